// One streamed POST /v1/completions against any OpenAI-compatible server, timed as the load
// generator needs it (first text chunk, every further chunk, end of response).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tools/ember/bench/serve_dataset.h"
#include "tools/ember/bench/serve_stats.h"

namespace ember::tools::bench {

struct ServerTarget {
  std::string origin;       // "http://127.0.0.1:8000" (scheme, host and port)
  std::string path_prefix;  // "" or "/some/prefix": whatever came after the origin in the URL
  std::string api_key;      // sent as "Authorization: Bearer ..." when not empty
};

// "http://host:port[/prefix]" -> target; errors say what a base URL looks like.
Expected<ServerTarget> ParseBaseUrl(const std::string& base_url, const std::string& api_key);

// GET path (after the target's prefix): the body, and the HTTP status in *status.
Expected<std::string> GetText(const ServerTarget& target, const std::string& path, int* status);

// The first model id of GET /v1/models.
Expected<std::string> DiscoverModel(const ServerTarget& target);

// Streams one completion of `request` (temperature 0, ignore_eos, max_tokens = output_len,
// stream_options.include_usage) with `extra_body` merged into the JSON body, on a fresh
// connection (llama-server closes idle keep-alive connections under it); a null `extra_body`
// adds nothing. Never throws: every
// failure is a RequestResult with ok false and an error message.
RequestResult SendCompletion(const ServerTarget& target, const std::string& model, const BenchRequest& request,
                             const nlohmann::json& extra_body);

// Applies one SSE event's data to `result` at time `now` (seconds from the request's start):
// counts chunks with text, records TTFT and chunk times, reads usage. Returns false with
// result->error set if the data is neither JSON nor "[DONE]" or carries an error object.
bool ApplyStreamEvent(const std::string& data, double now, RequestResult* result);

}  // namespace ember::tools::bench
