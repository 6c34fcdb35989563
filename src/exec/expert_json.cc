#include "exec/expert_json.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/json_fields.h"

namespace ember::exec {
namespace {

using Json = nlohmann::json;

Expected<Json> ParseObject(const std::string& text, const std::string& where) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return InvalidArgument(fmt::format("{}: not a JSON object", where));
  return json;
}

Expected<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(fmt::format("cannot read {}", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return IoError(fmt::format("cannot write {}", path));
  return Status::Ok();
}

// A list of integers in [low, high), as `where` names it.
Expected<std::vector<int64_t>> IntList(const Json& value, int64_t low, int64_t high, const std::string& where) {
  if (!value.is_array()) return InvalidArgument(fmt::format("{} must be a list of integers", where));
  std::vector<int64_t> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const Json& v = value[i];
    if (!v.is_number_integer() || v.get<int64_t>() < low || v.get<int64_t>() >= high) {
      return InvalidArgument(fmt::format("{}[{}] must be an integer in [{}, {}), got {}", where, i, low, high, v.dump()));
    }
    out.push_back(v.get<int64_t>());
  }
  return out;
}

// A "layers" key: a decoder layer number in decimal without sign or leading zeros.
Expected<int64_t> LayerKey(const std::string& key, const std::string& where) {
  const bool digits = !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos &&
                      (key.size() == 1 || key[0] != '0');
  if (!digits) return InvalidArgument(fmt::format("{}: layers key \"{}\" is not a decoder layer number", where, key));
  return std::stoll(key);
}

// The "layers" object: each entry's list read by `read_list(layer, value, name)`.
template <typename ReadList>
Status ForEachLayer(const Json* layers, const std::string& where, ReadList read_list) {
  if (layers == nullptr) return Status::Ok();
  if (!layers->is_object()) return InvalidArgument(fmt::format("{}: field 'layers' must be an object", where));
  for (const auto& [key, value] : layers->items()) {
    EMBER_ASSIGN_OR_RETURN(const int64_t layer, LayerKey(key, where));
    EMBER_RETURN_IF_ERROR(read_list(layer, value, fmt::format("{}: layers.{}", where, key)));
  }
  return Status::Ok();
}

Status ReadNumLayers(JsonFields& fields, const std::string& where, int64_t* num_layers) {
  EMBER_RETURN_IF_ERROR(fields.Int("num_layers", num_layers, /*required=*/false));
  if (*num_layers < 0) return InvalidArgument(fmt::format("{}: num_layers must not be negative", where));
  return Status::Ok();
}

// A field read as it is (JsonFields::Object only returns objects); nullptr when absent or null.
const Json* Raw(JsonFields& fields, const Json& json, const char* key) {
  fields.Ignore({key});
  const auto it = json.find(key);
  return it == json.end() || it->is_null() ? nullptr : &*it;
}

std::vector<int32_t> Narrow(const std::vector<int64_t>& values) { return {values.begin(), values.end()}; }

}  // namespace

Expected<ExpertPlacement> ParseExpertPlacement(const std::string& text, const std::string& where) {
  EMBER_ASSIGN_OR_RETURN(const Json json, ParseObject(text, where));
  JsonFields fields(json, where);
  int64_t num_experts = 0, ep_size = 0, num_layers = 0;
  EMBER_RETURN_IF_ERROR(fields.Int("num_experts", &num_experts));
  EMBER_RETURN_IF_ERROR(fields.Int("ep_size", &ep_size));
  EMBER_RETURN_IF_ERROR(ReadNumLayers(fields, where, &num_layers));
  if (ep_size < 1 || ep_size > (1 << 20)) return InvalidArgument(fmt::format("{}: ep_size {} is out of range", where, ep_size));
  const Json* default_json = Raw(fields, json, "default");
  const Json* layers_json = Raw(fields, json, "layers");
  EMBER_RETURN_IF_ERROR(fields.RejectUnknown());
  EMBER_ASSIGN_OR_RETURN(const ExpertPlacement contiguous,
                         ExpertPlacement::Contiguous(num_experts, static_cast<int>(ep_size)));
  std::vector<int32_t> default_ranks(contiguous.default_ranks().begin(), contiguous.default_ranks().end());
  if (default_json != nullptr) {
    EMBER_ASSIGN_OR_RETURN(const std::vector<int64_t> ranks, IntList(*default_json, 0, ep_size, where + ": default"));
    default_ranks = Narrow(ranks);
  }
  std::vector<std::vector<int32_t>> layer_ranks;
  EMBER_RETURN_IF_ERROR(ForEachLayer(layers_json, where, [&](int64_t layer, const Json& value, const std::string& name) {
    EMBER_ASSIGN_OR_RETURN(const std::vector<int64_t> ranks, IntList(value, 0, ep_size, name));
    if (ranks.empty()) return InvalidArgument(fmt::format("{} is empty", name));
    if (layer_ranks.size() <= static_cast<size_t>(layer)) layer_ranks.resize(static_cast<size_t>(layer) + 1);
    layer_ranks[layer] = Narrow(ranks);
    return Status::Ok();
  }));
  auto placement = ExpertPlacement::Create(num_experts, static_cast<int>(ep_size), std::move(default_ranks),
                                           std::move(layer_ranks), num_layers);
  if (!placement.ok()) return InvalidArgument(fmt::format("{}: {}", where, placement.status().message()));
  return placement;
}

Expected<ExpertPlacement> ReadExpertPlacementFile(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const std::string text, ReadText(path));
  return ParseExpertPlacement(text, path);
}

std::string ExpertPlacementToJson(const ExpertPlacement& placement) {
  nlohmann::ordered_json json = {{"num_experts", placement.num_experts()}, {"ep_size", placement.ep_size()}};
  if (placement.num_layers() > 0) json["num_layers"] = placement.num_layers();
  const std::span<const int32_t> fallback = placement.default_ranks();
  json["default"] = std::vector<int32_t>(fallback.begin(), fallback.end());
  json["layers"] = nlohmann::ordered_json::object();
  for (const int64_t layer : placement.listed_layers()) {
    const std::span<const int32_t> ranks = placement.ranks(layer);
    json["layers"][std::to_string(layer)] = std::vector<int32_t>(ranks.begin(), ranks.end());
  }
  return json.dump() + "\n";
}

Status WriteExpertPlacementFile(const std::string& path, const ExpertPlacement& placement) {
  return WriteText(path, ExpertPlacementToJson(placement));
}

Expected<ExpertLoadFile> ParseExpertLoad(const std::string& text, const std::string& where) {
  EMBER_ASSIGN_OR_RETURN(const Json json, ParseObject(text, where));
  JsonFields fields(json, where);
  ExpertLoadFile file;
  ExpertLoad& load = file.load;
  EMBER_RETURN_IF_ERROR(fields.Int("num_experts", &load.num_experts));
  EMBER_RETURN_IF_ERROR(fields.Int("top_k", &load.top_k, /*required=*/false));
  EMBER_RETURN_IF_ERROR(ReadNumLayers(fields, where, &file.num_layers));
  const Json* layers_json = Raw(fields, json, "layers");
  EMBER_RETURN_IF_ERROR(fields.RejectUnknown());
  if (load.num_experts < 1) return InvalidArgument(fmt::format("{}: num_experts must be at least 1", where));
  if (layers_json == nullptr) return InvalidArgument(fmt::format("{}: required field 'layers' is missing", where));
  std::vector<std::pair<int64_t, std::vector<int64_t>>> rows;  // nlohmann's objects iterate in key order, not numeric
  EMBER_RETURN_IF_ERROR(ForEachLayer(layers_json, where, [&](int64_t layer, const Json& value, const std::string& name) {
    EMBER_ASSIGN_OR_RETURN(std::vector<int64_t> counts, IntList(value, 0, INT64_MAX, name));
    if (static_cast<int64_t>(counts.size()) != load.num_experts) {
      return InvalidArgument(fmt::format("{} has {} counts, num_experts is {}", name, counts.size(), load.num_experts));
    }
    if (file.num_layers > 0 && layer >= file.num_layers) {
      return InvalidArgument(fmt::format("{}: layer {} is not below num_layers {}", name, layer, file.num_layers));
    }
    rows.emplace_back(layer, std::move(counts));
    return Status::Ok();
  }));
  std::sort(rows.begin(), rows.end());
  for (auto& [layer, counts] : rows) {
    load.layers.push_back(static_cast<int32_t>(layer));
    load.tokens.insert(load.tokens.end(), counts.begin(), counts.end());
  }
  return file;
}

Expected<ExpertLoadFile> ReadExpertLoadFile(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const std::string text, ReadText(path));
  return ParseExpertLoad(text, path);
}

std::string ExpertLoadToJson(const ExpertLoad& load, int64_t num_layers) {
  nlohmann::ordered_json json = {{"num_experts", load.num_experts}, {"top_k", load.top_k}};
  if (num_layers > 0) json["num_layers"] = num_layers;
  json["layers"] = nlohmann::ordered_json::object();
  for (size_t i = 0; i < load.num_rows(); ++i) {
    const std::span<const int64_t> row = load.row(i);
    json["layers"][std::to_string(load.layers[i])] = std::vector<int64_t>(row.begin(), row.end());
  }
  return json.dump() + "\n";
}

Status WriteExpertLoadFile(const std::string& path, const ExpertLoad& load, int64_t num_layers) {
  return WriteText(path, ExpertLoadToJson(load, num_layers));
}

}  // namespace ember::exec
