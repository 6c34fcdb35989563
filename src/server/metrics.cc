#include "server/metrics.h"

#include <fmt/format.h>


#include "server/expert_load_metrics.h"

namespace ember::server {
ServerMetrics::ServerMetrics(std::string model_name)
    : labels(fmt::format("model_name=\"{}\"", prometheus::EscapeLabelValue(model_name))),
      expert_load(std::make_unique<ExpertLoadMetrics>()) {}

ServerMetrics::~ServerMetrics() = default;

std::string ServerMetrics::Render() const {
  std::string out;
  for (const Metric* m : std::initializer_list<const Metric*>{
           &num_requests_running, &num_requests_waiting, &kv_cache_usage, &dp_num_requests_running,
           &dp_num_requests_waiting, &dp_kv_cache_usage, &kv_group_usage, &prefix_cache_queries, &prefix_cache_hits,
           &prompt_tokens, &generation_tokens, &num_preemptions, &spec_decode_num_drafts,
           &spec_decode_num_draft_tokens, &spec_decode_num_accepted_tokens, &spec_decode_accepted_per_pos,
           &spec_decode_drafts_per_len, &spec_decode_propose_seconds, &spec_decode_hidden_states_seconds,
           &kv_transfer_held, &kv_transfer_waiting, &kv_transfer_sent_bytes, &kv_transfer_received_bytes,
           &kv_transfer_sent, &kv_transfer_received, &kv_transfer_pull_failures, &kv_transfer_holds_expired,
           &mm_items_encoded, &mm_encoder_cache_hits, &mm_embeddings, &mm_encode_seconds, &requests_success, &requests_failed,
           &time_to_first_token, &inter_token_latency, &e2e_request_latency, &request_queue_time,
           static_cast<const Metric*>(expert_load.get())}) {
    m->Render(labels, &out);
  }
  return out;
}

}  // namespace ember::server
