// Quantized dense checkpoints: the bf16 golden fixtures with every decoder-layer linear rewritten
// in a producer's per-linear layout (model/quantized_linear.h: ModelOpt NVFP4, Quark MXFP4, FP8
// weight_scale_inv, compressed-tensors FP8 blocks), with the producer's metadata, load to bitwise the logits that load-time
// --quantization makes of the bf16 weights (the bytes are the same quantizer's, QuantizeStack),
// and those logits stay near transformers' bf16 ones. The layouts' names and shapes are the
// producers' conventions for dense linears; the bytes are ember's quantizer's, which
// tests/golden/quant checks against the producers' own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/checkpoint.h"
#include "formats/safetensors_writer.h"
#include "model/causal_lm.h"
#include "model/quantized_weights.h"
#include "support/single_sequence.h"
#include "support/source_dir.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using quant::WeightFormat;

std::string FixtureDir(const std::string& name) { return std::string(EMBER_SOURCE_DIR) + "/tests/golden/hf_dense/" + name; }

std::vector<int32_t> PromptIds(const std::string& dir) {
  std::ifstream in(dir + "/golden.json");
  return nlohmann::json::parse(in).at("prompt_ids").get<std::vector<int32_t>>();
}

Expected<std::vector<float>> PromptLogits(const std::string& dir, const std::vector<int32_t>& prompt,
                                          const LoadOptions& options = {}) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<CausalLM> model, LoadModel(dir, options));
  const int64_t n = static_cast<int64_t>(prompt.size());
  EMBER_ASSIGN_OR_RETURN(test::SingleSequence sequence, test::SingleSequence::Create(model.get(), n, kv::KvDtype::kF32));
  std::vector<float> logits;
  EMBER_RETURN_IF_ERROR(sequence.Append(prompt.data(), n, /*all_logits=*/true, &logits));
  return logits;
}

bool IsLayerLinear(const std::string& name, const TensorView& t) {
  return name.find(".layers.") != std::string::npos && t.shape.rank() == 2 && name.ends_with("_proj.weight");
}

// One producer layout: the format and whether it is compressed-tensors' (which names FP8 block
// scales `weight_scale` and describes itself in config_groups) rather than the format's usual
// producer (ModelOpt NVFP4, Quark MXFP4, FP8 weight_scale_inv).
struct Layout {
  WeightFormat format;
  bool compressed_tensors = false;
  std::string Name() const {
    return std::string(compressed_tensors ? "ct_" : "") + std::string(quant::WeightFormatName(format));
  }
};

nlohmann::json QuantizationConfig(const Layout& layout) {
  if (layout.compressed_tensors) {
    return {{"quant_method", "compressed-tensors"}, {"format", "float-quantized"},
            {"config_groups", {{"group_0", {{"targets", {"Linear"}},
                                            {"weights", {{"num_bits", 8}, {"type", "float"}, {"symmetric", true},
                                                         {"strategy", "block"}, {"block_structure", {128, 128}},
                                                         {"dynamic", false}}}}}}},
            {"ignore", {"lm_head"}}};
  }
  switch (layout.format) {
    case WeightFormat::kNvfp4:
      return {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 16},
              {"exclude_modules", {"lm_head"}}};
    case WeightFormat::kMxfp4:
      return {{"quant_method", "quark"},
              {"global_quant_config", {{"weight", {{"dtype", "fp4"}, {"qscheme", "per_group"}, {"group_size", 32},
                                                   {"scale_format", "e8m0"}, {"scale_calculation_mode", "even"}}}}},
              {"exclude", {"lm_head"}}};
    case WeightFormat::kFp8E4m3:
      return {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
              {"weight_block_size", {128, 128}}, {"modules_to_not_convert", {"lm_head"}}};
  }
  return {};
}

// `fixture` rewritten into `out` with its layer linears quantized to `format` as the producer
// names them; everything else copied.
Status WriteQuantized(const std::string& fixture, const Layout& layout, const fs::path& out) {
  const WeightFormat format = layout.format;
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::OpenDirectory(fixture));
  std::vector<std::shared_ptr<const QuantizedStack>> stacks;
  std::vector<SafetensorsEntry> entries;
  for (const std::string& name : checkpoint->Names()) {
    EMBER_ASSIGN_OR_RETURN(TensorView t, checkpoint->Get(name));
    if (!IsLayerLinear(name, t)) {
      entries.push_back({name, t.dtype, t.shape, t.data});
      continue;
    }
    const int64_t rows = t.shape[0], cols = t.shape[1];
    EMBER_ASSIGN_OR_RETURN(std::shared_ptr<const QuantizedStack> q,
                           QuantizeStack(TensorView{t.dtype, Shape{1, rows, cols}, t.data}, format, 1));
    stacks.push_back(q);
    const std::string module = name.substr(0, name.size() - std::string(".weight").size());
    if (format == WeightFormat::kFp8E4m3) {
      entries.push_back({name, DType::kF8E4M3, Shape{rows, cols}, q->codes.data()});
      entries.push_back({module + (layout.compressed_tensors ? ".weight_scale" : ".weight_scale_inv"), DType::kF32, Shape{(rows + 127) / 128, (cols + 127) / 128},
                         q->scales.data()});
    } else {
      entries.push_back({name, DType::kU8, Shape{rows, quant::CodesRowBytes(format, cols)}, q->codes.data()});
      entries.push_back({module + ".weight_scale", format == WeightFormat::kNvfp4 ? DType::kF8E4M3 : DType::kU8,
                         Shape{rows, quant::ScalesRowBytes(format, cols)}, q->scales.data()});
      if (format == WeightFormat::kNvfp4) {
        // ModelOpt writes the per-tensor scales as 0-d tensors.
        entries.push_back({module + ".weight_scale_2", DType::kF32, Shape{}, q->globals.data()});
      }
    }
  }
  fs::create_directories(out);
  EMBER_RETURN_IF_ERROR(WriteSafetensors((out / "model.safetensors").string(), entries));
  std::ifstream in(fixture + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["quantization_config"] = QuantizationConfig(layout);
  std::ofstream(out / "config.json") << config.dump(2);
  return Status::Ok();
}

class HfDenseQuantTest : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(HfDenseQuantTest, ProducerLayoutLoadsAsLoadTimeQuantization) {
  const auto& [fixture, layout] = GetParam();
  const WeightFormat format = layout.format;
  const std::string dir = FixtureDir(fixture);
  const std::vector<int32_t> prompt = PromptIds(dir);
  const fs::path out = fs::temp_directory_path() /
                       ("ember_hf_dense_quant_" + fixture + "_" + layout.Name());
  fs::remove_all(out);
  ASSERT_TRUE(WriteQuantized(dir, layout, out).ok());
  auto stored = PromptLogits(out.string(), prompt);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  LoadOptions options;
  options.quantization = format;
  auto converted = PromptLogits(dir, prompt, options);
  ASSERT_TRUE(converted.ok()) << converted.status().ToString();
  auto dense = PromptLogits(dir, prompt);
  ASSERT_TRUE(dense.ok()) << dense.status().ToString();
  float worst = 0.0f, scale = 1.0f, apart = 0.0f;
  for (size_t i = 0; i < dense->size(); ++i) {
    worst = std::max(worst, std::fabs((*stored)[i] - (*dense)[i]));
    scale = std::max(scale, std::fabs((*dense)[i]));
    apart = std::max(apart, std::fabs((*stored)[i] - (*converted)[i]));
  }
  if (!layout.compressed_tensors) {
    EXPECT_EQ(*stored, *converted);  // bitwise
  } else {
    // These matrices are at most 128 x 128: one scale block, which compressed-tensors' [1, 1] scale
    // cannot tell from a per-tensor scale, so ember reads it as one. The dequantized weights are
    // the same; the per-tensor kernel applies the scale at another point of the dot product, so
    // the logits agree to f32 rounding rather than bitwise.
    EXPECT_LT(apart / scale, 1e-5f);
  }
  // Quantization must have happened (the logits moved) and stayed a perturbation.
  EXPECT_GT(worst, 0.0f);
  EXPECT_LT(worst / scale, 0.5f);
  std::printf("[ %s %s ] stored = load-time conversion; max |quantized - bf16| = %.3g (logit scale %.3g)\n",
              fixture.c_str(), layout.Name().c_str(), worst, scale);
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(Formats, HfDenseQuantTest,
                         ::testing::Combine(::testing::Values("llama", "gemma3"),
                                            ::testing::Values(Layout{WeightFormat::kNvfp4}, Layout{WeightFormat::kMxfp4},
                                                              Layout{WeightFormat::kFp8E4m3},
                                                              Layout{WeightFormat::kFp8E4m3, true})),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param).Name(); });

}  // namespace
}  // namespace ember
