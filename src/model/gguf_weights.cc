#include "model/gguf_weights.h"

#include <fmt/format.h>

#include "quant/gguf_dequant.h"

namespace ember {

Status GgufWeights::ReadArchitecture() {
  auto arch = file_->GetString("general.architecture");
  if (!arch) return InvalidArgument(fmt::format("{}: missing general.architecture", file_->path()));
  architecture_ = std::string(*arch);
  return Status::Ok();
}

Expected<int64_t> GgufWeights::Int(const std::string& suffix) const {
  const std::string key = architecture_ + "." + suffix;
  auto value = file_->GetInt(key);
  if (!value) return InvalidArgument(fmt::format("{}: missing or non-integer metadata key {}", file_->path(), key));
  return *value;
}

int64_t GgufWeights::IntOr(const std::string& suffix, int64_t fallback) const {
  return file_->GetInt(architecture_ + "." + suffix).value_or(fallback);
}

Expected<double> GgufWeights::Float(const std::string& suffix) const {
  const std::string key = architecture_ + "." + suffix;
  auto value = file_->GetFloat(key);
  if (!value) return InvalidArgument(fmt::format("{}: missing or non-numeric metadata key {}", file_->path(), key));
  return *value;
}

double GgufWeights::FloatOr(const std::string& suffix, double fallback) const {
  return file_->GetFloat(architecture_ + "." + suffix).value_or(fallback);
}

Expected<Linear> GgufWeights::Matrix(const std::string& name, int64_t out_features, int64_t in_features,
                                     const MatrixSplit& split) const {
  const GgufTensor* t = file_->FindTensor(name);
  if (t == nullptr) return NotFound(fmt::format("{}: tensor {} is missing", file_->path(), name));
  if (t->dims.size() != 2 || t->dims[0] != in_features || t->dims[1] != out_features) {
    std::string dims;
    for (int64_t d : t->dims) dims += fmt::format("{}{}", dims.empty() ? "" : ", ", d);
    return InvalidArgument(fmt::format("{}: tensor {} has GGUF dims [{}], expected [{}, {}] (in, out) from the "
                                       "model's hyperparameters",
                                       file_->path(), name, dims, in_features, out_features));
  }
  if (!quant::GgufMatMulSupports(t->type.type)) {
    return Unimplemented(fmt::format("{}: tensor {} has type {}, which ember cannot multiply yet", file_->path(),
                                     name, t->type.name));
  }
  // Unquantized bf16 / f32 matrices take the dense kernels (register-tiled GEMM, bf16 widened
  // exactly) rather than GgufMatMul's plain-float row dots, which exist only for completeness:
  // GGUF stores them row-major [out, in], as a safetensors checkpoint does.
  Expected<Linear> linear = [&]() -> Expected<Linear> {
    if (t->type.type == GgmlType::kBF16 || t->type.type == GgmlType::kF32) {
      const DType dtype = t->type.type == GgmlType::kBF16 ? DType::kBF16 : DType::kF32;
      return SliceDense(TensorView{dtype, Shape{out_features, in_features}, t->data}, split);
    }
    quant::QuantMatrix m{t->type.type, t->data, out_features, in_features, t->bytes / out_features};
    return SliceQuantized(m, split);
  }();
  if (!linear.ok()) return InvalidArgument(fmt::format("{}: tensor {}: {}", file_->path(), name, linear.status().message()));
  // A block of columns is a copy: the rank keeps only that, not the pages it read it from.
  if (split.kind == MatrixSplit::Kind::kColumns) MappedFile::DropResidentPages(static_cast<const uint8_t*>(t->data), t->bytes);
  return linear;
}

Expected<std::vector<float>> GgufWeights::Vector(const std::string& name, int64_t n) const {
  const GgufTensor* t = file_->FindTensor(name);
  if (t == nullptr) return NotFound(fmt::format("{}: tensor {} is missing", file_->path(), name));
  if (t->dims.size() != 1 || t->dims[0] != n) {
    return InvalidArgument(fmt::format("{}: tensor {} should be a vector of {} elements", file_->path(), name, n));
  }
  std::vector<float> out(n);
  Status status = quant::DequantizeRow(t->type.type, t->data, n, out.data());
  if (!status.ok()) return InvalidArgument(fmt::format("{}: tensor {}: {}", file_->path(), name, status.message()));
  return out;
}

}  // namespace ember
