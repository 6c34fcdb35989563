// One HTTP/1.1 connection of HttpServer: reads requests under the limits, hands each to the
// handler pool, writes the responses in order (keep-alive, pipelining) and pumps deferred bodies
// as the engine wakes it. All its work runs on its own strand.
//
// Reading: an idle connection holds no buffer (it waits for readability first); the header must
// arrive within header_timeout of the wait's start and the body within body_timeout after it.
// While a response is pending the socket is watched for the peer's end of stream: a client that
// goes away aborts its request's work at once (its engine requests end within a step), streaming
// or not. Bytes a client sends meanwhile (its next, pipelined request) are kept for later.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/message.h"
#include "http/server.h"

namespace ember::http {

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(boost::asio::ip::tcp::socket socket, HttpServer::State* server);
  ~HttpConnection();

  // Any thread: each posts to the connection's strand.
  void Start();
  void Drain();      // shutting down: close when idle, answer the request in flight with Connection: close
  void AbortWork();  // the shutdown deadline passed: abort the deferred body, which then ends

 private:
  enum class Phase { kReading, kHandling, kClosed };

  void ReadRequest();
  void ReadHeader();
  void OnHeader(boost::beast::error_code ec);
  void ReadBody();
  void OnBody(boost::beast::error_code ec);
  void OnReadError(boost::beast::error_code ec);
  void Dispatch();
  void OnResponse(HttpResponse response);
  void StartDeferred(HttpResponse response);
  void Wake();  // any thread
  void PumpBody();
  void StartStream();  // sends the streaming head (deferred_response_'s status and headers)
  void Tick();
  void Refuse(const HttpRefusal& refusal);
  void SendWhole(HttpResponse response);
  void Send(std::string bytes, bool completes_response);
  void WriteMore();
  void FinishResponse();
  void WatchPeer();
  void OnPeerReadable(boost::beast::error_code ec);
  void LingeringClose();
  void Close();

  HttpServer::State* server_;
  boost::beast::tcp_stream stream_;
  boost::asio::any_io_executor executor_;  // the connection's strand (the stream's executor)
  boost::asio::steady_timer idle_timer_;  // the wait for a request's first byte
  boost::asio::steady_timer tick_;        // keep-alive comments of a stream
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::chrono::steady_clock::time_point header_deadline_;

  Phase phase_ = Phase::kReading;
  bool keep_alive_ = true;
  bool draining_ = false;
  bool idle_wait_ = false;   // waiting for the first byte of a request
  bool watching_ = false;    // waiting for the peer while a response is pending
  bool peer_gone_ = false;   // the peer ended its side (or reset)
  bool input_unread_ = false;  // refused mid-request: what the client still sends is unread
  unsigned version_ = 11;

  std::shared_ptr<DeferredBody> body_;
  HttpResponse deferred_response_;  // a non-streaming deferred body fills it
  bool chunked_ = false;
  bool stream_started_ = false;
  bool pump_held_ = false;  // a pump was skipped: too many stream bytes wait for the socket  // the streaming head of the current deferred body is out
  std::atomic<bool> wake_posted_{false};

  std::string pending_;   // bytes queued for the socket
  std::string inflight_;  // bytes being written
  bool writing_ = false;
  bool response_queued_ = false;  // pending_ holds the end of the current response
};

}  // namespace ember::http
