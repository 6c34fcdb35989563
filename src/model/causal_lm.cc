#include "model/causal_lm.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/gguf.h"

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

namespace {

// A GGUF file names its architecture in general.architecture; the factory is "gguf:<arch>".
Expected<std::unique_ptr<CausalLM>> LoadGguf(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  const auto arch = file->GetString("general.architecture");
  if (!arch) return InvalidArgument(fmt::format("{}: GGUF file without general.architecture", path));
  auto it = Registry().find("gguf:" + std::string(*arch));
  if (it == Registry().end()) {
    std::string known;
    for (const auto& name : RegisteredArchitectures()) {
      if (name.rfind("gguf:", 0) == 0) known += (known.empty() ? "" : ", ") + name.substr(5);
    }
    return Unimplemented(fmt::format("{}: GGUF architecture '{}' is not supported; ember runs: {}", path, *arch,
                                     known));
  }
  return it->second(path);
}

}  // namespace

Expected<std::unique_ptr<CausalLM>> LoadModel(const std::string& model_dir) {
  std::error_code error;
  if (std::filesystem::is_regular_file(model_dir, error)) return LoadGguf(model_dir);
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
