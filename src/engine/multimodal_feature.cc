#include "engine/multimodal_feature.h"

#include <algorithm>

#include "core/check.h"

namespace ember {

std::string_view ModalityName(Modality modality) {
  switch (modality) {
    case Modality::kImage: return "image";
    case Modality::kVideo: return "video";
    case Modality::kAudio: return "audio";
  }
  return "?";
}

int64_t MultiModalFeature::num_embeds() const { return EmbedsBefore(offset + length); }

int64_t MultiModalFeature::EmbedsBefore(int64_t position) const {
  EMBER_CHECK(position >= offset && position <= offset + length, "position {} outside [{}, {}]", position, offset,
              offset + length);
  const int64_t n = position - offset;
  if (is_embed.empty()) return n;
  return std::count(is_embed.begin(), is_embed.begin() + n, true);
}

std::vector<kv::ExtraContent> BlockContentOf(const std::vector<MultiModalFeature>& features) {
  std::vector<kv::ExtraContent> content;
  content.reserve(features.size());
  for (const MultiModalFeature& f : features) content.push_back({f.offset, f.offset + f.length, f.hash});
  std::sort(content.begin(), content.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  return content;
}

}  // namespace ember
