// The request and response a route handler sees, independent of the HTTP library: the server
// (server.h) fills an HttpRequest from the wire and writes the HttpResponse back. A response
// whose body the engine produces later carries a DeferredBody instead of its bytes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::http {

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // the target up to '?'
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The first header called `name` (case-insensitive), "" when there is none.
  std::string header(std::string_view name) const;
};

struct HttpResponse;

// A body produced over time (an engine job). The connection that owns it calls every method
// from its own strand, never two at once; only the waker may be called from any thread.
class DeferredBody {
 public:
  virtual ~DeferredBody() = default;
  // True: the status and headers go out at once and the bytes as they come (chunked, SSE).
  // False: the whole response goes out when Pump reports it complete. A body may also start
  // false and turn true in a Pump call (once, never back) after filling *response with the
  // status and headers of its stream: a proxy learns them from its upstream.
  virtual bool streaming() const = 0;
  // `wake` (callable from any thread, e.g. the engine's) tells the connection to Pump again.
  virtual void SetWaker(std::function<void()> wake) = 0;
  // Takes what is ready without blocking: streaming appends bytes to *chunk; otherwise, once
  // complete, fills *response. Returns true when the body is complete.
  virtual bool Pump(std::string* chunk, HttpResponse* response) = 0;
  // Stop the work (the client went away, or the shutdown deadline passed). Pumping after it
  // still ends the body properly: a stream ends with its final chunks and [DONE].
  virtual void Abort() = 0;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;
  std::string body;
  std::shared_ptr<DeferredBody> deferred;  // set: `body` is produced later

  // Replaces any header of that name (case-insensitive).
  void set_header(std::string name, std::string value);
  void set_content(std::string body, std::string content_type);
  std::string header(std::string_view name) const;
};

bool HeaderNameEquals(std::string_view a, std::string_view b);

}  // namespace ember::http
