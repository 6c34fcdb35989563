#include "server/async_engine.h"

#include <exception>

#include "core/logging.h"
#include "server/expert_load_metrics.h"

namespace ember::server {

void RequestStream::Push(RequestOutput output) {
  std::shared_ptr<std::function<void()>> listener;
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(output));
    listener = listener_;
  }
  cv_.notify_all();
  if (listener) (*listener)();
}

void RequestStream::SetListener(std::function<void()> listener) {
  std::lock_guard lock(mu_);
  listener_ = listener ? std::make_shared<std::function<void()>>(std::move(listener)) : nullptr;
}

bool RequestStream::Pop(RequestOutput* out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return false;
  *out = std::move(events_.front());
  events_.pop_front();
  return true;
}

AsyncEngine::AsyncEngine(EngineClient* client, ServerMetrics* metrics, StepWatchdogOptions watchdog)
    : client_(client), metrics_(metrics), watchdog_(watchdog) {}

AsyncEngine::~AsyncEngine() { Stop(); }

void AsyncEngine::Start() {
  alive_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void AsyncEngine::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  alive_ = false;
}

AsyncEngine::Submitted AsyncEngine::Submit(RequestInput input) {
  auto stream = std::make_shared<RequestStream>();
  const RequestIndex index = Submit(std::move(input), stream);
  return {index, stream};
}

RequestIndex AsyncEngine::Submit(RequestInput input, std::shared_ptr<RequestStream> stream) {
  if (!alive_) {
    RequestOutput failed;
    failed.finished = true;
    failed.finish_reason = FinishReason::kError;
    failed.error = "the engine is not running";
    failed.req = kNoRequest;
    stream->Push(std::move(failed));
    return kNoRequest;
  }
  // Registering under the lock the router takes means no event can arrive before its stream.
  std::lock_guard lock(streams_mu_);
  const RequestIndex index = client_->Submit(std::move(input));
  streams_[index] = std::move(stream);
  ++in_flight_;
  return index;
}

void AsyncEngine::Abort(RequestIndex index) { client_->Abort(index); }

void AsyncEngine::Loop() {
  client_->SetStepObserver(&watchdog_);
  SetThreadOpTrace(watchdog_.trace());
  try {
    while (!stop_) {
      client_->WaitForWork(std::chrono::milliseconds(20));
      std::vector<RequestOutput> outputs = client_->Step();
      UpdateMetrics(outputs);
      Route(std::move(outputs));
    }
    FailAll("the server is shutting down");
  } catch (const std::exception& e) {
    EMBER_LOG_ERROR("engine loop died: {}", e.what());
    FailAll(std::string("the engine failed: ") + e.what());
  }
  SetThreadOpTrace(nullptr);
  client_->SetStepObserver(nullptr);
  alive_ = false;
}

void AsyncEngine::Route(std::vector<RequestOutput> outputs) {
  std::lock_guard lock(streams_mu_);
  for (RequestOutput& out : outputs) {
    auto it = streams_.find(out.req);
    if (it == streams_.end()) continue;
    const bool finished = out.finished;
    it->second->Push(std::move(out));
    if (finished) {
      streams_.erase(it);
      --in_flight_;
    }
  }
}

void AsyncEngine::Fail(const std::string& message) {
  {
    std::lock_guard lock(failure_mu_);
    failure_ = message;
  }
  alive_ = false;
  FailAll(message);
}

std::string AsyncEngine::FailureMessage() const {
  std::lock_guard lock(failure_mu_);
  return failure_;
}

void AsyncEngine::FailAll(const std::string& message) {
  std::lock_guard lock(streams_mu_);
  for (auto& [index, stream] : streams_) {
    RequestOutput failed;
    failed.req = index;
    failed.finished = true;
    failed.finish_reason = FinishReason::kError;
    failed.error = message;
    stream->Push(std::move(failed));
  }
  in_flight_ -= static_cast<int64_t>(streams_.size());
  streams_.clear();
}

namespace {
double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

void AsyncEngine::UpdateMetrics(const std::vector<RequestOutput>& outputs) {
  if (metrics_ == nullptr) return;
  const SchedulerStats stats = client_->Stats();
  metrics_->expert_load->Refresh(*client_);
  metrics_->num_requests_running.Set(static_cast<double>(stats.num_running));
  metrics_->num_requests_waiting.Set(static_cast<double>(stats.num_waiting));
  metrics_->kv_cache_usage.Set(stats.kv_usage);
  if (!stats.data_parallel_ranks.empty()) {
    const size_t ranks = stats.data_parallel_ranks.size();
    metrics_->dp_num_requests_running.Resize(ranks);
    metrics_->dp_num_requests_waiting.Resize(ranks);
    metrics_->dp_kv_cache_usage.Resize(ranks);
    for (size_t d = 0; d < ranks; ++d) {
      const DataParallelRankStats& r = stats.data_parallel_ranks[d];
      metrics_->dp_num_requests_running.Set(d, static_cast<double>(r.num_running));
      metrics_->dp_num_requests_waiting.Set(d, static_cast<double>(r.num_waiting));
      metrics_->dp_kv_cache_usage.Set(d, r.kv_usage);
    }
  }
  metrics_->num_preemptions.Add(static_cast<double>(stats.num_preemptions - last_preemptions_));
  metrics_->prefix_cache_queries.Add(static_cast<double>(stats.prefix_cache.queries - last_prefix_queries_));
  metrics_->prefix_cache_hits.Add(static_cast<double>(stats.prefix_cache.hits - last_prefix_hits_));
  const SpecDecodeCounters& spec = stats.spec_decode;
  metrics_->spec_decode_num_drafts.Add(static_cast<double>(spec.num_drafts - last_spec_.num_drafts));
  metrics_->spec_decode_num_draft_tokens.Add(static_cast<double>(spec.num_draft_tokens - last_spec_.num_draft_tokens));
  metrics_->spec_decode_num_accepted_tokens.Add(
      static_cast<double>(spec.num_accepted_tokens - last_spec_.num_accepted_tokens));
  metrics_->spec_decode_propose_seconds.Add(spec.propose_seconds - last_spec_.propose_seconds);
  metrics_->spec_decode_hidden_states_seconds.Add(spec.hidden_states_seconds - last_spec_.hidden_states_seconds);
  if (!spec.accepted_per_position.empty()) {
    metrics_->spec_decode_accepted_per_pos.Resize(spec.accepted_per_position.size());
    for (size_t i = 0; i < spec.accepted_per_position.size(); ++i) {
      metrics_->spec_decode_accepted_per_pos.Set(i, static_cast<double>(spec.accepted_per_position[i]));
    }
    metrics_->spec_decode_drafts_per_len.Resize(spec.drafts_per_length.size());
    for (size_t i = 0; i < spec.drafts_per_length.size(); ++i) {
      metrics_->spec_decode_drafts_per_len.Set(i, static_cast<double>(spec.drafts_per_length[i]));
    }
  }
  const KvTransferStats& kv = stats.kv_transfer;
  metrics_->kv_transfer_held.Set(static_cast<double>(stats.num_held_for_remote_decode));
  metrics_->kv_transfer_waiting.Set(static_cast<double>(stats.num_waiting_for_remote_kv));
  metrics_->kv_transfer_sent_bytes.Add(static_cast<double>(kv.bytes_sent - last_kv_.bytes_sent));
  metrics_->kv_transfer_received_bytes.Add(static_cast<double>(kv.bytes_received - last_kv_.bytes_received));
  metrics_->kv_transfer_sent.Add(static_cast<double>(kv.transfers_sent - last_kv_.transfers_sent));
  metrics_->kv_transfer_received.Add(static_cast<double>(kv.transfers_received - last_kv_.transfers_received));
  metrics_->kv_transfer_pull_failures.Add(static_cast<double>(kv.pulls_failed - last_kv_.pulls_failed));
  metrics_->kv_transfer_holds_expired.Add(static_cast<double>(kv.holds_expired - last_kv_.holds_expired));
  const MultiModalStepStats& mm = stats.multimodal;
  metrics_->mm_items_encoded.Add(static_cast<double>(mm.items_encoded - last_mm_.items_encoded));
  metrics_->mm_encoder_cache_hits.Add(static_cast<double>(mm.cache_hits - last_mm_.cache_hits));
  metrics_->mm_embeddings.Add(static_cast<double>(mm.embeddings - last_mm_.embeddings));
  metrics_->mm_encode_seconds.Add(mm.encode_seconds - last_mm_.encode_seconds);
  last_mm_ = mm;
  last_kv_ = kv;
  last_spec_ = spec;
  last_preemptions_ = stats.num_preemptions;
  last_prefix_queries_ = stats.prefix_cache.queries;
  last_prefix_hits_ = stats.prefix_cache.hits;
  const Clock::time_point now = Clock::now();
  for (const RequestOutput& out : outputs) {
    const size_t n = out.new_token_ids.size();
    metrics_->generation_tokens.Add(static_cast<double>(n));
    if (n > 0) {
      // Tokens that arrive together (speculative decoding) share the interval.
      auto [it, first] = last_token_time_.try_emplace(out.req, now);
      if (!first) {
        const double gap = Seconds(now - it->second) / static_cast<double>(n);
        for (size_t i = 0; i < n; ++i) metrics_->inter_token_latency.Observe(gap);
        it->second = now;
      }
    }
    if (!out.finished) continue;
    last_token_time_.erase(out.req);
    const RequestTimes& t = out.times;
    if (out.finish_reason == FinishReason::kError || out.finish_reason == FinishReason::kAbort) {
      metrics_->requests_failed.Add();
    } else {
      metrics_->requests_success.Add();
    }
    metrics_->prompt_tokens.Add(static_cast<double>(out.num_prompt_tokens));
    if (t.finished) metrics_->e2e_request_latency.Observe(Seconds(*t.finished - t.arrival));
    if (t.first_scheduled) metrics_->request_queue_time.Observe(Seconds(*t.first_scheduled - t.arrival));
    if (t.first_token) metrics_->time_to_first_token.Observe(Seconds(*t.first_token - t.arrival));
  }
}

}  // namespace ember::server
