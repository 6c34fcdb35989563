// Quantized expert checkpoints written by the producers' own libraries (tests/golden/quant,
// scripts/make_quant_fixtures.py): ember reads each layout and dequantizes it exactly as the
// producer's reference does, and its load-time quantizer writes the producer's bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "formats/checkpoint.h"
#include "model/quant_scheme.h"
#include "model/quantized_weights.h"
#include "support/source_dir.h"

namespace ember {
namespace {

const std::string kPrefix = "model.language_model.layers.";
constexpr int64_t kExperts = 2, kHm = 64, kInter = 32;

std::string FixtureDir(const std::string& name) { return std::string(EMBER_SOURCE_DIR) + "/tests/golden/quant/" + name; }

ExpertTensor GateUp(int layer) { return {kPrefix + std::to_string(layer) + ".mlp.experts", "gate_up_proj", kExperts, 2 * kInter, kHm, 2}; }
ExpertTensor Down(int layer) { return {kPrefix + std::to_string(layer) + ".mlp.experts", "down_proj", kExperts, kHm, kInter, 1}; }

struct Fixture {
  QuantScheme scheme;
  std::shared_ptr<Checkpoint> model, reference;
  std::unique_ptr<WeightSource> source;
};

Fixture Open(const std::string& name) {
  Fixture f;
  auto scheme = ReadQuantScheme(FixtureDir(name));
  EXPECT_TRUE(scheme.ok()) << scheme.status().ToString();
  f.scheme = *scheme;
  auto model = Checkpoint::OpenDirectory(FixtureDir(name));
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  f.model = std::move(*model);
  auto reference = Checkpoint::OpenFile(FixtureDir(name) + "/reference.safetensors");
  EXPECT_TRUE(reference.ok()) << reference.status().ToString();
  f.reference = std::move(*reference);
  f.source = MakeCheckpointWeightSource(f.model, name);
  return f;
}

// Distance in units in the last place between two finite floats of the same sign (0 if equal).
int64_t UlpDistance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if ((ia < 0) != (ib < 0)) return a == b ? 0 : INT32_MAX;
  return std::abs(static_cast<int64_t>(ia) - ib);
}

// Largest ulp distance between ember's dequantization and the producer's, over every element.
int64_t WorstUlps(const ExpertWeights& w, const TensorView& ref) {
  EXPECT_EQ(ref.dtype, DType::kF32);
  EXPECT_EQ(ref.shape, (Shape{w.num_experts(), w.rows(), w.cols()}));
  int64_t worst = 0;
  std::vector<float> row(w.cols());
  for (int64_t e = 0; e < w.num_experts(); ++e) {
    for (int64_t r = 0; r < w.rows(); ++r) {
      w.DequantizeRow(e, r, row.data());
      const float* expected = ref.As<float>() + (e * w.rows() + r) * w.cols();
      for (int64_t k = 0; k < w.cols(); ++k) worst = std::max(worst, UlpDistance(row[k], expected[k]));
    }
  }
  return worst;
}

struct ProducerCase {
  const char* dir;
  QuantProducer producer;
  quant::WeightFormat format;
  int64_t max_ulps;  // 0: bit for bit
};

class ProducerFixtureTest : public ::testing::TestWithParam<ProducerCase> {};

TEST_P(ProducerFixtureTest, DequantizesAsTheProducerDoes) {
  const ProducerCase& c = GetParam();
  Fixture f = Open(c.dir);
  EXPECT_EQ(f.scheme.producer, c.producer);
  EXPECT_EQ(f.scheme.format, c.format);
  for (const ExpertTensor& t : {GateUp(1), Down(1)}) {
    auto w = ReadExpertWeights(*f.source, f.scheme, t);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_EQ(w->format(), c.format) << t.Name();
    auto ref = f.reference->Get("dequant." + t.Name());
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    EXPECT_LE(WorstUlps(*w, *ref), c.max_ulps) << t.Name();
    // Same numbers through the matmul: x = e_k picks column k of every row (the kernels may apply
    // the scales in another order, so up to f32 rounding).
    std::vector<float> x(t.cols, 0.0f), y(t.rows), row(t.cols);
    x[t.cols - 1] = 1.0f;
    w->Apply(1, x.data(), 1, y.data());
    for (int64_t r = 0; r < t.rows; ++r) {
      w->DequantizeRow(1, r, row.data());
      EXPECT_NEAR(y[r], row[t.cols - 1], 1e-6f * std::fabs(row[t.cols - 1])) << t.Name() << " row " << r;
    }
  }
  // Layer 0 is excluded (kept bf16, like layers 0 and 61 of the released NVFP4 checkpoint).
  auto dense = ReadExpertWeights(*f.source, f.scheme, GateUp(0));
  ASSERT_TRUE(dense.ok()) << dense.status().ToString();
  EXPECT_FALSE(dense->format().has_value());
}

// compressed-tensors dequantizes code * (scale / global) with its inverted global; ember multiplies
// by 1 / global, which can differ in the last bit of the combined scale.
INSTANTIATE_TEST_SUITE_P(
    Producers, ProducerFixtureTest,
    ::testing::Values(ProducerCase{"modelopt_nvfp4", QuantProducer::kModelOpt, quant::WeightFormat::kNvfp4, 0},
                      ProducerCase{"quark_mxfp4", QuantProducer::kQuark, quant::WeightFormat::kMxfp4, 0},
                      ProducerCase{"ct_nvfp4", QuantProducer::kCompressedTensors, quant::WeightFormat::kNvfp4, 1},
                      ProducerCase{"ct_fp8_block", QuantProducer::kCompressedTensors, quant::WeightFormat::kFp8E4m3, 0}),
    [](const auto& info) { return std::string(info.param.dir); });

// ember's load-time quantizer against the producer's bytes for the same bf16 weights.
void ExpectSameBytes(const TensorView& ours_view, const uint8_t* ours, const TensorView& theirs, const std::string& what) {
  ASSERT_EQ(ours_view.NumBytes(), theirs.NumBytes()) << what;
  int64_t differing = 0;
  for (int64_t i = 0; i < theirs.NumBytes(); ++i) differing += ours[i] != theirs.As<uint8_t>()[i];
  EXPECT_EQ(differing, 0) << what << ": " << differing << " of " << theirs.NumBytes() << " bytes differ";
}

TEST(LoadTimeQuantizationTest, Nvfp4MatchesModelOptBytes) {
  Fixture f = Open("modelopt_nvfp4");
  for (const ExpertTensor& t : {GateUp(1), Down(1)}) {
    auto src = f.reference->Get("source." + t.Name());
    ASSERT_TRUE(src.ok());
    auto q = QuantizeStack(*src, quant::WeightFormat::kNvfp4, t.halves);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    ExpectSameBytes(*f.model->Get(t.Name()), (*q)->codes.data(), *f.model->Get(t.Name()), t.Name() + " codes");
    const TensorView scales = *f.model->Get(t.Name() + "_weight_scale");
    ExpectSameBytes(scales, (*q)->scales.data(), scales, t.Name() + " scales");
    const TensorView globals = *f.model->Get(t.Name() + "_weight_scale_2");
    ASSERT_EQ(globals.NumElements(), static_cast<int64_t>((*q)->globals.size()));
    for (int64_t i = 0; i < globals.NumElements(); ++i) EXPECT_EQ((*q)->globals[i], globals.As<float>()[i]);
  }
}

// The quark_mxfp4 checkpoint was written by Quark's file-to-file quantizer in its default "even"
// scale mode: ember's load-time MXFP4 (also "even" by default) gives the same bytes, codes and
// scales, and dequantizes to Quark's own quantize-dequantize.
TEST(LoadTimeQuantizationTest, Mxfp4MatchesQuarkBytesInDefaultEvenMode) {
  Fixture f = Open("quark_mxfp4");
  for (const ExpertTensor& t : {GateUp(1), Down(1)}) {
    auto src = f.reference->Get("source." + t.Name());
    ASSERT_TRUE(src.ok());
    auto q = QuantizeStack(*src, quant::WeightFormat::kMxfp4, t.halves);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    const TensorView codes = *f.model->Get(t.Name());
    ExpectSameBytes(codes, (*q)->codes.data(), codes, t.Name() + " codes");
    const TensorView scales = *f.model->Get(t.Name() + "_weight_scale");
    ExpectSameBytes(scales, (*q)->scales.data(), scales, t.Name() + " scales");
    EXPECT_EQ(WorstUlps((*q)->View(*q), *f.reference->Get("dequant." + t.Name())), 0) << t.Name();
  }
}

// Quark's "floor" mode is the OCP MX v1.0 rule (floor(log2(amax)) - 2): its quantize-dequantize in
// that mode equals ember's kFloor quantization exactly, and differs from "even" somewhere (the
// fixture has blocks with amax in [1.75, 2) * 2^k).
TEST(LoadTimeQuantizationTest, Mxfp4MatchesQuarkOcpFloorMode) {
  Fixture f = Open("quark_mxfp4");
  for (const ExpertTensor& t : {GateUp(1), Down(1)}) {
    auto src = f.reference->Get("source." + t.Name());
    ASSERT_TRUE(src.ok());
    auto even = QuantizeStack(*src, quant::WeightFormat::kMxfp4, t.halves);
    ASSERT_TRUE(even.ok());
    EXPECT_GT(WorstUlps((*even)->View(*even), *f.reference->Get("qdq_floor." + t.Name())), 0) << t.Name();
    auto q = QuantizeStack(*src, quant::WeightFormat::kMxfp4, t.halves, quant::Mxfp4ScaleRounding::kFloor);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    const ExpertWeights w = (*q)->View(*q);
    EXPECT_EQ(WorstUlps(w, *f.reference->Get("qdq_floor." + t.Name())), 0) << t.Name();
  }
}

TEST(LoadTimeQuantizationTest, Fp8BlockMatchesCompressedTensorsBytes) {
  // down_proj: one [Hm, I] linear per expert, one 128x128 block each, as compressed-tensors stored it.
  Fixture f = Open("ct_fp8_block");
  const ExpertTensor t = Down(1);
  auto src = f.reference->Get("source." + t.Name());
  ASSERT_TRUE(src.ok());
  auto q = QuantizeStack(*src, quant::WeightFormat::kFp8E4m3, 1);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  for (int64_t e = 0; e < kExperts; ++e) {
    const std::string base = t.module + "." + std::to_string(e) + ".down_proj.";
    const TensorView codes = *f.model->Get(base + "weight");
    ExpectSameBytes(codes, (*q)->codes.data() + e * kHm * kInter, codes, base + "weight");
    float scale;
    std::memcpy(&scale, (*q)->scales.data() + e * 4, 4);
    EXPECT_EQ(scale, f.model->Get(base + "weight_scale")->As<float>()[0]);
  }
}

// ---- errors name the tensor and what was expected ------------------------------------------------

class MapWeightSource : public WeightSource {
 public:
  explicit MapWeightSource(const Checkpoint& from) {
    for (const std::string& name : from.Names()) tensors_[name] = *from.Get(name);
  }
  Expected<TensorView> Require(std::string_view name, std::initializer_list<DType> allowed, const Shape& shape) override {
    auto it = tensors_.find(std::string(name));
    if (it == tensors_.end()) return NotFound(fmt::format("tensor '{}' not found", name));
    bool dtype_ok = false;
    for (DType d : allowed) dtype_ok |= d == it->second.dtype;
    bool shape_ok = shape.rank() == it->second.shape.rank();
    for (int i = 0; shape_ok && i < shape.rank(); ++i) shape_ok = shape[i] == -1 || shape[i] == it->second.shape[i];
    if (!dtype_ok || !shape_ok) {
      return InvalidArgument(fmt::format("tensor '{}' has {} {}, expected shape {}", name,
                                         DTypeName(it->second.dtype), it->second.shape.ToString(), shape.ToString()));
    }
    return it->second;
  }
  bool Has(std::string_view name) const override { return tensors_.count(std::string(name)) > 0; }
  std::string Describe() const override { return "test tensors"; }
  std::map<std::string, TensorView> tensors_;
};

TEST(QuantizedWeightsErrorTest, MissingScaleNamesTheTensorAndTheExclusionList) {
  Fixture f = Open("modelopt_nvfp4");
  MapWeightSource source(*f.model);
  source.tensors_.erase(GateUp(1).Name() + "_weight_scale");
  auto w = ReadExpertWeights(source, f.scheme, GateUp(1));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find(GateUp(1).Name() + "_weight_scale' is missing"), std::string::npos)
      << w.status().message();
  EXPECT_NE(w.status().message().find("exclusions"), std::string::npos);
}

TEST(QuantizedWeightsErrorTest, WrongScaleShapeAndDtypeAreNamed) {
  Fixture f = Open("modelopt_nvfp4");
  MapWeightSource source(*f.model);
  TensorView& scale = source.tensors_[GateUp(1).Name() + "_weight_scale"];
  scale.shape = Shape{kExperts, 2 * kInter, kHm / 32};  // an MXFP4-sized scale plane
  auto w = ReadExpertWeights(source, f.scheme, GateUp(1));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("_weight_scale"), std::string::npos) << w.status().message();
  MapWeightSource source2(*f.model);
  source2.tensors_[GateUp(1).Name() + "_weight_scale_2"].shape = Shape{kExperts};  // one global for both halves
  w = ReadExpertWeights(source2, f.scheme, GateUp(1));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("_weight_scale_2"), std::string::npos) << w.status().message();
}

TEST(QuantizedWeightsErrorTest, Bf16ExpertsInAQuantizedModuleAreAnError) {
  Fixture f = Open("modelopt_nvfp4");
  QuantScheme scheme = f.scheme;
  scheme.exclude = {"lm_head"};  // layer 0's bf16 experts are no longer excluded
  auto w = ReadExpertWeights(*f.source, scheme, GateUp(0));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("quantizes module '" + GateUp(0).module + "'"), std::string::npos)
      << w.status().message();
}

TEST(QuantizedWeightsErrorTest, TruncatedCheckpointIsDataLoss) {
  const std::string dir = ::testing::TempDir() + "/truncated_nvfp4";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(FixtureDir("modelopt_nvfp4") + "/model.safetensors", dir + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(dir + "/model.safetensors", std::filesystem::file_size(dir + "/model.safetensors") - 100);
  auto c = Checkpoint::OpenDirectory(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
}

// ---- metadata -------------------------------------------------------------------------------------

TEST(QuantSchemeTest, ParsesAndRejects) {
  auto none = ParseQuantScheme("", "");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->quantized());
  auto fp8 = ParseQuantScheme("", R"({"quant_method": "fp8", "weight_block_size": [128, 128]})");
  ASSERT_TRUE(fp8.ok()) << fp8.status().ToString();
  EXPECT_EQ(fp8->producer, QuantProducer::kFp8ScaleInv);
  auto bad_group = ParseQuantScheme(R"({"quantization": {"quant_algo": "NVFP4", "group_size": 32}})", "");
  ASSERT_FALSE(bad_group.ok());
  EXPECT_NE(bad_group.status().message().find("group_size"), std::string::npos);
  auto awq = ParseQuantScheme("", R"({"quant_method": "awq"})");
  ASSERT_FALSE(awq.ok());
  EXPECT_NE(awq.status().message().find("'awq'"), std::string::npos);
  auto fp8_64 = ParseQuantScheme("", R"({"quant_method": "fp8", "weight_block_size": [64, 64]})");
  EXPECT_FALSE(fp8_64.ok());
}

TEST(QuantSchemeTest, ExclusionPatterns) {
  EXPECT_TRUE(ModuleMatches("*layers.0.mlp.experts*", "model.language_model.layers.0.mlp.experts"));
  EXPECT_FALSE(ModuleMatches("*layers.0.mlp.experts*", "model.language_model.layers.10.mlp.experts"));
  EXPECT_TRUE(ModuleMatches("lm_head", "lm_head"));
  EXPECT_FALSE(ModuleMatches("lm_head", "model.lm_head_x"));
  EXPECT_TRUE(ModuleMatches("re:.*layers\\.0\\.mlp\\.experts.*", "model.language_model.layers.0.mlp.experts"));
  EXPECT_FALSE(ModuleMatches("re:layers\\.0", "model.layers.0"));  // re.match anchors at the start
}

TEST(ParseQuantizationTest, Mxfp4DefaultsToQuarkEvenScalesAndFloorIsSelectable) {
  using R = quant::Mxfp4ScaleRounding;
  auto mxfp4 = ParseQuantization("mxfp4");
  ASSERT_TRUE(mxfp4.ok());
  EXPECT_EQ(mxfp4->format, quant::WeightFormat::kMxfp4);
  EXPECT_EQ(mxfp4->mxfp4_rounding, R::kEven);
  EXPECT_EQ(ParseQuantization("mxfp4-floor")->mxfp4_rounding, R::kFloor);
  EXPECT_EQ(ParseQuantization("mxfp4-even")->mxfp4_rounding, R::kEven);
  EXPECT_EQ(ParseQuantization("nvfp4")->format, quant::WeightFormat::kNvfp4);
  EXPECT_EQ(ParseQuantization("fp8")->format, quant::WeightFormat::kFp8E4m3);
  auto bad = ParseQuantization("mxfp4-ceil");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("mxfp4-floor"), std::string::npos) << bad.status().message();
}

// `--quantization ''` is a mistake, not "no quantization" (that is leaving the flag out): the
// error lists the choices and says how to keep the stored formats.
TEST(ParseQuantizationTest, EmptyIsAnErrorListingTheChoices) {
  auto empty = ParseQuantization("");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  const std::string message = empty.status().message();
  EXPECT_NE(message.find("empty"), std::string::npos) << message;
  for (const char* choice : {"nvfp4", "mxfp4", "mxfp4-floor", "fp8"}) {
    EXPECT_NE(message.find(choice), std::string::npos) << choice << ": " << message;
  }
  EXPECT_NE(message.find("stored formats"), std::string::npos) << message;
}

}  // namespace
}  // namespace ember
