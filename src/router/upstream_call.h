// One HTTP exchange with an upstream instance (a prefill or decode `ember serve`, or anything
// OpenAI-compatible), asynchronous on the router's I/O context: a fresh connection, the request,
// then the response's head and its body piece by piece as they arrive (an SSE stream is relayed
// as it is produced, never gathered). Every wait has a timeout, and Cancel() closes the
// connection, which is how an instance learns that the client went away (it aborts the request).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http/url.h"

namespace ember::router {

struct UpstreamRequest {
  const http::HttpUrl* url = nullptr;  // outlives the call (the router's upstream list)
  std::string method = "POST";
  std::string path;        // after the URL's prefix: "/v1/completions"
  std::string body;        // JSON; empty for a GET
  std::string api_key;     // "Authorization: Bearer" when not empty
  std::string request_id;  // X-Request-Id, the same for both phases of one client request
};

struct UpstreamTimeouts {
  std::chrono::milliseconds connect{std::chrono::seconds(5)};
  // The most the instance may stay silent: before its response head, and between body pieces.
  std::chrono::milliseconds read{std::chrono::seconds(600)};
};

// Where an exchange failed: before anything was sent (resolve, connect: another instance may
// be tried), before the response head, or in the body.
enum class UpstreamStage { kResolve, kConnect, kSend, kHead, kBody, kCancelled };

struct UpstreamFailure {
  UpstreamStage stage = UpstreamStage::kConnect;
  // What happened, to follow "<phase> instance <url> ": "refused the connection".
  std::string what;
};

class UpstreamCall : public std::enable_shared_from_this<UpstreamCall> {
 public:
  struct Handlers {
    std::function<void(int status, std::string content_type)> on_head;
    // False: stop reading until Resume() (the client is behind); the instance is then held
    // back by TCP instead of the router buffering its output.
    std::function<bool(std::string_view bytes)> on_body;
    // Exactly once, last: nullopt when the whole response arrived.
    std::function<void(std::optional<UpstreamFailure>)> on_end;
  };

  // Handlers run on `executor`, which must be a strand (or single-threaded): the caller's.
  static std::shared_ptr<UpstreamCall> Start(boost::asio::any_io_executor executor, UpstreamRequest request,
                                             UpstreamTimeouts timeouts, Handlers handlers);
  // Any thread: closes the connection; on_end then gets kCancelled unless it already ran.
  void Cancel();
  // Any thread: reading goes on after on_body returned false.
  void Resume();

  ~UpstreamCall();
  struct Impl;

 private:
  explicit UpstreamCall(std::unique_ptr<Impl> impl);
  static void ReadBody(const std::shared_ptr<UpstreamCall>& call);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::router
