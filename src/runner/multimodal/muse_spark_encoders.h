// Muse Spark's towers behind MultiModalEncoder: the audio encoder (model/audio) for audio inputs
// and the vision tower with its adapter and projection (model/vision) for images and video
// frames. Loaded from a MuseSparkForConditionalGeneration checkpoint directory; a tower whose
// config section or tensors are absent is simply not there (its modality is refused upstream).
#pragma once

#include <memory>
#include <string>

#include "model/encoder_ops.h"
#include "runner/multimodal/encoder.h"

namespace ember {

class MuseSparkAudioEncoder;
class MuseSparkVisionEncoder;

struct MultiModalLoadOptions {
  bool audio = true;
  bool vision = true;
  // Both towers' linears: as stored, or converted at load (`--quantization F --quantize-dense`).
  EncoderWeightOptions weights;
};

class MuseSparkEncoders : public MultiModalEncoder {
 public:
  // The towers of the model directory `dir` that `options` asks for and the checkpoint has; null
  // (not an error) when it has none, e.g. a text-only model. Logs each tower's weight format.
  static Expected<std::unique_ptr<MuseSparkEncoders>> Load(const std::string& dir, const MultiModalLoadOptions& options);
  // Whether `dir`'s config.json describes an audio or vision tower (reads no tensor): a multi-rank
  // engine, which serves text only, says so without loading them.
  static Expected<bool> DescribesTowers(const std::string& dir);
  ~MuseSparkEncoders() override;

  bool Accepts(Modality modality) const override;
  Expected<std::vector<float>> Encode(const EncoderInput& input) const override;
  int64_t hidden_size() const override { return hidden_size_; }

 private:
  MuseSparkEncoders() = default;
  std::unique_ptr<MuseSparkAudioEncoder> audio_;
  std::unique_ptr<MuseSparkVisionEncoder> vision_;  // images and video frames
  int64_t hidden_size_ = 0;
};

}  // namespace ember
