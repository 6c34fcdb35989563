#include "model/vision/muse_spark_vision.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "formats/json_fields.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/encoder_ops.h"
#include "model/weight_source.h"

namespace ember {

using encoder_ops::GeluErf;
using encoder_ops::LayerNorm;
using encoder_ops::ApplyLinear;
using encoder_ops::RequireF32;
using encoder_ops::RmsNorm;
using encoder_ops::RowChunk;

// ---- config -------------------------------------------------------------------------------------

std::vector<bool> MuseSparkVisionConfig::DefaultWindowLayers(int64_t layers) {
  // MuseSparkVisionConfig.__post_init__: full attention on every 4th layer and on the last.
  std::vector<bool> window(static_cast<size_t>(std::max<int64_t>(layers, 0)));
  for (int64_t i = 0; i < layers; ++i) window[i] = !((i + 1) % 4 == 0 || i == layers - 1);
  return window;
}

int64_t MuseSparkVisionConfig::NumParameters() const {
  const int64_t d = hidden_size, f = intermediate_size, p = projector_hidden_size;
  const int64_t layer = 4 * (d * d + d) + (d * f + f) + (f * d + d) + 4 * d;  // attn, mlp, 2 LayerNorms
  return d * PatchDim() + pos_emb_height * pos_emb_width * d + 4 * d + num_layers() * layer +
         out_hidden_size * p + p * p + p * text_hidden_size;
}

Status MuseSparkVisionConfig::Validate() const {
  auto fail = [](std::string message) { return InvalidArgument("vision_config: " + message); };
  if (patch_size < 1 || patch_temporal < 1 || merge_size < 1 || hidden_size < 1 || intermediate_size < 1 ||
      num_attention_heads < 1 || pos_emb_height < 1 || pos_emb_width < 1) {
    return fail(fmt::format("patch_size {}, patch_temporal {}, merge_size {}, hidden_size {}, intermediate_size {}, "
                            "num_attention_heads {}, pos_emb_height {}, pos_emb_width {} must all be positive",
                            patch_size, patch_temporal, merge_size, hidden_size, intermediate_size,
                            num_attention_heads, pos_emb_height, pos_emb_width));
  }
  if (patch_size > 1024 || merge_size > 64 || pos_emb_height > 4096) {
    return fail("patch_size, merge_size or pos_emb_height is implausibly large");
  }
  if (hidden_size % num_attention_heads != 0 || head_dim() % 4 != 0) {
    return fail(fmt::format("hidden_size {} must split into {} heads of a multiple of 4 (the axial RoPE rotates "
                            "head_dim / 4 frequencies per axis, twice)", hidden_size, num_attention_heads));
  }
  if (pos_emb_height != pos_emb_width) {
    // transformers reads the table as pos_emb_height cells per side and sizes windows from it
    // alone ("assume pos_emb_height == pos_emb_width always"); a non-square table is not defined.
    return fail(fmt::format("pos_emb_height {} != pos_emb_width {}: only a square position table is supported",
                            pos_emb_height, pos_emb_width));
  }
  if (window_layers.empty()) return fail("no layers");
  if (out_hidden_size != hidden_size * merge_size * merge_size) {
    return fail(fmt::format("out_hidden_size {} must be hidden_size * merge_size^2 = {} (the adapter takes the "
                            "pixel-shuffled rows)", out_hidden_size, hidden_size * merge_size * merge_size));
  }
  if (projector_hidden_size < 1 || text_hidden_size < 1) {
    return fail("projector_hidden_size and the text hidden_size must be positive");
  }
  if (!(layer_norm_eps > 0) || !(embed_norm_eps > 0) || !(rope_theta > 0)) {
    return fail("layer_norm_eps, the perception norm's eps and rope_theta must be > 0");
  }
  return Status::Ok();
}

namespace {

Status RequireGelu(JsonFields& f, const char* key, const std::string& where) {
  std::string act = "gelu";
  EMBER_RETURN_IF_ERROR(f.String(key, &act, /*required=*/false));
  if (act != "gelu") {
    return InvalidArgument(fmt::format("{}: {} '{}' is not supported (the encoder implements 'gelu', the exact "
                                       "erf GELU)", where, key, act));
  }
  return Status::Ok();
}

Status ParseVision(const nlohmann::json& json, const std::string& where, MuseSparkVisionConfig& c) {
  if (!json.is_object()) return InvalidArgument(where + ": expected a JSON object");
  JsonFields f(json, where);
  std::string model_type;
  EMBER_RETURN_IF_ERROR(f.String("model_type", &model_type, /*required=*/false));
  if (f.Has("model_type") && model_type != "muse_spark_vision") {
    return InvalidArgument(fmt::format("{}: model_type is '{}', expected 'muse_spark_vision'", where, model_type));
  }
  EMBER_RETURN_IF_ERROR(f.Int("patch_size", &c.patch_size, false));
  EMBER_RETURN_IF_ERROR(f.Int("patch_temporal", &c.patch_temporal, false));
  EMBER_RETURN_IF_ERROR(f.Int("pos_emb_height", &c.pos_emb_height, false));
  EMBER_RETURN_IF_ERROR(f.Int("pos_emb_width", &c.pos_emb_width, false));
  EMBER_RETURN_IF_ERROR(f.Int("num_attention_heads", &c.num_attention_heads, false));
  EMBER_RETURN_IF_ERROR(f.Int("hidden_size", &c.hidden_size, false));
  EMBER_RETURN_IF_ERROR(f.Int("intermediate_size", &c.intermediate_size, false));
  EMBER_RETURN_IF_ERROR(f.Double("layer_norm_eps", &c.layer_norm_eps, false));
  EMBER_RETURN_IF_ERROR(f.Int("merge_size", &c.merge_size, false));
  EMBER_RETURN_IF_ERROR(RequireGelu(f, "hidden_act", where));
  int64_t layers = 50;
  EMBER_RETURN_IF_ERROR(f.Int("num_hidden_layers", &layers, false));
  if (layers < 1 || layers > 4096) return InvalidArgument(fmt::format("{}: num_hidden_layers {} out of range", where, layers));
  std::vector<std::string> types;
  EMBER_RETURN_IF_ERROR(f.StringList("layer_types", &types, false));
  if (f.Has("layer_types")) {
    if (static_cast<int64_t>(types.size()) != layers) {
      return InvalidArgument(fmt::format("{}: {} layer_types for num_hidden_layers {}", where, types.size(), layers));
    }
    c.window_layers.assign(types.size(), false);
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] != "window_attention" && types[i] != "full_attention") {
        return InvalidArgument(fmt::format("{}: layer_types[{}] is '{}', expected 'window_attention' or "
                                           "'full_attention'", where, i, types[i]));
      }
      c.window_layers[i] = types[i] == "window_attention";
    }
  } else {
    c.window_layers = MuseSparkVisionConfig::DefaultWindowLayers(layers);
  }
  if (const nlohmann::json* rope = f.Object("rope_parameters")) {
    JsonFields r(*rope, where + ": rope_parameters");
    std::string type = "axial";
    EMBER_RETURN_IF_ERROR(r.String("rope_type", &type, false));
    if (type != "axial") {
      return InvalidArgument(fmt::format("{}: rope_type '{}' is not supported (MuseSparkVisionRotaryEmbedding "
                                         "is 'axial' only)", where, type));
    }
    EMBER_RETURN_IF_ERROR(r.Double("rope_theta", &c.rope_theta, false));
    EMBER_RETURN_IF_ERROR(r.RejectUnknown());
  }
  f.Ignore({"initializer_range", "dtype", "torch_dtype", "transformers_version", "architectures",
            "max_position_embeddings"});
  return f.RejectUnknown();
}

}  // namespace

Expected<MuseSparkVisionConfig> MuseSparkVisionConfig::FromJson(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object()) return InvalidArgument(where + ": expected a JSON object");
  MuseSparkVisionConfig c;
  const std::string model_type = json.value("model_type", std::string());
  if (model_type == "muse_spark") {
    if (!json.contains("vision_config") || !json["vision_config"].is_object()) {
      return InvalidArgument(where + ": a muse_spark config without a vision_config object has no vision tower");
    }
    EMBER_RETURN_IF_ERROR(ParseVision(json["vision_config"], where + ": vision_config", c));
    // The top level is the whole model's: read only the vision path's fields, by name.
    auto integer = [&](const char* key, int64_t* out) -> Status {
      if (!json.contains(key)) return Status::Ok();
      if (!json[key].is_number_integer()) return InvalidArgument(fmt::format("{}: {} must be an integer", where, key));
      *out = json[key].get<int64_t>();
      return Status::Ok();
    };
    EMBER_RETURN_IF_ERROR(integer("out_hidden_size", &c.out_hidden_size));
    EMBER_RETURN_IF_ERROR(integer("projector_hidden_size", &c.projector_hidden_size));
    EMBER_RETURN_IF_ERROR(integer("image_token_id", &c.image_token_id));
    EMBER_RETURN_IF_ERROR(integer("video_token_id", &c.video_token_id));
    if (json.contains("projector_hidden_act") && json["projector_hidden_act"] != "gelu") {
      return InvalidArgument(fmt::format("{}: projector_hidden_act {} is not supported (the adapter implements "
                                         "'gelu', the exact erf GELU)", where, json["projector_hidden_act"].dump()));
    }
    if (json.contains("text_config") && json["text_config"].is_object()) {
      const auto& text = json["text_config"];
      if (text.contains("rms_norm_eps") && text["rms_norm_eps"].is_number()) {
        c.embed_norm_eps = text["rms_norm_eps"].get<double>();
      }
      if (text.contains("hidden_size") && text["hidden_size"].is_number_integer()) {
        c.text_hidden_size = text["hidden_size"].get<int64_t>();
      }
    }
  } else if (model_type == "muse_spark_vision") {
    EMBER_RETURN_IF_ERROR(ParseVision(json, where, c));
    c.out_hidden_size = c.hidden_size * c.merge_size * c.merge_size;
  } else {
    return InvalidArgument(fmt::format("{}: model_type is '{}', expected 'muse_spark' or 'muse_spark_vision'",
                                       where, model_type));
  }
  EMBER_RETURN_IF_ERROR(c.Validate());
  return c;
}

Expected<MuseSparkVisionConfig> MuseSparkVisionConfig::FromFile(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const nlohmann::json json, encoder_ops::ReadJsonFile(path));
  return FromJson(json, path);
}

// ---- weights ------------------------------------------------------------------------------------

struct MuseSparkVisionEncoder::Layer {
  bool window = true;                      // window_attention (else full_attention)
  std::vector<float> norm1_gain, norm1_bias, norm2_gain, norm2_bias;
  Linear q, k, v, proj, fc1, fc2;          // [d, d] x 4, [f, d], [d, f]
  std::vector<float> q_bias, k_bias, v_bias, proj_bias, fc1_bias, fc2_bias;
};

MuseSparkVisionEncoder::~MuseSparkVisionEncoder() = default;

Status MuseSparkVisionEncoder::Bind(const std::string& prefix, const EncoderWeightOptions& weights) {
  const MuseSparkVisionConfig& c = config_;
  WeightSource& w = *source_;
  encoder_ops::LinearLoader linears(w, weights, NumLinears());
  const int64_t d = c.hidden_size, f = c.intermediate_size;
  const std::string t = prefix + "vision_tower.";
  EMBER_ASSIGN_OR_RETURN(patch_embedding_, linears.Load(t + "patch_embedder.patch_embedding.weight", d, c.PatchDim()));
  EMBER_ASSIGN_OR_RETURN(position_table_, RequireF32(w, t + "patch_embedder.position_embedding_table.weight",
                                                     Shape{c.pos_emb_height * c.pos_emb_width, d}));
  EMBER_ASSIGN_OR_RETURN(ln_pre_gain_, RequireVectorF32(w, t + "ln_pre.weight", d));
  EMBER_ASSIGN_OR_RETURN(ln_pre_bias_, RequireVectorF32(w, t + "ln_pre.bias", d));
  EMBER_ASSIGN_OR_RETURN(ln_post_gain_, RequireVectorF32(w, t + "ln_post.weight", d));
  EMBER_ASSIGN_OR_RETURN(ln_post_bias_, RequireVectorF32(w, t + "ln_post.bias", d));
  layers_.resize(c.num_layers());
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const std::string p = fmt::format("{}layers.{}.", t, i);
    Layer& l = layers_[i];
    l.window = c.window_layers[i];
    EMBER_ASSIGN_OR_RETURN(l.norm1_gain, RequireVectorF32(w, p + "norm1.weight", d));
    EMBER_ASSIGN_OR_RETURN(l.norm1_bias, RequireVectorF32(w, p + "norm1.bias", d));
    EMBER_ASSIGN_OR_RETURN(l.norm2_gain, RequireVectorF32(w, p + "norm2.weight", d));
    EMBER_ASSIGN_OR_RETURN(l.norm2_bias, RequireVectorF32(w, p + "norm2.bias", d));
    EMBER_ASSIGN_OR_RETURN(l.q, linears.Load(p + "attn.q_proj.weight", d, d));
    EMBER_ASSIGN_OR_RETURN(l.q_bias, RequireVectorF32(w, p + "attn.q_proj.bias", d));
    EMBER_ASSIGN_OR_RETURN(l.k, linears.Load(p + "attn.k_proj.weight", d, d));
    EMBER_ASSIGN_OR_RETURN(l.k_bias, RequireVectorF32(w, p + "attn.k_proj.bias", d));
    EMBER_ASSIGN_OR_RETURN(l.v, linears.Load(p + "attn.v_proj.weight", d, d));
    EMBER_ASSIGN_OR_RETURN(l.v_bias, RequireVectorF32(w, p + "attn.v_proj.bias", d));
    EMBER_ASSIGN_OR_RETURN(l.proj, linears.Load(p + "attn.proj.weight", d, d));
    EMBER_ASSIGN_OR_RETURN(l.proj_bias, RequireVectorF32(w, p + "attn.proj.bias", d));
    EMBER_ASSIGN_OR_RETURN(l.fc1, linears.Load(p + "mlp.fc1.weight", f, d));
    EMBER_ASSIGN_OR_RETURN(l.fc1_bias, RequireVectorF32(w, p + "mlp.fc1.bias", f));
    EMBER_ASSIGN_OR_RETURN(l.fc2, linears.Load(p + "mlp.fc2.weight", d, f));
    EMBER_ASSIGN_OR_RETURN(l.fc2_bias, RequireVectorF32(w, p + "mlp.fc2.bias", d));
  }
  const int64_t pj = c.projector_hidden_size;
  EMBER_ASSIGN_OR_RETURN(adapter_fc1_, linears.Load(prefix + "vision_adapter.fc1.weight", pj, c.out_hidden_size));
  EMBER_ASSIGN_OR_RETURN(adapter_fc2_, linears.Load(prefix + "vision_adapter.fc2.weight", pj, pj));
  EMBER_ASSIGN_OR_RETURN(projection_, linears.Load(prefix + "vision_projection.weight", c.text_hidden_size, pj));
  // MuseSparkVisionRotaryEmbedding: 1 / theta^(arange(0, head_dim / 2, 2) / (head_dim / 2)), f32.
  inv_freq_.resize(c.head_dim() / 4);
  kernels::RopeInverseFrequencies(c.rope_theta, c.head_dim() / 2, inv_freq_.data());
  weight_report_ = linears.report();
  return Status::Ok();
}

Expected<std::unique_ptr<MuseSparkVisionEncoder>> MuseSparkVisionEncoder::Load(const MuseSparkVisionConfig& config,
                                                                                 std::unique_ptr<WeightSource> source,
                                                                                 const std::string& prefix,
                                                                                 const EncoderWeightOptions& weights) {
  EMBER_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<MuseSparkVisionEncoder> encoder(new MuseSparkVisionEncoder());
  encoder->config_ = config;
  encoder->source_ = std::move(source);
  EMBER_RETURN_IF_ERROR(encoder->Bind(prefix, weights));
  return encoder;
}

Expected<std::unique_ptr<MuseSparkVisionEncoder>> MuseSparkVisionEncoder::LoadDirectory(
    const std::string& dir, const EncoderWeightOptions& weights) {
  EMBER_ASSIGN_OR_RETURN(MuseSparkVisionConfig config, MuseSparkVisionConfig::FromFile(dir + "/config.json"));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source, encoder_ops::OpenDirectoryWeights(dir));
  return Load(config, std::move(source), "model.", weights);
}

int64_t MuseSparkVisionEncoder::TokensFor(const VisionGrid& grid, int64_t merge_size) {
  const auto [t, h, w] = grid;
  if (merge_size < 1 || t < 1 || h < 1 || w < 1 || h % merge_size != 0 || w % merge_size != 0) return 0;
  if (t > (int64_t{1} << 20) || h > (int64_t{1} << 20) || w > (int64_t{1} << 20)) return 0;
  return t * (h / merge_size) * (w / merge_size);
}

// ---- layout -------------------------------------------------------------------------------------

namespace {

ThreadPool& Pool() { return ThreadPool::Global(); }

// Most patches one Encode call takes (16M: far past any processor's cap of a few thousand tokens),
// so that sizes and indices stay well inside int64 and allocations stay finite.
constexpr int64_t kMaxPatches = int64_t{1} << 24;

}  // namespace

// Where every patch sits. The hidden states live in window order from ln_pre to ln_post, as in
// transformers (get_vision_window_index): per item, per frame, windows of W x W patches (W =
// pos_emb_height) row-major over the frame, patches row-major inside a window. A frame's windows
// are consecutive, so each frame is also a contiguous range in window order: full attention's
// segments (get_vision_cu_seqlens: one per frame, never a whole video).
struct MuseSparkVisionEncoder::Layout {
  struct Patch {
    int32_t row, col;        // in its frame
    int32_t rows, cols;      // its frame's grid h, w
  };
  int64_t patches = 0;
  std::vector<Patch> patch;               // per patch, input order
  std::vector<int64_t> order;             // window order -> input index
  std::vector<int64_t> window_bounds;     // segments of window_attention, in window order
  std::vector<int64_t> frame_bounds;      // segments of full_attention, in window order

  static Layout Build(const std::vector<VisionGrid>& grids, int64_t window) {
    Layout l;
    for (const VisionGrid& g : grids) l.patches += g[0] * g[1] * g[2];
    l.patch.reserve(l.patches);
    l.order.reserve(l.patches);
    l.window_bounds.push_back(0);
    l.frame_bounds.push_back(0);
    int64_t base = 0;
    for (const auto& [t, h, w] : grids) {
      for (int64_t f = 0; f < t; ++f, base += h * w) {
        for (int64_t r = 0; r < h; ++r) {
          for (int64_t c = 0; c < w; ++c) {
            l.patch.push_back({static_cast<int32_t>(r), static_cast<int32_t>(c), static_cast<int32_t>(h),
                               static_cast<int32_t>(w)});
          }
        }
        for (int64_t wr = 0; wr < h; wr += window) {
          for (int64_t wc = 0; wc < w; wc += window) {
            for (int64_t r = wr; r < std::min(wr + window, h); ++r) {
              for (int64_t c = wc; c < std::min(wc + window, w); ++c) l.order.push_back(base + r * w + c);
            }
            l.window_bounds.push_back(static_cast<int64_t>(l.order.size()));
          }
        }
        l.frame_bounds.push_back(base + h * w);
      }
    }
    return l;
  }
};

// ---- forward ------------------------------------------------------------------------------------

namespace {

// One interpolation axis of get_vision_interpolation_indices_and_weights (bilinear, half-pixel
// centres, align_corners=False, zeros padding), in f32 as transformers computes it: target index
// i of an axis of `size` cells reads source cells tap[0..1] of `side` with weight[0..1]; a tap
// outside the table gets weight 0 (its index is clamped and irrelevant).
void AxisTaps(int64_t i, int64_t size, int64_t side, int64_t tap[2], float weight[2]) {
  const float src = (static_cast<float>(i) + 0.5f) * static_cast<float>(side) / static_cast<float>(size) - 0.5f;
  const float floor = std::floor(src);
  for (int o = 0; o < 2; ++o) {
    const int64_t raw = static_cast<int64_t>(floor) + o;
    tap[o] = std::clamp<int64_t>(raw, 0, side - 1);
    const float w = std::max(1.0f - std::abs(src - floor - static_cast<float>(o)), 0.0f);
    weight[o] = (raw >= 0 && raw <= side - 1) ? w : 0.0f;
  }
}

// x[order[i]] = y[i]... and back: gathers rows of width n.
void Permute(const float* x, const std::vector<int64_t>& order, int64_t n, bool to_window, float* out) {
  Pool().ParallelFor(static_cast<int64_t>(order.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* src = to_window ? x + order[i] * n : x + i * n;
      float* dst = to_window ? out + i * n : out + order[i] * n;
      std::copy(src, src + n, dst);
    }
  }, RowChunk(n));
}

// The rotate-half RoPE of apply_rotary_pos_emb_vision on every head of `rows` tokens: pairs
// (j, j + head_dim / 2) turn by the token's angle j, cos / sin tables [rows, head_dim / 2].
void ApplyRope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  Pool().ParallelFor(rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* c = cos + r * half;
      const float* s = sin + r * half;
      for (int64_t h = 0; h < heads; ++h) {
        float* a = x + (r * heads + h) * head_dim;
        float* b = a + half;
        for (int64_t j = 0; j < half; ++j) {
          const float x1 = a[j], x2 = b[j];
          a[j] = x1 * c[j] - x2 * s[j];
          b[j] = x2 * c[j] + x1 * s[j];
        }
      }
    }
  }, RowChunk(heads * head_dim));
}

// Per (segment, head): the segment's keys of that head as a contiguous [len, head_dim] block and
// its values transposed, [head_dim, len], both at offset bounds[s] * d + head * len * head_dim,
// so that attention's two products are plain row-major matmuls (q k^T and v^T p^T).
void GatherSegmentHeads(const float* k, const float* v, int64_t heads, int64_t head_dim,
                        const std::vector<int64_t>& bounds, float* kseg, float* vtseg) {
  const int64_t d = heads * head_dim, segments = static_cast<int64_t>(bounds.size()) - 1;
  Pool().ParallelFor(segments * heads, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t s = t / heads, h = t % heads, b = bounds[s], len = bounds[s + 1] - b;
      float* ks = kseg + b * d + h * len * head_dim;
      float* vs = vtseg + b * d + h * len * head_dim;
      for (int64_t j = 0; j < len; ++j) {
        const float* kj = k + (b + j) * d + h * head_dim;
        const float* vj = v + (b + j) * d + h * head_dim;
        std::copy(kj, kj + head_dim, ks + j * head_dim);
        for (int64_t e = 0; e < head_dim; ++e) vs[e * len + j] = vj[e];
      }
    }
  });
}

// Bidirectional softmax attention inside each segment [bounds[s], bounds[s + 1]) of `rows`
// tokens: out[i, head] = sum_j softmax_j(q_i . k_j * scale) v_j over the j of i's segment.
// q and out are [rows, heads * head_dim]; kseg / vtseg come from GatherSegmentHeads. One task =
// one head of one block of kQueryBlock queries of one segment; tasks are independent, so they
// thread freely, and each runs its two products on the active ISA's single-threaded matmul.
void SegmentAttention(const float* q, const float* kseg, const float* vtseg, int64_t heads, int64_t head_dim,
                      const std::vector<int64_t>& bounds, float* out) {
  constexpr int64_t kQueryBlock = 64;
  struct Task {
    int64_t seg_begin, seg_end, q_begin, q_end;
  };
  std::vector<Task> tasks;
  int64_t longest = 0;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    longest = std::max(longest, bounds[s + 1] - bounds[s]);
    for (int64_t q0 = bounds[s]; q0 < bounds[s + 1]; q0 += kQueryBlock) {
      tasks.push_back({bounds[s], bounds[s + 1], q0, std::min(q0 + kQueryBlock, bounds[s + 1])});
    }
  }
  const int64_t d = heads * head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const kernels::KernelVariant& variant = kernels::ActiveVariant();
  Pool().ParallelFor(static_cast<int64_t>(tasks.size()) * heads, [&](int64_t begin, int64_t end) {
    std::vector<float> qb(kQueryBlock * head_dim), scores(kQueryBlock * longest), out_t(head_dim * kQueryBlock),
        sums(kQueryBlock);
    for (int64_t t = begin; t < end; ++t) {
      const Task& task = tasks[t / heads];
      const int64_t h = t % heads, nq = task.q_end - task.q_begin, nk = task.seg_end - task.seg_begin;
      const float* ks = kseg + task.seg_begin * d + h * nk * head_dim;
      const float* vs = vtseg + task.seg_begin * d + h * nk * head_dim;
      for (int64_t r = 0; r < nq; ++r) {
        const float* qr = q + (task.q_begin + r) * d + h * head_dim;
        std::copy(qr, qr + head_dim, qb.data() + r * head_dim);
      }
      variant.matmul_f32(qb.data(), nq, head_dim, ks, 0, nk, scores.data(), nk);  // [nq, nk] = q k^T
      // Softmax numerators (scaled, max subtracted); the division waits for the output.
      for (int64_t r = 0; r < nq; ++r) {
        float* sr = scores.data() + r * nk;
        float max = -INFINITY;
        for (int64_t j = 0; j < nk; ++j) max = std::max(max, sr[j] * scale);
        float sum = 0.0f;
        for (int64_t j = 0; j < nk; ++j) {
          sr[j] = std::exp(sr[j] * scale - max);
          sum += sr[j];
        }
        sums[r] = sum;
      }
      variant.matmul_f32(vs, head_dim, nk, scores.data(), 0, nq, out_t.data(), nq);  // [hd, nq] = v^T p^T
      for (int64_t r = 0; r < nq; ++r) {
        const float inv = 1.0f / sums[r];
        float* o = out + (task.q_begin + r) * d + h * head_dim;
        for (int64_t e = 0; e < head_dim; ++e) o[e] = out_t[e * nq + r] * inv;
      }
    }
  });
}

// Rows of the MLP per pass: bounds its intermediate ([rows, intermediate_size]) for large inputs.
constexpr int64_t kMlpRows = 2048;

}  // namespace

struct MuseSparkVisionEncoder::Workspace {
  std::vector<float> norm, q, k, v, kseg, vtseg, attn, proj, mid;
  std::vector<float> cos, sin;  // [patches, head_dim / 2] per token, window order
};

void MuseSparkVisionEncoder::EmbedPatches(const float* pixels, const Layout& layout, float* out) const {
  const int64_t d = config_.hidden_size, side = config_.pos_emb_height;
  ApplyLinear(pixels, layout.patches, patch_embedding_, nullptr, out);
  // The position table resampled to the frame's grid. transformers passes the grid as (t, w, h)
  // (modeling's grid_thw[:, [0, 2, 1]]) and decodes the patch's raster index p = row * W + col
  // with that swapped grid: it reads table row-axis cell p / H (of an axis W long) and column-axis
  // cell p % H (of an axis H long). For a square grid that is (row, col); for others it is what
  // the reference computes, reproduced as is.
  Pool().ParallelFor(layout.patches, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Layout::Patch& p = layout.patch[i];
      const int64_t index = static_cast<int64_t>(p.row) * p.cols + p.col;
      int64_t ta[2], tb[2];
      float wa[2], wb[2];
      AxisTaps(index / p.rows, p.cols, side, ta, wa);
      AxisTaps(index % p.rows, p.rows, side, tb, wb);
      float* o = out + i * d;
      for (int64_t a = 0; a < 2; ++a) {
        for (int64_t b = 0; b < 2; ++b) {
          const float weight = wa[a] * wb[b];
          const float* cell = position_table_.data() + (ta[a] * side + tb[b]) * d;
          for (int64_t e = 0; e < d; ++e) o[e] += weight * cell[e];
        }
      }
    }
  }, RowChunk(4 * d));
}

void MuseSparkVisionEncoder::RunLayer(const Layer& layer, const Layout& layout, Workspace& ws, float* x) const {
  const MuseSparkVisionConfig& c = config_;
  const int64_t n = layout.patches, d = c.hidden_size, f = c.intermediate_size;
  const int64_t heads = c.num_attention_heads, hd = c.head_dim();
  // x += proj(attention(rope(q), rope(k), v)) over the layer's segments.
  LayerNorm(x, n, d, 1e-5, layer.norm1_gain.data(), layer.norm1_bias.data(), ws.norm.data());
  ApplyLinear(ws.norm.data(), n, layer.q, layer.q_bias.data(), ws.q.data());
  ApplyLinear(ws.norm.data(), n, layer.k, layer.k_bias.data(), ws.k.data());
  ApplyLinear(ws.norm.data(), n, layer.v, layer.v_bias.data(), ws.v.data());
  ApplyRope(ws.q.data(), n, heads, hd, ws.cos.data(), ws.sin.data());
  ApplyRope(ws.k.data(), n, heads, hd, ws.cos.data(), ws.sin.data());
  const std::vector<int64_t>& segments = layer.window ? layout.window_bounds : layout.frame_bounds;
  GatherSegmentHeads(ws.k.data(), ws.v.data(), heads, hd, segments, ws.kseg.data(), ws.vtseg.data());
  SegmentAttention(ws.q.data(), ws.kseg.data(), ws.vtseg.data(), heads, hd, segments, ws.attn.data());
  ApplyLinear(ws.attn.data(), n, layer.proj, layer.proj_bias.data(), ws.proj.data());
  kernels::AddInPlace(x, ws.proj.data(), n * d);
  // x += fc2(gelu(fc1(norm2(x)))), in passes of kMlpRows rows.
  for (int64_t r0 = 0; r0 < n; r0 += kMlpRows) {
    const int64_t rows = std::min(kMlpRows, n - r0);
    float* xr = x + r0 * d;
    LayerNorm(xr, rows, d, 1e-5, layer.norm2_gain.data(), layer.norm2_bias.data(), ws.norm.data());
    ApplyLinear(ws.norm.data(), rows, layer.fc1, layer.fc1_bias.data(), ws.mid.data());
    GeluErf(ws.mid.data(), rows * f);
    ApplyLinear(ws.mid.data(), rows, layer.fc2, layer.fc2_bias.data(), ws.proj.data());
    kernels::AddInPlace(xr, ws.proj.data(), rows * d);
  }
}

Expected<VisionEncoding> MuseSparkVisionEncoder::Encode(const float* pixel_values, int64_t num_patches,
                                                        const std::vector<VisionGrid>& grid_thw,
                                                        std::vector<float>* patch_embeddings) const {
  const MuseSparkVisionConfig& c = config_;
  const int64_t m = c.merge_size, d = c.hidden_size, hd = c.head_dim();
  // Refuse what transformers would crash on or silently misread.
  if (grid_thw.empty()) return InvalidArgument("vision input has no items (grid_thw is empty)");
  int64_t expected = 0;
  VisionEncoding result;
  for (size_t i = 0; i < grid_thw.size(); ++i) {
    const auto [t, h, w] = grid_thw[i];
    if (t < 1 || h < 1 || w < 1) {
      return InvalidArgument(fmt::format("vision item {}: grid_thw [{}, {}, {}] has a dimension below 1", i, t, h, w));
    }
    if (h % m != 0 || w % m != 0) {
      return InvalidArgument(fmt::format("vision item {}: grid h {} and w {} must be multiples of merge_size {} "
                                         "(the pixel shuffle merges {}x{} patches)", i, h, w, m, m, m));
    }
    const int64_t tokens = TokensFor(grid_thw[i], m);
    if (tokens == 0 || t * h * w > kMaxPatches - expected) {
      return InvalidArgument(fmt::format("vision input: more than {} patches (item {}: grid_thw [{}, {}, {}])",
                                         kMaxPatches, i, t, h, w));
    }
    expected += t * h * w;
    result.tokens.push_back(tokens);
  }
  if (num_patches != expected) {
    return InvalidArgument(fmt::format("vision input: {} patches given, the grids hold {} (sum of t * h * w)",
                                       num_patches, expected));
  }
  if (pixel_values == nullptr) return InvalidArgument("vision input: pixel_values is null");

  const Layout layout = Layout::Build(grid_thw, c.pos_emb_height);
  const int64_t n = layout.patches, half = hd / 2, quarter = hd / 4;
  Workspace ws;
  for (auto* buffer : {&ws.norm, &ws.q, &ws.k, &ws.v, &ws.kseg, &ws.vtseg, &ws.attn, &ws.proj}) buffer->resize(n * d);
  ws.mid.resize(std::min(n, kMlpRows) * c.intermediate_size);

  // Patch embedding + positions, ln_pre, then into window order.
  std::vector<float> x(n * d);
  EmbedPatches(pixel_values, layout, ws.proj.data());
  if (patch_embeddings != nullptr) patch_embeddings->assign(ws.proj.begin(), ws.proj.end());
  LayerNorm(ws.proj.data(), n, d, c.layer_norm_eps, ln_pre_gain_.data(), ln_pre_bias_.data(), ws.norm.data());
  Permute(ws.norm.data(), layout.order, d, /*to_window=*/true, x.data());

  // The axial RoPE angles of each token (window order): transformers' position ids are (row, col)
  // flipped to (col, row) plus 1 ("the ref implementation's position offset is 1"); the first
  // quarter of the half-dim turns with col + 1, the second with row + 1 ([W, H] frequencies,
  // repeated for the rotate-half pairs).
  ws.cos.resize(n * half);
  ws.sin.resize(n * half);
  Pool().ParallelFor(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Layout::Patch& p = layout.patch[layout.order[i]];
      const float col = static_cast<float>(p.col + 1), row = static_cast<float>(p.row + 1);
      for (int64_t j = 0; j < half; ++j) {
        const float angle = (j < quarter ? col : row) * inv_freq_[j % quarter];
        ws.cos[i * half + j] = std::cos(angle);
        ws.sin[i * half + j] = std::sin(angle);
      }
    }
  }, RowChunk(2 * half));

  for (const Layer& layer : layers_) RunLayer(layer, layout, ws, x.data());

  // Back to input order, ln_post, then the pixel shuffle: per frame, merge blocks row-major, and
  // a block's m*m patches (row-major) interleaved channel-major into one row: out[e * m*m + s]
  // = patch s's channel e (get_vision_pixel_shuffle_index + view/permute in pixel_shuffle).
  Permute(x.data(), layout.order, d, /*to_window=*/false, ws.norm.data());
  LayerNorm(ws.norm.data(), n, d, c.layer_norm_eps, ln_post_gain_.data(), ln_post_bias_.data(), ws.norm.data());
  int64_t total = 0;
  for (int64_t tokens : result.tokens) total += tokens;
  const int64_t mm = m * m, out_d = c.out_hidden_size;
  result.hidden.resize(total * out_d);
  // Token k of the packed output is block k of the packed frames, in order: frame_bounds walks them.
  std::vector<int64_t> block_first;  // per output token: input index of the block's top-left patch
  block_first.reserve(total);
  for (size_t fr = 0; fr + 1 < layout.frame_bounds.size(); ++fr) {
    const int64_t base = layout.frame_bounds[fr];
    const Layout::Patch& p = layout.patch[base];
    for (int64_t br = 0; br < p.rows; br += m) {
      for (int64_t bc = 0; bc < p.cols; bc += m) block_first.push_back(base + br * p.cols + bc);
    }
  }
  Pool().ParallelFor(total, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t first = block_first[k], cols = layout.patch[first].cols;
      float* o = result.hidden.data() + k * out_d;
      for (int64_t s = 0; s < mm; ++s) {
        const float* src = ws.norm.data() + (first + (s / m) * cols + s % m) * d;
        for (int64_t e = 0; e < d; ++e) o[e * mm + s] = src[e];
      }
    }
  }, RowChunk(out_d));

  // get_image_features: act(fc2(act(fc1(x)))) (no biases), vision_projection, perception_emb_norm.
  const int64_t pj = c.projector_hidden_size;
  std::vector<float> a(total * pj), b(total * pj);
  ApplyLinear(result.hidden.data(), total, adapter_fc1_, nullptr, a.data());
  GeluErf(a.data(), total * pj);
  ApplyLinear(a.data(), total, adapter_fc2_, nullptr, b.data());
  GeluErf(b.data(), total * pj);
  result.features.resize(total * c.text_hidden_size);
  ApplyLinear(b.data(), total, projection_, nullptr, result.features.data());
  RmsNorm(result.features.data(), total, c.text_hidden_size, c.embed_norm_eps, nullptr, result.features.data());
  return result;
}

}  // namespace ember
