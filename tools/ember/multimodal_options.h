// `ember serve`'s multimodal flags, with vLLM's names: which towers load (--language-model-only),
// how many items a prompt may hold (--limit-mm-per-prompt), where media may come from
// (--allowed-local-media-path, --allowed-media-domains), and the bounds on each item and on the
// encoder cache.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>

#include "runner/multimodal/encoder.h"
#include "server/multimodal/mm_processor.h"

namespace ember::tools {

struct MultiModalFlags {
  bool language_model_only = false;
  std::string limit_mm_per_prompt;     // JSON: {"image": N, "video": N, "audio": N}
  std::string allowed_local_media_path;
  std::string allowed_media_domains;   // comma-separated hosts whose http(s) media URLs are fetched
  double media_fetch_timeout = 10;     // seconds for one remote item, redirects included
  std::string max_media_bytes = "16MiB";
  std::string encoder_cache_size = "256MiB";
  double max_media_seconds = 600;      // a video's or a clip's duration at most

  // The server's processor options from the flags; errors name the flag.
  Expected<server::MultiModalOptions> Options() const;
  Expected<int64_t> EncoderCacheBytes() const;
};

void AddMultiModalOptions(CLI::App* cmd, MultiModalFlags* flags);

// The model directory's towers unless --language-model-only (null: none to load, or a multi-rank
// engine, which runs text only and says so in the log). A tower whose placeholder tokens
// `tokenizer` lacks is not loaded (a test model's filler towers): nothing could reach it. The towers'
// linears are converted to `quantization` (--quantization) when `quantize_dense` (--quantize-dense)
// is set, the rule the text model's dense linears follow; otherwise they stay as stored.
Expected<std::shared_ptr<const MultiModalEncoder>> LoadMultiModalEncoder(const std::string& model,
                                                                         const MultiModalFlags& flags,
                                                                         const Tokenizer& tokenizer, bool parallel,
                                                                         const std::optional<std::string>& quantization,
                                                                         bool quantize_dense);

}  // namespace ember::tools
