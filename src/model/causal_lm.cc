#include "model/causal_lm.h"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ember {
namespace {

std::map<std::string, ModelFactory>& Registry() {
  static std::map<std::string, ModelFactory> registry;
  return registry;
}

}  // namespace

bool RegisterArchitecture(const std::string& model_type, ModelFactory factory) {
  Registry()[model_type] = std::move(factory);
  return true;
}

std::vector<std::string> RegisteredArchitectures() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : Registry()) names.push_back(name);
  return names;
}

Expected<std::unique_ptr<CausalLM>> LoadModel(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  std::ifstream in(path);
  if (!in) {
    return NotFound(fmt::format("cannot open {}: --model must be a Hugging Face model directory with "
                                "config.json and *.safetensors", path));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::json json = nlohmann::json::parse(buffer.str(), nullptr, false);
  if (json.is_discarded() || !json.is_object()) return InvalidArgument(path + ": not a valid JSON object");
  const std::string model_type = json.value("model_type", std::string());
  auto it = Registry().find(model_type);
  if (it == Registry().end()) {
    std::string known;
    for (const auto& name : RegisteredArchitectures()) known += (known.empty() ? "" : ", ") + name;
    return Unimplemented(fmt::format("{}: model_type '{}' is not supported; ember knows: {}", path, model_type,
                                     known));
  }
  return it->second(model_dir);
}

}  // namespace ember
