// The frontend half of multimodal inputs (vLLM's multimodal processor): a chat request's image,
// video and audio parts are fetched (media_source.h), decoded and preprocessed exactly as
// transformers' Muse Spark processors do (src/media), and the rendered prompt's placeholder tokens
// are expanded into the positions the encoders fill, each item becoming a MultiModalFeature the
// engine carries to the runner. Preprocessed items are kept by content hash, so a repeated image
// is decoded once. Every failure a client can cause is a 400 naming the content part.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/lru_cache.h"
#include "engine/multimodal_feature.h"
#include "media/media.h"
#include "media/muse_processor_config.h"
#include "server/multimodal/media_source.h"
#include "server/protocol/api_error.h"
#include "tokenizer/tokenizer.h"

namespace ember::server {

// One media content part of a chat request, in message order.
struct MediaPart {
  Modality modality = Modality::kImage;
  std::string field;         // "messages[1].content[2]", for errors
  std::string url;           // image_url / video_url / audio_url
  bool is_input_audio = false;
  std::string audio_data;    // input_audio: base64 (its format member is not needed: the bytes are probed)
};

// The special token a modality's placeholder is in the rendered prompt ("<|patch|>", "<|video|>",
// "<|audio|>", as MuseSparkProcessor), and its id in `tokenizer` when the tokenizer has it as a
// special token: without it the modality cannot be served, whatever towers the model has.
std::string_view PlaceholderTokenText(Modality modality);
std::optional<int32_t> PlaceholderTokenId(const Tokenizer& tokenizer, Modality modality);

// The media parts of `messages` (already checked by NormalizeMessages), in order.
std::vector<MediaPart> CollectMediaParts(const nlohmann::ordered_json& messages);

struct MultiModalOptions {
  media::MediaLimits limits;
  MediaAccess access;
  // --limit-mm-per-prompt: items of each modality one prompt may hold (image, video, audio).
  std::array<int64_t, 3> max_per_prompt = {8, 1, 2};
  // Preprocessed items kept for reuse (bytes of pixel values and waveforms).
  int64_t processed_cache_bytes = int64_t{128} << 20;
};

struct ExpandedPrompt {
  std::vector<int32_t> token_ids;
  std::vector<MultiModalFeature> features;
};

class MultiModalProcessor {
 public:
  // For the model directory `dir` (its processor configs) and `tokenizer` (its placeholder
  // tokens), serving the modalities in `accepted` (the towers the engine loaded) whose
  // placeholder the tokenizer has (the others are logged and stay off). Null when none is left.
  static Expected<std::unique_ptr<MultiModalProcessor>> Create(const std::string& dir, const Tokenizer& tokenizer,
                                                               std::vector<Modality> accepted,
                                                               MultiModalOptions options);

  bool Accepts(Modality modality) const;
  // The placeholder token text a template's media part stands for in the rendered prompt: one per
  // item, expanded by Expand ("<|patch|>", "<|video|>", "<|audio|>").
  const std::string& PlaceholderText(Modality modality) const { return placeholders_[Index(modality)].text; }

  // The prompt with each media part's placeholder expanded and the features that fill it. The
  // rendered prompt must hold exactly one placeholder token per part of that modality, in the
  // parts' order. With use_audio_in_video, each video's audio track follows its frames as an
  // audio input of its own.
  std::variant<ExpandedPrompt, ApiError> Expand(const std::vector<int32_t>& prompt, const std::vector<MediaPart>& parts,
                                                bool use_audio_in_video);

 private:
  struct Placeholder {
    std::string text;
    int32_t id = -1;
  };
  // One preprocessed item: what the encoder takes and the tokens its placeholder becomes.
  struct Item {
    MultiModalFeature feature;  // offset 0; input, hash, length and mask set
    std::vector<int32_t> tokens;
    int64_t bytes = 0;
  };
  using ItemPtr = std::shared_ptr<const Item>;

  MultiModalProcessor(const Tokenizer& tokenizer, media::MuseProcessorConfig config, MultiModalOptions options)
      : tokenizer_(tokenizer),
        config_(std::move(config)),
        options_(std::move(options)),
        processed_(options_.processed_cache_bytes) {}
  static size_t Index(Modality m) { return static_cast<size_t>(m); }

  std::variant<std::vector<uint8_t>, ApiError> Bytes(const MediaPart& part) const;
  // The item for `bytes` as `modality` (cached by content hash).
  std::variant<ItemPtr, ApiError> Process(Modality modality, const std::vector<uint8_t>& bytes,
                                          const std::string& field);
  Expected<Item> Preprocess(Modality modality, const std::vector<uint8_t>& bytes, const kv::BlockHash& hash) const;
  Item Finish(Modality modality, const kv::BlockHash& hash, std::shared_ptr<EncoderInput> input,
              const std::string& replacement) const;


  const Tokenizer& tokenizer_;
  media::MuseProcessorConfig config_;
  std::string config_key_;
  MultiModalOptions options_;
  std::array<Placeholder, 3> placeholders_;
  std::array<bool, 3> accepted_{};

  std::mutex mu_;  // the cache below: route handlers run on several threads
  LruCache<kv::BlockHash, ItemPtr> processed_;  // cost: Item::bytes
};

}  // namespace ember::server
