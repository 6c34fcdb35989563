#include "model/audio/muse_spark_audio.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "formats/json_fields.h"
#include "kernels/ops.h"
#include "model/encoder_ops.h"
#include "model/weight_source.h"

namespace ember {

using encoder_ops::GeluErf;
using encoder_ops::RequireF32;
using encoder_ops::RmsNorm;
using encoder_ops::RowChunk;

// ---- config -------------------------------------------------------------------------------------

int64_t MuseSparkAudioConfig::SamplesPerToken() const {
  int64_t n = 1;
  for (int64_t p : patch_sizes) n *= p;
  return n;
}

int64_t MuseSparkAudioConfig::IntermediateSize(int64_t stage) const {
  // transformers: int(self.hidden_size * config.mlp_ratio) (Python int() truncates).
  return static_cast<int64_t>(static_cast<double>(hidden_sizes[stage]) * mlp_ratio);
}

int64_t MuseSparkAudioConfig::RowsPerToken(int64_t stage) const {
  int64_t n = 1;
  for (int64_t i = stage + 1; i < num_stages(); ++i) n *= patch_sizes[i];
  return n;
}

int64_t MuseSparkAudioConfig::NumParameters() const {
  int64_t n = 0, in = 1;
  for (int64_t i = 0; i < num_stages(); ++i) {
    const int64_t h = hidden_sizes[i], f = IntermediateSize(i);
    n += in * patch_sizes[i] * h + h + h;                                      // patch proj + bias, norm
    n += depths[i] * (h * conv_kernel_size + h + h + h * f + f + f * h + h);  // conv, norm, fc1, fc2
    in = h;
  }
  return n + in + in * out_hidden_size + 2 * out_hidden_size;
}

Status MuseSparkAudioConfig::Validate() const {
  auto fail = [](std::string message) { return InvalidArgument("audio_config: " + message); };
  if (patch_sizes.empty() || patch_sizes.size() != hidden_sizes.size() || patch_sizes.size() != depths.size()) {
    return fail(fmt::format("patch_sizes ({}), hidden_sizes ({}) and depths ({}) must be non-empty and of one length",
                            patch_sizes.size(), hidden_sizes.size(), depths.size()));
  }
  for (int64_t i = 0; i < num_stages(); ++i) {
    if (patch_sizes[i] < 1 || hidden_sizes[i] < 1 || depths[i] < 0 || IntermediateSize(i) < 1) {
      return fail(fmt::format("stage {}: patch size {}, hidden size {}, depth {}, mlp width {} must be positive",
                              i, patch_sizes[i], hidden_sizes[i], depths[i], IntermediateSize(i)));
    }
  }
  if (SamplesPerToken() > (int64_t{1} << 24)) return fail("patch_sizes multiply to more than 2^24 samples");
  if (conv_kernel_size < 1) return fail(fmt::format("conv_kernel_size {} must be positive", conv_kernel_size));
  if (out_hidden_size < 1) return fail(fmt::format("out_hidden_size {} must be positive", out_hidden_size));
  if (!(rms_norm_eps > 0) || !(embed_norm_eps > 0)) return fail("rms_norm_eps and the embed norm eps must be > 0");
  return Status::Ok();
}

namespace {

Status IntList(JsonFields& f, const char* key, std::vector<int64_t>* out, const std::string& where) {
  std::vector<double> values;
  EMBER_RETURN_IF_ERROR(f.DoubleList(key, &values, /*required=*/false));
  if (!f.Has(key)) return Status::Ok();
  out->clear();
  for (double v : values) {
    if (v != std::floor(v) || std::abs(v) > 1e12) {
      return InvalidArgument(fmt::format("{}.{}: {} is not an integer", where, key, v));
    }
    out->push_back(static_cast<int64_t>(v));
  }
  return Status::Ok();
}

Status ParseAudio(const nlohmann::json& json, const std::string& where, MuseSparkAudioConfig& c) {
  if (!json.is_object()) return InvalidArgument(where + ": expected a JSON object");
  JsonFields f(json, where);
  std::string model_type;
  EMBER_RETURN_IF_ERROR(f.String("model_type", &model_type, /*required=*/false));
  if (f.Has("model_type") && model_type != "muse_spark_audio") {
    return InvalidArgument(fmt::format("{}: model_type is '{}', expected 'muse_spark_audio'", where, model_type));
  }
  EMBER_RETURN_IF_ERROR(IntList(f, "patch_sizes", &c.patch_sizes, where));
  EMBER_RETURN_IF_ERROR(IntList(f, "hidden_sizes", &c.hidden_sizes, where));
  EMBER_RETURN_IF_ERROR(IntList(f, "depths", &c.depths, where));
  int64_t layers = static_cast<int64_t>(c.hidden_sizes.size());
  EMBER_RETURN_IF_ERROR(f.Int("num_hidden_layers", &layers, /*required=*/false));
  if (layers != static_cast<int64_t>(c.hidden_sizes.size())) {
    return InvalidArgument(fmt::format("{}: num_hidden_layers {} != {} hidden_sizes", where, layers,
                                       c.hidden_sizes.size()));
  }
  EMBER_RETURN_IF_ERROR(f.Double("mlp_ratio", &c.mlp_ratio, false));
  EMBER_RETURN_IF_ERROR(f.Int("conv_kernel_size", &c.conv_kernel_size, false));
  EMBER_RETURN_IF_ERROR(f.Double("rms_norm_eps", &c.rms_norm_eps, false));
  EMBER_RETURN_IF_ERROR(f.Int("out_hidden_size", &c.out_hidden_size, false));
  std::string act = "gelu";
  EMBER_RETURN_IF_ERROR(f.String("hidden_act", &act, false));
  if (act != "gelu") {
    return InvalidArgument(fmt::format("{}: hidden_act '{}' is not supported (the encoder implements 'gelu', "
                                       "the exact erf GELU)", where, act));
  }
  f.Ignore({"initializer_range", "dtype", "torch_dtype", "transformers_version", "architectures"});
  return f.RejectUnknown();
}

}  // namespace

Expected<MuseSparkAudioConfig> MuseSparkAudioConfig::FromJson(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object()) return InvalidArgument(where + ": expected a JSON object");
  MuseSparkAudioConfig c;
  const std::string model_type = json.value("model_type", std::string());
  if (model_type == "muse_spark") {
    if (!json.contains("audio_config") || !json["audio_config"].is_object()) {
      return InvalidArgument(where + ": a muse_spark config without an audio_config object has no audio tower");
    }
    EMBER_RETURN_IF_ERROR(ParseAudio(json["audio_config"], where + ": audio_config", c));
    if (json.contains("text_config") && json["text_config"].is_object()) {
      const auto& text = json["text_config"];
      if (text.contains("rms_norm_eps") && text["rms_norm_eps"].is_number()) {
        c.embed_norm_eps = text["rms_norm_eps"].get<double>();
      }
      if (text.contains("hidden_size") && text["hidden_size"].is_number_integer() &&
          text["hidden_size"].get<int64_t>() != c.out_hidden_size) {
        return InvalidArgument(fmt::format("{}: audio_config.out_hidden_size {} != text_config.hidden_size {}",
                                           where, c.out_hidden_size, text["hidden_size"].get<int64_t>()));
      }
    }
    if (json.contains("audio_token_id") && json["audio_token_id"].is_number_integer()) {
      c.audio_token_id = json["audio_token_id"].get<int64_t>();
    }
  } else if (model_type == "muse_spark_audio") {
    EMBER_RETURN_IF_ERROR(ParseAudio(json, where, c));
  } else {
    return InvalidArgument(fmt::format("{}: model_type is '{}', expected 'muse_spark' or 'muse_spark_audio'",
                                       where, model_type));
  }
  EMBER_RETURN_IF_ERROR(c.Validate());
  return c;
}

Expected<MuseSparkAudioConfig> MuseSparkAudioConfig::FromFile(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const nlohmann::json json, encoder_ops::ReadJsonFile(path));
  return FromJson(json, path);
}

// ---- weights ------------------------------------------------------------------------------------

struct MuseSparkAudioEncoder::Block {
  std::vector<float> conv_weight;  // [C, K] (the checkpoint's [C, 1, K])
  std::vector<float> conv_bias, norm_gain, fc1_bias, fc2_bias;
  Linear fc1, fc2;                 // [F, C], [C, F]
};

struct MuseSparkAudioEncoder::Stage {
  Linear patch_proj;               // [C, C_in * p]
  std::vector<float> patch_bias, patch_gain;
  std::vector<Block> blocks;
};

MuseSparkAudioEncoder::~MuseSparkAudioEncoder() = default;

int64_t MuseSparkAudioEncoder::NumLinears() const {
  int64_t n = 1;  // proj
  for (int64_t depth : config_.depths) n += 1 + 2 * depth;
  return n;
}

Status MuseSparkAudioEncoder::Bind(const std::string& prefix, const EncoderWeightOptions& weights) {
  const MuseSparkAudioConfig& c = config_;
  WeightSource& w = *source_;
  encoder_ops::LinearLoader linears(w, weights, NumLinears());
  int64_t in = 1;  // stage 0 folds the mono waveform
  stages_.resize(c.num_stages());
  for (int64_t i = 0; i < c.num_stages(); ++i) {
    const int64_t h = c.hidden_sizes[i], f = c.IntermediateSize(i);
    const std::string p = fmt::format("{}layers.{}.", prefix, i);
    Stage& s = stages_[i];
    EMBER_ASSIGN_OR_RETURN(s.patch_proj, linears.Load(p + "patch_embedder.proj.weight", h, in * c.patch_sizes[i]));
    EMBER_ASSIGN_OR_RETURN(s.patch_bias, RequireVectorF32(w, p + "patch_embedder.proj.bias", h));
    EMBER_ASSIGN_OR_RETURN(s.patch_gain, RequireVectorF32(w, p + "patch_embedder.norm.weight", h));
    s.blocks.resize(c.depths[i]);
    for (int64_t j = 0; j < c.depths[i]; ++j) {
      const std::string b = fmt::format("{}conv_blocks.{}.", p, j);
      Block& k = s.blocks[j];
      EMBER_ASSIGN_OR_RETURN(k.conv_weight, RequireF32(w, b + "conv.weight", Shape{h, 1, c.conv_kernel_size}));
      EMBER_ASSIGN_OR_RETURN(k.conv_bias, RequireVectorF32(w, b + "conv.bias", h));
      EMBER_ASSIGN_OR_RETURN(k.norm_gain, RequireVectorF32(w, b + "norm.weight", h));
      EMBER_ASSIGN_OR_RETURN(k.fc1, linears.Load(b + "mlp.fc1.weight", f, h));
      EMBER_ASSIGN_OR_RETURN(k.fc1_bias, RequireVectorF32(w, b + "mlp.fc1.bias", f));
      EMBER_ASSIGN_OR_RETURN(k.fc2, linears.Load(b + "mlp.fc2.weight", h, f));
      EMBER_ASSIGN_OR_RETURN(k.fc2_bias, RequireVectorF32(w, b + "mlp.fc2.bias", h));
    }
    in = h;
  }
  EMBER_ASSIGN_OR_RETURN(norm_gain_, RequireVectorF32(w, prefix + "norm.weight", in));
  EMBER_ASSIGN_OR_RETURN(proj_, linears.Load(prefix + "proj.weight", c.out_hidden_size, in));
  EMBER_ASSIGN_OR_RETURN(proj_bias_, RequireVectorF32(w, prefix + "proj.bias", c.out_hidden_size));
  EMBER_ASSIGN_OR_RETURN(post_proj_gain_, RequireVectorF32(w, prefix + "post_proj_norm.weight", c.out_hidden_size));
  weight_report_ = linears.report();
  return Status::Ok();
}

Expected<std::unique_ptr<MuseSparkAudioEncoder>> MuseSparkAudioEncoder::Load(const MuseSparkAudioConfig& config,
                                                                               std::unique_ptr<WeightSource> source,
                                                                               const std::string& prefix,
                                                                               const EncoderWeightOptions& weights) {
  EMBER_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<MuseSparkAudioEncoder> encoder(new MuseSparkAudioEncoder());
  encoder->config_ = config;
  encoder->source_ = std::move(source);
  EMBER_RETURN_IF_ERROR(encoder->Bind(prefix, weights));
  return encoder;
}

Expected<std::unique_ptr<MuseSparkAudioEncoder>> MuseSparkAudioEncoder::LoadDirectory(
    const std::string& dir, const EncoderWeightOptions& weights) {
  EMBER_ASSIGN_OR_RETURN(MuseSparkAudioConfig config, MuseSparkAudioConfig::FromFile(dir + "/config.json"));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source, encoder_ops::OpenDirectoryWeights(dir));
  return Load(config, std::move(source), "model.audio_tower.", weights);
}

// ---- forward ------------------------------------------------------------------------------------

namespace {

ThreadPool& Pool() { return ThreadPool::Global(); }

// A linear plus its stored bias.
void ApplyLinear(const float* x, int64_t rows, const Linear& w, const std::vector<float>& bias, float* y) {
  encoder_ops::ApplyLinear(x, rows, w, bias.data(), y);
}

}  // namespace

Expected<AudioEncoding> MuseSparkAudioEncoder::Encode(const float* samples, int64_t num_samples, int64_t chunk_tokens,
                                                      std::vector<std::vector<float>>* stage_outputs) const {
  const MuseSparkAudioConfig& c = config_;
  if (num_samples <= 0) return InvalidArgument("audio clip has no samples");
  if (chunk_tokens < 1) return InvalidArgument(fmt::format("chunk_tokens {} must be >= 1", chunk_tokens));
  const int64_t spt = c.SamplesPerToken();
  const int64_t tokens = (num_samples + spt - 1) / spt;
  const int64_t kpad = c.conv_kernel_size - 1;  // left_pad = (kernel - 1) * dilation + 1 - stride
  const int64_t out_h = c.out_hidden_size;
  const int64_t ns = c.num_stages();
  chunk_tokens = std::min(chunk_tokens, tokens);

  // Scratch for one chunk: the stage input/output `x`, a padded conv input `pad`, the conv output
  // `conv` (normed in place), the MLP's intermediate `mid`.
  int64_t max_x = chunk_tokens * spt, max_pad = 0, max_conv = 0, max_mid = 0;
  for (int64_t i = 0; i < ns; ++i) {
    const int64_t rows = chunk_tokens * c.RowsPerToken(i), h = c.hidden_sizes[i];
    max_x = std::max(max_x, rows * h);
    max_pad = std::max(max_pad, (rows + kpad) * h);
    max_conv = std::max(max_conv, rows * h);
    max_mid = std::max(max_mid, rows * c.IntermediateSize(i));
  }
  max_x = std::max(max_x, chunk_tokens * out_h);
  std::vector<float> x(max_x), y(max_x), pad(max_pad), conv(max_conv), mid(std::max(max_mid, chunk_tokens * out_h));
  // Each conv block's carried state: the last kpad rows of its input, zeros before the clip.
  std::vector<std::vector<float>> carry;
  for (int64_t i = 0; i < ns; ++i) {
    for (size_t j = 0; j < stages_[i].blocks.size(); ++j) carry.emplace_back(kpad * c.hidden_sizes[i], 0.0f);
  }
  if (stage_outputs != nullptr) {
    stage_outputs->assign(ns, {});
    for (int64_t i = 0; i < ns; ++i) stage_outputs->at(i).reserve(tokens * c.RowsPerToken(i) * c.hidden_sizes[i]);
  }

  AudioEncoding result;
  result.tokens = tokens;
  result.hidden.resize(tokens * out_h);
  result.features.resize(tokens * out_h);

  for (int64_t t0 = 0; t0 < tokens; t0 += chunk_tokens) {
    const int64_t nt = std::min(chunk_tokens, tokens - t0);
    // The chunk's samples, zero-padded past the clip's end (the feature extractor's right padding).
    const int64_t first = t0 * spt, count = std::min(nt * spt, num_samples - first);
    std::memcpy(x.data(), samples + first, count * sizeof(float));
    std::fill(x.data() + count, x.data() + nt * spt, 0.0f);
    int64_t rows = nt * spt;
    size_t block_index = 0;
    for (int64_t i = 0; i < ns; ++i) {
      const Stage& s = stages_[i];
      const int64_t h = c.hidden_sizes[i], f = c.IntermediateSize(i), p = c.patch_sizes[i];
      // Patchify: [rows, C] row-major read as [rows / p, p * C] (transformers' reshape), then
      // Linear + RMSNorm.
      rows /= p;
      ApplyLinear(x.data(), rows, s.patch_proj, s.patch_bias, y.data());
      RmsNorm(y.data(), rows, h, c.rms_norm_eps, s.patch_gain.data(), x.data());

      for (const Block& b : s.blocks) {
        // Depthwise causal conv over [carry; x]: out[t, ch] = bias[ch] + sum_k w[ch, k] pad[t + k, ch].
        std::vector<float>& state = carry[block_index++];
        if (kpad > 0) std::memcpy(pad.data(), state.data(), kpad * h * sizeof(float));
        std::memcpy(pad.data() + kpad * h, x.data(), rows * h * sizeof(float));
        const int64_t kk = c.conv_kernel_size;
        const float* wt = b.conv_weight.data();
        const float* bias = b.conv_bias.data();
        Pool().ParallelFor(rows, [&](int64_t begin, int64_t end) {
          for (int64_t t = begin; t < end; ++t) {
            float* o = conv.data() + t * h;
            for (int64_t ch = 0; ch < h; ++ch) o[ch] = 0.0f;
            for (int64_t k = 0; k < kk; ++k) {
              const float* in = pad.data() + (t + k) * h;
              for (int64_t ch = 0; ch < h; ++ch) o[ch] += wt[ch * kk + k] * in[ch];
            }
            for (int64_t ch = 0; ch < h; ++ch) o[ch] += bias[ch];
          }
        }, RowChunk(h * kk));
        if (kpad > 0) std::memcpy(state.data(), pad.data() + rows * h, kpad * h * sizeof(float));
        // x += fc2(gelu(fc1(norm(conv))))
        RmsNorm(conv.data(), rows, h, c.rms_norm_eps, b.norm_gain.data(), conv.data());
        ApplyLinear(conv.data(), rows, b.fc1, b.fc1_bias, mid.data());
        GeluErf(mid.data(), rows * f);
        ApplyLinear(mid.data(), rows, b.fc2, b.fc2_bias, y.data());
        kernels::AddInPlace(x.data(), y.data(), rows * h);
      }
      if (stage_outputs != nullptr) {
        auto& dst = stage_outputs->at(i);
        dst.insert(dst.end(), x.data(), x.data() + rows * h);
      }
    }
    // Head: norm, proj, post_proj_norm, then the text embedding norm (get_audio_features).
    RmsNorm(x.data(), nt, c.hidden_sizes[ns - 1], c.rms_norm_eps, norm_gain_.data(), x.data());
    ApplyLinear(x.data(), nt, proj_, proj_bias_, mid.data());
    float* hidden = result.hidden.data() + t0 * out_h;
    RmsNorm(mid.data(), nt, out_h, c.rms_norm_eps, post_proj_gain_.data(), hidden);
    RmsNorm(hidden, nt, out_h, c.embed_norm_eps, nullptr, result.features.data() + t0 * out_h);
  }
  return result;
}

}  // namespace ember
