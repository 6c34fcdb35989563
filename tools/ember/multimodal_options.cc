#include "tools/ember/multimodal_options.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/logging.h"
#include "model/quantized_weights.h"
#include "runner/multimodal/muse_spark_encoders.h"
#include "tools/ember/common.h"
#include "tools/ember/engine_options.h"

namespace ember::tools {

Expected<server::MultiModalOptions> MultiModalFlags::Options() const {
  server::MultiModalOptions o;
  EMBER_ASSIGN_OR_RETURN(o.access.max_media_bytes, ParseByteSize(max_media_bytes));
  o.limits.max_encoded_bytes = o.access.max_media_bytes;
  if (!(max_media_seconds > 0)) return InvalidArgument("--max-media-seconds must be positive");
  o.limits.max_video_seconds = max_media_seconds;
  o.limits.max_audio_seconds = max_media_seconds;
  if (!allowed_local_media_path.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(allowed_local_media_path, ec)) {
      return InvalidArgument(fmt::format("--allowed-local-media-path {} is not a directory", allowed_local_media_path));
    }
    o.access.allowed_local_media_path = allowed_local_media_path;
  }
  if (!allowed_media_domains.empty()) {
    EMBER_ASSIGN_OR_RETURN(o.access.remote.allowed_domains, server::ParseAllowedMediaDomains(allowed_media_domains));
  }
  if (!(media_fetch_timeout > 0) || media_fetch_timeout > 3600) {
    return InvalidArgument("--media-fetch-timeout must be between 0 and 3600 seconds");
  }
  o.access.remote.timeout_seconds = media_fetch_timeout;
  if (!limit_mm_per_prompt.empty()) {
    const auto json = nlohmann::json::parse(limit_mm_per_prompt, nullptr, /*allow_exceptions=*/false);
    const char* kShape = "--limit-mm-per-prompt must be a JSON object such as '{\"image\": 4, \"video\": 1, \"audio\": 1}'";
    if (!json.is_object()) return InvalidArgument(kShape);
    for (const auto& [key, value] : json.items()) {
      const int index = key == "image" ? 0 : key == "video" ? 1 : key == "audio" ? 2 : -1;
      if (index < 0 || !value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 4096) {
        return InvalidArgument(fmt::format("{} (counts 0 to 4096); got '{}'", kShape, key));
      }
      o.max_per_prompt[index] = value.get<int64_t>();
    }
  }
  return o;
}

Expected<int64_t> MultiModalFlags::EncoderCacheBytes() const { return ParseByteSize(encoder_cache_size); }

void AddMultiModalOptions(CLI::App* cmd, MultiModalFlags* f) {
  cmd->add_flag("--language-model-only", f->language_model_only,
                "Load no image, video or audio towers: serve the text model only");
  cmd->add_option("--limit-mm-per-prompt", f->limit_mm_per_prompt,
                  "Media items one prompt may hold, as JSON (default '{\"image\": 8, \"video\": 1, \"audio\": 2}')");
  cmd->add_option("--allowed-local-media-path", f->allowed_local_media_path,
                  "Allow file:// media URLs for files under this directory (default: none)");
  cmd->add_option("--allowed-media-domains", f->allowed_media_domains,
                  "Fetch http(s) media URLs from these hosts only, comma-separated ('images.example.com,*.cdn.net'); "
                  "a host name must lead to a public address, an IP address listed here may be any (default: none, "
                  "remote URLs refused)");
  cmd->add_option("--media-fetch-timeout", f->media_fetch_timeout,
                  "Seconds one remote media item may take, redirects included (default 10)");
  cmd->add_option("--max-media-bytes", f->max_media_bytes, "Largest image, video or audio item, encoded (default 16MiB)");
  cmd->add_option("--max-media-seconds", f->max_media_seconds, "Longest video or audio item in seconds (default 600)");
  cmd->add_option("--encoder-cache-size", f->encoder_cache_size,
                  "Encoder outputs kept by content hash for repeated media (default 256MiB)");
}

namespace {

// The towers' linears follow the text model's dense linears: converted only with --quantize-dense
// (LoadModelWithLog has already refused --quantize-dense without --quantization).
Expected<EncoderWeightOptions> TowerWeightOptions(const std::optional<std::string>& quantization,
                                                  bool quantize_dense) {
  EncoderWeightOptions weights;
  if (!quantization || !quantize_dense) return weights;
  EMBER_ASSIGN_OR_RETURN(const QuantizationChoice choice, ParseQuantization(*quantization));
  weights.quantization = choice.format;
  weights.mxfp4_rounding = choice.mxfp4_rounding;
  weights.progress = StderrProgressBar(fmt::format("quantizing a multimodal tower to {}", *quantization));
  return weights;
}

}  // namespace

Expected<std::shared_ptr<const MultiModalEncoder>> LoadMultiModalEncoder(const std::string& model,
                                                                         const MultiModalFlags& flags,
                                                                         const Tokenizer& tokenizer, bool parallel,
                                                                         const std::optional<std::string>& quantization,
                                                                         bool quantize_dense) {
  std::error_code ec;
  if (flags.language_model_only || !std::filesystem::is_directory(model, ec)) {
    return std::shared_ptr<const MultiModalEncoder>();
  }
  if (parallel) {
    // Checked from config.json alone: towers a multi-rank engine would not use are never loaded.
    EMBER_ASSIGN_OR_RETURN(const bool towers, MuseSparkEncoders::DescribesTowers(model));
    if (towers) {
      EMBER_LOG_WARN("{} has image/video/audio towers, but they run in single-process engines only: serving text only",
                     model);
    }
    return std::shared_ptr<const MultiModalEncoder>();
  }
  auto takes = [&](Modality m) { return server::PlaceholderTokenId(tokenizer, m).has_value(); };
  EMBER_ASSIGN_OR_RETURN(EncoderWeightOptions weights, TowerWeightOptions(quantization, quantize_dense));
  const MultiModalLoadOptions load{.audio = takes(Modality::kAudio),
                                   .vision = takes(Modality::kImage) || takes(Modality::kVideo),
                                   .weights = std::move(weights)};
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<MuseSparkEncoders> encoders, MuseSparkEncoders::Load(model, load));
  if (encoders == nullptr) return std::shared_ptr<const MultiModalEncoder>();
  return std::shared_ptr<const MultiModalEncoder>(std::move(encoders));
}

}  // namespace ember::tools
