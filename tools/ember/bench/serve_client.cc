#include "tools/ember/bench/serve_client.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <functional>
#include <limits>
#include <string_view>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "http/url.h"
#include "tools/ember/bench/sse_parser.h"

namespace ember::tools::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;

constexpr auto kConnectTimeout = std::chrono::seconds(10);
// A request at the back of a deep queue may wait minutes for its first token.
constexpr auto kReadTimeout = std::chrono::seconds(900);

struct Exchanged {
  int status = 0;     // 0: no response
  std::string error;  // set when the exchange failed
};

// One request on a fresh connection (llama-server closes idle keep-alive connections under a
// client that reuses them), on its own I/O context so that every wait has a timeout. Each piece
// of the response body goes to `on_body` as it arrives (false stops reading).
Exchanged Exchange(const ServerTarget& target, bhttp::verb method, const std::string& path, std::string body,
                   const std::function<bool(int status, std::string_view)>& on_body) {
  Exchanged out;
  auto url = http::ParseHttpUrl(target.origin, "--base-url");
  if (!url.ok()) {
    out.error = url.status().message();
    return out;
  }
  if (url->scheme != "http") {
    out.error = fmt::format("{}: only http:// servers are supported", target.origin);
    return out;
  }
  const std::string& authority = url->authority;
  const std::string& host = url->host;
  const std::string& port = url->port;

  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  const auto endpoints = asio::ip::tcp::resolver(ioc).resolve(host, port, ec);
  if (ec) {
    out.error = fmt::format("{}: cannot resolve: {}", target.origin, ec.message());
    return out;
  }
  bhttp::request<bhttp::string_body> request(method, path, 11);
  request.set(bhttp::field::host, authority);
  request.set(bhttp::field::connection, "close");
  if (!target.api_key.empty()) request.set(bhttp::field::authorization, "Bearer " + target.api_key);
  if (method == bhttp::verb::post) {
    request.set(bhttp::field::content_type, "application/json");
    request.set(bhttp::field::accept, "text/event-stream");
    request.body() = std::move(body);
    request.prepare_payload();
  }
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // a long stream is not an error
  std::array<char, 16384> piece;
  auto fail = [&](const char* step, beast::error_code e) {
    out.error = fmt::format("{}: {} failed: {}", target.origin, step, e.message());
  };
  std::function<void()> read_body = [&] {
    if (parser.is_done()) return;
    parser.get().body().data = piece.data();
    parser.get().body().size = piece.size();
    stream.expires_after(kReadTimeout);
    bhttp::async_read_some(stream, buffer, parser, [&](beast::error_code e, size_t) {
      if (e == bhttp::error::need_buffer) e = {};
      const size_t n = piece.size() - parser.get().body().size;
      if (n > 0 && !on_body(out.status, std::string_view(piece.data(), n))) return;
      if (e == bhttp::error::end_of_stream || e == asio::error::eof) return;  // ended by the close
      if (e) return fail("reading the response", e);
      read_body();
    });
  };
  stream.expires_after(kConnectTimeout);
  stream.async_connect(endpoints, [&](beast::error_code e, const asio::ip::tcp::endpoint&) {
    if (e) return fail("connecting", e);
    stream.expires_after(kReadTimeout);
    bhttp::async_write(stream, request, [&](beast::error_code e2, size_t) {
      if (e2) return fail("sending the request", e2);
      bhttp::async_read_header(stream, buffer, parser, [&](beast::error_code e3, size_t) {
        if (e3) return fail("reading the response", e3);
        out.status = parser.get().result_int();
        read_body();
      });
    });
  });
  ioc.run();
  return out;
}

}  // namespace

Expected<ServerTarget> ParseBaseUrl(const std::string& base_url, const std::string& api_key) {
  EMBER_ASSIGN_OR_RETURN(http::HttpUrl url, http::ParseHttpUrl(base_url, "--base-url"));
  ServerTarget target;
  target.origin = url.origin;
  target.path_prefix = url.path_prefix;
  // The OpenAI convention puts /v1 in the base URL; the routes below add it themselves.
  if (target.path_prefix.ends_with("/v1")) target.path_prefix.resize(target.path_prefix.size() - 3);
  target.api_key = api_key;
  return target;
}

Expected<std::string> GetText(const ServerTarget& target, const std::string& path, int* status) {
  std::string text;
  const Exchanged res = Exchange(target, bhttp::verb::get, target.path_prefix + path, "", [&](int, std::string_view piece) {
    text.append(piece);
    return text.size() < (16u << 20);
  });
  if (!res.error.empty()) {
    return IoError(fmt::format("GET {}{}{}: {}; is the server up?", target.origin, target.path_prefix, path, res.error));
  }
  *status = res.status;
  return text;
}

Expected<std::string> DiscoverModel(const ServerTarget& target) {
  int status = 0;
  auto text = GetText(target, "/v1/models", &status);
  if (!text.ok()) return text.status();
  const auto body = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (status != 200 || !body.is_object() || !body.contains("data") || !body["data"].is_array() ||
      body["data"].empty() || !body["data"][0].contains("id")) {
    return IoError(fmt::format("GET {}{}/v1/models answered {} without a model list; pass --model NAME", target.origin,
                               target.path_prefix, status));
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
  SseParser parser;
  std::string error_body;
  bool stream_ok = true;
  const Exchanged res = Exchange(target, bhttp::verb::post, target.path_prefix + "/v1/completions", body.dump(),
                                 [&](int status, std::string_view data) {
                                   const double now = since_start();
                                   if (status != 200) {
                                     error_body.append(data);
                                     return true;
                                   }
                                   for (const std::string& event : parser.Feed(data)) {
                                     if (!ApplyStreamEvent(event, now, &result)) stream_ok = false;
                                   }
                                   return stream_ok;  // false stops reading: the request has failed
                                 });
  const int status = res.status;
  result.latency = since_start();
  for (const std::string& event : parser.Finish()) {
    if (stream_ok && !ApplyStreamEvent(event, result.latency, &result)) stream_ok = false;
  }
  if (!stream_ok) return result;  // error already set
  if (status != 0 && status != 200) {
    result.error = fmt::format("HTTP {}: {}", status, error_body.substr(0, 200));
  } else if (!res.error.empty()) {
    result.error = res.error;
  } else if (result.chunks == 0) {
    result.error = "no tokens streamed";
  } else {
    result.ok = true;
  }
  return result;
}

}  // namespace ember::tools::bench
