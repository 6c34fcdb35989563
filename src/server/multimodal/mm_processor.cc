#include "server/multimodal/mm_processor.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/logging.h"

#include "media/audio_decode.h"
#include "media/image_decode.h"
#include "media/muse_image_processor.h"
#include "media/muse_video_processor.h"

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;

constexpr std::array<Modality, 3> kModalities = {Modality::kImage, Modality::kVideo, Modality::kAudio};
// The processor's placeholder tokens (MuseSparkProcessor: image_token, video_token, audio_token).
constexpr std::array<const char*, 3> kPlaceholderTexts = {"<|patch|>", "<|video|>", "<|audio|>"};
constexpr std::array<const char*, 3> kPlural = {"images", "videos", "audio inputs"};

std::string StringAt(const json& part, const char* member, const char* inner) {
  const json& v = part[member];
  if (v.is_string()) return v.get<std::string>();
  return v[inner].get<std::string>();
}

}  // namespace

std::string_view PlaceholderTokenText(Modality modality) {
  return kPlaceholderTexts[static_cast<size_t>(modality)];
}

std::optional<int32_t> PlaceholderTokenId(const Tokenizer& tokenizer, Modality modality) {
  const std::optional<int32_t> id = tokenizer.TokenId(PlaceholderTokenText(modality));
  if (!id || !tokenizer.IsSpecial(*id)) return std::nullopt;
  return id;
}

std::vector<MediaPart> CollectMediaParts(const json& messages) {
  std::vector<MediaPart> parts;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& content = messages[i]["content"];
    if (!content.is_array()) continue;
    for (size_t j = 0; j < content.size(); ++j) {
      const json& part = content[j];
      const std::string type = part["type"].get<std::string>();
      MediaPart m;
      m.field = fmt::format("messages[{}].content[{}]", i, j);
      if (type == "image_url") {
        m.modality = Modality::kImage;
        m.url = StringAt(part, "image_url", "url");
      } else if (type == "video_url") {
        m.modality = Modality::kVideo;
        m.url = StringAt(part, "video_url", "url");
      } else if (type == "audio_url") {
        m.modality = Modality::kAudio;
        m.url = StringAt(part, "audio_url", "url");
      } else if (type == "input_audio") {
        m.modality = Modality::kAudio;
        m.is_input_audio = true;
        // input_audio.format is not needed: FFmpeg probes the bytes themselves.
        m.audio_data = part["input_audio"]["data"].get<std::string>();
      } else {
        continue;
      }
      parts.push_back(std::move(m));
    }
  }
  return parts;
}

Expected<std::unique_ptr<MultiModalProcessor>> MultiModalProcessor::Create(const std::string& dir,
                                                                           const Tokenizer& tokenizer,
                                                                           std::vector<Modality> accepted,
                                                                           MultiModalOptions options) {
  EMBER_ASSIGN_OR_RETURN(media::MuseProcessorConfig config, media::LoadMuseProcessorConfig(dir));
  std::unique_ptr<MultiModalProcessor> p(new MultiModalProcessor(tokenizer, std::move(config), std::move(options)));
  p->config_key_ = media::ProcessorConfigKey(p->config_);
  for (Modality m : accepted) {
    const std::optional<int32_t> id = PlaceholderTokenId(tokenizer, m);
    if (!id) {
      // Towers without the tokenizer's placeholder token (a test model's filler towers, a
      // tokenizer swapped for another): that modality stays off, the rest of the model serves.
      EMBER_LOG_WARN("{}: the model has a tower for {} but its tokenizer has no special token {}: {} inputs are off",
                     dir, kPlural[Index(m)], kPlaceholderTexts[Index(m)], ModalityName(m));
      continue;
    }
    p->placeholders_[Index(m)] = {kPlaceholderTexts[Index(m)], *id};
    p->accepted_[Index(m)] = true;
  }
  if (std::none_of(p->accepted_.begin(), p->accepted_.end(), [](bool a) { return a; })) {
    return std::unique_ptr<MultiModalProcessor>();
  }
  return p;
}

bool MultiModalProcessor::Accepts(Modality modality) const { return accepted_[Index(modality)]; }

std::variant<std::vector<uint8_t>, ApiError> MultiModalProcessor::Bytes(const MediaPart& part) const {
  if (part.is_input_audio) return DecodeBase64Media(part.audio_data, options_.access, part.field, "input_audio.data");
  return FetchMedia(part.url, options_.access, part.field);
}

MultiModalProcessor::Item MultiModalProcessor::Finish(Modality modality, const kv::BlockHash& hash,
                                                      std::shared_ptr<EncoderInput> input,
                                                      const std::string& replacement) const {
  Item item;
  item.tokens = tokenizer_.Encode(replacement, /*add_special=*/false, /*parse_special=*/true);
  const int32_t id = placeholders_[Index(modality)].id;
  // The feature's range runs from its first placeholder to its last; a video's timestamps and
  // separators inside it are text (is_embed false), its start and end tokens lie outside.
  const auto first = std::find(item.tokens.begin(), item.tokens.end(), id);
  const auto last = std::find(item.tokens.rbegin(), item.tokens.rend(), id).base();
  MultiModalFeature& f = item.feature;
  f.modality = modality;
  f.hash = hash;
  f.offset = first - item.tokens.begin();
  f.length = last - first;
  if (std::any_of(first, last, [id](int32_t t) { return t != id; })) {
    for (auto it = first; it != last; ++it) f.is_embed.push_back(*it == id);
  }
  item.bytes = static_cast<int64_t>(input->data.size() * sizeof(float) + item.tokens.size() * sizeof(int32_t));
  f.input = std::move(input);
  return item;
}

Expected<MultiModalProcessor::Item> MultiModalProcessor::Preprocess(Modality modality,
                                                                    const std::vector<uint8_t>& bytes,
                                                                    const kv::BlockHash& hash) const {
  auto input = std::make_shared<EncoderInput>();
  input->modality = modality;
  std::string replacement;
  int64_t expected_rows = 0;
  if (modality == Modality::kImage) {
    EMBER_ASSIGN_OR_RETURN(media::RgbImage image, media::DecodeImage(bytes, options_.limits));
    EMBER_ASSIGN_OR_RETURN(media::ProcessedVisual visual, media::ProcessImage(image, config_));
    replacement = media::RenderImagePlaceholder(visual);
    expected_rows = visual.num_tokens;
    input->data = std::move(visual.pixel_values);
    input->num_patches = visual.num_patches;
    input->grid_thw = visual.grid_thw;
  } else if (modality == Modality::kVideo) {
    EMBER_ASSIGN_OR_RETURN(media::ProcessedVideo video, media::ProcessVideo(bytes, options_.limits, config_));
    EMBER_ASSIGN_OR_RETURN(replacement, media::RenderVideoPlaceholder(video, config_));
    expected_rows = video.visual.num_tokens;
    input->data = std::move(video.visual.pixel_values);
    input->num_patches = video.visual.num_patches;
    input->grid_thw = video.visual.grid_thw;
  } else {
    EMBER_ASSIGN_OR_RETURN(media::DecodedAudio audio, media::DecodeAudio(bytes, options_.limits, config_.sampling_rate));
    expected_rows = media::NumAudioTokens(static_cast<int64_t>(audio.samples.size()), config_);
    replacement = media::RenderAudioPlaceholder(expected_rows);
    input->data = std::move(audio.samples);
  }
  Item item = Finish(modality, hash, std::move(input), replacement);
  if (item.feature.num_embeds() != expected_rows) {
    return Internal(fmt::format("the {} placeholder text became {} placeholder tokens, not {}: the tokenizer splits "
                                "{}",
                                ModalityName(modality), item.feature.num_embeds(), expected_rows,
                                kPlaceholderTexts[Index(modality)]));
  }
  return item;
}

std::variant<MultiModalProcessor::ItemPtr, ApiError> MultiModalProcessor::Process(Modality modality,
                                                                                 const std::vector<uint8_t>& bytes,
                                                                                 const std::string& field) {
  // The item is a function of the bytes, the modality and the processor's settings.
  const media::ContentHash128 h =
      media::ContentHash(fmt::format("{}/{}", ModalityName(modality), config_key_), bytes);
  const kv::BlockHash hash{h.lo, h.hi};
  {
    std::lock_guard lock(mu_);
    if (const ItemPtr* cached = processed_.Find(hash)) return *cached;
  }
  Expected<Item> item = Preprocess(modality, bytes, hash);
  if (!item.ok()) {
    if (item.status().code() == StatusCode::kInternal) return FromStatus(item.status(), "messages");
    return BadRequest(fmt::format("{}: {}", field, item.status().message()), "messages");
  }
  auto shared = std::make_shared<const Item>(std::move(*item));
  std::lock_guard lock(mu_);
  processed_.Insert(hash, shared, shared->bytes);
  return shared;
}

std::variant<ExpandedPrompt, ApiError> MultiModalProcessor::Expand(const std::vector<int32_t>& prompt,
                                                                   const std::vector<MediaPart>& parts,
                                                                   bool use_audio_in_video) {
  std::array<int64_t, 3> counts{};
  for (const MediaPart& part : parts) {
    const size_t m = Index(part.modality);
    if (!accepted_[m]) {
      return BadRequest(fmt::format("{}: this model does not take {}", part.field, kPlural[m]), "messages");
    }
    if (++counts[m] > options_.max_per_prompt[m]) {
      return BadRequest(fmt::format("{}: at most {} {} per prompt (--limit-mm-per-prompt)", part.field,
                                    options_.max_per_prompt[m], kPlural[m]),
                        "messages");
    }
  }
  if (use_audio_in_video && counts[Index(Modality::kVideo)] > 0 && !accepted_[Index(Modality::kAudio)]) {
    return BadRequest("use_audio_in_video: this model does not take audio inputs", "mm_processor_kwargs");
  }
  // Each modality's parts, preprocessed, in order; a video's audio track rides with it.
  std::array<std::vector<std::pair<ItemPtr, ItemPtr>>, 3> items;
  for (const MediaPart& part : parts) {
    auto bytes = Bytes(part);
    if (auto* e = std::get_if<ApiError>(&bytes)) return *e;
    const std::vector<uint8_t>& b = std::get<std::vector<uint8_t>>(bytes);
    auto item = Process(part.modality, b, part.field);
    if (auto* e = std::get_if<ApiError>(&item)) return *e;
    ItemPtr audio;
    if (use_audio_in_video && part.modality == Modality::kVideo) {
      auto track = Process(Modality::kAudio, b, part.field + " (its audio track)");
      if (auto* e = std::get_if<ApiError>(&track)) return *e;
      audio = std::get<ItemPtr>(track);
    }
    items[Index(part.modality)].emplace_back(std::get<ItemPtr>(item), std::move(audio));
  }
  for (Modality m : kModalities) {
    const Placeholder& placeholder = placeholders_[Index(m)];
    if (placeholder.id < 0) continue;
    const int64_t found = std::count(prompt.begin(), prompt.end(), placeholder.id);
    if (found != counts[Index(m)]) {
      return BadRequest(fmt::format("the rendered prompt holds {} {} placeholders for {} {}: each media part needs "
                                    "exactly one (does the text contain {} itself, or does the chat template drop "
                                    "media parts?)",
                                    found, placeholder.text, counts[Index(m)], kPlural[Index(m)], placeholder.text),
                        "messages");
    }
  }
  ExpandedPrompt out;
  std::array<size_t, 3> next{};
  auto append = [&out](const Item& item) {
    MultiModalFeature f = item.feature;
    f.offset += static_cast<int64_t>(out.token_ids.size());
    out.token_ids.insert(out.token_ids.end(), item.tokens.begin(), item.tokens.end());
    out.features.push_back(std::move(f));
  };
  for (int32_t token : prompt) {
    const auto m = std::find_if(kModalities.begin(), kModalities.end(),
                                [&](Modality x) { return placeholders_[Index(x)].id == token; });
    if (m == kModalities.end()) {
      out.token_ids.push_back(token);
      continue;
    }
    const auto& [item, audio] = items[Index(*m)][next[Index(*m)]++];
    append(*item);
    if (audio) append(*audio);
  }
  return out;
}

}  // namespace ember::server
