#include "disagg/ucx_kv_connector.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "core/logging.h"

namespace ember::disagg {
namespace {

using Clock = std::chrono::steady_clock;

// Active-message ids (control messages; the KV itself travels as one tagged message).
constexpr unsigned kAmHello = 1;       // consumer -> producer: its KV layout
constexpr unsigned kAmHelloReply = 2;  // producer -> consumer: accepted, or why not
constexpr unsigned kAmPull = 3;        // consumer -> producer: send me a held request's KV
constexpr unsigned kAmPullError = 4;   // producer -> consumer: cannot (expired, wrong prompt, ...)
constexpr unsigned kAmRelease = 5;     // consumer -> producer: one expected pull will not come

struct ReleaseMessage {
  uint64_t transfer_id;
  uint64_t tokens_hash;
};

// Fixed-size control messages, little-endian on both sides (x86-64 and aarch64 hosts).
struct PullMessage {
  uint64_t transfer_id;
  uint64_t tag;          // the tag the consumer receives the KV under
  int64_t first_token;   // positions the consumer holds already (a multiple of the block size)
  int64_t num_tokens;    // positions it expects held
  uint64_t tokens_hash;  // of their ids
  int32_t num_pulls;     // requests that will pull this KV (a request's n choices)
  int32_t reserved;
};
static_assert(sizeof(PullMessage) == 48);

constexpr size_t kMaxControlBytes = 1 << 20;  // a layout of the largest model is far smaller

std::vector<uint8_t> Pack(const void* head, size_t head_bytes, const void* tail, size_t tail_bytes) {
  std::vector<uint8_t> out(head_bytes + tail_bytes);
  std::memcpy(out.data(), head, head_bytes);
  if (tail_bytes > 0) std::memcpy(out.data() + head_bytes, tail, tail_bytes);
  return out;
}

std::string UcsError(ucs_status_t status) { return ucs_status_string(status); }

}  // namespace

class UcxKvConnector::Impl {
 public:
  Impl(KvTransferConfig config, kv::KvCacheConfig kv_config)
      : config_(std::move(config)), kv_config_(std::move(kv_config)) {}
  ~Impl() { Stop(); }

  Status Start();
  void Stop();

  // ---- engine thread ----
  Expected<RemoteKv> Hold(RequestIndex index, KvExportSpans spans, uint64_t tokens_hash);
  void StartPull(RequestIndex index, const RemoteKv& from, int64_t first_token, int32_t num_pulls,
                 KvImportSpans into);
  void CancelPull(RequestIndex index) { Queue(CancelCommand{index}); }
  void ReleaseRemote(const RemoteKv& from) { Queue(ReleaseCommand{from}); }
  std::function<void()> PauseForTesting();
  Events TakeEvents() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(events_, {});
  }
  void SetWake(std::function<void()> wake) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = std::move(wake);
  }
  KvTransferStats Stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  const KvTransferConfig& config() const { return config_; }
  const std::string& host() const { return host_; }
  int32_t port() const { return port_; }
  const std::string& engine_id() const { return engine_id_; }

 private:
  struct HoldCommand {
    RequestIndex index;
    uint64_t transfer_id;
    KvExportSpans spans;
    uint64_t tokens_hash;
  };
  struct PullCommand {
    RequestIndex index;
    RemoteKv from;
    int64_t first_token;
    int32_t num_pulls;
    KvImportSpans into;
  };
  struct CancelCommand {
    RequestIndex index;
  };
  struct ReleaseCommand {
    RemoteKv from;
  };
  struct PauseCommand {  // tests only: the thread waits here for `resume`
    std::shared_ptr<std::promise<void>> paused, resume;
  };
  using Command = std::variant<HoldCommand, PullCommand, CancelCommand, ReleaseCommand, PauseCommand>;

  // Producer: one request's KV, held for consumers.
  struct Held {
    RequestIndex index = 0;
    KvExportSpans spans;
    uint64_t tokens_hash = 0;
    Clock::time_point deadline;
    int32_t num_pulls = 1;
    int32_t pulls_done = 0;
    int32_t sends_in_flight = 0;
    std::vector<ucp_ep_h> send_eps;  // the consumers its sends go to
    bool expired = false;
  };
  // A consumer's connection to one producer.
  struct Peer {
    std::string address;  // host:port
    ucp_ep_h ep = nullptr;
    uint64_t hello_id = 0;
    bool ready = false;
    bool failed = false;
    Clock::time_point hello_deadline;
    std::vector<uint64_t> waiting;  // pulls to send once the handshake is accepted
    std::vector<ReleaseMessage> releases;  // releases to send then
  };
  // Consumer: one request's KV on its way.
  struct Pull {
    RequestIndex index = 0;
    uint64_t tag = 0;
    RemoteKv from;
    int64_t first_token = 0;
    int32_t num_pulls = 1;
    KvImportSpans into;
    std::vector<uint8_t> expected_header, header;
    std::vector<ucp_dt_iov_t> iov;
    int64_t expected_bytes = 0;
    std::string peer;
    void* request = nullptr;  // the posted receive while UCX holds it
    Clock::time_point deadline;
    std::string error;        // set when the pull was failed on purpose (cancel, timeout, refusal)
    bool cancel_asked = false;
  };
  // Something UCX completed, recorded by a callback and applied by the loop (callbacks never
  // erase state: UCX may call them from inside the call that the loop is making).
  struct Completion {
    enum Kind : uint8_t { kRecv, kSend, kControlSent } kind;
    uint64_t key = 0;  // the pull's tag, the held transfer id
    ucs_status_t status = UCS_OK;
    size_t length = 0;
  };
  struct SendContext {
    Impl* self;
    Completion::Kind kind;
    uint64_t key;
    std::vector<uint8_t> bytes;     // control message or header
    std::vector<ucp_dt_iov_t> iov;  // payload pieces
    int64_t payload_bytes = 0;
  };
  struct Inbound {
    unsigned id;
    std::vector<uint8_t> data;
    ucp_ep_h reply_ep;
  };

  void Queue(Command command);
  void Loop();
  void RunCommands();
  void ApplyCompletions();
  void HandleInbound();
  void CheckDeadlines();
  void Publish(Events events);

  // producer
  void OnHello(const Inbound& in);
  void OnPull(const Inbound& in);
  void SendPullError(ucp_ep_h ep, uint64_t tag, const std::string& message);
  void SendDone(uint64_t transfer_id, ucs_status_t status, int64_t bytes);
  void Release(uint64_t transfer_id, bool expired);
  // consumer
  void BeginPull(PullCommand command);
  Peer* Connect(const std::string& host, int32_t port, std::string* error);
  void OnHelloReply(const Inbound& in);
  void OnPullError(const Inbound& in);
  void OnRelease(const Inbound& in);
  void SendPull(Pull& pull, Peer& peer);
  void FailPull(Pull& pull, std::string error);
  void FailPeer(const std::string& address, std::string error);
  void RecvDone(uint64_t tag, ucs_status_t status, size_t length);
  // both
  bool SendControl(ucp_ep_h ep, unsigned id, std::vector<uint8_t> bytes, bool reply);
  void CloseEp(ucp_ep_h ep);

  static void OnConnRequest(ucp_conn_request_h request, void* arg);
  static void OnEpError(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t OnAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                           const ucp_am_recv_param_t* param);
  static void OnSent(void* request, ucs_status_t status, void* user_data);
  static void OnRecv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data);

  KvTransferConfig config_;
  kv::KvCacheConfig kv_config_;
  std::string host_, engine_id_;
  int32_t port_ = 0;

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int worker_fd_ = -1, command_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mt19937_64 random_;
  std::mutex random_mu_;

  // Shared with the engine thread.
  mutable std::mutex mu_;
  std::deque<Command> commands_;
  Events events_;
  std::function<void()> wake_;
  KvTransferStats stats_;

  // The connector thread's own.
  std::unordered_map<uint64_t, Held> held_;
  std::unordered_map<std::string, Peer> peers_;
  std::unordered_map<uint64_t, Pull> pulls_;              // by tag
  std::unordered_map<RequestIndex, uint64_t> pull_tags_;  // index -> tag
  std::vector<Completion> completions_;
  std::vector<Inbound> inbound_;
  std::vector<std::pair<ucp_ep_h, ucs_status_t>> ep_errors_;
  std::vector<ucp_ep_h> server_eps_;
  uint64_t next_tag_ = 1, next_hello_ = 1;
};

// ---------------------------------------------------------------------------------------------
// Start and stop

Status UcxKvConnector::Impl::Start() {
  {
    std::random_device device;
    random_.seed((static_cast<uint64_t>(device()) << 32) ^ device());
  }
  engine_id_ = config_.engine_id.empty() ? fmt::format("ember-{:016x}", random_()) : config_.engine_id;
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  ucp_config_t* ucp_config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &ucp_config); s != UCS_OK) {
    return Internal(fmt::format("UCX: reading its configuration failed: {}", UcsError(s)));
  }
  const ucs_status_t init = ucp_init(&params, ucp_config, &context_);
  ucp_config_release(ucp_config);
  if (init != UCS_OK) return Internal(fmt::format("UCX: ucp_init failed: {}", UcsError(init)));
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;  // only the connector's thread calls UCX
  if (ucs_status_t s = ucp_worker_create(context_, &worker_params, &worker_); s != UCS_OK) {
    return Internal(fmt::format("UCX: creating a worker failed: {}", UcsError(s)));
  }
  if (ucs_status_t s = ucp_worker_get_efd(worker_, &worker_fd_); s != UCS_OK) {
    return Internal(fmt::format("UCX: no wakeup file descriptor: {}", UcsError(s)));
  }
  command_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (command_fd_ < 0) return IoError("eventfd failed for the KV connector");
  for (unsigned id : {kAmHello, kAmHelloReply, kAmPull, kAmPullError, kAmRelease}) {
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = id;
    handler.cb = &Impl::OnAm;
    handler.arg = this;
    if (ucs_status_t s = ucp_worker_set_am_recv_handler(worker_, &handler); s != UCS_OK) {
      return Internal(fmt::format("UCX: registering a message handler failed: {}", UcsError(s)));
    }
  }
  if (config_.is_producer()) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(config_.port));
    if (inet_pton(AF_INET, config_.ip.c_str(), &addr.sin_addr) != 1) {
      return InvalidArgument(fmt::format("--kv-transfer-config: \"kv_ip\" is \"{}\": give an IPv4 address of this "
                                         "host that consumers can reach",
                                         config_.ip));
    }
    ucp_listener_params_t listener{};
    listener.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    listener.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    listener.sockaddr.addrlen = sizeof(addr);
    listener.conn_handler.cb = &Impl::OnConnRequest;
    listener.conn_handler.arg = this;
    if (ucs_status_t s = ucp_listener_create(worker_, &listener, &listener_); s != UCS_OK) {
      return IoError(fmt::format("KV transfer: cannot listen on {}:{} ({}): is the port in use? Pick another "
                                 "\"kv_port\" in --kv-transfer-config",
                                 config_.ip, config_.port, UcsError(s)));
    }
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    if (ucs_status_t s = ucp_listener_query(listener_, &attr); s != UCS_OK) {
      return Internal(fmt::format("UCX: ucp_listener_query failed: {}", UcsError(s)));
    }
    host_ = config_.ip;
    port_ = ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
  }
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void UcxKvConnector::Impl::Stop() {
  if (thread_.joinable()) {
    stop_ = true;
    const uint64_t one = 1;
    (void)!write(command_fd_, &one, sizeof(one));
    thread_.join();
  }
  // Whatever is still posted is cancelled with the worker; nothing writes KV memory after this.
  for (auto& [tag, pull] : pulls_) {
    if (pull.request != nullptr) ucp_request_cancel(worker_, pull.request);
  }
  if (worker_ != nullptr) {
    for (int i = 0; i < 100 && ucp_worker_progress(worker_) != 0; ++i) {
    }
  }
  for (auto& [address, peer] : peers_) CloseEp(peer.ep);
  for (ucp_ep_h ep : server_eps_) CloseEp(ep);
  peers_.clear();
  server_eps_.clear();
  if (listener_ != nullptr) ucp_listener_destroy(listener_);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
  if (command_fd_ >= 0) close(command_fd_);
  listener_ = nullptr;
  worker_ = nullptr;
  context_ = nullptr;
  command_fd_ = -1;
}

void UcxKvConnector::Impl::CloseEp(ucp_ep_h ep) {
  if (ep == nullptr || worker_ == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t request = ucp_ep_close_nbx(ep, &param);
  if (UCS_PTR_IS_PTR(request)) {
    for (int i = 0; i < 1000 && ucp_request_check_status(request) == UCS_INPROGRESS; ++i) ucp_worker_progress(worker_);
    ucp_request_free(request);
  }
}

// ---------------------------------------------------------------------------------------------
// The loop

void UcxKvConnector::Impl::Queue(Command command) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(std::move(command));
  }
  const uint64_t one = 1;
  (void)!write(command_fd_, &one, sizeof(one));
}

void UcxKvConnector::Impl::Loop() {
  while (!stop_) {
    while (ucp_worker_progress(worker_) != 0) {
    }
    // Commands before messages: the engine queues a Hold before its response can reach a client,
    // so a pull that progress just received may name a hold still in the queue. Handled first,
    // that pull found nothing and its prompt was computed again on the consumer (a loaded host:
    // 2 of 10 runs of the disaggregation e2e tests beside three busy loops).
    RunCommands();
    HandleInbound();
    ApplyCompletions();
    CheckDeadlines();
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.held = static_cast<int64_t>(held_.size());
      stats_.pulls_in_flight = static_cast<int64_t>(pulls_.size());
    }
    if (!inbound_.empty() || !ep_errors_.empty() || !completions_.empty()) continue;
    if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) continue;
    pollfd fds[2] = {{worker_fd_, POLLIN, 0}, {command_fd_, POLLIN, 0}};
    poll(fds, 2, /*timeout_ms=*/50);  // also the tick that checks deadlines
    uint64_t count = 0;
    (void)!read(command_fd_, &count, sizeof(count));
  }
}

std::function<void()> UcxKvConnector::Impl::PauseForTesting() {
  PauseCommand pause{std::make_shared<std::promise<void>>(), std::make_shared<std::promise<void>>()};
  std::future<void> paused = pause.paused->get_future();
  Queue(pause);
  paused.wait();
  return [resume = pause.resume] { resume->set_value(); };
}

void UcxKvConnector::Impl::RunCommands() {
  std::deque<Command> commands;
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands.swap(commands_);
  }
  for (Command& command : commands) {
    if (auto* hold = std::get_if<HoldCommand>(&command)) {
      Held& held = held_[hold->transfer_id];
      held.index = hold->index;
      held.spans = std::move(hold->spans);
      held.tokens_hash = hold->tokens_hash;
      held.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(config_.hold_timeout_s));
    } else if (auto* pull = std::get_if<PullCommand>(&command)) {
      BeginPull(std::move(*pull));
    } else if (auto* release = std::get_if<ReleaseCommand>(&command)) {
      if (!config_.AllowsProducer(release->from.host, release->from.port)) continue;
      std::string error;
      Peer* peer = Connect(release->from.host, release->from.port, &error);
      const ReleaseMessage msg{release->from.transfer_id, release->from.tokens_hash};
      if (peer == nullptr || peer->failed) continue;  // its hold expires there instead
      if (peer->ready) {
        SendControl(peer->ep, kAmRelease, Pack(&msg, sizeof(msg), nullptr, 0), /*reply=*/false);
      } else {
        peer->releases.push_back(msg);
      }
    } else if (auto* cancel = std::get_if<CancelCommand>(&command)) {
      auto it = pull_tags_.find(cancel->index);
      if (it != pull_tags_.end()) FailPull(pulls_.at(it->second), "the request was aborted");
    } else if (auto* pause = std::get_if<PauseCommand>(&command)) {
      pause->paused->set_value();
      pause->resume->get_future().wait();
    }
  }
}

void UcxKvConnector::Impl::Publish(Events events) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (RequestIndex index : events.released) events_.released.push_back(index);
    for (PullDone& done : events.pulls) events_.pulls.push_back(std::move(done));
    wake = wake_;
  }
  if (wake) wake();
}

void UcxKvConnector::Impl::CheckDeadlines() {
  const auto now = Clock::now();
  std::vector<uint64_t> expired;
  for (auto& [id, held] : held_) {
    if (!held.expired && now >= held.deadline) expired.push_back(id);
  }
  for (uint64_t id : expired) Release(id, /*expired=*/true);
  // A send the consumer never takes (it gave up on that pull: the rendezvous waits for a receive
  // that will not come) would hold the blocks forever: past the hold's lifetime, its connection is
  // closed, which ends the send with an error and releases the hold.
  for (auto& [id, held] : held_) {
    if (held.sends_in_flight == 0 || now < held.deadline + std::chrono::seconds(5)) continue;
    for (ucp_ep_h ep : std::exchange(held.send_eps, {})) {
      auto server = std::find(server_eps_.begin(), server_eps_.end(), ep);
      if (server == server_eps_.end()) continue;  // closed already
      EMBER_LOG_WARN("KV transfer: a consumer did not take request {}'s KV; closing its connection", held.index);
      server_eps_.erase(server);
      CloseEp(ep);
    }
  }
  for (auto& [address, peer] : peers_) {
    if (!peer.ready && !peer.failed && now >= peer.hello_deadline) {
      FailPeer(address, fmt::format("producer {} did not answer the KV handshake within {} s", address,
                                    config_.connect_timeout_s));
      break;  // FailPeer changed peers_; the next tick goes on
    }
  }
  for (auto& [tag, pull] : pulls_) {
    if (!pull.cancel_asked && now >= pull.deadline) {
      FailPull(pull, fmt::format("the KV from {} did not arrive within {} s (pull_timeout_s)", pull.peer,
                                 config_.pull_timeout_s));
    } else if (pull.cancel_asked && now >= pull.deadline + std::chrono::seconds(5)) {
      // A cancelled receive that UCX still holds is matched to a transfer in progress: closing
      // the connection ends it, so the blocks are never written after the pull is reported.
      FailPeer(pull.peer, fmt::format("the KV from {} stalled mid-transfer", pull.peer));
      break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// UCX callbacks: record, never act

void UcxKvConnector::Impl::OnConnRequest(ucp_conn_request_h request, void* arg) {
  auto* self = static_cast<Impl*>(arg);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Impl::OnEpError;
  params.err_handler.arg = self;
  ucp_ep_h ep = nullptr;
  if (ucs_status_t s = ucp_ep_create(self->worker_, &params, &ep); s != UCS_OK) {
    EMBER_LOG_WARN("KV transfer: accepting a consumer's connection failed: {}", UcsError(s));
    return;
  }
  self->server_eps_.push_back(ep);
}

void UcxKvConnector::Impl::OnEpError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  static_cast<Impl*>(arg)->ep_errors_.push_back({ep, status});
}

ucs_status_t UcxKvConnector::Impl::OnAm(void* arg, const void* header, size_t header_length, void* data,
                                        size_t length, const ucp_am_recv_param_t* param) {
  (void)header, (void)header_length;
  auto* self = static_cast<Impl*>(arg);
  // Control messages are small and arrive eagerly; anything else is not ours.
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0 || length > kMaxControlBytes) return UCS_OK;
  const auto* bytes = static_cast<const uint8_t*>(data);
  // The id is not in the callback's arguments: each handler shares this function, so the
  // messages carry their id as their first byte.
  if (length < 1) return UCS_OK;
  const bool reply = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0;
  self->inbound_.push_back({bytes[0], std::vector<uint8_t>(bytes + 1, bytes + length), reply ? param->reply_ep : nullptr});
  return UCS_OK;
}

void UcxKvConnector::Impl::OnSent(void* request, ucs_status_t status, void* user_data) {
  auto* context = static_cast<SendContext*>(user_data);
  context->self->completions_.push_back({context->kind, context->key, status,
                                         static_cast<size_t>(context->payload_bytes)});
  delete context;
  ucp_request_free(request);
}

void UcxKvConnector::Impl::OnRecv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                                  void* user_data) {
  auto* self = static_cast<Impl*>(user_data);
  // Found by the request pointer: the sender's tag is not filled in for a cancelled receive.
  for (auto& [pull_tag, pull] : self->pulls_) {
    if (pull.request == request) {
      pull.request = nullptr;
      self->completions_.push_back({Completion::kRecv, pull_tag, status, info != nullptr ? info->length : 0});
      break;
    }
  }
  ucp_request_free(request);
}

void UcxKvConnector::Impl::ApplyCompletions() {
  std::vector<Completion> completions = std::exchange(completions_, {});
  for (const Completion& c : completions) {
    switch (c.kind) {
      case Completion::kRecv: RecvDone(c.key, c.status, c.length); break;
      case Completion::kSend: SendDone(c.key, c.status, static_cast<int64_t>(c.length)); break;
      case Completion::kControlSent:
        if (c.status != UCS_OK) EMBER_LOG_DEBUG("KV transfer: a control message failed: {}", UcsError(c.status));
        break;
    }
  }
}

void UcxKvConnector::Impl::HandleInbound() {
  for (const auto& error : std::exchange(ep_errors_, {})) {
    // Not a structured binding: clang 14 (the sanitizer builds) cannot capture one in a lambda.
    const ucp_ep_h ep = error.first;
    const ucs_status_t status = error.second;
    auto peer = std::find_if(peers_.begin(), peers_.end(), [&](const auto& p) { return p.second.ep == ep; });
    if (peer != peers_.end()) {
      const std::string address = peer->first;
      FailPeer(address, fmt::format("lost the connection to producer {} ({})", address, UcsError(status)));
      continue;
    }
    // A consumer went away: its sends complete with errors, and its endpoint is closed now.
    auto server = std::find(server_eps_.begin(), server_eps_.end(), ep);
    if (server != server_eps_.end()) {
      EMBER_LOG_DEBUG("KV transfer: a consumer's connection ended: {}", UcsError(status));
      server_eps_.erase(server);
      CloseEp(ep);
    }
  }
  std::vector<Inbound> inbound = std::exchange(inbound_, {});
  for (const Inbound& in : inbound) {
    switch (in.id) {
      case kAmHello: OnHello(in); break;
      case kAmHelloReply: OnHelloReply(in); break;
      case kAmPull: OnPull(in); break;
      case kAmPullError: OnPullError(in); break;
      case kAmRelease: OnRelease(in); break;
      default: break;
    }
  }
}

bool UcxKvConnector::Impl::SendControl(ucp_ep_h ep, unsigned id, std::vector<uint8_t> bytes, bool reply) {
  auto* context = new SendContext{this, Completion::kControlSent, 0, {}, {}, 0};
  context->bytes.reserve(bytes.size() + 1);
  context->bytes.push_back(static_cast<uint8_t>(id));
  context->bytes.insert(context->bytes.end(), bytes.begin(), bytes.end());
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.send = &Impl::OnSent;
  param.user_data = context;
  param.flags = reply ? UCP_AM_SEND_FLAG_REPLY : 0;
  ucs_status_ptr_t request =
      ucp_am_send_nbx(ep, id, nullptr, 0, context->bytes.data(), context->bytes.size(), &param);
  if (UCS_PTR_IS_ERR(request)) {
    EMBER_LOG_DEBUG("KV transfer: sending a control message failed: {}", UcsError(UCS_PTR_STATUS(request)));
    delete context;
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Producer

Expected<RemoteKv> UcxKvConnector::Impl::Hold(RequestIndex index, KvExportSpans spans, uint64_t tokens_hash) {
  if (!config_.is_producer()) return Internal("Hold on a connector that is no KV producer");
  RemoteKv where;
  {
    std::lock_guard<std::mutex> lock(random_mu_);
    where.transfer_id = random_();  // unguessable: a pull must name it
  }
  where.engine_id = engine_id_;
  where.host = host_;
  where.port = port_;
  where.num_tokens = spans.layout.num_tokens;
  where.tokens_hash = tokens_hash;
  where.num_bytes = spans.layout.PayloadBytes();
  Queue(HoldCommand{index, where.transfer_id, std::move(spans), tokens_hash});
  return where;
}

void UcxKvConnector::Impl::OnHello(const Inbound& in) {
  if (in.reply_ep == nullptr || in.data.size() < sizeof(uint64_t)) return;
  uint64_t hello_id = 0;
  std::memcpy(&hello_id, in.data.data(), sizeof(hello_id));
  int64_t header_bytes = 0;
  Status status = Status::Ok();
  Expected<KvTransferLayout> layout = ParseKvLayout(std::span(in.data).subspan(sizeof(hello_id)), &header_bytes);
  if (!layout.ok()) {
    status = layout.status();
  } else {
    status = CheckKvLayoutMatches(*layout, kv_config_);
  }
  if (!status.ok()) {
    EMBER_LOG_WARN("KV transfer: refused a consumer whose KV cache differs from ours: {}", status.message());
  }
  std::vector<uint8_t> reply = Pack(&hello_id, sizeof(hello_id), nullptr, 0);
  reply.push_back(status.ok() ? 1 : 0);
  const std::string message = status.ok() ? engine_id_ : status.message();
  reply.insert(reply.end(), message.begin(), message.end());
  SendControl(in.reply_ep, kAmHelloReply, std::move(reply), /*reply=*/false);
}

void UcxKvConnector::Impl::SendPullError(ucp_ep_h ep, uint64_t tag, const std::string& message) {
  std::vector<uint8_t> bytes = Pack(&tag, sizeof(tag), message.data(), message.size());
  SendControl(ep, kAmPullError, std::move(bytes), /*reply=*/false);
}

void UcxKvConnector::Impl::OnPull(const Inbound& in) {
  if (in.reply_ep == nullptr || in.data.size() != sizeof(PullMessage)) return;
  PullMessage msg;
  std::memcpy(&msg, in.data.data(), sizeof(msg));
  auto it = held_.find(msg.transfer_id);
  if (it == held_.end() || it->second.expired) {
    SendPullError(in.reply_ep, msg.tag,
                  fmt::format("producer {} holds no KV under that transfer id (it was pulled already, or nobody "
                              "pulled it within hold_timeout_s = {} s)",
                              engine_id_, config_.hold_timeout_s));
    return;
  }
  Held& held = it->second;
  const KvTransferLayout& layout = held.spans.layout;
  if (msg.tokens_hash != held.tokens_hash || msg.num_tokens != layout.num_tokens) {
    SendPullError(in.reply_ep, msg.tag, "the KV held under that transfer id belongs to another prompt");
    return;
  }
  if (msg.first_token < 0 || msg.first_token % layout.block_size != 0 || msg.first_token >= layout.num_tokens) {
    SendPullError(in.reply_ep, msg.tag, fmt::format("a pull from position {} makes no sense for {} held tokens in "
                                                    "blocks of {}",
                                                    msg.first_token, layout.num_tokens, layout.block_size));
    return;
  }
  held.num_pulls = std::clamp(msg.num_pulls, held.num_pulls, 1 << 16);
  const KvExportSpans part = msg.first_token > 0 ? WithoutLeadingEntries(held.spans, msg.first_token) : held.spans;
  auto* context = new SendContext{this, Completion::kSend, msg.transfer_id, SerializeKvLayout(part.layout), {}, 0};
  context->iov.push_back({context->bytes.data(), context->bytes.size()});
  for (const KvSourceSpan& span : CoalesceKvSpans<const uint8_t>(part.spans)) {
    context->iov.push_back({const_cast<uint8_t*>(span.bytes.data()), span.bytes.size()});
    context->payload_bytes += static_cast<int64_t>(span.bytes.size());
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.send = &Impl::OnSent;
  param.user_data = context;
  param.datatype = ucp_dt_make_iov();
  ++held.sends_in_flight;
  held.send_eps.push_back(in.reply_ep);
  ucs_status_ptr_t request = ucp_tag_send_nbx(in.reply_ep, context->iov.data(), context->iov.size(), msg.tag, &param);
  if (UCS_PTR_IS_ERR(request)) {
    completions_.push_back({Completion::kSend, msg.transfer_id, UCS_PTR_STATUS(request), 0});
    delete context;
  }
}

void UcxKvConnector::Impl::OnRelease(const Inbound& in) {
  if (in.data.size() != sizeof(ReleaseMessage)) return;
  ReleaseMessage msg;
  std::memcpy(&msg, in.data.data(), sizeof(msg));
  auto it = held_.find(msg.transfer_id);
  if (it == held_.end() || it->second.tokens_hash != msg.tokens_hash) return;
  Held& held = it->second;
  if (++held.pulls_done >= held.num_pulls) Release(msg.transfer_id, /*expired=*/false);
}

void UcxKvConnector::Impl::SendDone(uint64_t transfer_id, ucs_status_t status, int64_t bytes) {
  auto it = held_.find(transfer_id);
  if (it == held_.end()) return;
  Held& held = it->second;
  --held.sends_in_flight;
  if (status == UCS_OK) {
    ++held.pulls_done;
    std::lock_guard<std::mutex> lock(mu_);
    stats_.bytes_sent += bytes;
    ++stats_.transfers_sent;
  } else {
    EMBER_LOG_WARN("KV transfer: sending request {}'s KV to a consumer failed: {}", held.index, UcsError(status));
  }
  if (held.pulls_done >= held.num_pulls || (held.expired && held.sends_in_flight == 0)) {
    Release(transfer_id, held.expired);
  }
}

void UcxKvConnector::Impl::Release(uint64_t transfer_id, bool expired) {
  Held& held = held_.at(transfer_id);
  held.expired = true;  // no new pulls
  if (held.sends_in_flight > 0) return;  // its blocks are being read: released when the sends end
  const RequestIndex index = held.index;
  if (expired && held.pulls_done == 0) {
    EMBER_LOG_WARN("KV transfer: nobody pulled request {}'s KV within {} s; freeing it", index, config_.hold_timeout_s);
  }
  held_.erase(transfer_id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (expired) ++stats_.holds_expired;
  }
  Events events;
  events.released.push_back(index);
  Publish(std::move(events));
}

// ---------------------------------------------------------------------------------------------
// Consumer

void UcxKvConnector::Impl::StartPull(RequestIndex index, const RemoteKv& from, int64_t first_token,
                                     int32_t num_pulls, KvImportSpans into) {
  Queue(PullCommand{index, from, first_token, num_pulls, std::move(into)});
}

UcxKvConnector::Impl::Peer* UcxKvConnector::Impl::Connect(const std::string& host, int32_t port, std::string* error) {
  const std::string address = fmt::format("{}:{}", host, port);
  auto it = peers_.find(address);
  if (it != peers_.end()) return &it->second;
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) {
    *error = fmt::format("cannot resolve the producer's KV address {}", address);
    return nullptr;
  }
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = found->ai_addr;
  params.sockaddr.addrlen = found->ai_addrlen;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Impl::OnEpError;
  params.err_handler.arg = this;
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = ucp_ep_create(worker_, &params, &ep);
  freeaddrinfo(found);
  if (status != UCS_OK) {
    *error = fmt::format("cannot connect to the producer's KV address {}: {}", address, UcsError(status));
    return nullptr;
  }
  Peer& peer = peers_[address];
  peer.address = address;
  peer.ep = ep;
  peer.hello_id = next_hello_++;
  peer.hello_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config_.connect_timeout_s));
  std::vector<uint8_t> hello = Pack(&peer.hello_id, sizeof(peer.hello_id), nullptr, 0);
  const std::vector<uint8_t> layout = SerializeKvLayout(KvLayoutOfConfig(kv_config_));
  hello.insert(hello.end(), layout.begin(), layout.end());
  SendControl(ep, kAmHello, std::move(hello), /*reply=*/true);
  return &peer;
}

void UcxKvConnector::Impl::BeginPull(PullCommand command) {
  const uint64_t tag = next_tag_++;
  Pull& pull = pulls_[tag];
  pull.index = command.index;
  pull.tag = tag;
  pull.from = command.from;
  pull.first_token = command.first_token;
  pull.num_pulls = command.num_pulls;
  pull.into = std::move(command.into);
  pull.peer = fmt::format("{}:{}", pull.from.host, pull.from.port);
  pull.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(config_.pull_timeout_s));
  pull_tags_[pull.index] = tag;
  pull.expected_header = SerializeKvLayout(pull.into.layout);
  pull.header.resize(pull.expected_header.size());
  pull.iov.push_back({pull.header.data(), pull.header.size()});
  for (const KvDestSpan& span : CoalesceKvSpans<uint8_t>(pull.into.spans)) {
    pull.iov.push_back({span.bytes.data(), span.bytes.size()});
    pull.expected_bytes += static_cast<int64_t>(span.bytes.size());
  }
  if (!config_.AllowsProducer(pull.from.host, pull.from.port)) {
    FailPull(pull, fmt::format("{} is not among this consumer's allowed_producers", pull.peer));
    return;
  }
  std::string error;
  Peer* peer = Connect(pull.from.host, pull.from.port, &error);
  if (peer == nullptr || peer->failed) {
    FailPull(pull, peer == nullptr ? error : fmt::format("producer {} is unreachable", pull.peer));
    return;
  }
  // Posted before the PULL goes out, so the KV lands in the blocks as it arrives.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = &Impl::OnRecv;
  param.user_data = this;
  param.datatype = ucp_dt_make_iov();
  ucs_status_ptr_t request = ucp_tag_recv_nbx(worker_, pull.iov.data(), pull.iov.size(), tag, ~ucp_tag_t{0}, &param);
  if (UCS_PTR_IS_ERR(request)) {
    pull.error = fmt::format("posting the receive failed: {}", UcsError(UCS_PTR_STATUS(request)));
    pull.cancel_asked = true;
    completions_.push_back({Completion::kRecv, tag, UCS_PTR_STATUS(request), 0});
    return;
  }
  pull.request = request;
  if (peer->ready) {
    SendPull(pull, *peer);
  } else {
    peer->waiting.push_back(tag);
  }
}

void UcxKvConnector::Impl::SendPull(Pull& pull, Peer& peer) {
  PullMessage msg{};
  msg.transfer_id = pull.from.transfer_id;
  msg.tag = pull.tag;
  msg.first_token = pull.first_token;
  msg.num_tokens = pull.from.num_tokens;
  msg.tokens_hash = pull.from.tokens_hash;
  msg.num_pulls = pull.num_pulls;
  if (!SendControl(peer.ep, kAmPull, Pack(&msg, sizeof(msg), nullptr, 0), /*reply=*/true)) {
    FailPull(pull, fmt::format("cannot send the pull to producer {}", peer.address));
  }
}

void UcxKvConnector::Impl::OnHelloReply(const Inbound& in) {
  if (in.data.size() < sizeof(uint64_t) + 1) return;
  uint64_t hello_id = 0;
  std::memcpy(&hello_id, in.data.data(), sizeof(hello_id));
  const bool ok = in.data[sizeof(hello_id)] != 0;
  const std::string message(in.data.begin() + sizeof(hello_id) + 1, in.data.end());
  for (auto& [address, peer] : peers_) {
    if (peer.hello_id != hello_id || peer.ready || peer.failed) continue;
    if (!ok) {
      FailPeer(address, fmt::format("producer {} refused this instance: {}", address, message));
      return;
    }
    EMBER_LOG_INFO("KV transfer: connected to producer {} ({})", address, message);
    peer.ready = true;
    for (const ReleaseMessage& msg : std::exchange(peer.releases, {})) {
      SendControl(peer.ep, kAmRelease, Pack(&msg, sizeof(msg), nullptr, 0), /*reply=*/false);
    }
    for (uint64_t tag : std::exchange(peer.waiting, {})) {
      auto it = pulls_.find(tag);
      if (it != pulls_.end() && !it->second.cancel_asked) SendPull(it->second, peer);
    }
    return;
  }
}

void UcxKvConnector::Impl::OnPullError(const Inbound& in) {
  if (in.data.size() < sizeof(uint64_t)) return;
  uint64_t tag = 0;
  std::memcpy(&tag, in.data.data(), sizeof(tag));
  auto it = pulls_.find(tag);
  if (it == pulls_.end()) return;
  FailPull(it->second, std::string(in.data.begin() + sizeof(tag), in.data.end()));
}

void UcxKvConnector::Impl::FailPull(Pull& pull, std::string error) {
  if (pull.cancel_asked) return;
  pull.cancel_asked = true;
  pull.error = std::move(error);
  if (pull.request != nullptr) {
    ucp_request_cancel(worker_, pull.request);  // OnRecv reports it, now or once UCX lets go
  } else {
    completions_.push_back({Completion::kRecv, pull.tag, UCS_ERR_CANCELED, 0});
  }
}

void UcxKvConnector::Impl::FailPeer(const std::string& address, std::string error) {
  auto it = peers_.find(address);
  if (it == peers_.end()) return;
  EMBER_LOG_WARN("KV transfer: {}", error);
  for (auto& [tag, pull] : pulls_) {
    if (pull.peer == address) FailPull(pull, error);
  }
  CloseEp(it->second.ep);
  peers_.erase(it);  // the next pull from there connects again
}

void UcxKvConnector::Impl::RecvDone(uint64_t tag, ucs_status_t status, size_t length) {
  auto it = pulls_.find(tag);
  if (it == pulls_.end()) return;
  Pull& pull = it->second;
  Status result = Status::Ok();
  const auto expected = static_cast<size_t>(pull.expected_bytes) + pull.header.size();
  if (!pull.error.empty()) {
    result = IoError(pull.error);
  } else if (status != UCS_OK) {
    result = IoError(fmt::format("receiving the KV from {} failed: {}", pull.peer, UcsError(status)));
  } else if (length != expected) {
    result = DataLoss(fmt::format("producer {} sent {} bytes where {} were expected", pull.peer, length, expected));
  } else if (pull.header != pull.expected_header) {
    result = DataLoss(fmt::format("producer {} sent KV of another layout than this request's", pull.peer));
  }
  Events events;
  events.pulls.push_back({pull.index, result, result.ok() ? pull.expected_bytes : 0});
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (result.ok()) {
      stats_.bytes_received += pull.expected_bytes;
      ++stats_.transfers_received;
    } else {
      ++stats_.pulls_failed;
    }
  }
  pull_tags_.erase(pull.index);
  pulls_.erase(it);
  Publish(std::move(events));
}

// ---------------------------------------------------------------------------------------------

Expected<std::unique_ptr<UcxKvConnector>> UcxKvConnector::Create(const KvTransferConfig& config,
                                                                 const kv::KvCacheConfig& kv_config) {
  auto impl = std::make_unique<Impl>(config, kv_config);
  EMBER_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<UcxKvConnector>(new UcxKvConnector(std::move(impl)));
}

UcxKvConnector::UcxKvConnector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxKvConnector::~UcxKvConnector() = default;

bool UcxKvConnector::is_producer() const { return impl_->config().is_producer(); }
bool UcxKvConnector::is_consumer() const { return impl_->config().is_consumer(); }
Expected<RemoteKv> UcxKvConnector::Hold(RequestIndex index, KvExportSpans spans, uint64_t tokens_hash) {
  return impl_->Hold(index, std::move(spans), tokens_hash);
}
void UcxKvConnector::StartPull(RequestIndex index, const RemoteKv& from, int64_t first_token, int32_t num_pulls,
                               KvImportSpans into) {
  impl_->StartPull(index, from, first_token, num_pulls, std::move(into));
}
void UcxKvConnector::ReleaseRemote(const RemoteKv& from) { impl_->ReleaseRemote(from); }
void UcxKvConnector::CancelPull(RequestIndex index) { impl_->CancelPull(index); }
std::function<void()> UcxKvConnector::PauseForTesting() { return impl_->PauseForTesting(); }
KvConnector::Events UcxKvConnector::TakeEvents() { return impl_->TakeEvents(); }
void UcxKvConnector::SetWake(std::function<void()> wake) { impl_->SetWake(std::move(wake)); }
KvTransferStats UcxKvConnector::Stats() const { return impl_->Stats(); }
const std::string& UcxKvConnector::host() const { return impl_->host(); }
int32_t UcxKvConnector::port() const { return impl_->port(); }
const std::string& UcxKvConnector::engine_id() const { return impl_->engine_id(); }

}  // namespace ember::disagg
