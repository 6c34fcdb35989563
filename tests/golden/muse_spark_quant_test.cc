// Accuracy of quantized routed experts, per format, on a tiny Muse Spark trained briefly with torch
// (tests/golden/quant/accuracy, scripts/make_quant_accuracy.py) so that, like a real model, it
// answers a small weight perturbation with a small change of its logits. (The random golden
// models, tests/golden/muse_spark, turn any perturbation into unrelated logits: KL ~7 nats for
// every format and every implementation, which says nothing about the formats.) Three comparisons:
//   library vs bf16  transformers with the experts quantize-dequantized by the reference library
//                    (NVFP4 ModelOpt, MXFP4 Quark in its "even" and "floor" modes, FP8 128x128
//                    blocks compressed-tensors) against transformers in bf16: the format's error;
//   ember vs bf16    ember's load-time quantization (--quantization) against the same bf16 logits;
//   ember vs library same quantized weights (tests/unit/model/quantized_weights_test.cc shows the
//                    bytes are the libraries'), so only ember's kernels differ: f32 activations for
//                    FP8, activations rounded to int8 per 16 elements for FP4
//                    (quant/block_scaled_dot.h), and the summation order.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/checkpoint.h"
#include "model/causal_lm.h"
#include "model/convert_checkpoint.h"
#include "model/quantized_weights.h"
#include "support/golden_logits.h"
#include "support/single_sequence.h"
#include "support/source_dir.h"

namespace ember {
namespace {

using test::ReadFloats;

constexpr int64_t kVocab = 256;  // the accuracy model's vocabulary

struct Agreement {
  double mean_kl = 0, max_kl = 0, top1 = 0;
};

// KL(p || q) of the softmaxes per row (f64), and how often the argmaxes agree.
Agreement Compare(const std::vector<float>& p, const std::vector<float>& q, int64_t vocab) {
  Agreement a;
  const int64_t rows = static_cast<int64_t>(p.size()) / vocab;
  for (int64_t r = 0; r < rows; ++r) {
    const float* pr = p.data() + r * vocab;
    const float* qr = q.data() + r * vocab;
    double pmax = pr[0], qmax = qr[0];
    int64_t parg = 0, qarg = 0;
    for (int64_t v = 1; v < vocab; ++v) {
      if (pr[v] > pmax) pmax = pr[v], parg = v;
      if (qr[v] > qmax) qmax = qr[v], qarg = v;
    }
    double pz = 0, qz = 0;
    for (int64_t v = 0; v < vocab; ++v) pz += std::exp(pr[v] - pmax), qz += std::exp(qr[v] - qmax);
    double kl = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double lp = pr[v] - pmax - std::log(pz);
      const double lq = qr[v] - qmax - std::log(qz);
      kl += std::exp(lp) * (lp - lq);
    }
    a.mean_kl += kl / rows;
    a.max_kl = std::max(a.max_kl, kl);
    a.top1 += (parg == qarg ? 1.0 : 0.0) / rows;
  }
  return a;
}

const std::string kAccuracyDir = std::string(EMBER_SOURCE_DIR) + "/tests/golden/quant/accuracy/";
const std::string kModelDir = kAccuracyDir + "model";

std::vector<int32_t> Prompt() {
  std::ifstream in(kModelDir + "/golden.json");
  return nlohmann::json::parse(in).at("prompt_ids").get<std::vector<int32_t>>();
}

std::vector<float> PromptLogits(const std::string& dir, const LoadOptions& options) {
  const std::vector<int32_t> prompt = Prompt();
  auto model = LoadModel(dir, options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  const int64_t n = static_cast<int64_t>(prompt.size());
  auto sequence = test::SingleSequence::Create(model->get(), n, kv::KvDtype::kF32);
  EXPECT_TRUE(sequence.ok()) << sequence.status().ToString();
  std::vector<float> logits;
  EXPECT_TRUE(sequence->Append(prompt.data(), n, /*all_logits=*/true, &logits).ok());
  return logits;
}

LoadOptions Quantized(const QuantizationChoice& choice) {
  LoadOptions options;
  options.quantization = choice.format;
  options.mxfp4_rounding = choice.mxfp4_rounding;
  return options;
}

// The --quantization value under test; the library logits file is named after it.
class MuseSparkQuantAccuracyTest : public ::testing::TestWithParam<const char*> {
 protected:
  QuantizationChoice Choice() const {
    auto choice = ParseQuantization(GetParam());
    EXPECT_TRUE(choice.ok()) << choice.status().ToString();
    return *choice;
  }
  std::string LibraryLogitsFile() const {
    std::string name = GetParam();
    std::replace(name.begin(), name.end(), '-', '_');
    return kAccuracyDir + name + ".logits.f32";
  }
};

// ember in bf16 reproduces transformers' bf16 logits of the accuracy model (the denominator of
// everything below is the model, not a difference between the two implementations).
TEST(MuseSparkAccuracyModelTest, Bf16MatchesTransformers) {
  const std::vector<float> reference = ReadFloats(kAccuracyDir + "bf16.logits.f32");
  const std::vector<float> ours = PromptLogits(kModelDir, {});
  ASSERT_EQ(ours.size(), reference.size());
  const Agreement a = Compare(reference, ours, kVocab);
  std::printf("[ bf16 ] ember vs transformers: mean KL %.2e max %.2e top-1 %.3f\n", a.mean_kl, a.max_kl, a.top1);
  EXPECT_LT(a.max_kl, 1e-6);
  EXPECT_EQ(a.top1, 1.0);
}

TEST_P(MuseSparkQuantAccuracyTest, QuantizedExpertsMatchReferenceLibraryQuantization) {
  const std::vector<float> bf16 = ReadFloats(kAccuracyDir + "bf16.logits.f32");
  const std::vector<float> library = ReadFloats(LibraryLogitsFile());
  LoadOptions options = Quantized(Choice());
  int64_t progress_calls = 0;
  options.progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(done, ++progress_calls);
    EXPECT_EQ(total, 8);  // 4 sparse layers x (gate_up, down)
  };
  const std::vector<float> logits = PromptLogits(kModelDir, options);
  EXPECT_EQ(progress_calls, 8);
  ASSERT_EQ(logits.size(), bf16.size());
  ASSERT_EQ(library.size(), bf16.size());

  const Agreement theirs = Compare(bf16, library, kVocab);
  const Agreement ours = Compare(bf16, logits, kVocab);
  const Agreement same = Compare(library, logits, kVocab);
  std::printf("[ %s ] vs bf16: reference library mean KL %.2e max %.2e top-1 %.3f | ember mean KL %.2e max %.2e "
              "top-1 %.3f | ember vs library: mean KL %.2e max %.2e top-1 %.3f\n",
              GetParam(), theirs.mean_kl, theirs.max_kl, theirs.top1, ours.mean_kl, ours.max_kl, ours.top1,
              same.mean_kl, same.max_kl, same.top1);
  // The format's error is visible and small (measured 3e-4 for FP8 and 2-3e-3 for the FP4 formats,
  // tests/golden/quant/README.md), and ember's error is the library's within a quarter.
  EXPECT_GT(theirs.mean_kl, 1e-5);
  EXPECT_LT(theirs.mean_kl, 1e-2);
  EXPECT_NEAR(ours.mean_kl, theirs.mean_kl, 0.25 * theirs.mean_kl);
  if (Choice().format == quant::WeightFormat::kFp8E4m3) {
    // Same weights, f32 activations: the distributions coincide up to summation order (3e-14).
    EXPECT_LT(same.max_kl, 1e-9);
    EXPECT_EQ(same.top1, 1.0);
  } else {
    // int8 activations per 16 elements: a small fraction of the format's divergence (measured
    // 3e-6 for MXFP4, 1e-4 for NVFP4, mostly one position, likely a near-tied router choice), and at
    // most one of 64 argmaxes moves (a near-tie in the logits).
    EXPECT_LT(same.mean_kl, 0.1 * theirs.mean_kl);
    EXPECT_GE(same.top1, 63.0 / 64);
  }
}

// Per sparse layer, the relative RMS error of the experts' outputs against the bf16 experts for the
// same inputs (random latent vectors of the experts' width): the format's own error (quantized
// weights dequantized, f64 activations) and what ember's kernel adds. The kernel may round the
// activations, but that must stay a small part of the format's error.
TEST_P(MuseSparkQuantAccuracyTest, ExpertErrorIsTheFormats) {
  auto checkpoint = Checkpoint::OpenDirectory(kModelDir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  const QuantizationChoice choice = Choice();
  const bool fp8 = choice.format == quant::WeightFormat::kFp8E4m3;
  for (int layer = 0; layer < 4; ++layer) {
    double format_err = 0, kernel_err = 0, ref_norm = 0;
    for (const char* param : {"gate_up_proj", "down_proj"}) {
      auto stacked = (*checkpoint)->Get(fmt::format("model.language_model.layers.{}.mlp.experts.{}", layer, param));
      ASSERT_TRUE(stacked.ok());
      const ExpertWeights dense = ExpertWeights::Dense(*stacked);
      auto q = QuantizeStack(*stacked, choice.format, std::string(param) == "gate_up_proj" ? 2 : 1,
                             choice.mxfp4_rounding);
      ASSERT_TRUE(q.ok()) << q.status().ToString();
      const ExpertWeights quantized = (*q)->View(*q);
      const int64_t n = 5, rows = dense.rows(), cols = dense.cols();
      std::vector<float> x(n * cols), y_ref(n * rows), y_kernel(n * rows), w(cols);
      for (int64_t i = 0; i < n * cols; ++i) x[i] = std::sin(0.7 * i + 0.3) * (1.0 + (i % 7) * 0.25);
      for (int64_t e = 0; e < dense.num_experts(); ++e) {
        dense.Apply(e, x.data(), n, y_ref.data());
        quantized.Apply(e, x.data(), n, y_kernel.data());
        for (int64_t r = 0; r < rows; ++r) {
          quantized.DequantizeRow(e, r, w.data());
          for (int64_t i = 0; i < n; ++i) {
            double y_deq = 0;
            for (int64_t k = 0; k < cols; ++k) y_deq += static_cast<double>(w[k]) * x[i * cols + k];
            const double ref = y_ref[i * rows + r];
            format_err += (y_deq - ref) * (y_deq - ref);
            kernel_err += (y_kernel[i * rows + r] - y_deq) * (y_kernel[i * rows + r] - y_deq);
            ref_norm += ref * ref;
          }
        }
      }
    }
    const double format_rel = std::sqrt(format_err / ref_norm), kernel_rel = std::sqrt(kernel_err / ref_norm);
    std::printf("[ %s ] layer %d experts: format error %.4f rel RMS; kernel vs dequantized weights %.2e rel RMS\n",
                GetParam(), layer, format_rel, kernel_rel);
    // e4m3 has 3 mantissa bits (relative step 2^-4, RMS ~2%); e2m1 has 1 (~10% at best, blocks
    // of 16/32 sharing a scale make it ~15%).
    EXPECT_LT(format_rel, fp8 ? 0.05 : 0.2);
    EXPECT_LT(kernel_rel, fp8 ? 1e-5 : 0.15 * format_rel);
  }
}

// `ember convert` writes the producer-compatible layout; loading it gives the model that the
// load-time conversion gives, bit for bit.
TEST_P(MuseSparkQuantAccuracyTest, ConvertedCheckpointLoadsAsLoadTimeConversion) {
  const std::string out = ::testing::TempDir() + "/ember_convert_" + GetParam();
  std::filesystem::remove_all(out);
  const QuantizationChoice choice = Choice();
  auto stats = ConvertCheckpoint(kModelDir, out, choice.format, {}, choice.mxfp4_rounding);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->tensors_converted, 8);
  EXPECT_LT(stats->bytes_out, stats->bytes_in);
  auto scheme = ReadQuantScheme(out);
  ASSERT_TRUE(scheme.ok()) << scheme.status().ToString();
  EXPECT_EQ(scheme->format, choice.format);
  EXPECT_EQ(scheme->producer, choice.format == quant::WeightFormat::kNvfp4   ? QuantProducer::kModelOpt
                              : choice.format == quant::WeightFormat::kMxfp4 ? QuantProducer::kQuark
                                                                             : QuantProducer::kFp8ScaleInv);
  if (choice.format == quant::WeightFormat::kMxfp4) {
    std::ifstream in(out + "/config.json");
    const auto config = nlohmann::json::parse(in);
    EXPECT_EQ(config.at("quantization_config").at("global_quant_config").at("weight").at("scale_calculation_mode"),
              quant::Mxfp4ScaleRoundingName(choice.mxfp4_rounding));
  }
  const std::vector<float> converted = PromptLogits(out, {});
  const std::vector<float> on_load = PromptLogits(kModelDir, Quantized(choice));
  ASSERT_EQ(converted.size(), on_load.size());
  EXPECT_EQ(std::memcmp(converted.data(), on_load.data(), converted.size() * sizeof(float)), 0);
  // Converting twice is refused, and so is asking to quantize it again while loading.
  EXPECT_FALSE(ConvertCheckpoint(out, out + "_again", choice.format).ok());
  EXPECT_FALSE(LoadModel(out, Quantized(choice)).ok());
  std::filesystem::remove_all(out);
}

// --quantize-dense: the decoder layers' linears too (attention, latent projections); router,
// embeddings and lm_head stay as stored. The model streams fewer bytes; its distance from bf16 is
// reported (no library reference here: the libraries' checkpoints keep these linears in bf16 or
// quantize them with other recipes).
TEST_P(MuseSparkQuantAccuracyTest, DenseLinearsToo) {
  LoadOptions options = Quantized(Choice());
  auto experts_only = LoadModel(kModelDir, options);
  ASSERT_TRUE(experts_only.ok());
  options.quantize_dense = true;
  int64_t last_total = 0, calls = 0;
  options.progress = [&](int64_t done, int64_t total) { last_total = total, calls = done; };
  auto model = LoadModel(kModelDir, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(calls, last_total);
  EXPECT_EQ(last_total, 4 * (2 + 5 + 2));  // per sparse layer: 2 expert stacks, 5 attention, 2 latent
  EXPECT_LT((*model)->weight_bytes().per_token_decode, (*experts_only)->weight_bytes().per_token_decode);
  const std::vector<int32_t> prompt = Prompt();
  auto sequence = test::SingleSequence::Create(model->get(), static_cast<int64_t>(prompt.size()), kv::KvDtype::kF32);
  std::vector<float> logits;
  ASSERT_TRUE(sequence->Append(prompt.data(), static_cast<int64_t>(prompt.size()), true, &logits).ok());
  const Agreement a = Compare(ReadFloats(kAccuracyDir + "bf16.logits.f32"), logits, kVocab);
  std::printf("[ %s ] experts + dense linears vs bf16: mean KL %.2e max %.2e top-1 %.3f\n", GetParam(), a.mean_kl,
              a.max_kl, a.top1);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  // Measured 1.5e-3 (FP8) to 9e-3 (MXFP4 floor): a few times the experts-only divergence.
  EXPECT_LT(a.mean_kl, 0.03);
}

INSTANTIATE_TEST_SUITE_P(Formats, MuseSparkQuantAccuracyTest,
                         ::testing::Values("nvfp4", "mxfp4", "mxfp4-floor", "fp8"), [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace ember
