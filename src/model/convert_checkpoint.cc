#include "model/convert_checkpoint.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "formats/checkpoint.h"
#include "formats/safetensors_writer.h"
#include "model/quant_scheme.h"
#include "model/quantized_weights.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using quant::WeightFormat;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// 2 for a stacked gate_up tensor, 1 for down, 0 for anything that is not a stacked expert tensor.
int64_t ExpertHalves(const SafetensorTensor& t) {
  if (t.shape.rank() != 3 || (t.dtype != DType::kBF16 && t.dtype != DType::kF32)) return 0;
  if (EndsWith(t.name, ".mlp.experts.gate_up_proj")) return 2;
  if (EndsWith(t.name, ".mlp.experts.down_proj")) return 1;
  return 0;
}

// Modules of the 2-D ".weight" tensors: the linears the converted checkpoint keeps in bf16/f32.
std::vector<std::string> KeptModules(const Checkpoint& c) {
  std::vector<std::string> modules;
  for (const std::string& name : c.Names()) {
    const SafetensorTensor* t = c.Find(name);
    if (t->shape.rank() == 2 && EndsWith(name, ".weight")) modules.push_back(name.substr(0, name.size() - 7));
  }
  return modules;
}

ordered_json QuantizationConfig(WeightFormat format, quant::Mxfp4ScaleRounding mxfp4_rounding,
                                const std::vector<std::string>& kept) {
  const ordered_json producer = {{"name", "ember"}, {"tool", "ember convert"}};
  switch (format) {
    case WeightFormat::kNvfp4:
      return {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 16},
              {"exclude_modules", kept}, {"producer", producer}};
    case WeightFormat::kMxfp4:
      return {{"quant_method", "quark"},
              {"global_quant_config",
               {{"weight", {{"dtype", "fp4"}, {"qscheme", "per_group"}, {"ch_axis", -1}, {"group_size", 32},
                            {"is_dynamic", false}, {"round_method", "half_even"}, {"scale_format", "e8m0"},
                            {"scale_calculation_mode", quant::Mxfp4ScaleRoundingName(mxfp4_rounding)}}},
                {"input_tensors", nullptr}, {"output_tensors", nullptr}, {"bias", nullptr}}},
              {"exclude", kept}, {"layer_quant_config", ordered_json::object()},
              {"layer_type_quant_config", ordered_json::object()},
              {"export", {{"pack_method", "reorder"}, {"weight_format", "real_quantized"}}},
              {"producer", producer}};
    case WeightFormat::kFp8E4m3:
      return {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
              {"weight_block_size", {128, 128}}, {"modules_to_not_convert", kept}, {"producer", producer}};
  }
  return {};
}

Status WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return IoError(fmt::format("cannot write {}", path.string()));
  return Status::Ok();
}

// The converted tensors of one stacked expert tensor, in the chosen layout.
void AppendQuantized(const SafetensorTensor& t, const QuantizedStack& q, std::vector<SafetensorsEntry>* out) {
  const int64_t e = q.experts, r = q.rows, c = q.cols;
  switch (q.format) {
    case WeightFormat::kNvfp4:
      out->push_back({t.name, DType::kU8, Shape{e, r, c / 2}, q.codes.data()});
      out->push_back({t.name + "_weight_scale", DType::kF8E4M3, Shape{e, r, c / 16}, q.scales.data()});
      out->push_back({t.name + "_weight_scale_2", DType::kF32, q.halves == 1 ? Shape{e} : Shape{e, q.halves},
                      q.globals.data()});
      break;
    case WeightFormat::kMxfp4:
      out->push_back({t.name, DType::kU8, Shape{e, r, c / 2}, q.codes.data()});
      out->push_back({t.name + "_weight_scale", DType::kU8, Shape{e, r, c / 32}, q.scales.data()});
      break;
    case WeightFormat::kFp8E4m3:
      out->push_back({t.name, DType::kF8E4M3, Shape{e, r, c}, q.codes.data()});
      out->push_back({t.name + "_weight_scale_inv", DType::kF32, Shape{e, (r + 127) / 128, (c + 127) / 128},
                      q.scales.data()});
      break;
  }
}

}  // namespace

Expected<ConvertStats> ConvertCheckpoint(const std::string& in_dir, const std::string& out_dir, WeightFormat format,
                                         const std::function<void(int64_t, int64_t)>& progress,
                                         quant::Mxfp4ScaleRounding mxfp4_rounding) {
  EMBER_ASSIGN_OR_RETURN(QuantScheme scheme, ReadQuantScheme(in_dir));
  if (scheme.quantized()) {
    return InvalidArgument(fmt::format("{} is already quantized ({}); ember convert takes a bf16 checkpoint", in_dir,
                                       scheme.Describe()));
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::OpenDirectory(in_dir));
  std::error_code error;
  if (fs::exists(out_dir, error) && !fs::is_empty(out_dir, error)) {
    return InvalidArgument(fmt::format("output directory {} exists and is not empty; choose a new one", out_dir));
  }
  fs::create_directories(out_dir, error);
  if (error) return IoError(fmt::format("cannot create {}: {}", out_dir, error.message()));

  int64_t total = 0;
  for (const std::string& name : checkpoint->Names()) total += ExpertHalves(*checkpoint->Find(name)) > 0;
  if (total == 0) {
    return InvalidArgument(fmt::format("{} has no stacked expert tensors (*.mlp.experts.gate_up_proj / down_proj) to "
                                       "quantize", in_dir));
  }
  ConvertStats stats;
  std::map<std::string, std::string> weight_map;
  for (const auto& file : checkpoint->files()) {
    file->Prefetch();
    const std::string shard = fs::path(file->path()).filename().string();
    std::vector<SafetensorsEntry> entries;
    std::vector<std::shared_ptr<const QuantizedStack>> keep_alive;
    for (const SafetensorTensor& t : file->tensors()) {
      stats.bytes_in += t.NumBytes();
      const int64_t halves = ExpertHalves(t);
      if (halves == 0) {
        entries.push_back({t.name, t.dtype, t.shape, t.view.data});
        continue;
      }
      EMBER_ASSIGN_OR_RETURN(std::shared_ptr<const QuantizedStack> q, QuantizeStack(t.view, format, halves, mxfp4_rounding));
      AppendQuantized(t, *q, &entries);
      keep_alive.push_back(std::move(q));
      ++stats.tensors_converted;
      if (progress) progress(stats.tensors_converted, total);
    }
    for (const SafetensorsEntry& e : entries) {
      weight_map[e.name] = shard;
      stats.bytes_out += DTypeBytes(e.dtype, e.shape.NumElements());
    }
    EMBER_RETURN_IF_ERROR(WriteSafetensors((fs::path(out_dir) / shard).string(), entries, file->metadata()));
  }

  const ordered_json quant_config = QuantizationConfig(format, mxfp4_rounding, KeptModules(*checkpoint));
  // Every other file of the model directory comes along; config.json gains quantization_config.
  for (const auto& entry : fs::directory_iterator(in_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || EndsWith(name, ".safetensors") || name == Checkpoint::kIndexFileName) continue;
    if (name == "config.json") {
      std::ifstream in(entry.path());
      ordered_json config = ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (config.is_discarded() || !config.is_object()) return InvalidArgument(entry.path().string() + ": not JSON");
      config["quantization_config"] = quant_config;
      EMBER_RETURN_IF_ERROR(WriteText(fs::path(out_dir) / name, config.dump(2) + "\n"));
    } else {
      fs::copy_file(entry.path(), fs::path(out_dir) / name, fs::copy_options::overwrite_existing, error);
      if (error) return IoError(fmt::format("cannot copy {}: {}", entry.path().string(), error.message()));
    }
  }
  if (format == WeightFormat::kNvfp4) {
    const ordered_json hf_quant = {{"producer", quant_config["producer"]},
                                   {"quantization", {{"quant_algo", "NVFP4"}, {"kv_cache_quant_algo", nullptr},
                                                     {"group_size", 16}, {"exclude_modules", quant_config["exclude_modules"]}}}};
    EMBER_RETURN_IF_ERROR(WriteText(fs::path(out_dir) / "hf_quant_config.json", hf_quant.dump(2) + "\n"));
  }
  if (fs::exists(fs::path(in_dir) / Checkpoint::kIndexFileName, error)) {
    const ordered_json index = {{"metadata", {{"total_size", stats.bytes_out}}}, {"weight_map", weight_map}};
    EMBER_RETURN_IF_ERROR(WriteText(fs::path(out_dir) / Checkpoint::kIndexFileName, index.dump(2) + "\n"));
  }
  return stats;
}

}  // namespace ember
