#include "runner/multimodal/muse_spark_encoders.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/logging.h"
#include "formats/checkpoint.h"
#include "model/audio/muse_spark_audio.h"
#include "model/weight_source.h"

namespace ember {
namespace {

Expected<nlohmann::json> ReadConfig(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot open {}", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return InvalidArgument(fmt::format("{}: not valid JSON", path));
  return json;
}

}  // namespace

MuseSparkEncoders::~MuseSparkEncoders() = default;

Expected<std::unique_ptr<MuseSparkEncoders>> MuseSparkEncoders::Load(const std::string& dir,
                                                                     const MultiModalLoadOptions& options) {
  EMBER_ASSIGN_OR_RETURN(nlohmann::json config, ReadConfig(dir));
  if (config.value("model_type", "") != "muse_spark") return std::unique_ptr<MuseSparkEncoders>();
  const bool has_audio = options.audio && config.contains("audio_config") && config["audio_config"].is_object();
  if (!has_audio) return std::unique_ptr<MuseSparkEncoders>();
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> opened, Checkpoint::OpenDirectory(dir));
  std::shared_ptr<const Checkpoint> checkpoint = std::move(opened);

  std::unique_ptr<MuseSparkEncoders> encoders(new MuseSparkEncoders());
  constexpr const char* kAudioPrefix = "model.audio_tower.";
  if (has_audio) {
    // A checkpoint saved without its tower (a text-only conversion) keeps the config section.
    if (!checkpoint->Has(std::string(kAudioPrefix) + "norm.weight")) {
      EMBER_LOG_WARN("{}: config.json has audio_config but the checkpoint has no {}* tensors; audio inputs are off",
                     dir, kAudioPrefix);
    } else {
      EMBER_ASSIGN_OR_RETURN(MuseSparkAudioConfig audio_config, MuseSparkAudioConfig::FromJson(config, dir));
      EMBER_ASSIGN_OR_RETURN(
          encoders->audio_,
          MuseSparkAudioEncoder::Load(audio_config, MakeCheckpointWeightSource(checkpoint, fmt::format("checkpoint {}", dir)),
                                      kAudioPrefix));
      encoders->hidden_size_ = audio_config.out_hidden_size;
    }
  }
  if (encoders->audio_ == nullptr) return std::unique_ptr<MuseSparkEncoders>();
  return encoders;
}

bool MuseSparkEncoders::Accepts(Modality modality) const {
  switch (modality) {
    case Modality::kAudio: return audio_ != nullptr;
    case Modality::kImage:
    case Modality::kVideo: return false;
  }
  return false;
}

Expected<std::vector<float>> MuseSparkEncoders::Encode(const EncoderInput& input) const {
  if (!Accepts(input.modality)) {
    return InvalidArgument(fmt::format("this model has no {} encoder", ModalityName(input.modality)));
  }
  EMBER_ASSIGN_OR_RETURN(AudioEncoding encoded,
                         audio_->Encode(input.data.data(), static_cast<int64_t>(input.data.size())));
  return std::move(encoded.features);
}

}  // namespace ember
