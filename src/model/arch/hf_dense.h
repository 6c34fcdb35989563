// Dense decoders from Hugging Face model directories: model_type llama, qwen3, gemma3_text and
// gemma3 (the text decoder of Gemma3ForConditionalGeneration). See hf_dense.cc.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "model/causal_lm.h"
#include "model/linear.h"

namespace ember {

// A bf16 / f32 matrix as Linear::Dense, an f16 one through the GGUF F16 matmul, both over the
// tensor's own bytes (which must outlive the Linear).
Expected<Linear> LinearFromTensor(const TensorView& t);

// What LoadModel calls for those model types.
Expected<std::unique_ptr<CausalLM>> LoadHfDenseDirectory(const std::string& dir, const LoadOptions& options);

}  // namespace ember
