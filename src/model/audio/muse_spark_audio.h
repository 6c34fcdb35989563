// Muse Spark's audio encoder (transformers' MuseSparkAudioModel plus the LM's embedding norm):
// a causal convolutional pyramid from a mono 24 kHz waveform to one embedding per
// samples_per_token (1920) samples, in the text model's hidden size. The computation, with
// references to the transformers source it follows, is in src/model/audio/README.md.
//
// Everything runs in f32; the linears stay as stored (bf16 or f32, through kernels::MatMul over the
// checkpoint mapping) or are converted at load to NVFP4 / MXFP4 / FP8 (EncoderWeightOptions); conv
// kernels, biases and norm gains are copied to f32 at load. Long clips
// run in chunks of whole tokens, each causal convolution carrying the last kernel_size - 1 rows of
// its input from one chunk to the next (transformers' MuseSparkAudioConv1dPaddingCache), so the
// activations never exceed one chunk's.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "model/encoder_ops.h"
#include "model/linear.h"

namespace ember {

class WeightSource;

struct MuseSparkAudioConfig {
  std::vector<int64_t> patch_sizes = {16, 6, 5, 4};       // samples (then rows) folded per stage
  std::vector<int64_t> hidden_sizes = {256, 512, 1024, 2048};
  std::vector<int64_t> depths = {2, 2, 2, 2};             // conv blocks per stage
  double mlp_ratio = 4.0;                                 // fc1 width = int(hidden * mlp_ratio)
  int64_t conv_kernel_size = 7;                           // depthwise causal conv taps
  double rms_norm_eps = 1e-6;                             // every norm of the tower
  int64_t out_hidden_size = 8192;                         // = text hidden_size
  // Not in audio_config: the text model's embedding norm (weightless RMSNorm, text_config
  // rms_norm_eps) that get_audio_features applies before the rows replace <audio> placeholders.
  double embed_norm_eps = 1e-5;
  int64_t audio_token_id = 200038;

  int64_t num_stages() const { return static_cast<int64_t>(patch_sizes.size()); }
  int64_t SamplesPerToken() const;
  int64_t IntermediateSize(int64_t stage) const;
  // Rows stage `stage` produces per output token (the product of the later stages' patches).
  int64_t RowsPerToken(int64_t stage) const;
  Status Validate() const;
  // Parameters of the tower (weights and biases), for reports.
  int64_t NumParameters() const;

  // The whole multimodal config.json (model_type muse_spark: audio_config, text_config's
  // rms_norm_eps, audio_token_id) or a bare audio config (model_type muse_spark_audio).
  static Expected<MuseSparkAudioConfig> FromJson(const nlohmann::json& json, const std::string& where);
  static Expected<MuseSparkAudioConfig> FromFile(const std::string& path);
};

struct AudioEncoding {
  int64_t tokens = 0;           // ceil(samples / samples_per_token): the <audio> positions to fill
  // [tokens, out_hidden_size]: MuseSparkAudioModel's last_hidden_state (post_proj_norm output).
  std::vector<float> hidden;
  // [tokens, out_hidden_size]: get_audio_features' pooler_output, the embed norm applied: the
  // rows the language model takes as input embeddings at the placeholder positions.
  std::vector<float> features;
};

class MuseSparkAudioEncoder {
 public:
  // Tokens per chunk when Encode is not told otherwise (~5 s of audio; at the released sizes the
  // largest activation, stage 0's MLP, is then 7680 x 1024 floats).
  static constexpr int64_t kDefaultChunkTokens = 64;

  // Binds the tower's tensors `prefix`* ("model.audio_tower." in MuseSparkForConditionalGeneration
  // checkpoints). The encoder keeps `source`, whose tensors back the linears left as stored;
  // `weights` says whether to convert them.
  static Expected<std::unique_ptr<MuseSparkAudioEncoder>> Load(const MuseSparkAudioConfig& config,
                                                                std::unique_ptr<WeightSource> source,
                                                                const std::string& prefix = "model.audio_tower.",
                                                                const EncoderWeightOptions& weights = {});
  // config.json + safetensors of a Hugging Face model directory.
  static Expected<std::unique_ptr<MuseSparkAudioEncoder>> LoadDirectory(const std::string& dir,
                                                                         const EncoderWeightOptions& weights = {});

  ~MuseSparkAudioEncoder();
  MuseSparkAudioEncoder(const MuseSparkAudioEncoder&) = delete;
  MuseSparkAudioEncoder& operator=(const MuseSparkAudioEncoder&) = delete;

  const MuseSparkAudioConfig& config() const { return config_; }
  // Which linears the load converted and which it kept as stored.
  const EncoderWeightReport& weight_report() const { return weight_report_; }
  // Linears of the tower: per stage the patch projection and fc1 / fc2 per block, then proj.
  int64_t NumLinears() const;

  // Encodes one mono clip of `num_samples` samples at 24 kHz, right-padded with zeros to a
  // multiple of samples_per_token as MuseSparkFeatureExtractor does. `stage_outputs`, when given,
  // receives each stage's output ([tokens * RowsPerToken(i), hidden_sizes[i]], the padded tail
  // included). InvalidArgument for an empty clip or chunk_tokens < 1.
  Expected<AudioEncoding> Encode(const float* samples, int64_t num_samples,
                                 int64_t chunk_tokens = kDefaultChunkTokens,
                                 std::vector<std::vector<float>>* stage_outputs = nullptr) const;

 private:
  struct Block;
  struct Stage;
  MuseSparkAudioEncoder() = default;
  Status Bind(const std::string& prefix, const EncoderWeightOptions& weights);

  MuseSparkAudioConfig config_;
  std::unique_ptr<WeightSource> source_;
  EncoderWeightReport weight_report_;
  std::vector<Stage> stages_;
  std::vector<float> norm_gain_, proj_bias_, post_proj_gain_;
  Linear proj_;
};

}  // namespace ember
