// A multimodal input of a prompt as the engine sees it (vLLM's MultiModalFeatureSpec): which prompt
// positions take encoder features instead of token embeddings, the content hash that keys the
// encoder cache and the prefix cache, and the preprocessed input the runner's encoder turns into
// those features. Built by the frontend (server/multimodal) after placeholder expansion; nothing
// here knows how media is decoded or which tower encodes it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kv/block_hash.h"

namespace ember {

enum class Modality : uint8_t { kImage, kVideo, kAudio };
std::string_view ModalityName(Modality modality);  // "image", "video", "audio"

// What an encoder consumes, already preprocessed as the model's processor does it: pixel values
// ([num_patches, patch_dim] with grid_thw) for images and video, or a mono waveform at the
// model's sample rate for audio. Immutable once built; shared by the request and the runner.
struct EncoderInput {
  Modality modality = Modality::kImage;
  std::vector<float> data;
  int64_t num_patches = 0;             // vision: rows of data
  std::array<int64_t, 3> grid_thw{};   // vision: temporal groups, patch rows, patch columns
};

struct MultiModalFeature {
  Modality modality = Modality::kImage;
  // Of the preprocessed input (and its modality): equal hashes mean equal encoder outputs.
  kv::BlockHash hash;
  // The item's placeholder range in the prompt: positions [offset, offset + length). Every
  // position of the range takes a feature row, in order, unless `is_embed` is non-empty; then only
  // the positions where it is true do (a video's timestamps and separators between its frames
  // stay text).
  int64_t offset = 0;
  int64_t length = 0;
  std::vector<bool> is_embed;
  std::shared_ptr<const EncoderInput> input;

  // Feature rows the encoder must produce: the embedding positions of the range.
  int64_t num_embeds() const;
  // Rows of the range's positions before `position` (offset <= position <= offset + length): the
  // feature row that position takes, when it is an embedding position.
  int64_t EmbedsBefore(int64_t position) const;
  bool IsEmbed(int64_t position) const {
    return position >= offset && position < offset + length && (is_embed.empty() || is_embed[position - offset]);
  }
};

// The prefix-cache content keys of a request's features (kv/block_hash.h), in prompt order.
std::vector<kv::ExtraContent> BlockContentOf(const std::vector<MultiModalFeature>& features);

}  // namespace ember
