#include "parallel/step_codec.h"

#include <bit>
#include <optional>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "core/check.h"

namespace ember::parallel {
namespace {

// "EMWS" read as a little-endian u32, then the version of the layout below.
constexpr uint32_t kMagic = 0x53574d45;
constexpr uint32_t kVersion = 2;
// "EMRO": a data-parallel rank's ModelRunnerOutput.
constexpr uint32_t kOutputMagic = 0x4f524d45;
constexpr uint32_t kOutputVersion = 3;

// A new field must be encoded: update step_codec.cc and this size. (Sizes of the x86-64 and
// AArch64 libstdc++ layouts; a field that fits in padding does not change them, which is why each
// struct is also encoded through a structured binding of all its fields below: a new field breaks
// that binding's compilation.)
#if defined(__GLIBCXX__) && __SIZEOF_POINTER__ == 8
static_assert(sizeof(SamplingParams) == 152, "a new field must be encoded: update step_codec.cc and this size");
static_assert(sizeof(kv::KvBlocks) == 24, "a new field must be encoded: update step_codec.cc and this size");
static_assert(sizeof(NewRequestData) == 280, "a new field must be encoded: update step_codec.cc and this size");
static_assert(sizeof(CachedRequestData) == 64, "a new field must be encoded: update step_codec.cc and this size");
static_assert(sizeof(SchedulerOutput) == 208, "a new field must be encoded: update step_codec.cc and this size");
static_assert(sizeof(TokenLogprobs) == 56, "a new field must be encoded: update step_codec.cc and this size");
static_assert(sizeof(ModelRunnerOutput) == 216, "a new field must be encoded: update step_codec.cc and this size");
static_assert(sizeof(WorkerStep) == 264, "a new field must be encoded: update step_codec.cc and this size");
#endif

class Writer {
 public:
  std::vector<uint8_t> Take() && { return std::move(bytes_); }
  size_t size() const { return bytes_.size(); }

  void U8(uint8_t v) { bytes_.push_back(v); }
  void Bool(bool v) { U8(v ? 1 : 0); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F32(float v) { U32(std::bit_cast<uint32_t>(v)); }  // every bit, NaN payloads included
  void Count(size_t n) { U64(n); }

  void I32s(const std::vector<int32_t>& v) {
    Count(v.size());
    for (int32_t x : v) I32(x);
  }
  void U64s(const std::vector<uint64_t>& v) {
    Count(v.size());
    for (uint64_t x : v) U64(x);
  }
  void I32Lists(const std::vector<std::vector<int32_t>>& v) {
    Count(v.size());
    for (const auto& list : v) I32s(list);
  }
  void String(const std::string& s) {
    Count(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  template <typename T>
  void Optional(const std::optional<T>& v) {
    Bool(v.has_value());
    if (!v.has_value()) return;
    if constexpr (std::is_same_v<T, uint64_t>) {
      U64(*v);
    } else {
      static_assert(std::is_same_v<T, int32_t>);
      I32(*v);
    }
  }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads what Writer wrote. The first problem is kept and every later read returns zeros, so
// decoding code reads straight through and checks once at the end; counts that fail are 0, so
// nothing is allocated after an error.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t position() const { return position_; }
  size_t remaining() const { return bytes_.size() - position_; }
  void Fail(std::string message) {
    if (ok()) error_ = fmt::format("malformed WorkerStep at byte {}: {}", position_, message);
  }

  uint8_t U8(const char* what) {
    if (!ok()) return 0;
    if (remaining() < 1) {
      Fail(fmt::format("truncated in {}", what));
      return 0;
    }
    return bytes_[position_++];
  }
  bool Bool(const char* what) {
    const uint8_t v = U8(what);
    if (v > 1) Fail(fmt::format("{} is {}, not a boolean", what, v));
    return v == 1;
  }
  uint32_t U32(const char* what) { return static_cast<uint32_t>(Fixed(what, 4)); }
  uint64_t U64(const char* what) { return Fixed(what, 8); }
  int32_t I32(const char* what) { return static_cast<int32_t>(U32(what)); }
  int64_t I64(const char* what) { return static_cast<int64_t>(U64(what)); }
  float F32(const char* what) { return std::bit_cast<float>(U32(what)); }

  // A list's length, which cannot exceed the elements the remaining bytes could hold (each
  // takes at least `min_element_bytes`): a corrupt count fails here instead of allocating.
  size_t Count(const char* what, size_t min_element_bytes) {
    const uint64_t n = U64(what);
    if (!ok()) return 0;
    if (n > remaining() / min_element_bytes) {
      Fail(fmt::format("{} claims {} entries, more than the {} bytes left can hold", what, n, remaining()));
      return 0;
    }
    return static_cast<size_t>(n);
  }

  std::vector<int32_t> I32s(const char* what) {
    std::vector<int32_t> v(Count(what, 4));
    for (int32_t& x : v) x = I32(what);
    return v;
  }
  std::vector<uint64_t> U64s(const char* what) {
    std::vector<uint64_t> v(Count(what, 8));
    for (uint64_t& x : v) x = U64(what);
    return v;
  }
  std::vector<std::vector<int32_t>> I32Lists(const char* what) {
    std::vector<std::vector<int32_t>> v(Count(what, 8));
    for (auto& list : v) list = I32s(what);
    return v;
  }
  std::string String(const char* what) {
    const size_t n = Count(what, 1);
    std::string s(reinterpret_cast<const char*>(bytes_.data()) + position_, n);
    position_ += n;
    return s;
  }
  template <typename T>
  std::optional<T> Optional(const char* what) {
    if (!Bool(what)) return std::nullopt;
    if constexpr (std::is_same_v<T, uint64_t>) {
      return U64(what);
    } else {
      static_assert(std::is_same_v<T, int32_t>);
      return I32(what);
    }
  }

 private:
  uint64_t Fixed(const char* what, size_t width) {
    if (!ok()) return 0;
    if (remaining() < width) {
      Fail(fmt::format("truncated in {}", what));
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < width; ++i) v |= static_cast<uint64_t>(bytes_[position_ + i]) << (8 * i);
    position_ += width;
    return v;
  }

  std::span<const uint8_t> bytes_;
  size_t position_ = 0;
  std::string error_;
};

// Each Put binds every field of its struct: a field added to the struct breaks the binding's
// compilation here, and then needs its line in Put and Get.

void Put(Writer& w, const SamplingParams& p) {
  const auto& [n, temperature, top_p, top_k, min_p, presence_penalty, frequency_penalty, repetition_penalty, seed,
               max_tokens, min_tokens, ignore_eos, stop_token_ids, stop, include_stop_str_in_output, logprobs,
               prompt_logprobs, constraint] = p;
  // Not encoded: workers never sample, so they need no grammar (and a compiled grammar is an
  // object, not data).
  (void)constraint;
  w.I32(n);
  w.F32(temperature);
  w.F32(top_p);
  w.I32(top_k);
  w.F32(min_p);
  w.F32(presence_penalty);
  w.F32(frequency_penalty);
  w.F32(repetition_penalty);
  w.Optional(seed);
  w.I32(max_tokens);
  w.I32(min_tokens);
  w.Bool(ignore_eos);
  w.I32s(stop_token_ids);
  w.Count(stop.size());
  for (const std::string& s : stop) w.String(s);
  w.Bool(include_stop_str_in_output);
  w.Optional(logprobs);
  w.Optional(prompt_logprobs);
}

void Get(Reader& r, SamplingParams& p) {
  p.n = r.I32("n");
  p.temperature = r.F32("temperature");
  p.top_p = r.F32("top_p");
  p.top_k = r.I32("top_k");
  p.min_p = r.F32("min_p");
  p.presence_penalty = r.F32("presence_penalty");
  p.frequency_penalty = r.F32("frequency_penalty");
  p.repetition_penalty = r.F32("repetition_penalty");
  p.seed = r.Optional<uint64_t>("seed");
  p.max_tokens = r.I32("max_tokens");
  p.min_tokens = r.I32("min_tokens");
  p.ignore_eos = r.Bool("ignore_eos");
  p.stop_token_ids = r.I32s("stop_token_ids");
  p.stop.resize(r.Count("stop", 8));
  for (std::string& s : p.stop) s = r.String("stop");
  p.include_stop_str_in_output = r.Bool("include_stop_str_in_output");
  p.logprobs = r.Optional<int32_t>("logprobs");
  p.prompt_logprobs = r.Optional<int32_t>("prompt_logprobs");
}

void Put(Writer& w, const kv::KvBlocks& b) {
  const auto& [per_group] = b;
  w.I32Lists(per_group);
}

void Get(Reader& r, kv::KvBlocks& b) { b.per_group = r.I32Lists("block ids"); }

void Put(Writer& w, const NewRequestData& d) {
  const auto& [req, prompt_token_ids, output_token_ids, sampling, eos_token_id, block_ids, num_computed_tokens,
               cache_salt_key, mm_features] = d;
  // Encoder inputs stay on rank 0: a multi-rank engine loads no towers, so its frontend refuses
  // media before a request gets here.
  EMBER_CHECK(mm_features.empty(), "request {}: multimodal inputs cannot be sent to worker ranks", req);
  w.U64(req);
  w.I32s(prompt_token_ids);
  w.I32s(output_token_ids);
  Put(w, sampling);
  w.I32(eos_token_id);
  Put(w, block_ids);
  w.I64(num_computed_tokens);
  w.U64(cache_salt_key);
}

void Get(Reader& r, NewRequestData& d) {
  d.req = r.U64("req");
  d.prompt_token_ids = r.I32s("prompt_token_ids");
  d.output_token_ids = r.I32s("output_token_ids");
  Get(r, d.sampling);
  d.eos_token_id = r.I32("eos_token_id");
  Get(r, d.block_ids);
  d.num_computed_tokens = r.I64("num_computed_tokens");
  d.cache_salt_key = r.U64("cache_salt_key");
}

void Put(Writer& w, const CachedRequestData& d) {
  const auto& [req, new_block_ids, num_computed_tokens, num_kept_blocks] = d;
  w.U64(req);
  Put(w, new_block_ids);
  w.I64(num_computed_tokens);
  w.I32s(num_kept_blocks);
}

void Get(Reader& r, CachedRequestData& d) {
  d.req = r.U64("req");
  Get(r, d.new_block_ids);
  d.num_computed_tokens = r.I64("num_computed_tokens");
  d.num_kept_blocks = r.I32s("num_kept_blocks");
}

// The fewest bytes an encoded T takes (a default T: empty lists, absent optionals), which bounds
// a list of T by the bytes left.
template <typename T>
size_t MinEncodedBytes() {
  static const size_t bytes = [] {
    Writer w;
    Put(w, T{});
    return w.size();
  }();
  return bytes;
}

void Put(Writer& w, const SchedulerOutput& o) {
  const auto& [step_id, new_reqs, cached_reqs, scheduled_reqs, num_scheduled_tokens, total_num_scheduled_tokens,
               scheduled_spec_tokens, num_tokens_to_propose, finished_reqs, preempted_reqs] = o;
  w.U64(step_id);
  w.Count(new_reqs.size());
  for (const NewRequestData& d : new_reqs) Put(w, d);
  w.Count(cached_reqs.size());
  for (const CachedRequestData& d : cached_reqs) Put(w, d);
  w.U64s(scheduled_reqs);
  w.I32s(num_scheduled_tokens);
  w.I64(total_num_scheduled_tokens);
  w.I32Lists(scheduled_spec_tokens);
  w.I32s(num_tokens_to_propose);
  w.U64s(finished_reqs);
  w.U64s(preempted_reqs);
}

void Get(Reader& r, SchedulerOutput& o) {
  o.step_id = r.U64("step_id");
  o.new_reqs.resize(r.Count("new_reqs", MinEncodedBytes<NewRequestData>()));
  for (NewRequestData& d : o.new_reqs) Get(r, d);
  o.cached_reqs.resize(r.Count("cached_reqs", MinEncodedBytes<CachedRequestData>()));
  for (CachedRequestData& d : o.cached_reqs) Get(r, d);
  o.scheduled_reqs = r.U64s("scheduled_reqs");
  o.num_scheduled_tokens = r.I32s("num_scheduled_tokens");
  o.total_num_scheduled_tokens = r.I64("total_num_scheduled_tokens");
  o.scheduled_spec_tokens = r.I32Lists("scheduled_spec_tokens");
  o.num_tokens_to_propose = r.I32s("num_tokens_to_propose");
  o.finished_reqs = r.U64s("finished_reqs");
  o.preempted_reqs = r.U64s("preempted_reqs");
}

// The lists scheduler_output.h documents as parallel: a worker indexes one by the other.
Status CheckParallelLists(const WorkerStep& step) {
  const SchedulerOutput& o = step.output;
  const size_t scheduled = o.scheduled_reqs.size();
  if (o.num_scheduled_tokens.size() != scheduled) {
    return InvalidArgument(fmt::format("malformed WorkerStep: {} scheduled requests but {} token counts", scheduled,
                                       o.num_scheduled_tokens.size()));
  }
  if (!o.scheduled_spec_tokens.empty() && o.scheduled_spec_tokens.size() != scheduled) {
    return InvalidArgument(fmt::format("malformed WorkerStep: {} scheduled requests but {} draft-token lists",
                                       scheduled, o.scheduled_spec_tokens.size()));
  }
  if (!o.num_tokens_to_propose.empty() && o.num_tokens_to_propose.size() != scheduled) {
    return InvalidArgument(fmt::format("malformed WorkerStep: {} scheduled requests but {} propose counts", scheduled,
                                       o.num_tokens_to_propose.size()));
  }
  if (step.sampled_token_ids.size() != step.sampled_reqs.size()) {
    return InvalidArgument(fmt::format("malformed WorkerStep: {} sampled requests but {} token lists",
                                       step.sampled_reqs.size(), step.sampled_token_ids.size()));
  }
  return Status::Ok();
}

void Put(Writer& w, const TokenLogprobs& t) {
  const auto& [logprob, top_ids, top_logprobs] = t;
  w.F32(logprob);
  w.I32s(top_ids);
  w.Count(top_logprobs.size());
  for (float v : top_logprobs) w.F32(v);
}

void Get(Reader& r, TokenLogprobs& t) {
  t.logprob = r.F32("logprob");
  t.top_ids = r.I32s("top_ids");
  t.top_logprobs.resize(r.Count("top_logprobs", 4));
  for (float& v : t.top_logprobs) v = r.F32("top_logprobs");
}

void PutLogprobLists(Writer& w, const std::vector<std::vector<TokenLogprobs>>& lists) {
  w.Count(lists.size());
  for (const std::vector<TokenLogprobs>& list : lists) {
    w.Count(list.size());
    for (const TokenLogprobs& t : list) Put(w, t);
  }
}

std::vector<std::vector<TokenLogprobs>> GetLogprobLists(Reader& r, const char* what) {
  std::vector<std::vector<TokenLogprobs>> lists(r.Count(what, 8));
  for (std::vector<TokenLogprobs>& list : lists) {
    list.resize(r.Count(what, 20));  // a TokenLogprobs takes at least 4 + 8 + 8 bytes
    for (TokenLogprobs& t : list) Get(r, t);
  }
  return lists;
}

void PutF32Lists(Writer& w, const std::vector<std::vector<float>>& lists) {
  w.Count(lists.size());
  for (const std::vector<float>& list : lists) {
    w.Count(list.size());
    for (float v : list) w.F32(v);
  }
}

std::vector<std::vector<float>> GetF32Lists(Reader& r, const char* what) {
  std::vector<std::vector<float>> lists(r.Count(what, 8));
  for (std::vector<float>& list : lists) {
    list.resize(r.Count(what, 4));
    for (float& v : list) v = r.F32(what);
  }
  return lists;
}

}  // namespace

std::vector<uint8_t> EncodeWorkerStep(const WorkerStep& step) {
  const auto& [shutdown, forward_without_tokens, output, sampled_reqs, sampled_token_ids] = step;
  Writer w;
  w.U32(kMagic);
  w.U32(kVersion);
  w.Bool(shutdown);
  Put(w, output);
  w.U64s(sampled_reqs);
  w.I32Lists(sampled_token_ids);
  w.Bool(forward_without_tokens);
  return std::move(w).Take();
}

Expected<WorkerStep> DecodeWorkerStep(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  const uint32_t magic = r.U32("the magic number");
  if (r.ok() && magic != kMagic) {
    return InvalidArgument(fmt::format("not a WorkerStep: magic {:#010x}, expected {:#010x}", magic, kMagic));
  }
  const uint32_t version = r.U32("the version");
  if (r.ok() && version != kVersion) {
    return InvalidArgument(fmt::format("WorkerStep version {}, this build reads {}: every rank must run the same "
                                       "ember build",
                                       version, kVersion));
  }
  WorkerStep step;
  step.shutdown = r.Bool("shutdown");
  Get(r, step.output);
  step.sampled_reqs = r.U64s("sampled_reqs");
  step.sampled_token_ids = r.I32Lists("sampled_token_ids");
  step.forward_without_tokens = r.Bool("forward_without_tokens");
  if (r.ok() && r.remaining() != 0) r.Fail(fmt::format("{} bytes after the end", r.remaining()));
  if (!r.ok()) return InvalidArgument(r.error());
  EMBER_RETURN_IF_ERROR(CheckParallelLists(step));
  return step;
}

std::vector<uint8_t> EncodeRunnerOutput(const ModelRunnerOutput& output) {
  const auto& [step_id, reqs, sampled_token_ids, logprobs, prompt_logprobs, draft_token_ids, draft_confidences,
               propose_seconds, propose_catch_up_seconds, hidden_states_seconds, execute_seconds, multimodal] = output;
  Writer w;
  w.U32(kOutputMagic);
  w.U32(kOutputVersion);
  w.U64(step_id);
  w.U64s(reqs);
  w.I32Lists(sampled_token_ids);
  PutLogprobLists(w, logprobs);
  PutLogprobLists(w, prompt_logprobs);
  w.I32Lists(draft_token_ids);
  PutF32Lists(w, draft_confidences);
  w.U64(std::bit_cast<uint64_t>(propose_seconds));
  w.U64(std::bit_cast<uint64_t>(propose_catch_up_seconds));
  w.U64(std::bit_cast<uint64_t>(hidden_states_seconds));
  w.U64(std::bit_cast<uint64_t>(execute_seconds));
  const auto& [items_encoded, cache_hits, embeddings, encode_seconds] = multimodal;
  w.I64(items_encoded);
  w.I64(cache_hits);
  w.I64(embeddings);
  w.U64(std::bit_cast<uint64_t>(encode_seconds));
  return std::move(w).Take();
}

Expected<ModelRunnerOutput> DecodeRunnerOutput(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  const uint32_t magic = r.U32("the magic number");
  const uint32_t version = r.U32("the version");
  if (r.ok() && (magic != kOutputMagic || version != kOutputVersion)) {
    return InvalidArgument(fmt::format("not a ModelRunnerOutput of this build (magic {:#010x}, version {}): every "
                                       "rank must run the same ember build",
                                       magic, version));
  }
  ModelRunnerOutput o;
  o.step_id = r.U64("step_id");
  o.reqs = r.U64s("reqs");
  o.sampled_token_ids = r.I32Lists("sampled_token_ids");
  o.logprobs = GetLogprobLists(r, "logprobs");
  o.prompt_logprobs = GetLogprobLists(r, "prompt_logprobs");
  o.draft_token_ids = r.I32Lists("draft_token_ids");
  o.draft_confidences = GetF32Lists(r, "draft_confidences");
  o.propose_seconds = std::bit_cast<double>(r.U64("propose_seconds"));
  o.propose_catch_up_seconds = std::bit_cast<double>(r.U64("propose_catch_up_seconds"));
  o.hidden_states_seconds = std::bit_cast<double>(r.U64("hidden_states_seconds"));
  o.execute_seconds = std::bit_cast<double>(r.U64("execute_seconds"));
  o.multimodal.items_encoded = r.I64("multimodal.items_encoded");
  o.multimodal.cache_hits = r.I64("multimodal.cache_hits");
  o.multimodal.embeddings = r.I64("multimodal.embeddings");
  o.multimodal.encode_seconds = std::bit_cast<double>(r.U64("multimodal.encode_seconds"));
  if (r.ok() && r.remaining() != 0) r.Fail(fmt::format("{} bytes after the end", r.remaining()));
  if (!r.ok()) return InvalidArgument(r.error());
  const size_t n = o.reqs.size();
  for (size_t size : {o.logprobs.size(), o.prompt_logprobs.size(), o.draft_token_ids.size()}) {
    if (size != 0 && size != n) {
      return InvalidArgument(fmt::format("malformed ModelRunnerOutput: {} requests but a list of {}", n, size));
    }
  }
  if (o.sampled_token_ids.size() != n) {
    return InvalidArgument(fmt::format("malformed ModelRunnerOutput: {} requests but {} token lists", n,
                                       o.sampled_token_ids.size()));
  }
  return o;
}

}  // namespace ember::parallel
