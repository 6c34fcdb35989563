// Runs a GenerationJob to the end for one HTTP response: either collects every choice
// (non-streaming) or streams Server-Sent Events, ending with `data: [DONE]`. A client that goes
// away mid-stream is noticed at the next write (keep-alive comments go out while the engine is
// busy elsewhere) and its requests are aborted, which frees their KV blocks.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/generation.h"

namespace ember::server {

struct StreamFormat {
  // SSE payloads for one delta (may be none, e.g. text held back).
  std::function<std::vector<nlohmann::ordered_json>(const ChoiceDelta&)> on_delta;
  // Payloads after the last delta (e.g. the usage chunk).
  std::function<std::vector<nlohmann::ordered_json>(const GenerationJob&)> on_done;
};

void StreamJob(httplib::Response& res, std::shared_ptr<GenerationJob> job, StreamFormat format);

// OpenAI's usage object (with prompt_tokens_details.cached_tokens when the prefix cache helped).
nlohmann::ordered_json UsageJson(const Usage& usage);
// vLLM's stop_reason: the stop string or stop token that ended a choice, null otherwise.
nlohmann::ordered_json StopReason(const TextDelta& delta);

// Runs the job to the end on this thread, passing each delta to `on_delta`.
void CollectJob(GenerationJob& job, const std::function<void(const ChoiceDelta&)>& on_delta);

}  // namespace ember::server
