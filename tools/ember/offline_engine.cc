#include "tools/ember/offline_engine.h"

#include <algorithm>

namespace ember::tools {

EngineOptions OneRequestAtATime(EngineOptions options, int64_t tokens, const CausalLM& model) {
  options.max_num_seqs = 1;
  if (options.max_model_len == 0) {
    const int64_t context = model.info().max_position_embeddings;
    options.max_model_len = context > 0 ? std::min(tokens, context) : tokens;
  }
  return options;
}

void AddModelStops(const std::vector<int32_t>& eos_token_ids, RequestInput* input) {
  if (eos_token_ids.empty()) return;
  input->eos_token_id = eos_token_ids.front();
  if (input->sampling.ignore_eos) return;
  input->sampling.stop_token_ids.insert(input->sampling.stop_token_ids.end(), eos_token_ids.begin() + 1,
                                        eos_token_ids.end());
}

void RunUntilDone(EngineClient& client, const std::function<void(RequestOutput&)>& on_output) {
  while (client.HasUnfinished()) {
    for (RequestOutput& out : client.Step()) on_output(out);
  }
}

}  // namespace ember::tools
