// GgufFile on the real reference models (scripts/fetch_models.py puts them in the model cache;
// each test is skipped when its file is absent), and a cross-check against the reference reader:
// scripts/check_gguf_reader.py digests the models with gguf-py into tests/unit/formats/testdata/,
// and the same digest computed from GgufFile must match it line for line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "support/source_dir.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

// Same rule as scripts/fetch_models.py: $EMBER_MODEL_CACHE, else ~/.cache/ember/models.
fs::path ModelPath(const std::string& name) {
  if (const char* cache = std::getenv("EMBER_MODEL_CACHE"); cache && *cache) {
    return fs::path(cache) / name;
  }
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/") / ".cache" / "ember" / "models" / name;
}

// Opens a cached model, or returns nullptr after recording why the test should skip or fail.
std::unique_ptr<GgufFile> OpenModel(const std::string& name, bool* skip) {
  const fs::path path = ModelPath(name);
  *skip = !fs::exists(path);
  if (*skip) return nullptr;
  auto file = GgufFile::Open(path.string());
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? std::move(file).value() : nullptr;
}

// ---- the digest format of scripts/check_gguf_reader.py ----

std::string Escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c <= 0x7e && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

uint64_t Fnv1a64(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string Hex64(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Canonical text of a scalar or of one array element.
std::string ElementText(const GgufValue& v) {
  char buf[64];
  switch (v.type()) {
    case GgufValueType::kBool: return *v.AsBool() ? "true" : "false";
    case GgufValueType::kFloat32: std::snprintf(buf, sizeof(buf), "%.9g", *v.AsFloat()); return buf;
    case GgufValueType::kFloat64: std::snprintf(buf, sizeof(buf), "%.17g", *v.AsFloat()); return buf;
    case GgufValueType::kString: return Escape(*v.AsString());
    case GgufValueType::kArray: {
      std::string out = "[";
      for (int64_t i = 0; i < v.size(); ++i) {
        if (i > 0) out += ',';
        out += ElementText(v.At(i));
      }
      return out + "]";
    }
    default: break;
  }
  if (auto i = v.AsInt()) return std::to_string(*i);
  return std::to_string(*v.AsUint());
}

std::string ValueText(const GgufValue& v) {
  if (v.type() == GgufValueType::kString) {
    const std::string_view s = *v.AsString();
    if (s.size() <= 64) return "string \"" + Escape(s) + "\"";
    return "string len=" + std::to_string(s.size()) + " fnv1a64=" + Hex64(Fnv1a64(s)) + " \"" +
           Escape(s.substr(0, 48)) + "\"...";
  }
  if (!v.is_array()) return std::string(GgufValueTypeName(v.type())) + " " + ElementText(v);
  uint64_t hash = 0xcbf29ce484222325ull;
  std::string shown;
  for (int64_t i = 0; i < v.size(); ++i) {
    const GgufValue element = v.At(i);
    const std::string text = ElementText(element);
    hash = Fnv1a64(text + "\n", hash);
    if (i < 4) {
      if (i) shown += ", ";
      shown += element.type() == GgufValueType::kString ? "\"" + text + "\"" : text;
    }
  }
  return "array[" + std::string(GgufValueTypeName(v.element_type())) + "] n=" +
         std::to_string(v.size()) + " fnv1a64=" + Hex64(hash) + " [" + shown + "]";
}

std::string Digest(const GgufFile& f) {
  std::ostringstream out;
  out << "gguf-digest 1\n"
      << "file_size " << f.file_size() << "\n"
      << "version " << f.version() << "\n"
      << "alignment " << f.alignment() << "\n"
      << "data_offset " << f.data_offset() << "\n"
      << "kv_count " << f.Keys().size() << "\n"
      << "tensor_count " << f.tensors().size() << "\n";
  std::vector<std::string_view> keys = f.Keys();
  std::sort(keys.begin(), keys.end());
  for (std::string_view key : keys) out << "kv " << Escape(key) << " " << ValueText(*f.Find(key)) << "\n";
  for (const GgufTensor& t : f.tensors()) {
    std::string type(t.type.name);
    for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out << "tensor " << Escape(t.name) << " " << type << " [";
    for (size_t i = 0; i < t.dims.size(); ++i) out << (i ? "," : "") << t.dims[i];
    out << "] at=" << f.data_offset() + t.offset << " bytes=" << t.bytes << "\n";
  }
  return out.str();
}

struct ModelFacts {
  const char* file;
  const char* architecture;
  size_t tensor_count;
  int64_t block_count;
  int64_t vocab_size;
  const char* tensor;  // one tensor to check in detail
  GgmlType type;
  std::vector<int64_t> dims;
  int64_t bytes;
};

const ModelFacts kModels[] = {
    // Tied embeddings: no output.weight; the embedding is Q8_0 although the file type is Q4_1.
    {"SmolLM2-135M-Instruct.Q4_1.gguf", "llama", 272, 30, 49152, "blk.0.ffn_down.weight",
     GgmlType::kQ4_1, {1536, 576}, 576 * (1536 / 32) * 20},
    // Rows of 640 are not a multiple of 256, so only attn_output/ffn_down can be K-quants.
    {"gemma-3-270m-q4_k_m.gguf", "gemma3", 236, 18, 262144, "blk.0.attn_output.weight",
     GgmlType::kQ4_K, {1024, 640}, 640 * (1024 / 256) * 144},
};

class GgufRealModelTest : public ::testing::TestWithParam<ModelFacts> {};

TEST_P(GgufRealModelTest, KnownFacts) {
  const ModelFacts& m = GetParam();
  bool skip = false;
  auto f = OpenModel(m.file, &skip);
  if (skip) GTEST_SKIP() << ModelPath(m.file) << " is absent; run scripts/fetch_models.py";
  ASSERT_NE(f, nullptr);
  const std::string arch(m.architecture);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->GetString("general.architecture"), arch);
  EXPECT_EQ(f->tensors().size(), m.tensor_count);
  EXPECT_EQ(f->GetInt(arch + ".block_count"), m.block_count);
  ASSERT_TRUE(f->GetStringArray("tokenizer.ggml.tokens").has_value());
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens")->size(), static_cast<size_t>(m.vocab_size));
  EXPECT_EQ(f->GetIntArray("tokenizer.ggml.token_type")->size(), static_cast<size_t>(m.vocab_size));
  const GgufTensor* t = f->FindTensor(m.tensor);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type.type, m.type);
  EXPECT_EQ(t->dims, m.dims);
  EXPECT_EQ(t->bytes, m.bytes);
  const GgufTensor* embd = f->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type.type, GgmlType::kQ8_0);
  EXPECT_EQ(embd->dims, (std::vector<int64_t>{*f->GetInt(arch + ".embedding_length"), m.vocab_size}));
  // Both files are packed: the last tensor ends exactly at the end of the file.
  int64_t end = 0;
  for (const GgufTensor& x : f->tensors()) end = std::max(end, f->data_offset() + x.offset + x.bytes);
  EXPECT_EQ(end, f->file_size());
}

INSTANTIATE_TEST_SUITE_P(GgufModels, GgufRealModelTest, ::testing::ValuesIn(kModels),
                         [](const auto& info) { return std::string(info.param.architecture); });

class GgufDigestTest : public ::testing::TestWithParam<ModelFacts> {};

TEST_P(GgufDigestTest, MatchesGgufPy) {
  const ModelFacts& m = GetParam();
  bool skip = false;
  auto f = OpenModel(m.file, &skip);
  if (skip) GTEST_SKIP() << ModelPath(m.file) << " is absent; run scripts/fetch_models.py";
  ASSERT_NE(f, nullptr);
  const fs::path expected_path =
      fs::path(EMBER_SOURCE_DIR) / "tests/unit/formats/testdata" / (std::string(m.file) + ".digest");
  std::ifstream in(expected_path);
  ASSERT_TRUE(in.good()) << expected_path << " is missing; run scripts/check_gguf_reader.py --write";
  std::stringstream expected;
  expected << in.rdbuf();

  const std::string got = Digest(*f);
  std::istringstream got_lines(got), want_lines(expected.str());
  std::string g, w;
  int line = 0;
  while (true) {
    const bool more_got = static_cast<bool>(std::getline(got_lines, g));
    const bool more_want = static_cast<bool>(std::getline(want_lines, w));
    ++line;
    if (!more_got && !more_want) break;
    ASSERT_EQ(g, w) << "first difference at line " << line << " of " << expected_path;
  }
  // Every key of the file is covered.
  EXPECT_NE(got.find("kv_count " + std::to_string(f->Keys().size())), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(GgufModels, GgufDigestTest, ::testing::ValuesIn(kModels),
                         [](const auto& info) { return std::string(info.param.architecture); });

}  // namespace
}  // namespace ember
