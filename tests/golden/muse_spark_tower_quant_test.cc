// Muse Spark's multimodal towers with their linears converted at load (EncoderWeightOptions: what
// `ember serve --quantization F --quantize-dense` asks for), on the committed tiny fixtures
// (tests/golden/muse_spark_vision, tests/golden/muse_spark_audio):
//  - a converted tower computes with the dequantized weights: it equals the same tower loaded from
//    a source whose matrices are the f32 dequantized values of the same conversion;
//  - its features stay near transformers' bf16-weight reference;
//  - the load reports which linears it converted and which it kept as stored.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "formats/checkpoint.h"
#include "model/audio/muse_spark_audio.h"
#include "model/encoder_ops.h"
#include "model/tensor_parallel.h"
#include "model/vision/muse_spark_vision.h"
#include "model/weight_source.h"
#include "quant/block_scaled_dot.h"
#include "support/golden_logits.h"
#include "support/source_dir.h"

namespace ember {
namespace {

using quant::Mxfp4ScaleRounding;
using quant::WeightFormat;
using test::WorstRowRelative;

const std::string kVisionDir = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark_vision";
const std::string kAudioDir = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark_audio";

struct Format {
  const char* name;
  WeightFormat format;
  Mxfp4ScaleRounding rounding = Mxfp4ScaleRounding::kEven;
};
const Format kFormats[] = {{"nvfp4", WeightFormat::kNvfp4}, {"mxfp4", WeightFormat::kMxfp4}, {"fp8", WeightFormat::kFp8E4m3}};

EncoderWeightOptions Options(const Format& f) {
  EncoderWeightOptions o;
  o.quantization = f.format;
  o.mxfp4_rounding = f.rounding;
  return o;
}

// The checkpoint's tensors, some of them replaced by f32 matrices this source owns.
class OverlayWeightSource : public WeightSource {
 public:
  explicit OverlayWeightSource(std::shared_ptr<const Checkpoint> checkpoint)
      : base_(MakeCheckpointWeightSource(checkpoint, "fixture")) {}

  void Replace(const std::string& name, const Shape& shape, std::vector<float> values) {
    overlay_[name] = {shape, std::move(values)};
  }
  Expected<TensorView> Require(std::string_view name, std::initializer_list<DType> allowed,
                               const Shape& shape) override {
    const auto it = overlay_.find(std::string(name));
    if (it == overlay_.end()) return base_->Require(name, allowed, shape);
    if (std::find(allowed.begin(), allowed.end(), DType::kF32) == allowed.end() || !(it->second.shape == shape)) {
      return InvalidArgument(fmt::format("{}: the overlay's f32 {} does not fit", name, it->second.shape.ToString()));
    }
    return TensorView{DType::kF32, it->second.shape, it->second.values.data()};
  }
  bool Has(std::string_view name) const override { return overlay_.count(std::string(name)) > 0 || base_->Has(name); }
  std::string Describe() const override { return "fixture with dequantized linears"; }

 private:
  struct Matrix {
    Shape shape;
    std::vector<float> values;
  };
  std::unique_ptr<WeightSource> base_;
  std::map<std::string, Matrix> overlay_;
};

std::shared_ptr<const Checkpoint> OpenFixture(const std::string& dir) {
  auto opened = Checkpoint::OpenDirectory(dir);
  EXPECT_TRUE(opened.ok()) << opened.status().ToString();
  return opened.ok() ? std::shared_ptr<const Checkpoint>(std::move(*opened)) : nullptr;
}

// The tower's linear weights: its 2-D tensors (vectors are norms and biases, the audio convs are
// 3-D) other than the vision position table.
std::vector<std::string> TowerLinears(const Checkpoint& checkpoint, const std::vector<std::string>& prefixes) {
  std::vector<std::string> names;
  for (const std::string& name : checkpoint.Names()) {
    const bool in_tower = std::any_of(prefixes.begin(), prefixes.end(),
                                      [&](const std::string& p) { return name.rfind(p, 0) == 0; });
    if (in_tower && checkpoint.Get(name)->shape.rank() == 2 && name.find("position_embedding_table") == std::string::npos) {
      names.push_back(name);
    }
  }
  return names;
}

// f32 values of `stored` after the conversion the tower makes (QuantizeLinear, whole matrix), read
// back through the block-scaled dequantizer (quant::DequantizeRow).
std::vector<float> Dequantized(const TensorView& stored, const Format& f) {
  auto q = QuantizeLinear(stored, f.format, f.rounding, MatrixSplit::Whole());
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  if (!q.ok()) return {};
  const int64_t rows = stored.shape[0], cols = stored.shape[1];
  std::vector<float> values(rows * cols);
  for (int64_t r = 0; r < rows; ++r) EXPECT_TRUE(q->ReadRow(r, values.data() + r * cols).ok());
  return values;
}

// The fixture with every tower linear the format can convert replaced by its dequantized values
// (those it cannot stay bf16, as the converted tower keeps them), except `skip`.
std::unique_ptr<WeightSource> DequantizedFixture(const std::string& dir, const std::vector<std::string>& prefixes,
                                                 const Format& f, const std::string& skip = "") {
  std::shared_ptr<const Checkpoint> checkpoint = OpenFixture(dir);
  if (checkpoint == nullptr) return nullptr;
  auto source = std::make_unique<OverlayWeightSource>(checkpoint);
  for (const std::string& name : TowerLinears(*checkpoint, prefixes)) {
    const TensorView stored = *checkpoint->Get(name);
    if (name == skip || stored.shape[1] % encoder_ops::QuantizableInMultiple(f.format) != 0) continue;
    source->Replace(name, stored.shape, Dequantized(stored, f));
  }
  return source;
}

// The fixture as stored.
std::unique_ptr<WeightSource> StoredFixture(const std::string& dir) {
  auto source = encoder_ops::OpenDirectoryWeights(dir);
  EXPECT_TRUE(source.ok()) << source.status().ToString();
  return source.ok() ? std::move(*source) : nullptr;
}

// ---- vision -------------------------------------------------------------------------------------

const std::vector<std::string> kVisionPrefixes = {"model.vision_tower.", "model.vision_adapter.",
                                                  "model.vision_projection."};

struct VisionInput {
  std::string kind;
  std::vector<float> pixels;
  std::vector<VisionGrid> grids;
};

std::vector<VisionInput> VisionInputs() {
  std::ifstream in(kVisionDir + "/golden.json");
  const nlohmann::json g = nlohmann::json::parse(in);
  std::vector<VisionInput> inputs;
  for (const std::string kind : {"image", "video"}) {
    VisionInput input{kind, test::ReadFloats(kVisionDir + (kind == "image" ? "/pixel_values.f32" : "/pixel_values_videos.f32")), {}};
    for (const auto& r : g[kind + "_grid_thw"]) input.grids.push_back({r[0].get<int64_t>(), r[1].get<int64_t>(), r[2].get<int64_t>()});
    inputs.push_back(std::move(input));
  }
  return inputs;
}

VisionEncoding EncodeVision(const MuseSparkVisionEncoder& encoder, const VisionInput& input) {
  const int64_t patches = static_cast<int64_t>(input.pixels.size()) / encoder.config().PatchDim();
  auto out = encoder.Encode(input.pixels.data(), patches, input.grids);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(*out) : VisionEncoding{};
}

std::unique_ptr<MuseSparkVisionEncoder> LoadVision(std::unique_ptr<WeightSource> source,
                                                   const EncoderWeightOptions& options = {}) {
  auto config = MuseSparkVisionConfig::FromFile(kVisionDir + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  if (!config.ok() || source == nullptr) return nullptr;
  auto encoder = MuseSparkVisionEncoder::Load(*config, std::move(source), "model.", options);
  EXPECT_TRUE(encoder.ok()) << encoder.status().ToString();
  return encoder.ok() ? std::move(*encoder) : nullptr;
}

// Worst row-relative error of the converted tower against the dequantized-weights one, over the
// images' and the video's last_hidden_state and features.
float VisionAgainstDequantized(const MuseSparkVisionEncoder& converted, const MuseSparkVisionEncoder& dequantized) {
  const MuseSparkVisionConfig& c = converted.config();
  float worst = 0.0f;
  for (const VisionInput& input : VisionInputs()) {
    const VisionEncoding a = EncodeVision(converted, input), b = EncodeVision(dequantized, input);
    worst = std::max({worst, WorstRowRelative(a.hidden, b.hidden, c.out_hidden_size),
                      WorstRowRelative(a.features, b.features, c.text_hidden_size)});
  }
  return worst;
}

// ---- audio --------------------------------------------------------------------------------------

const std::vector<std::string> kAudioPrefixes = {"model.audio_tower."};

std::unique_ptr<MuseSparkAudioEncoder> LoadAudio(std::unique_ptr<WeightSource> source,
                                                 const EncoderWeightOptions& options = {}) {
  auto config = MuseSparkAudioConfig::FromFile(kAudioDir + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  if (!config.ok() || source == nullptr) return nullptr;
  auto encoder = MuseSparkAudioEncoder::Load(*config, std::move(source), "model.audio_tower.", options);
  EXPECT_TRUE(encoder.ok()) << encoder.status().ToString();
  return encoder.ok() ? std::move(*encoder) : nullptr;
}

AudioEncoding EncodeAudio(const MuseSparkAudioEncoder& encoder) {
  const std::vector<float> wave = test::ReadFloats(kAudioDir + "/waveform.f32");
  auto out = encoder.Encode(wave.data(), static_cast<int64_t>(wave.size()));
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(*out) : AudioEncoding{};
}

float AudioAgainstDequantized(const MuseSparkAudioEncoder& converted, const MuseSparkAudioEncoder& dequantized) {
  const AudioEncoding a = EncodeAudio(converted), b = EncodeAudio(dequantized);
  const int64_t h = converted.config().out_hidden_size;
  return std::max(WorstRowRelative(a.hidden, b.hidden, h), WorstRowRelative(a.features, b.features, h));
}

// ||ours - ref|| / ||ref|| over all values: how far the features moved as a whole (a few-bit
// format's worst row-relative error is dominated by single outlying elements).
double RelativeRms(const std::vector<float>& ours, const std::vector<float>& ref) {
  EXPECT_EQ(ours.size(), ref.size());
  double err = 0, norm = 0;
  for (size_t i = 0; i < std::min(ours.size(), ref.size()); ++i) {
    const double d = static_cast<double>(ours[i]) - ref[i];
    err += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(err / norm);
}

// What a block-scaled matmul multiplies the weights by: FP4 rounds each activation row to int8 with
// one f32 scale per 16 elements (quant/block_scaled_dot.h), FP8 takes the f32 activations as they are.
std::vector<float> KernelActivations(const std::vector<float>& x, int64_t k, WeightFormat format) {
  if (!quant::FormatTraits(format).int8_activations) return x;
  const quant::ActivationLayout layout = quant::Int8ActivationLayout(k);
  std::unique_ptr<uint8_t, decltype(&std::free)> buffer(
      static_cast<uint8_t*>(std::aligned_alloc(64, (layout.bytes + 63) / 64 * 64)), &std::free);
  std::vector<float> rounded(x.size());
  for (size_t r = 0; r < x.size() / k; ++r) {
    quant::QuantizeActivationInt8(x.data() + r * k, k, buffer.get());
    const auto* q = reinterpret_cast<const int8_t*>(buffer.get() + layout.q);
    const auto* scale = reinterpret_cast<const float*>(buffer.get() + layout.scale);
    for (int64_t i = 0; i < k; ++i) rounded[r * k + i] = static_cast<float>(q[i]) * scale[i / 16];
  }
  return rounded;
}

// ---- (a) a converted linear, and a converted tower, compute with the dequantized weights --------

// Every linear of both fixtures, converted by the towers' loader: y = x_hat . dequant(W)^T up to f32
// summation order (worst 2.2e-7 row-relative measured), x_hat being the activations the format's
// kernel multiplies (above). This is the exact statement the towers' tests below rest on.
TEST(MuseSparkTowerQuantTest, ConvertedLinearsComputeWithTheDequantizedWeights) {
  for (const Format& f : kFormats) {
    for (const auto& [dir, prefixes] : {std::pair{kVisionDir, kVisionPrefixes}, std::pair{kAudioDir, kAudioPrefixes}}) {
      std::shared_ptr<const Checkpoint> checkpoint = OpenFixture(dir);
      ASSERT_NE(checkpoint, nullptr);
      std::unique_ptr<WeightSource> source = MakeCheckpointWeightSource(checkpoint, "fixture");
      const EncoderWeightOptions options = Options(f);
      const std::vector<std::string> names = TowerLinears(*checkpoint, prefixes);
      encoder_ops::LinearLoader loader(*source, options, static_cast<int64_t>(names.size()));
      float worst = 0.0f;
      for (const std::string& name : names) {
        const TensorView stored = *checkpoint->Get(name);
        const int64_t out = stored.shape[0], in = stored.shape[1], m = 5;
        auto linear = loader.Load(name, out, in);
        ASSERT_TRUE(linear.ok()) << linear.status().ToString();
        if (in % encoder_ops::QuantizableInMultiple(f.format) != 0) continue;  // kept as stored
        std::vector<float> x(m * in), y(m * out), y_ref(m * out);
        for (int64_t i = 0; i < m * in; ++i) x[i] = std::sin(0.7f * i + 0.3f) * (1.0f + (i % 7) * 0.25f);
        linear->Apply(x.data(), m, y.data());
        const std::vector<float> w = Dequantized(stored, f), x_hat = KernelActivations(x, in, f.format);
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t j = 0; j < out; ++j) {
            double sum = 0;
            for (int64_t k = 0; k < in; ++k) sum += static_cast<double>(x_hat[r * in + k]) * w[j * in + k];
            y_ref[r * out + j] = static_cast<float>(sum);
          }
        }
        const float e = WorstRowRelative(y, y_ref, out);
        EXPECT_LT(e, 1e-5f) << f.name << " " << name;
        worst = std::max(worst, e);
      }
      EXPECT_EQ(loader.report().linears, static_cast<int64_t>(names.size()));
      std::printf("[ %s ] %s linears against x_hat . dequant(W): worst row-relative %.3g\n", f.name,
                  dir == kVisionDir ? "vision" : "audio", worst);
    }
  }
}

// The converted tower against the same tower loaded from f32 dequantized weights, worst row-relative
// over last_hidden_state and features. FP8 multiplies f32 activations: only the summation order
// differs (7.1e-7 vision, 5.7e-7 audio measured), bound 1e-5. FP4 rounds every linear's
// activations to int8 (what the converted tower computes and the f32 one does not), 2.3e-2 vision
// (nvfp4 and mxfp4 alike), 2.7e-2 / 1.8e-2 audio (nvfp4 / mxfp4) through the random fixtures' 6 to
// 12 linears deep; bound 4e-2. Leaving one linear out of the dequantized reference moves it by
// 2.5e-2 .. 6e-2 (fp8) and 5e-2 .. 3e-1 (fp4); see ABrokenConversionFails.
float ExactBound(const Format& f) { return f.format == WeightFormat::kFp8E4m3 ? 1e-5f : 4e-2f; }

TEST(MuseSparkTowerQuantTest, VisionEqualsTheDequantizedTower) {
  for (const Format& f : kFormats) {
    auto converted = LoadVision(StoredFixture(kVisionDir), Options(f));
    auto dequantized = LoadVision(DequantizedFixture(kVisionDir, kVisionPrefixes, f));
    ASSERT_TRUE(converted && dequantized);
    const float e = VisionAgainstDequantized(*converted, *dequantized);
    EXPECT_LT(e, ExactBound(f)) << f.name;
    std::printf("[ %s ] vision tower against the dequantized-weights tower: %.3g\n", f.name, e);
  }
}

TEST(MuseSparkTowerQuantTest, AudioEqualsTheDequantizedTower) {
  for (const Format& f : kFormats) {
    auto converted = LoadAudio(StoredFixture(kAudioDir), Options(f));
    auto dequantized = LoadAudio(DequantizedFixture(kAudioDir, kAudioPrefixes, f));
    ASSERT_TRUE(converted && dequantized);
    const float e = AudioAgainstDequantized(*converted, *dequantized);
    EXPECT_LT(e, ExactBound(f)) << f.name;
    std::printf("[ %s ] audio tower against the dequantized-weights tower: %.3g\n", f.name, e);
  }
}

// (c) The comparison above catches a conversion that is not the one the tower claims: MXFP4 scales
// rounded by the other rule (the converted tower "even", the reference "floor") and one linear
// (a block's fc1, the adapter's fc1) missing from the conversion.
TEST(MuseSparkTowerQuantTest, ABrokenConversionFails) {
  const Format even = kFormats[1], floor_rule{"mxfp4-floor", WeightFormat::kMxfp4, Mxfp4ScaleRounding::kFloor};
  auto vision = LoadVision(StoredFixture(kVisionDir), Options(even));
  auto vision_floor = LoadVision(DequantizedFixture(kVisionDir, kVisionPrefixes, floor_rule));
  ASSERT_TRUE(vision && vision_floor);
  EXPECT_GT(VisionAgainstDequantized(*vision, *vision_floor), 5 * ExactBound(even));  // 0.36 measured
  auto audio = LoadAudio(StoredFixture(kAudioDir), Options(even));
  auto audio_floor = LoadAudio(DequantizedFixture(kAudioDir, kAudioPrefixes, floor_rule));
  ASSERT_TRUE(audio && audio_floor);
  EXPECT_GT(AudioAgainstDequantized(*audio, *audio_floor), 3 * ExactBound(even));  // 0.22 measured
  for (const Format& f : kFormats) {
    auto converted = LoadVision(StoredFixture(kVisionDir), Options(f));
    auto skipped = LoadVision(DequantizedFixture(kVisionDir, kVisionPrefixes, f, "model.vision_adapter.fc1.weight"));
    ASSERT_TRUE(converted && skipped);
    EXPECT_GT(VisionAgainstDequantized(*converted, *skipped), ExactBound(f)) << f.name;  // >= 6.3e-2 measured
    auto audio_converted = LoadAudio(StoredFixture(kAudioDir), Options(f));
    auto audio_skipped = LoadAudio(
        DequantizedFixture(kAudioDir, kAudioPrefixes, f, "model.audio_tower.layers.1.conv_blocks.0.mlp.fc2.weight"));
    ASSERT_TRUE(audio_converted && audio_skipped);
    EXPECT_GT(AudioAgainstDequantized(*audio_converted, *audio_skipped), ExactBound(f)) << f.name;  // >= 2.4e-2
  }
}

// ---- (b) the converted towers stay near the bf16 reference --------------------------------------

// Against transformers' features (bf16 weights, f32): relative RMS error / worst row-relative, on
// this fixture's random towers, which amplify the per-linear weight error (the patch embedding
// alone: 2.7e-2 fp8, 8.9e-2 nvfp4, 1.1e-1 mxfp4 relative RMS):
//             vision (images, video)   audio
//   nvfp4     0.31 / 0.43              0.28 / 0.35
//   mxfp4     0.30 / 0.83              0.22 / 0.34
//   fp8       0.091 / 0.19             0.089 / 0.15
// Bounds on the relative RMS: 0.45 for the FP4 formats, 0.15 for FP8 (features of unrelated
// inputs are ~1.4 apart); the bf16 towers are within 1e-6 (the golden tests).
double ReferenceBound(const Format& f) { return f.format == WeightFormat::kFp8E4m3 ? 0.15 : 0.45; }

TEST(MuseSparkTowerQuantTest, ConvertedTowersStayNearTheReference) {
  for (const Format& f : kFormats) {
    auto vision = LoadVision(StoredFixture(kVisionDir), Options(f));
    auto audio = LoadAudio(StoredFixture(kAudioDir), Options(f));
    ASSERT_TRUE(vision && audio);
    double vision_rms = 0;
    float vision_worst = 0.0f;
    for (const VisionInput& input : VisionInputs()) {
      const std::vector<float> features = EncodeVision(*vision, input).features;
      const std::vector<float> ref = test::ReadFloats(kVisionDir + "/" + input.kind + "_features.f32");
      vision_rms = std::max(vision_rms, RelativeRms(features, ref));
      vision_worst = std::max(vision_worst, WorstRowRelative(features, ref, vision->config().text_hidden_size));
    }
    const std::vector<float> audio_features = EncodeAudio(*audio).features;
    const std::vector<float> audio_ref = test::ReadFloats(kAudioDir + "/features.f32");
    const double audio_rms = RelativeRms(audio_features, audio_ref);
    EXPECT_LT(vision_rms, ReferenceBound(f)) << f.name;
    EXPECT_LT(audio_rms, ReferenceBound(f)) << f.name;
    std::printf("[ %s ] features against the bf16 reference: vision %.3g rel RMS (worst row %.3g), audio %.3g "
                "(worst row %.3g)\n", f.name, vision_rms, vision_worst, audio_rms,
                WorstRowRelative(audio_features, audio_ref, audio->config().out_hidden_size));
  }
}

// ---- the load's report ----------------------------------------------------------------------------

// What each format converts of the fixtures: every input width there is a multiple of 16 but the
// adapter fc2 and projection (48) for MXFP4's 32, and the audio pyramid's narrow linears.
TEST(MuseSparkTowerQuantTest, ReportsConvertedAndKeptLinears) {
  auto stored = LoadVision(StoredFixture(kVisionDir));
  ASSERT_TRUE(stored);
  EXPECT_FALSE(stored->weight_report().format);
  EXPECT_EQ(stored->weight_report().linears, 28);
  EXPECT_EQ(stored->weight_report().Describe(), "28 linears as stored (bf16/f32)");
  for (const Format& f : kFormats) {
    auto vision = LoadVision(StoredFixture(kVisionDir), Options(f));
    auto audio = LoadAudio(StoredFixture(kAudioDir), Options(f));
    ASSERT_TRUE(vision && audio);
    const EncoderWeightReport& v = vision->weight_report();
    const EncoderWeightReport& a = audio->weight_report();
    EXPECT_EQ(v.format, f.format);
    EXPECT_EQ(v.linears, vision->NumLinears());
    EXPECT_EQ(a.linears, audio->NumLinears());
    EXPECT_EQ(v.converted + static_cast<int64_t>(v.kept.size()), v.linears);
    EXPECT_EQ(a.converted + static_cast<int64_t>(a.kept.size()), a.linears);
    if (f.format == WeightFormat::kMxfp4) {
      EXPECT_EQ(v.kept, (std::vector<std::string>{"model.vision_adapter.fc2.weight [48, 48]",
                                                   "model.vision_projection.weight [64, 48]"}));
      EXPECT_EQ(a.converted, 12);  // kept: stages 0-2's patch projections (16, 48, 80) and fc1s (8, 16, 24)
    } else {
      EXPECT_TRUE(v.kept.empty()) << v.Describe();
      EXPECT_EQ(a.converted, 17);  // kept: stages 0 and 2's fc1s (8, 24 wide)
    }
    std::printf("[ %s ] vision: %s\n[ %s ] audio: %s\n", f.name, v.Describe().c_str(), f.name, a.Describe().c_str());
  }
}

// The released patch size (14: a 2 * 3 * 14 * 14 = 1176-wide patch embedding, a multiple of 8
// only) keeps the patch embedding as stored under every format, and the tower still runs.
TEST(MuseSparkTowerQuantTest, ReleasedPatchEmbeddingStaysAsStored) {
  MuseSparkVisionConfig c;
  c.patch_size = 14;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.intermediate_size = 128;
  c.window_layers = {true, false};
  c.pos_emb_height = c.pos_emb_width = 4;
  c.out_hidden_size = 256;
  c.projector_hidden_size = 64;
  c.text_hidden_size = 64;
  ASSERT_EQ(c.PatchDim(), 1176);
  for (const Format& f : kFormats) {
    auto encoder = MuseSparkVisionEncoder::Load(c, std::make_unique<RandomWeightSource>(3, 0.1f), "model.", Options(f));
    ASSERT_TRUE(encoder.ok()) << encoder.status().ToString();
    const EncoderWeightReport& report = (*encoder)->weight_report();
    EXPECT_EQ(report.kept, (std::vector<std::string>{"model.vision_tower.patch_embedder.patch_embedding.weight [64, 1176]"}))
        << f.name;
    EXPECT_EQ(report.converted, (*encoder)->NumLinears() - 1);
    std::vector<float> pixels(4 * c.PatchDim());
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = std::cos(0.1f * static_cast<float>(i));
    auto out = (*encoder)->Encode(pixels.data(), 4, {{1, 2, 2}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    for (float v : out->features) ASSERT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace ember
