#include "model/causal_lm.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"

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

bool RegisterArchitecture(const std::string& model_type,
                          std::function<Expected<std::unique_ptr<CausalLM>>(const std::string& path)> factory) {
  return RegisterArchitecture(model_type, [factory = std::move(factory)](const std::string& path, const LoadOptions&) {
    return factory(path);
  });
}

std::vector<std::string> RegisteredArchitectures() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : Registry()) names.push_back(name);
  return names;
}

namespace {

// A GGUF file names its architecture in general.architecture; the factory is "gguf:<arch>".
Expected<std::unique_ptr<CausalLM>> LoadGguf(const std::string& path, const LoadOptions& options) {
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
  return it->second(path, options);
}

}  // namespace

Expected<PipelineStage> PipelineStage::ForModel(int64_t num_layers) const {
  if (num_stages < 1 || index < 0 || index >= num_stages) {
    return InvalidArgument(fmt::format("pipeline stage {} of {}", index, num_stages));
  }
  if (num_stages > num_layers) {
    return InvalidArgument(fmt::format("--pipeline-parallel-size {} is larger than the model's {} layers; use at most {}",
                                       num_stages, num_layers, num_layers));
  }
  PipelineStage stage = *this;
  if (num_stages == 1) return stage;
  const int64_t base = num_layers / num_stages, extra = num_layers % num_stages;
  stage.layers.begin = index * base + std::min<int64_t>(index, extra);
  stage.layers.count = base + (index < extra ? 1 : 0);
  return stage;
}

Status CheckForwardBatch(const CausalLM& model, const ForwardBatch& batch, const KvStore& kv) {
  const ModelInfo& info = model.info();
  const kv::KvCacheConfig& config = kv.config();
  const int64_t num_tokens = batch.num_tokens();
  const int64_t num_reqs = batch.num_reqs();
  if (num_tokens == 0 || num_reqs == 0) return InvalidArgument("Forward: the batch has no tokens");
  if (static_cast<int64_t>(batch.positions.size()) != num_tokens ||
      static_cast<int64_t>(batch.query_start_loc.size()) != num_reqs + 1) {
    return InvalidArgument(fmt::format("Forward: {} tokens, {} positions, {} requests, {} query_start_loc entries",
                                       num_tokens, batch.positions.size(), num_reqs, batch.query_start_loc.size()));
  }
  if (batch.query_start_loc.front() != 0 || batch.query_start_loc.back() != num_tokens) {
    return InvalidArgument(fmt::format("Forward: query_start_loc must run from 0 to {} tokens", num_tokens));
  }
  // The store must be laid out for this model.
  const std::vector<kv::LayerKvSpec>& specs = model.KvLayerSpecs();
  if (config.group_of_layer.size() != specs.size() || config.num_kv_heads != specs.front().num_kv_heads ||
      config.head_dim != specs.front().head_dim) {
    return InvalidArgument(fmt::format("Forward: the KV store holds {} layers of {} KV heads x {}, the model has "
                                       "{} layers of {} x {}; plan it from KvLayerSpecs()",
                                       config.group_of_layer.size(), config.num_kv_heads, config.head_dim,
                                       specs.size(), specs.front().num_kv_heads, specs.front().head_dim));
  }
  if (batch.groups.size() != config.groups.size()) {
    return InvalidArgument(fmt::format("Forward: {} KV group tables for {} KV groups", batch.groups.size(),
                                       config.groups.size()));
  }
  for (int64_t r = 0; r < num_reqs; ++r) {
    const int32_t begin = batch.query_start_loc[r], end = batch.query_start_loc[r + 1];
    if (begin > end) return InvalidArgument(fmt::format("Forward: query_start_loc decreases at request {}", r));
    const int64_t seq_len = batch.seq_lens[r];
    if (seq_len > info.max_position_embeddings) {
      return OutOfRange(fmt::format("sequence of {} tokens exceeds the model's context length {}", seq_len,
                                    info.max_position_embeddings));
    }
    for (int32_t t = begin; t < end; ++t) {
      if (batch.token_ids[t] < 0 || batch.token_ids[t] >= info.vocab_size) {
        return InvalidArgument(fmt::format("token id {} at index {} is outside the vocabulary [0, {})",
                                           batch.token_ids[t], t, info.vocab_size));
      }
      if (batch.positions[t] < 0 || batch.positions[t] >= seq_len) {
        return OutOfRange(fmt::format("position {} of token {} is outside request {}'s sequence of {} tokens",
                                      batch.positions[t], t, r, seq_len));
      }
    }
  }
  for (size_t g = 0; g < batch.groups.size(); ++g) {
    const KvGroupTable& table = batch.groups[g];
    if (static_cast<int64_t>(table.slot_mapping.size()) != num_tokens ||
        static_cast<int64_t>(table.block_table.size()) != num_reqs * table.max_blocks_per_req) {
      return InvalidArgument(fmt::format("Forward: KV group {} has {} slots for {} tokens and {} block ids for {} "
                                         "requests x {}", g, table.slot_mapping.size(), num_tokens,
                                         table.block_table.size(), num_reqs, table.max_blocks_per_req));
    }
    for (int64_t slot : table.slot_mapping) {
      if (slot < -1 || slot >= kv.num_slots()) {
        return InvalidArgument(fmt::format("Forward: KV group {} slot {} outside [-1, {})", g, slot, kv.num_slots()));
      }
    }
    for (int32_t block : table.block_table) {
      if (block < 0 || block >= config.num_blocks) {
        return InvalidArgument(fmt::format("Forward: KV group {} block id {} outside [0, {})", g, block,
                                           config.num_blocks));
      }
    }
    for (int64_t r = 0; r < num_reqs; ++r) {
      if (batch.seq_lens[r] > table.max_blocks_per_req * config.block_size) {
        return InvalidArgument(fmt::format("Forward: request {} has {} tokens but KV group {} maps only {} blocks "
                                           "of {}", r, batch.seq_lens[r], g, table.max_blocks_per_req,
                                           config.block_size));
      }
    }
  }
  for (int32_t row : batch.logits_indices) {
    if (row < 0 || row >= num_tokens) {
      return InvalidArgument(fmt::format("Forward: logits index {} outside the batch of {} tokens", row, num_tokens));
    }
  }
  for (size_t i = 0; i < batch.hidden_state_layers.size(); ++i) {
    const int32_t layer = batch.hidden_state_layers[i];
    if (layer < 0 || layer >= info.num_layers || (i > 0 && layer <= batch.hidden_state_layers[i - 1])) {
      return InvalidArgument(fmt::format("Forward: hidden state layers must increase within [0, {}); got {}",
                                         info.num_layers, layer));
    }
  }
  for (size_t i = 0; i < batch.embedding_rows.size(); ++i) {
    const int32_t row = batch.embedding_rows[i];
    if (row < 0 || row >= num_tokens || (i > 0 && row <= batch.embedding_rows[i - 1])) {
      return InvalidArgument(fmt::format("Forward: embedding rows must increase within the batch of {} tokens; got "
                                         "{}", num_tokens, row));
    }
  }
  if (batch.input_embeddings.size() != batch.embedding_rows.size() * static_cast<size_t>(info.hidden_size)) {
    return InvalidArgument(fmt::format("Forward: {} input embedding floats for {} rows of {}",
                                       batch.input_embeddings.size(), batch.embedding_rows.size(), info.hidden_size));
  }
  return Status::Ok();
}

Status CheckExpertPlacement(const exec::ExpertPlacement& placement, const ModelInfo& info) {
  const Status matches = placement.CheckModel(info.num_layers, info.num_experts, info.moe_layers);
  if (matches.ok()) return matches;
  return InvalidArgument(fmt::format("--expert-placement does not fit this {} model: {}", info.architecture,
                                     matches.message()));
}

namespace {

Expected<std::unique_ptr<CausalLM>> LoadModelFiles(const std::string& model_dir, const LoadOptions& options) {
  std::error_code error;
  if (std::filesystem::is_regular_file(model_dir, error)) {
    if (options.quantization) {
      return InvalidArgument(fmt::format("{}: --quantization converts safetensors checkpoints; a GGUF file keeps its "
                                         "own quantization types", model_dir));
    }
    return LoadGguf(model_dir, options);
  }
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
  return it->second(model_dir, options);
}

}  // namespace

Expected<std::unique_ptr<CausalLM>> LoadModel(const std::string& model_dir, const LoadOptions& options) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<CausalLM> model, LoadModelFiles(model_dir, options));
  // Every architecture, GGUF ones included (their factories take no options): a placement for
  // a dense model, or for another expert or layer count, is refused here.
  if (options.expert_placement) EMBER_RETURN_IF_ERROR(CheckExpertPlacement(*options.expert_placement, model->info()));
  return model;
}

}  // namespace ember
