// Prometheus metrics in the text exposition format (version 0.0.4), named like vLLM's so existing
// dashboards work: counters, gauges and histograms, each carrying the model_name label.
// Thread-safe: the engine loop records, HTTP threads render.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "http/prometheus.h"

namespace ember::server {

// The exposition primitives (http/prometheus.h), by their short names here.
using prometheus::Counter;
using prometheus::Gauge;
using prometheus::GaugeVector;
using prometheus::Header;
using prometheus::Histogram;
using prometheus::Metric;

class ExpertLoadMetrics;  // expert_load_metrics.h

// Everything /metrics shows. Names follow vLLM's `vllm:` metrics with an `ember:` prefix.
struct ServerMetrics {
  explicit ServerMetrics(std::string model_name);
  ~ServerMetrics();
  std::string Render() const;

  std::string labels;
  Gauge num_requests_running{"ember:num_requests_running", "Requests being computed this step."};
  Gauge num_requests_waiting{"ember:num_requests_waiting", "Requests waiting to be scheduled."};
  Gauge kv_cache_usage{"ember:kv_cache_usage_perc", "Fraction of KV cache blocks in use (0..1)."};
  // Data parallelism (DEP): per data-parallel rank, its scheduler's requests and KV cache (no
  // samples with one scheduler).
  GaugeVector dp_num_requests_running{"ember:dp_rank_num_requests_running",
                                      "Requests being computed this step on each data-parallel rank.", "dp_rank"};
  GaugeVector dp_num_requests_waiting{"ember:dp_rank_num_requests_waiting",
                                      "Requests waiting to be scheduled on each data-parallel rank.", "dp_rank"};
  GaugeVector dp_kv_cache_usage{"ember:dp_rank_kv_cache_usage_perc",
                                "Fraction of each data-parallel rank's KV cache blocks in use (0..1).", "dp_rank"};
  GaugeVector kv_group_usage{"ember:kv_cache_group_usage_perc",
                             "Fraction of KV cache blocks held by each KV group (0..1).", "kv_group"};
  Counter prefix_cache_queries{"ember:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache."};
  Counter prefix_cache_hits{"ember:prefix_cache_hits_total", "Prompt tokens found in the prefix cache."};
  Counter prompt_tokens{"ember:prompt_tokens_total", "Prompt tokens processed."};
  Counter generation_tokens{"ember:generation_tokens_total", "Tokens generated."};
  Counter num_preemptions{"ember:num_preemptions_total", "Requests preempted (recomputed later) for lack of KV blocks."};
  // Speculative decoding (vLLM's spec_decode metrics): verified drafts only.
  Counter spec_decode_num_drafts{"ember:spec_decode_num_drafts_total", "Verification passes with draft tokens."};
  Counter spec_decode_num_draft_tokens{"ember:spec_decode_num_draft_tokens_total", "Draft tokens verified."};
  Counter spec_decode_num_accepted_tokens{"ember:spec_decode_num_accepted_tokens_total",
                                          "Draft tokens accepted (the target sampled the same token)."};
  GaugeVector spec_decode_accepted_per_pos{"ember:spec_decode_num_accepted_tokens_per_pos_total",
                                           "Drafts whose token at this position (0-based) was accepted.", "position",
                                           "counter"};
  GaugeVector spec_decode_drafts_per_len{"ember:spec_decode_num_drafts_per_len_total",
                                         "Drafts verified with this many draft tokens (the verification length "
                                         "the step planned).",
                                         "length", "counter", 1};
  // What the proposer costs, drafting or not: compare with the run's time to see what speculation
  // pays where it stays off (DSpark keeps its context current from every step's hidden states).
  Counter spec_decode_propose_seconds{"ember:spec_decode_propose_seconds_total",
                                      "Time the proposer spent drafting (the engine thread's wall time)."};
  Counter spec_decode_hidden_states_seconds{"ember:spec_decode_hidden_states_seconds_total",
                                            "Time the proposer spent taking in the target's hidden states (DSpark's "
                                            "context upkeep), every step, drafting or not."};
  // Prefill/decode disaggregation (--kv-transfer-config).
  Gauge kv_transfer_held{"ember:kv_transfer_held_requests",
                         "Producer: finished prefills whose KV waits for a consumer to pull it."};
  Gauge kv_transfer_waiting{"ember:num_requests_waiting_for_remote_kv",
                            "Consumer: requests whose prompt KV is on its way from a producer."};
  Counter kv_transfer_sent_bytes{"ember:kv_transfer_sent_bytes_total", "Producer: KV payload bytes sent."};
  Counter kv_transfer_received_bytes{"ember:kv_transfer_received_bytes_total", "Consumer: KV payload bytes received."};
  Counter kv_transfer_sent{"ember:kv_transfer_sent_total", "Producer: KV transfers (one message per pull) sent."};
  Counter kv_transfer_received{"ember:kv_transfer_received_total", "Consumer: KV transfers received."};
  Counter kv_transfer_pull_failures{"ember:kv_transfer_pull_failures_total",
                                    "Consumer: pulls that failed; the prompt was computed here instead."};
  Counter kv_transfer_holds_expired{"ember:kv_transfer_holds_expired_total",
                                    "Producer: held KV nobody pulled within hold_timeout_s."};
  // Multimodal inputs (images, video, audio) through the runner's encoders.
  Counter mm_items_encoded{"ember:mm_items_encoded_total", "Media items run through an encoder."};
  Counter mm_encoder_cache_hits{"ember:mm_encoder_cache_hits_total",
                                "Media items whose encoder output came from the encoder cache."};
  Counter mm_embeddings{"ember:mm_embedding_positions_total", "Prompt positions filled with encoder output."};
  Counter mm_encode_seconds{"ember:mm_encode_seconds_total", "Time the encoders ran."};
  Counter requests_success{"ember:request_success_total", "Requests that finished normally."};
  Counter requests_failed{"ember:request_failure_total", "Requests rejected or aborted."};
  Histogram time_to_first_token{"ember:time_to_first_token_seconds", "Arrival to first generated token.",
                                {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                                 7.5, 10.0, 20.0, 40.0, 80.0}};
  Histogram inter_token_latency{"ember:inter_token_latency_seconds", "Time between consecutive generated tokens.",
                                {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0}};
  Histogram e2e_request_latency{"ember:e2e_request_latency_seconds", "Arrival to finish.",
                                {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                                 120.0, 240.0, 480.0}};
  Histogram request_queue_time{"ember:request_queue_time_seconds", "Arrival to first scheduled.",
                               {0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0}};
  // Mixture-of-experts models: tokens per layer and expert, imbalance (always set; rendered last).
  std::unique_ptr<ExpertLoadMetrics> expert_load;
};

}  // namespace ember::server
