#include "formats/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "core/logging.h"
#include "formats/mapped_file.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr std::string_view kRedownload = "re-download or re-convert the checkpoint";
// model.safetensors.index.json is a few hundred KB even for the largest models.
constexpr uintmax_t kMaxIndexBytes = 100u << 20;

std::string JoinPath(const std::string& dir, const std::string& file) {
  return (fs::path(dir) / file).string();
}

// Shard names must stay inside the model directory: an index is downloaded data, and
// "../../somewhere" or "/abs/path" in it must not make us map arbitrary files.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

// Levenshtein distance, giving up (returning limit + 1) once it must exceed `limit`.
size_t EditDistance(std::string_view a, std::string_view b, size_t limit) {
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > limit) return limit + 1;
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    size_t row_min = current[0];
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
      row_min = std::min(row_min, current[j]);
    }
    if (row_min > limit) return limit + 1;
    std::swap(previous, current);
  }
  return previous[b.size()];
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// What is in a directory that has neither weight file, to turn "not found" into advice.
std::string DescribeMissingWeights(const std::string& dir) {
  std::vector<std::string> safetensors, pytorch;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (EndsWith(name, ".safetensors")) safetensors.push_back(name);
    if (EndsWith(name, ".bin") || EndsWith(name, ".pt") || EndsWith(name, ".pth")) {
      pytorch.push_back(name);
    }
  }
  std::sort(safetensors.begin(), safetensors.end());
  std::sort(pytorch.begin(), pytorch.end());
  if (!safetensors.empty()) {
    return fmt::format(
        "; the directory has {} .safetensors file(s) (e.g. '{}') but no index: open "
        "a single file with OpenFile() or restore {}",
        safetensors.size(), safetensors.front(), Checkpoint::kIndexFileName);
  }
  if (!pytorch.empty()) {
    return fmt::format("; only PyTorch weights were found (e.g. '{}'): convert them to safetensors",
                       pytorch.front());
  }
  return "; download the model's weights into it";
}

Expected<std::string> ReadSmallFile(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return IoError(fmt::format("'{}': cannot stat: {}", path, ec.message()));
  if (size > kMaxIndexBytes) {
    return DataLoss(
        fmt::format("'{}' is {} bytes, more than the {} MB an index can plausibly need; "
                    "{}",
                    path, size, kMaxIndexBytes >> 20, kRedownload));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(fmt::format("'{}': cannot open for reading", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(fmt::format("'{}': read failed", path));
  return text.str();
}

std::string Truncated(std::string text, size_t max_chars) {
  if (text.size() > max_chars) text = text.substr(0, max_chars - 3) + "...";
  return text;
}

}  // namespace

Expected<std::unique_ptr<Checkpoint>> Checkpoint::OpenFile(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  checkpoint->source_ = path;
  for (const SafetensorTensor& t : file->tensors()) {
    checkpoint->tensors_.emplace(t.name, Entry{file.get(), &t});
  }
  checkpoint->files_.push_back(std::move(file));
  return checkpoint;
}

Expected<std::unique_ptr<Checkpoint>> Checkpoint::OpenDirectory(const std::string& dir) {
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (!fs::exists(status)) {
    return NotFound(fmt::format("checkpoint directory '{}' does not exist", dir));
  }
  if (fs::is_regular_file(status)) return OpenFile(dir);
  if (!fs::is_directory(status)) {
    return IoError(fmt::format("checkpoint path '{}' is neither a directory nor a file", dir));
  }

  const std::string single = JoinPath(dir, kSingleFileName);
  if (fs::exists(single, ec)) {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, OpenFile(single));
    checkpoint->source_ = dir;
    return checkpoint;
  }
  const std::string index = JoinPath(dir, kIndexFileName);
  if (!fs::exists(index, ec)) {
    return NotFound(fmt::format("checkpoint directory '{}' has neither {} nor {}{}", dir,
                                kSingleFileName, kIndexFileName, DescribeMissingWeights(dir)));
  }
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  checkpoint->source_ = dir;
  EMBER_RETURN_IF_ERROR(checkpoint->OpenIndex(index));
  return checkpoint;
}

Status Checkpoint::OpenIndex(const std::string& index_path) {
  EMBER_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(index_path));
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    return DataLoss(
        fmt::format("index '{}' is not valid JSON: {}; {}", index_path, e.what(), kRedownload));
  }
  if (!root.is_object()) {
    return DataLoss(
        fmt::format("index '{}' is a JSON {}, expected an object with \"weight_map\"; {}",
                    index_path, root.type_name(), kRedownload));
  }
  auto metadata = root.find("metadata");
  if (metadata != root.end() && !metadata->is_null()) {
    if (!metadata->is_object()) {
      return DataLoss(fmt::format("index '{}': \"metadata\" is a JSON {}, expected an object; {}",
                                  index_path, metadata->type_name(), kRedownload));
    }
    for (const auto& [key, value] : metadata->items()) {
      index_metadata_[key] = value.is_string()
                                 ? value.get<std::string>()
                                 : value.dump(-1, ' ', false, Json::error_handler_t::replace);
    }
  }
  auto weight_map = root.find("weight_map");
  if (weight_map == root.end() || !weight_map->is_object() || weight_map->empty()) {
    return DataLoss(fmt::format(
        "index '{}' has {} \"weight_map\", expected a non-empty object "
        "mapping tensor names to shard files; {}",
        index_path, weight_map == root.end() ? "no" : "an empty or non-object", kRedownload));
  }

  // Open each shard once, in name order so that errors are deterministic.
  std::map<std::string, std::string> tensor_to_shard;  // from the index
  std::map<std::string, size_t> shard_to_file;         // shard name -> files_ index
  std::map<std::string, std::string> example_tensor;   // shard name -> a tensor naming it
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (!shard.is_string() || !IsPlainFileName(shard.get<std::string>())) {
      return DataLoss(fmt::format(
          "index '{}': tensor '{}' maps to {}, expected the file name of "
          "a shard in the same directory; {}",
          index_path, tensor,
          Truncated(shard.dump(-1, ' ', true, Json::error_handler_t::replace), 80), kRedownload));
    }
    tensor_to_shard[tensor] = shard.get<std::string>();
    example_tensor.emplace(shard.get<std::string>(), tensor);
  }
  for (const auto& [shard, tensor] : example_tensor) {
    const std::string shard_path = JoinPath(source_, shard);
    Expected<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(shard_path);
    if (!file.ok()) {
      if (file.status().code() == StatusCode::kNotFound) {
        return NotFound(
            fmt::format("index '{}' puts tensor '{}' in shard '{}', but '{}' does not "
                        "exist; the download is incomplete, fetch the missing shard",
                        index_path, tensor, shard, shard_path));
      }
      return file.status();
    }
    shard_to_file[shard] = files_.size();
    files_.push_back(std::move(file).value());
  }

  // Where every tensor actually is, across all shards.
  std::unordered_map<std::string_view, size_t> found_in;
  for (size_t f = 0; f < files_.size(); ++f) {
    for (const SafetensorTensor& t : files_[f]->tensors()) {
      auto [it, inserted] = found_in.emplace(t.name, f);
      if (!inserted) {
        return DataLoss(
            fmt::format("tensor '{}' is stored in two shards, '{}' and '{}'; the shards "
                        "come from different conversions, {}",
                        t.name, files_[it->second]->path(), files_[f]->path(), kRedownload));
      }
    }
  }
  for (const auto& [tensor, shard] : tensor_to_shard) {
    const SafetensorsFile& file = *files_[shard_to_file[shard]];
    const SafetensorTensor* t = file.Find(tensor);
    if (t == nullptr) {
      auto elsewhere = found_in.find(tensor);
      const std::string hint =
          elsewhere == found_in.end()
              ? std::string(" and no other shard has it")
              : fmt::format(" (it is in '{}' instead)", files_[elsewhere->second]->path());
      return DataLoss(
          fmt::format("index '{}' puts tensor '{}' in shard '{}', but that shard has no "
                      "such tensor{}; the index and shards do not match, {}",
                      index_path, tensor, file.path(), hint, kRedownload));
    }
    tensors_.emplace(tensor, Entry{&file, t});
  }

  // Tensors the index does not mention are still served (transformers loads every tensor of
  // each listed shard), but an index that forgets tensors usually means a hand-edited index.
  size_t unlisted = 0;
  std::string first_unlisted;
  for (const auto& file : files_) {
    for (const SafetensorTensor& t : file->tensors()) {
      if (tensor_to_shard.count(t.name) != 0) continue;
      if (unlisted++ == 0) first_unlisted = fmt::format("'{}' in '{}'", t.name, file->path());
      tensors_.emplace(t.name, Entry{file.get(), &t});
    }
  }
  if (unlisted > 0) {
    EMBER_LOG_WARN(
        "checkpoint '{}': {} tensor(s) in the shards are missing from {} (first: {}); "
        "loading them anyway",
        source_, unlisted, kIndexFileName, first_unlisted);
  }
  return Status::Ok();
}

const SafetensorTensor* Checkpoint::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.tensor;
}

std::string Checkpoint::SuggestName(std::string_view name) const {
  if (name.empty()) return "";
  // A prefix added or dropped ("model.layers.0..." vs "layers.0...") is the usual near miss.
  for (const auto& [candidate, entry] : tensors_) {
    std::string_view c = candidate;
    if (c.size() > name.size() && EndsWith(c, name) && c[c.size() - name.size() - 1] == '.') {
      return candidate;
    }
    if (name.size() > c.size() && EndsWith(name, c) && name[name.size() - c.size() - 1] == '.') {
      return candidate;
    }
  }
  // Otherwise a typo: a handful of edits, scaled with the length so short names stay strict.
  const size_t limit = std::max<size_t>(2, name.size() / 10);
  std::string best;
  size_t best_distance = limit + 1;
  for (const auto& [candidate, entry] : tensors_) {
    const size_t d = EditDistance(name, candidate, std::min(limit, best_distance));
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

Expected<TensorView> Checkpoint::Get(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it != tensors_.end()) return it->second.tensor->view;
  const std::string suggestion = SuggestName(name);
  return NotFound(fmt::format(
      "tensor '{}' not found in checkpoint '{}' ({} tensors){}", name, source_, tensors_.size(),
      suggestion.empty() ? std::string("; the checkpoint does not match this architecture")
                         : fmt::format("; did you mean '{}'?", suggestion)));
}

Expected<TensorView> Checkpoint::Require(std::string_view name,
                                         std::initializer_list<DType> allowed_dtypes,
                                         const Shape& expected_shape,
                                         std::string_view shape_source) const {
  EMBER_ASSIGN_OR_RETURN(TensorView view, Get(name));
  const std::string file = FileOf(name);
  if (allowed_dtypes.size() != 0 &&
      std::find(allowed_dtypes.begin(), allowed_dtypes.end(), view.dtype) == allowed_dtypes.end()) {
    std::string allowed;
    for (DType d : allowed_dtypes)
      allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", DTypeName(d));
    return InvalidArgument(
        fmt::format("tensor '{}' in file '{}' has dtype {}, expected one of {}; "
                    "convert the checkpoint to a supported dtype",
                    name, file, DTypeName(view.dtype), allowed));
  }
  bool shape_ok = view.shape.rank() == expected_shape.rank();
  for (int i = 0; shape_ok && i < expected_shape.rank(); ++i) {
    shape_ok = expected_shape[i] == -1 || expected_shape[i] == view.shape[i];
  }
  if (!shape_ok) {
    return InvalidArgument(fmt::format(
        "tensor '{}' in file '{}' has shape {}, expected {}{}; the checkpoint does not match its "
        "config.json",
        name, file, view.shape.ToString(), expected_shape.ToString(),
        shape_source.empty() ? std::string() : fmt::format(" ({})", shape_source)));
  }
  return view;
}

std::vector<std::string> Checkpoint::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, entry] : tensors_) names.push_back(name);
  return names;  // std::map iterates in sorted order
}

int64_t Checkpoint::TotalTensorBytes() const {
  int64_t total = 0;
  for (const auto& [name, entry] : tensors_) total += entry.tensor->NumBytes();
  return total;
}

std::string Checkpoint::FileOf(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? std::string() : it->second.file->path();
}

void Checkpoint::DropResidentPages() const {
  for (const auto& file : files_) MappedFile::DropResidentPages(file->mapped_bytes(), file->file_size());
}

}  // namespace ember
