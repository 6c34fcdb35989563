// Runs a GenerationJob to the end for one HTTP response, as a DeferredBody the connection pumps
// whenever the engine has events for it (no thread waits on a job): either streamed as
// Server-Sent Events ending with `data: [DONE]`, or collected into one JSON response at the end.
// A client that goes away aborts the job (the connection sees its end of stream at once),
// which frees its KV blocks; an aborted stream still ends with finish_reason and [DONE].
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/generation.h"
#include "http/message.h"

namespace ember::server {

using http::DeferredBody;
using http::HttpRequest;
using http::HttpResponse;

struct StreamFormat {
  // SSE payloads for one delta (may be none, e.g. text held back).
  std::function<std::vector<nlohmann::ordered_json>(const ChoiceDelta&)> on_delta;
  // Payloads after the last delta (e.g. the usage chunk).
  std::function<std::vector<nlohmann::ordered_json>(const GenerationJob&)> on_done;
};

struct CollectFormat {
  std::function<void(const ChoiceDelta&)> on_delta;
  // Writes the response once every choice has finished.
  std::function<void(const GenerationJob&, HttpResponse&)> on_done;
};

// The response streams the job as SSE.
void StreamJob(HttpResponse& res, std::shared_ptr<GenerationJob> job, StreamFormat format);
// The response is the job's result, written by `format.on_done` when it ends.
void CollectJob(HttpResponse& res, std::shared_ptr<GenerationJob> job, CollectFormat format);

// OpenAI's usage object (with prompt_tokens_details.cached_tokens when the prefix cache helped).
nlohmann::ordered_json UsageJson(const Usage& usage);
// vLLM's stop_reason: the stop string or stop token that ended a choice, null otherwise.
nlohmann::ordered_json StopReason(const TextDelta& delta);

}  // namespace ember::server
