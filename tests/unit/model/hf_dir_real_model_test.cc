// The real SmolLM2-135M-Instruct (and Gemma 3 270M) as a Hugging Face model directory (scripts/gguf_to_hf_dir.py:
// the GGUF's weights dequantized to f32 safetensors under HF names, q/k rows un-permuted,
// tokenizer.json + tokenizer_config.json built from the GGUF vocabulary) against the same weights
// as an F32 GGUF (scripts/make_dense_gguf.py --type f32): the same token ids from both tokenizers,
// the same chat template, the same logits to f32 noise and the same greedy text. Skips unless
// both are in the model cache ($EMBER_MODEL_CACHE or ~/.cache/ember/models):
//
//   .venv/bin/python scripts/make_dense_gguf.py --type f32
//   .venv/bin/python scripts/gguf_to_hf_dir.py
//
// Gemma 3 the same way (--src gemma-3-270m-q4_k_m.gguf for both scripts): norm gains back from
// 1 + w, no q/k permutation, sliding layers, local RoPE base and query_pre_attn_scalar as
// config.json fields; its tokenizer.json (SentencePiece-style, read with Hugging Face's rules)
// gives a chat prompt the GGUF's ids and decodes the greedy reply to the GGUF's text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "support/single_sequence.h"
#include "tokenizer/model_tokenizer.h"

namespace ember {
namespace {

std::string CachePath(const std::string& name) {
  const char* cache = std::getenv("EMBER_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  return (cache && *cache ? std::string(cache) : std::string(home ? home : "/") + "/.cache/ember/models") + "/" + name;
}

const std::string kGguf = CachePath("SmolLM2-135M-Instruct.F32.gguf");
const std::string kDir = CachePath("SmolLM2-135M-Instruct-hf-f32");
const std::string kQuantized = CachePath("SmolLM2-135M-Instruct.Q4_1.gguf");
constexpr int kGreedyTokens = 48;

#define SKIP_WITHOUT_MODELS()                                                                                 \
  if (!std::filesystem::exists(kGguf) || !std::filesystem::exists(kDir + "/config.json")) {                   \
    GTEST_SKIP() << "needs " << kGguf << " and " << kDir                                                      \
                 << " (scripts/make_dense_gguf.py --type f32; scripts/gguf_to_hf_dir.py)";                    \
  }

std::vector<int32_t> ChatPrompt(const std::string& model_path) {
  auto tokenizer = LoadModelTokenizer(model_path);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const std::string text =
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
      "<|im_start|>user\nWrite a short poem about the sea, and explain 12 + 30 = 42.<|im_end|>\n"
      "<|im_start|>assistant\n";
  return (*tokenizer)->Encode(text, /*add_special=*/true, /*parse_special=*/true);
}

struct ModelRun {
  std::vector<float> prompt_logits;  // [prompt, vocab]
  std::vector<int32_t> greedy;
  int64_t vocab = 0;
};

ModelRun RunModel(const std::string& path, const std::vector<int32_t>& prompt) {
  ModelRun run;
  auto model = LoadModel(path);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return run;
  run.vocab = (*model)->info().vocab_size;
  const int64_t n = static_cast<int64_t>(prompt.size());
  auto sequence = test::SingleSequence::Create(model->get(), n + kGreedyTokens, kv::KvDtype::kF32);
  EXPECT_TRUE(sequence.ok()) << sequence.status().ToString();
  EXPECT_TRUE(sequence->Append(prompt.data(), n, /*all_logits=*/true, &run.prompt_logits).ok());
  std::vector<float> logits(run.prompt_logits.end() - run.vocab, run.prompt_logits.end());
  for (int i = 0; i < kGreedyTokens; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    run.greedy.push_back(next);
    EXPECT_TRUE(sequence->Append(&next, 1, false, &logits).ok());
  }
  return run;
}

TEST(HfDirRealModelTest, SmolLM2DirectoryTokenizerAndTemplateEqualTheGguf) {
  SKIP_WITHOUT_MODELS();
  EXPECT_EQ(ChatPrompt(kDir), ChatPrompt(kGguf));
  auto dir_template = LoadModelChatTemplateSource(kDir);
  auto gguf_template = LoadModelChatTemplateSource(kGguf);
  ASSERT_TRUE(dir_template.ok()) << dir_template.status().ToString();
  ASSERT_TRUE(gguf_template.ok()) << gguf_template.status().ToString();
  EXPECT_EQ(*dir_template, *gguf_template);
  auto dir_tok = LoadModelTokenizer(kDir);
  auto gguf_tok = LoadModelTokenizer(kGguf);
  ASSERT_TRUE(dir_tok.ok() && gguf_tok.ok());
  EXPECT_EQ((*dir_tok)->bos_id(), (*gguf_tok)->bos_id());
  EXPECT_EQ((*dir_tok)->eos_id(), (*gguf_tok)->eos_id());
}

// Both are f32 weights with the same values; the GGUF runs the permuted rows through
// interleaved RoPE with the GGUF F32 matmul, the directory the HF rows through rotate-half RoPE
// with kernels::MatMul. A wrong un-permutation or RoPE layout moves logits by whole units; the
// two matmuls differ by summation order only (~1e-6 of the logit scale over 30 layers).
float WorstRelativeError(const ModelRun& a, const ModelRun& b, size_t rows) {
  float worst = 0.0f;
  for (size_t r = 0; r < rows; ++r) {
    float scale = 1.0f;
    for (int64_t v = 0; v < a.vocab; ++v) scale = std::max(scale, std::fabs(a.prompt_logits[r * a.vocab + v]));
    for (int64_t v = 0; v < a.vocab; ++v) {
      const size_t i = r * a.vocab + v;
      worst = std::max(worst, std::fabs(b.prompt_logits[i] - a.prompt_logits[i]) / scale);
    }
  }
  return worst;
}

TEST(HfDirRealModelTest, SmolLM2DirectoryMatchesF32GgufLogitsAndGreedyText) {
  SKIP_WITHOUT_MODELS();
  const std::vector<int32_t> prompt = ChatPrompt(kGguf);
  const ModelRun gguf = RunModel(kGguf, prompt);
  const ModelRun dir = RunModel(kDir, prompt);
  ASSERT_EQ(gguf.vocab, dir.vocab);
  ASSERT_EQ(gguf.prompt_logits.size(), dir.prompt_logits.size());
  const float worst = WorstRelativeError(gguf, dir, prompt.size());
  std::printf("[ SmolLM2 ] directory vs F32 GGUF: worst relative logit error over %zu positions: %.3g\n",
              prompt.size(), worst);
  EXPECT_LT(worst, 1e-4f);
  EXPECT_EQ(dir.greedy, gguf.greedy);
  auto tokenizer = LoadModelTokenizer(kDir);
  ASSERT_TRUE(tokenizer.ok());
  std::printf("[ SmolLM2 ] directory greedy text: %s\n", (*tokenizer)->Decode(dir.greedy, true).c_str());

  // For the record: the Q4_1 file these weights came from quantizes activations in its dot
  // products, so its greedy text may part from the f32 one; how far it agrees is printed only.
  if (std::filesystem::exists(kQuantized)) {
    const ModelRun q = RunModel(kQuantized, prompt);
    size_t same = 0;
    while (same < q.greedy.size() && q.greedy[same] == dir.greedy[same]) ++same;
    std::printf("[ SmolLM2 ] Q4_1 GGUF agrees with the directory on the first %zu of %d greedy tokens\n", same,
                kGreedyTokens);
  }
}

// Gemma 3: the directory's zero-centred norms (+1 at load), rotate-half RoPE on unpermuted rows
// with the local base on 15 of 18 layers and the 512-key window, against the GGUF's folded norms.
// The prompt is longer than the window so sliding layers drop keys.
TEST(HfDirRealModelTest, Gemma3DirectoryMatchesF32GgufLogitsAndGreedyIds) {
  const std::string gguf_path = CachePath("gemma-3-270m-q4_k_m.F32.gguf");
  const std::string dir_path = CachePath("gemma-3-270m-q4_k_m-hf-f32");
  if (!std::filesystem::exists(gguf_path) || !std::filesystem::exists(dir_path + "/config.json")) {
    GTEST_SKIP() << "needs " << gguf_path << " and " << dir_path << " (the two scripts with --src "
                 << "gemma-3-270m-q4_k_m.gguf)";
  }
  std::vector<int32_t> prompt = {2};
  for (int i = 0; i < 599; ++i) prompt.push_back(300 + (i * 7919) % 20000);
  const ModelRun gguf = RunModel(gguf_path, prompt);
  const ModelRun dir = RunModel(dir_path, prompt);
  ASSERT_EQ(gguf.prompt_logits.size(), dir.prompt_logits.size());
  const float worst = WorstRelativeError(gguf, dir, prompt.size());
  std::printf("[ Gemma 3 ] directory vs F32 GGUF: worst relative logit error over %zu positions: %.3g\n",
              prompt.size(), worst);
  EXPECT_LT(worst, 1e-4f);
  EXPECT_EQ(dir.greedy, gguf.greedy);
}

TEST(HfDirRealModelTest, Gemma3DirectoryTokenizerAndTemplateEqualTheGguf) {
  const std::string gguf_path = CachePath("gemma-3-270m-q4_k_m.F32.gguf");
  const std::string dir_path = CachePath("gemma-3-270m-q4_k_m-hf-f32");
  if (!std::filesystem::exists(gguf_path) || !std::filesystem::exists(dir_path + "/tokenizer.json")) {
    GTEST_SKIP() << "needs " << gguf_path << " and " << dir_path << "/tokenizer.json (the two scripts with --src "
                 << "gemma-3-270m-q4_k_m.gguf)";
  }
  auto dir_tok = LoadModelTokenizer(dir_path);
  auto gguf_tok = LoadModelTokenizer(gguf_path);
  ASSERT_TRUE(dir_tok.ok()) << dir_tok.status().ToString();
  ASSERT_TRUE(gguf_tok.ok()) << gguf_tok.status().ToString();
  EXPECT_EQ((*dir_tok)->bos_id(), (*gguf_tok)->bos_id());
  EXPECT_EQ((*dir_tok)->eos_id(), (*gguf_tok)->eos_id());
  // The 270M GGUF (a base model) carries no template; the script then writes Gemma 3's published one.
  auto dir_template = LoadModelChatTemplateSource(dir_path);
  auto gguf_template = LoadModelChatTemplateSource(gguf_path);
  ASSERT_TRUE(dir_template.ok()) << dir_template.status().ToString();
  if (gguf_template.ok()) {
    EXPECT_EQ(*dir_template, *gguf_template);
  } else {
    EXPECT_NE(dir_template->find("<start_of_turn>"), std::string::npos);
  }
  // A chat prompt as Gemma's template renders it (ordinary text: where HF and SentencePiece part,
  // long space runs, does not arise).
  const std::string text =
      "<start_of_turn>user\nWrite a short poem about the sea, and explain 12 + 30 = 42.<end_of_turn>\n"
      "<start_of_turn>model\n";
  const auto ids = (*dir_tok)->Encode(text, /*add_special=*/true, /*parse_special=*/true);
  EXPECT_EQ(ids, (*gguf_tok)->Encode(text, true, true));
  const ModelRun gguf = RunModel(gguf_path, ids);
  const ModelRun dir = RunModel(dir_path, ids);
  EXPECT_EQ(dir.greedy, gguf.greedy);
  const std::string reply = (*dir_tok)->Decode(dir.greedy, /*skip_special=*/true);
  EXPECT_EQ(reply, (*gguf_tok)->Decode(gguf.greedy, true));
  std::printf("[ Gemma 3 ] directory greedy text: %s\n", reply.c_str());
}

}  // namespace
}  // namespace ember
