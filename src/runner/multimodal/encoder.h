// The towers that turn a prompt's preprocessed images, video and audio into the rows the language
// model takes at their placeholder positions (engine/multimodal_feature.h). One implementation
// per model family (muse_spark_encoders.h); the runner sees only this.
#pragma once

#include <vector>

#include "core/status.h"
#include "engine/multimodal_feature.h"

namespace ember {

class MultiModalEncoder {
 public:
  virtual ~MultiModalEncoder() = default;
  virtual bool Accepts(Modality modality) const = 0;
  // Rows the language model takes, [rows, hidden_size] with rows = the item's embedding positions
  // (the frontend counted them with the same rules). InvalidArgument for an input the tower
  // cannot take.
  virtual Expected<std::vector<float>> Encode(const EncoderInput& input) const = 0;
  virtual int64_t hidden_size() const = 0;
};

}  // namespace ember
