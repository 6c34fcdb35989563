#include "tools/ember/bench/serve_client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <memory>

#include "tools/ember/bench/sse_parser.h"

namespace ember::tools::bench {
namespace {

constexpr int kConnectTimeoutSeconds = 10;
// A request at the back of a deep queue may wait minutes for its first token.
constexpr int kReadTimeoutSeconds = 900;

std::unique_ptr<httplib::Client> MakeClient(const ServerTarget& target) {
  auto client = std::make_unique<httplib::Client>(target.origin);
  client->set_connection_timeout(kConnectTimeoutSeconds, 0);
  client->set_read_timeout(kReadTimeoutSeconds, 0);
  client->set_keep_alive(false);
  if (!target.api_key.empty()) client->set_bearer_token_auth(target.api_key);
  return client;
}

}  // namespace

Expected<ServerTarget> ParseBaseUrl(const std::string& base_url, const std::string& api_key) {
  const size_t scheme_end = base_url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : base_url.substr(0, scheme_end);
  if ((scheme != "http" && scheme != "https") || base_url.size() == scheme_end + 3) {
    return InvalidArgument(fmt::format("--base-url must look like http://HOST:PORT (got '{}')", base_url));
  }
  ServerTarget target;
  const size_t path = base_url.find('/', scheme_end + 3);
  target.origin = base_url.substr(0, path);
  if (path != std::string::npos) {
    target.path_prefix = base_url.substr(path);
    while (!target.path_prefix.empty() && target.path_prefix.back() == '/') target.path_prefix.pop_back();
  }
  // The OpenAI convention puts /v1 in the base URL; the routes below add it themselves.
  if (target.path_prefix.ends_with("/v1")) target.path_prefix.resize(target.path_prefix.size() - 3);
  target.api_key = api_key;
  return target;
}

Expected<std::string> DiscoverModel(const ServerTarget& target) {
  auto client = MakeClient(target);
  const std::string path = target.path_prefix + "/v1/models";
  httplib::Result res = client->Get(path.c_str());
  if (!res) {
    return IoError(fmt::format("GET {}{}: {}; is the server up?", target.origin, path, httplib::to_string(res.error())));
  }
  const auto body = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (res->status != 200 || !body.is_object() || !body.contains("data") || !body["data"].is_array() ||
      body["data"].empty() || !body["data"][0].contains("id")) {
    return IoError(fmt::format("GET {}{} answered {} without a model list; pass --model NAME", target.origin, path,
                               res->status));
  }
  return body["data"][0]["id"].get<std::string>();
}

bool ApplyStreamEvent(const std::string& data, double now, RequestResult* result) {
  if (data == "[DONE]") return true;
  const auto message = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!message.is_object()) {
    result->error = fmt::format("not JSON in the stream: {}", data.substr(0, 200));
    return false;
  }
  if (message.contains("error")) {
    result->error = fmt::format("error in the stream: {}", message["error"].dump().substr(0, 200));
    return false;
  }
  if (const auto usage = message.find("usage"); usage != message.end() && usage->is_object()) {
    result->usage_prompt_tokens = usage->value("prompt_tokens", int64_t{-1});
    result->usage_completion_tokens = usage->value("completion_tokens", int64_t{-1});
  }
  if (const auto choices = message.find("choices"); choices != message.end() && choices->is_array()) {
    for (const auto& choice : *choices) {
      const auto text = choice.find("text");
      if (text == choice.end() || !text->is_string() || text->get_ref<const std::string&>().empty()) continue;
      if (result->chunks == 0) result->ttft = now;
      ++result->chunks;
      result->chunk_times.push_back(now);
    }
  }
  return true;
}

RequestResult SendCompletion(const ServerTarget& target, const std::string& model, const BenchRequest& request,
                             const nlohmann::json& extra_body) {
  nlohmann::json body = {{"model", model},
                         {"prompt", request.prompt},
                         {"max_tokens", request.output_len},
                         {"temperature", 0.0},
                         {"stream", true},
                         {"ignore_eos", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (extra_body.is_object()) body.update(extra_body);
  RequestResult result;
  const auto start = std::chrono::steady_clock::now();
  const auto since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto client = MakeClient(target);
  SseParser parser;
  int status = 0;
  std::string error_body;
  bool stream_ok = true;
  httplib::Request req;
  req.method = "POST";
  req.path = target.path_prefix + "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    const double now = since_start();
    if (status != 200) {
      error_body.append(data, length);
      return true;
    }
    for (const std::string& event : parser.Feed(std::string_view(data, length))) {
      if (!ApplyStreamEvent(event, now, &result)) stream_ok = false;
    }
    return stream_ok;  // false stops reading: the request has failed
  };
  httplib::Result res = client->send(req);
  result.latency = since_start();
  for (const std::string& event : parser.Finish()) {
    if (stream_ok && !ApplyStreamEvent(event, result.latency, &result)) stream_ok = false;
  }
  if (!stream_ok) return result;  // error already set
  if (status != 0 && status != 200) {
    result.error = fmt::format("HTTP {}: {}", status, error_body.substr(0, 200));
  } else if (!res) {
    result.error = fmt::format("{}: {}", target.origin, httplib::to_string(res.error()));
  } else if (result.chunks == 0) {
    result.error = "no tokens streamed";
  } else {
    result.ok = true;
  }
  return result;
}

}  // namespace ember::tools::bench
