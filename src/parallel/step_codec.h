// What rank 0 sends its worker ranks every engine step, and its byte encoding.
//
// Under tensor parallelism only rank 0 schedules and samples; every rank runs the model on its
// shard. Each step rank 0 broadcasts a WorkerStep, and a worker applies it to its own runner's
// request states exactly as rank 0's runner does, so that every rank builds the same batch.
//
// The encoding is little-endian and fixed-width, after a magic number and a version. Decoding
// is the input of another process: it checks every length against the bytes that remain and
// every flag's value, and returns InvalidArgument for anything malformed, never crashing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "engine/scheduler_output.h"

namespace ember::parallel {

struct WorkerStep {
  // Rank 0 is stopping: the worker leaves its loop (the other fields are empty).
  bool shutdown = false;
  // Data parallelism: this rank has no tokens in `output` but another rank has, so it runs the
  // model's expert-parallel exchanges with 0 tokens (ModelRunner::ExecuteWithoutTokens).
  bool forward_without_tokens = false;
  SchedulerOutput output;
  // What rank 0 sampled in the previous step (its ModelRunnerOutput.reqs and
  // sampled_token_ids): worker runners append these to their request states before applying
  // `output`. Parallel: one token list per request.
  std::vector<RequestIndex> sampled_reqs;
  std::vector<std::vector<int32_t>> sampled_token_ids;
};

// Every field of `step`, except each request's SamplingParams::constraint: a compiled grammar is
// an object, not data, and workers never sample, so they have no use for it (decoded requests
// have none).
std::vector<uint8_t> EncodeWorkerStep(const WorkerStep& step);

// The inverse of EncodeWorkerStep. InvalidArgument when `bytes` are not exactly one encoded
// WorkerStep of this version: truncated, trailing bytes, a count larger than the bytes left, a
// flag that is neither 0 nor 1, or parallel lists of different lengths.
Expected<WorkerStep> DecodeWorkerStep(std::span<const uint8_t> bytes);

// Data parallelism: what a worker rank's runner returns to rank 0 each step (every field; the
// times as their bits). DecodeRunnerOutput checks it as DecodeWorkerStep does: InvalidArgument
// for truncated, trailing or inconsistent bytes.
std::vector<uint8_t> EncodeRunnerOutput(const ModelRunnerOutput& output);
Expected<ModelRunnerOutput> DecodeRunnerOutput(std::span<const uint8_t> bytes);

}  // namespace ember::parallel
