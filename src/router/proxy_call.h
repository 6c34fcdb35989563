// One client request through the router, as the HTTP server's deferred body: phase 1 on a
// prefill instance (the KV-transfer handle), phase 2 on a decode instance (the answer, relayed as
// it arrives), the fallback when phase 1 fails, and the errors when phase 2 does. It runs on a
// strand of the router's I/O context; the client's connection pumps it from its own strand, so
// what they share (the bytes for the client, the response) is under a mutex.
//
// The response head waits for the decode instance's: a streamed 2xx SSE answer turns this body
// streaming (status and Content-Type passed through, then the events as they come); anything
// else (a non-streaming request, an instance's 4xx JSON error, a 502 of the router's) goes out
// whole with its status.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "http/message.h"
#include "router/body_rewrite.h"
#include "router/router_context.h"

namespace ember::router {

struct ProxySpec {
  std::string method = "POST";
  std::string path;  // "/v1/completions", "/v1/chat/completions", "/v1/models"
  Json original;     // the client's body (POST)
  bool chat = false;
  bool client_streams = false;  // the client asked for "stream": true
  bool two_phase = true;        // false: straight to a decode instance (GET /v1/models)
  std::string request_id;
};

class ProxyCall : public http::DeferredBody, public std::enable_shared_from_this<ProxyCall> {
 public:
  ProxyCall(RouterContext* context, ProxySpec spec, std::unique_ptr<ConcurrencySlot> slot);
  ~ProxyCall() override;
  void Start();

  bool streaming() const override;
  void SetWaker(std::function<void()> wake) override;
  bool Pump(std::string* chunk, http::HttpResponse* response) override;
  void Abort() override;

 private:
  using Clock = std::chrono::steady_clock;

  // On the strand.
  void StartPrefill();
  void OnPrefillEnd(std::optional<UpstreamFailure> failure);
  void FallBack(const std::string& why);
  void StartDecode();
  void OnDecodeHead(int status, std::string content_type);
  bool OnDecodeBody(std::string_view bytes);  // false: pause the upstream
  void OnDecodeEnd(std::optional<UpstreamFailure> failure);
  void Cancelled(Phase phase);
  // Ends the client's response: whole (status, JSON) unless the stream has begun, in which case
  // an error event and [DONE] close it.
  void FinishWithError(int status, const std::string& message);
  void FinishWhole(int status, std::string content_type, std::string body);
  void FinishStream(std::string tail);
  void Wake();
  std::string InstanceName(Phase phase, size_t index) const;

  RouterContext* const context_;
  const ProxySpec spec_;
  std::unique_ptr<ConcurrencySlot> slot_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;

  // Strand state.
  std::shared_ptr<UpstreamCall> upstream_;
  Balancer::Lease lease_;
  std::vector<size_t> decode_tried_;  // instances that refused this request's connection
  Json decode_body_;
  Phase phase_ = Phase::kPrefill;
  std::string last_decode_failure_;  // the latest refused connect, for the 502 if none is left
  bool aborted_ = false;
  bool body_overflow_ = false;  // the upstream's whole answer passed max_response_bytes
  bool finished_ = false;
  Clock::time_point phase_start_{};
  bool first_byte_seen_ = false;
  int upstream_status_ = 0;
  std::string upstream_content_type_;
  bool relaying_stream_ = false;     // the decode answer is being streamed to the client
  std::string whole_body_;           // otherwise gathered here
  char last_two_[2] = {'\n', '\n'};  // the stream's last bytes: is it at an event boundary?

  // Shared with the client's connection.
  mutable std::mutex mu_;
  std::function<void()> wake_;
  bool stream_head_ready_ = false;  // a streaming head waits in response_
  bool streaming_ = false;          // Pump handed the head over
  std::string out_;                 // stream bytes not yet pumped
  bool upstream_paused_ = false;    // out_ is full: the upstream waits for the next Pump
  http::HttpResponse response_;     // the whole response, or the stream's head
  bool done_ = false;
};

}  // namespace ember::router
