// Muse Spark's vision encoder (transformers' MuseSparkVisionModel plus MuseSparkModel's vision
// adapter, projection and perception norm): packed images and videos, as the Muse Glimmer image /
// video processors flatten them into patches, to one embedding per merge_size x merge_size block
// of patches in the text model's hidden size. The computation, with references to the
// transformers source it follows, is in src/model/vision/README.md.
//
// Everything runs in f32; the linears stay as stored (bf16 or f32, through kernels::MatMul over the
// checkpoint mapping) or are converted at load to NVFP4 / MXFP4 / FP8 (EncoderWeightOptions), norms,
// biases and the position table are copied to f32 at load. Attention
// is exact softmax attention per window or per frame (no item or frame ever attends to another),
// threaded over (segment, head, query block).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
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

struct MuseSparkVisionConfig {
  // vision_config (MuseSparkVisionConfig)
  int64_t patch_size = 14;            // pixels per patch side
  int64_t patch_temporal = 2;         // frames per patch (an image is repeated to fill them)
  int64_t pos_emb_height = 32;        // the learned position table is pos_emb_height x pos_emb_width;
  int64_t pos_emb_width = 32;         // a window of window_attention is pos_emb_height patches square
  int64_t num_attention_heads = 16;
  int64_t hidden_size = 1536;
  int64_t intermediate_size = 8960;
  double layer_norm_eps = 1e-5;       // ln_pre and ln_post (the blocks' norms are fixed at 1e-5)
  double rope_theta = 10000.0;
  int64_t merge_size = 2;             // pixel shuffle: merge_size^2 patches per output token
  // Per layer: true = window_attention, false = full_attention. Default (50 layers): full on
  // every 4th layer and the last.
  std::vector<bool> window_layers = DefaultWindowLayers(50);
  // Top level of the muse_spark config.
  int64_t out_hidden_size = 6144;     // the adapter's input: hidden_size * merge_size^2
  int64_t projector_hidden_size = 4096;
  int64_t text_hidden_size = 8192;    // vision_projection's output = text_config.hidden_size
  // perception_emb_norm: weightless RMSNorm with text_config.rms_norm_eps.
  double embed_norm_eps = 1e-5;
  int64_t image_token_id = 200092;
  int64_t video_token_id = 200091;

  static std::vector<bool> DefaultWindowLayers(int64_t layers);
  int64_t num_layers() const { return static_cast<int64_t>(window_layers.size()); }
  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // Floats per patch in pixel_values: patch_temporal * 3 * patch_size^2, (temporal, channel, y, x).
  int64_t PatchDim() const { return patch_temporal * 3 * patch_size * patch_size; }
  Status Validate() const;
  // Parameters of the tower, the adapter and the projection, for reports.
  int64_t NumParameters() const;

  // The whole multimodal config.json (model_type muse_spark: vision_config, the top-level
  // projector fields and token ids, text_config's hidden_size and rms_norm_eps) or a bare vision
  // config (model_type muse_spark_vision; the top-level fields keep their defaults except
  // out_hidden_size = hidden_size * merge_size^2).
  static Expected<MuseSparkVisionConfig> FromJson(const nlohmann::json& json, const std::string& where);
  static Expected<MuseSparkVisionConfig> FromFile(const std::string& path);
};

// One packed item's patch grid: {t, h, w} = temporal groups (1 for an image), patch rows, patch
// columns, as the processors' image_grid_thw / video_grid_thw rows.
using VisionGrid = std::array<int64_t, 3>;

struct VisionEncoding {
  // Per item: t * h * w / merge_size^2, the placeholder positions it fills.
  std::vector<int64_t> tokens;
  // [sum tokens, out_hidden_size]: MuseSparkVisionModel's last_hidden_state (ln_post, then the
  // pixel shuffle), items one after the other.
  std::vector<float> hidden;
  // [sum tokens, text_hidden_size]: get_image_features' pooler_output (adapter, projection,
  // perception norm), concatenated: the rows the language model takes as input embeddings.
  std::vector<float> features;
};

class MuseSparkVisionEncoder {
 public:
  // Binds `prefix`vision_tower.*, `prefix`vision_adapter.* and `prefix`vision_projection.weight
  // ("model." in MuseSparkForConditionalGeneration checkpoints). The encoder keeps `source`,
  // whose tensors back the linears left as stored; `weights` says whether to convert them.
  static Expected<std::unique_ptr<MuseSparkVisionEncoder>> Load(const MuseSparkVisionConfig& config,
                                                                 std::unique_ptr<WeightSource> source,
                                                                 const std::string& prefix = "model.",
                                                                 const EncoderWeightOptions& weights = {});
  // config.json + safetensors of a Hugging Face model directory.
  static Expected<std::unique_ptr<MuseSparkVisionEncoder>> LoadDirectory(const std::string& dir,
                                                                          const EncoderWeightOptions& weights = {});

  ~MuseSparkVisionEncoder();
  MuseSparkVisionEncoder(const MuseSparkVisionEncoder&) = delete;
  MuseSparkVisionEncoder& operator=(const MuseSparkVisionEncoder&) = delete;

  const MuseSparkVisionConfig& config() const { return config_; }
  // Which linears the load converted and which it kept as stored.
  const EncoderWeightReport& weight_report() const { return weight_report_; }
  // Linears of the tower, the adapter and the projection: the patch embedding, six per layer, three.
  int64_t NumLinears() const { return 1 + 6 * config_.num_layers() + 3; }

  // Output tokens of one grid: t * h * w / merge_size^2 (0 for a grid Encode would refuse).
  static int64_t TokensFor(const VisionGrid& grid, int64_t merge_size = 2);
  int64_t Tokens(const VisionGrid& grid) const { return TokensFor(grid, config_.merge_size); }

  // Encodes the packed items `grid_thw` from `pixel_values` [num_patches, PatchDim()], exactly
  // what MuseGlimmerImageProcessor (pixel_values, image_grid_thw) or MuseGlimmerVideoProcessor
  // (pixel_values_videos, video_grid_thw) produce: each item's t * h * w patches one after the
  // other, frame-major then row-major. Items never see each other: encoding them packed or one
  // at a time gives the same rows. `patch_embeddings`, when given, receives the patch embedder's
  // output [num_patches, hidden_size] (tests). InvalidArgument for no items, a grid dimension
  // below 1 or h / w not divisible by merge_size, num_patches != sum t * h * w, or a grid too
  // large to index.
  Expected<VisionEncoding> Encode(const float* pixel_values, int64_t num_patches,
                                  const std::vector<VisionGrid>& grid_thw,
                                  std::vector<float>* patch_embeddings = nullptr) const;

 private:
  struct Layer;
  struct Layout;
  struct Workspace;
  MuseSparkVisionEncoder() = default;
  Status Bind(const std::string& prefix, const EncoderWeightOptions& weights);
  void EmbedPatches(const float* pixels, const Layout& layout, float* out) const;
  // One encoder layer on the hidden states `x` [patches, hidden], held in window order.
  void RunLayer(const Layer& layer, const Layout& layout, Workspace& ws, float* x) const;

  MuseSparkVisionConfig config_;
  std::unique_ptr<WeightSource> source_;
  EncoderWeightReport weight_report_;
  Linear patch_embedding_;                      // [hidden, PatchDim]
  std::vector<float> position_table_;           // [pos_emb_height * pos_emb_width, hidden]
  std::vector<float> ln_pre_gain_, ln_pre_bias_, ln_post_gain_, ln_post_bias_;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;                 // [head_dim / 4]: one axis's RoPE frequencies
  Linear adapter_fc1_, adapter_fc2_, projection_;
};

}  // namespace ember
