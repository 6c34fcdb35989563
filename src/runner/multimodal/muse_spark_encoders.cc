#include "runner/multimodal/muse_spark_encoders.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/logging.h"
#include "formats/checkpoint.h"
#include "model/audio/muse_spark_audio.h"
#include "model/encoder_ops.h"
#include "model/vision/muse_spark_vision.h"
#include "model/weight_source.h"

namespace ember {

MuseSparkEncoders::~MuseSparkEncoders() = default;

namespace {

bool HasSection(const nlohmann::json& config, const char* name) {
  return config.value("model_type", "") == "muse_spark" && config.contains(name) && config[name].is_object();
}

}  // namespace

Expected<bool> MuseSparkEncoders::DescribesTowers(const std::string& dir) {
  EMBER_ASSIGN_OR_RETURN(nlohmann::json config, encoder_ops::ReadJsonFile(dir + "/config.json"));
  return HasSection(config, "audio_config") || HasSection(config, "vision_config");
}

Expected<std::unique_ptr<MuseSparkEncoders>> MuseSparkEncoders::Load(const std::string& dir,
                                                                     const MultiModalLoadOptions& options) {
  EMBER_ASSIGN_OR_RETURN(nlohmann::json config, encoder_ops::ReadJsonFile(dir + "/config.json"));
  const bool want_audio = options.audio && HasSection(config, "audio_config");
  const bool want_vision = options.vision && HasSection(config, "vision_config");
  if (!want_audio && !want_vision) return std::unique_ptr<MuseSparkEncoders>();
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> opened, Checkpoint::OpenDirectory(dir));
  std::shared_ptr<const Checkpoint> checkpoint = std::move(opened);
  auto weights = [&] { return MakeCheckpointWeightSource(checkpoint, fmt::format("checkpoint {}", dir)); };
  // A checkpoint saved without a tower (a text-only conversion) may keep its config section.
  auto present = [&](const std::string& tensor, const char* what) {
    if (checkpoint->Has(tensor)) return true;
    EMBER_LOG_WARN("{}: config.json describes the {} tower but the checkpoint has no {}; {} inputs are off", dir, what,
                   tensor, what);
    return false;
  };

  std::unique_ptr<MuseSparkEncoders> encoders(new MuseSparkEncoders());
  if (want_audio && present("model.audio_tower.norm.weight", "audio")) {
    EMBER_ASSIGN_OR_RETURN(MuseSparkAudioConfig audio, MuseSparkAudioConfig::FromJson(config, dir));
    EMBER_ASSIGN_OR_RETURN(encoders->audio_,
                           MuseSparkAudioEncoder::Load(audio, weights(), "model.audio_tower.", options.weights));
    encoders->hidden_size_ = audio.out_hidden_size;
    EMBER_LOG_INFO("{}: audio tower: {}", dir, encoders->audio_->weight_report().Describe());
  }
  if (want_vision && present("model.vision_projection.weight", "vision")) {
    EMBER_ASSIGN_OR_RETURN(MuseSparkVisionConfig vision, MuseSparkVisionConfig::FromJson(config, dir));
    EMBER_ASSIGN_OR_RETURN(encoders->vision_,
                           MuseSparkVisionEncoder::Load(vision, weights(), "model.", options.weights));
    encoders->hidden_size_ = vision.text_hidden_size;
    EMBER_LOG_INFO("{}: vision tower: {}", dir, encoders->vision_->weight_report().Describe());
  }
  if (encoders->audio_ == nullptr && encoders->vision_ == nullptr) return std::unique_ptr<MuseSparkEncoders>();
  return encoders;
}

bool MuseSparkEncoders::Accepts(Modality modality) const {
  switch (modality) {
    case Modality::kAudio: return audio_ != nullptr;
    case Modality::kImage:
    case Modality::kVideo: return vision_ != nullptr;
  }
  return false;
}

Expected<std::vector<float>> MuseSparkEncoders::Encode(const EncoderInput& input) const {
  if (!Accepts(input.modality)) {
    return InvalidArgument(fmt::format("this model has no {} encoder", ModalityName(input.modality)));
  }
  if (input.modality == Modality::kAudio) {
    EMBER_ASSIGN_OR_RETURN(AudioEncoding encoded,
                           audio_->Encode(input.data.data(), static_cast<int64_t>(input.data.size())));
    return std::move(encoded.features);
  }
  // An image and a video's frames go through the same tower (get_video_features is
  // get_image_features), one item per call so that the encoder cache keys each by its content.
  EMBER_ASSIGN_OR_RETURN(VisionEncoding encoded, vision_->Encode(input.data.data(), input.num_patches, {input.grid_thw}));
  return std::move(encoded.features);
}

}  // namespace ember
