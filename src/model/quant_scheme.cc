#include "model/quant_scheme.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

namespace ember {
namespace {

using nlohmann::json;

bool GlobMatch(std::string_view p, std::string_view s) {
  // Iterative wildcard match with backtracking to the last '*'.
  size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi, ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

Status StringList(const json& object, const char* key, const std::string& where, std::vector<std::string>* out) {
  if (!object.contains(key) || object.at(key).is_null()) return Status::Ok();
  const json& list = object.at(key);
  if (!list.is_array()) return InvalidArgument(fmt::format("{}: '{}' must be a list of strings", where, key));
  for (const json& item : list) {
    if (!item.is_string()) return InvalidArgument(fmt::format("{}: '{}' must be a list of strings", where, key));
    out->push_back(item.get<std::string>());
  }
  return Status::Ok();
}

std::string Str(const json& object, const char* key) {
  return object.contains(key) && object.at(key).is_string() ? object.at(key).get<std::string>() : std::string();
}

Status ParseModelOpt(const json& q, const std::string& where, QuantScheme* s) {
  const std::string algo = Str(q, "quant_algo");
  if (algo != "NVFP4" && algo != "W4A16_NVFP4") {
    return Unimplemented(fmt::format("{}: ModelOpt quant_algo '{}' is not supported (ember reads NVFP4)", where, algo));
  }
  if (q.contains("group_size") && !(q.at("group_size").is_number_integer() && q.at("group_size").get<int>() == 16)) {
    return Unimplemented(fmt::format("{}: NVFP4 group_size {} (ember reads 16)", where, q.at("group_size").dump()));
  }
  s->producer = QuantProducer::kModelOpt;
  s->format = quant::WeightFormat::kNvfp4;
  EMBER_RETURN_IF_ERROR(StringList(q, "exclude_modules", where, &s->exclude));
  return StringList(q, "ignore", where, &s->exclude);
}

Status ParseQuark(const json& q, const std::string& where, QuantScheme* s) {
  const json* weight = nullptr;
  if (q.contains("global_quant_config") && q.at("global_quant_config").is_object() &&
      q.at("global_quant_config").contains("weight") && q.at("global_quant_config").at("weight").is_object()) {
    weight = &q.at("global_quant_config").at("weight");
  }
  if (weight == nullptr) return InvalidArgument(where + ": Quark config without global_quant_config.weight");
  const std::string dtype = Str(*weight, "dtype");
  const std::string scale_format = Str(*weight, "scale_format");
  const int64_t group = weight->value("group_size", int64_t{0});
  if (dtype != "fp4" || group != 32 || scale_format != "e8m0") {
    return Unimplemented(fmt::format("{}: Quark weight dtype '{}', group_size {}, scale_format '{}'; ember reads "
                                     "MXFP4 (fp4, 32, e8m0)", where, dtype, group, scale_format));
  }
  for (const char* key : {"layer_quant_config", "layer_type_quant_config"}) {
    if (q.contains(key) && q.at(key).is_object() && !q.at(key).empty()) {
      return Unimplemented(fmt::format("{}: per-layer Quark settings ('{}') are not supported", where, key));
    }
  }
  s->producer = QuantProducer::kQuark;
  s->format = quant::WeightFormat::kMxfp4;
  return StringList(q, "exclude", where, &s->exclude);
}

Status ParseCompressedTensors(const json& q, const std::string& where, QuantScheme* s) {
  const std::string format = Str(q, "format");
  const json* groups = q.contains("config_groups") && q.at("config_groups").is_object() ? &q.at("config_groups")
                                                                                         : nullptr;
  if (groups == nullptr || groups->size() != 1) {
    return Unimplemented(fmt::format("{}: compressed-tensors needs exactly one config group", where));
  }
  const json& weights = groups->begin()->value("weights", json::object());
  const int64_t bits = weights.value("num_bits", int64_t{0});
  const std::string type = Str(weights, "type");
  const std::string strategy = Str(weights, "strategy");
  if (format == "nvfp4-pack-quantized" && bits == 4 && type == "float" && weights.value("group_size", 0) == 16) {
    s->format = quant::WeightFormat::kNvfp4;
  } else if (format == "float-quantized" && bits == 8 && type == "float" &&
             (strategy == "tensor" || strategy == "channel" || strategy == "block")) {
    if (strategy == "block" && weights.value("block_structure", json::array()) != json::array({128, 128})) {
      return Unimplemented(fmt::format("{}: FP8 block_structure {} (ember reads [128, 128])", where,
                                       weights.value("block_structure", json()).dump()));
    }
    s->format = quant::WeightFormat::kFp8E4m3;
  } else {
    return Unimplemented(fmt::format("{}: compressed-tensors format '{}' with {}-bit {} weights (strategy '{}') is "
                                     "not supported; ember reads nvfp4-pack-quantized and float-quantized FP8",
                                     where, format, bits, type, strategy));
  }
  s->producer = QuantProducer::kCompressedTensors;
  return StringList(q, "ignore", where, &s->exclude);
}

Status ParseFp8ScaleInv(const json& q, const std::string& where, QuantScheme* s) {
  if (q.value("weight_block_size", json::array()) != json::array({128, 128})) {
    return Unimplemented(fmt::format("{}: fp8 weight_block_size {} (ember reads [128, 128])", where,
                                     q.value("weight_block_size", json()).dump()));
  }
  s->producer = QuantProducer::kFp8ScaleInv;
  s->format = quant::WeightFormat::kFp8E4m3;
  return StringList(q, "modules_to_not_convert", where, &s->exclude);
}

Expected<json> ParseObject(std::string_view text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(where + ": not a JSON object");
  return j;
}

Expected<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError("cannot read " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

bool ModuleMatches(std::string_view pattern, std::string_view module) {
  if (pattern.substr(0, 3) == "re:") {
    const std::regex re(std::string(pattern.substr(3)));
    return std::regex_search(module.begin(), module.end(), re, std::regex_constants::match_continuous);
  }
  return GlobMatch(pattern, module);
}

bool QuantScheme::Excludes(std::string_view module) const {
  for (const std::string& pattern : exclude) {
    if (ModuleMatches(pattern, module)) return true;
  }
  return false;
}

std::string QuantScheme::Describe() const {
  static constexpr const char* kNames[] = {"none", "ModelOpt", "Quark", "compressed-tensors", "FP8 weight_scale_inv"};
  if (!quantized()) return "none";
  return fmt::format("{} {} ({})", kNames[static_cast<int>(producer)], quant::WeightFormatName(format), source);
}

Expected<QuantScheme> ParseQuantScheme(std::string_view hf_quant_config, std::string_view quantization_config) {
  QuantScheme s;
  if (!hf_quant_config.empty()) {
    s.source = "hf_quant_config.json";
    EMBER_ASSIGN_OR_RETURN(json j, ParseObject(hf_quant_config, s.source));
    const json q = j.value("quantization", json::object());
    EMBER_RETURN_IF_ERROR(ParseModelOpt(q, s.source + ": quantization", &s));
    return s;
  }
  if (quantization_config.empty()) return s;
  s.source = "config.json quantization_config";
  EMBER_ASSIGN_OR_RETURN(json q, ParseObject(quantization_config, s.source));
  const std::string method = Str(q, "quant_method");
  if (method == "modelopt") {
    EMBER_RETURN_IF_ERROR(ParseModelOpt(q, s.source, &s));
  } else if (method == "quark") {
    EMBER_RETURN_IF_ERROR(ParseQuark(q, s.source, &s));
  } else if (method == "compressed-tensors") {
    EMBER_RETURN_IF_ERROR(ParseCompressedTensors(q, s.source, &s));
  } else if (method == "fp8") {
    EMBER_RETURN_IF_ERROR(ParseFp8ScaleInv(q, s.source, &s));
  } else {
    return Unimplemented(fmt::format("{}: quant_method '{}' is not supported; ember reads modelopt (NVFP4), quark "
                                     "(MXFP4), compressed-tensors (NVFP4, FP8) and fp8 (128x128 weight_scale_inv)",
                                     s.source, method));
  }
  return s;
}

Expected<QuantScheme> ReadQuantScheme(const std::string& model_dir) {
  std::string hf_quant, quantization;
  const std::string hf_path = model_dir + "/hf_quant_config.json";
  std::error_code error;
  if (std::filesystem::exists(hf_path, error)) {
    EMBER_ASSIGN_OR_RETURN(hf_quant, ReadText(hf_path));
  }
  const std::string config_path = model_dir + "/config.json";
  if (std::filesystem::exists(config_path, error)) {
    EMBER_ASSIGN_OR_RETURN(std::string text, ReadText(config_path));
    EMBER_ASSIGN_OR_RETURN(json config, ParseObject(text, config_path));
    for (const json* level : {&config, config.contains("text_config") ? &config.at("text_config") : nullptr}) {
      if (level != nullptr && level->is_object() && level->contains("quantization_config") &&
          !level->at("quantization_config").is_null()) {
        quantization = level->at("quantization_config").dump();
        break;
      }
    }
  }
  auto scheme = ParseQuantScheme(hf_quant, quantization);
  if (!scheme.ok()) return Status(scheme.status().code(), model_dir + ": " + scheme.status().message());
  return scheme;
}

}  // namespace ember
