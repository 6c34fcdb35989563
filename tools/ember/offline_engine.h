// What the offline tools (generate, chat, perplexity, bench) share to run a model through the
// engine, as vLLM's LLM class does: engine options for one request at a time, the model's stop
// tokens on a request, and the loop that steps the engine until every request has finished.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/engine_client.h"
#include "runner/local_engine.h"

namespace ember::tools {

// `options` for a tool that runs one request at a time: max_num_seqs 1, so the KV budget is that
// of one sequence, and, when the caller set no max_model_len, `tokens` clamped to the model's
// context (a sequence never needs more than it can hold).
EngineOptions OneRequestAtATime(EngineOptions options, int64_t tokens, const CausalLM& model);

// The model's EOS ids on `input`, as `ember serve` sets them: the first as eos_token_id, the
// others as stop_token_ids unless sampling.ignore_eos.
void AddModelStops(const std::vector<int32_t>& eos_token_ids, RequestInput* input);

// Steps `client` until nothing submitted is unfinished, handing every event to `on_output` in
// the order the engine produced them.
void RunUntilDone(EngineClient& client, const std::function<void(RequestOutput&)>& on_output);

}  // namespace ember::tools
