// The scalar reference dequantizers against gguf-py, bit for bit: random blocks of every format
// and rows of the real models (fixtures written by scripts/gen_gguf_quant_fixtures.py), plus
// the quantizers and the error cases.
#include "quant/gguf_dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/dtypes.h"
#include "formats/ggml_type.h"
#include "quant/gguf_blocks.h"
#include "support/source_dir.h"

namespace ember::quant {
namespace {

const std::filesystem::path kTestData = std::filesystem::path(EMBER_SOURCE_DIR) / "tests/unit/quant/testdata";

std::string TypeName(uint32_t code) {
  const auto traits = GgmlTypeInfo(code);
  return traits ? std::string(traits->name) : "type " + std::to_string(code);
}

// Little-endian reader over a fixture file (x86 is little-endian, so plain memcpy).
class Reader {
 public:
  explicit Reader(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    data_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bool empty() const { return data_.empty(); }
  template <typename T>
  T Get() {
    T value{};
    Bytes(&value, sizeof(T));
    return value;
  }
  void Bytes(void* out, size_t n) {
    if (pos_ + n > data_.size()) {
      ADD_FAILURE() << "fixture truncated";
      pos_ = data_.size();
      return;
    }
    std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
  }
  std::vector<uint8_t> Raw(size_t n) {
    std::vector<uint8_t> v(n);
    if (n > 0) Bytes(v.data(), n);
    return v;
  }
  std::vector<float> Floats(size_t n) {
    std::vector<float> v(n);
    if (n > 0) Bytes(v.data(), n * sizeof(float));
    return v;
  }
  std::string String() {
    std::string s(Get<uint32_t>(), '\0');
    if (!s.empty()) Bytes(s.data(), s.size());
    return s;
  }
  bool Magic(const char* magic) {
    char got[4];
    Bytes(got, 4);
    return std::memcmp(got, magic, 4) == 0;
  }

 private:
  std::vector<char> data_;
  size_t pos_ = 0;
};

// Bitwise comparison with a readable first mismatch.
void ExpectBitExact(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0) return;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t g, w;
    std::memcpy(&g, &got[i], 4);
    std::memcpy(&w, &want[i], 4);
    if (g != w) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << " (0x" << std::hex << g
                    << "), gguf-py has " << want[i] << " (0x" << w << ")";
      return;
    }
  }
}

TEST(GgufBlocks, SizesMatchTypeTraits) {
  auto bytes = [](GgmlType t) { return GgmlTypeInfo(static_cast<uint32_t>(t))->block_bytes; };
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ4_0)), bytes(GgmlType::kQ4_0));
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ4_1)), bytes(GgmlType::kQ4_1));
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ5_0)), bytes(GgmlType::kQ5_0));
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ5_1)), bytes(GgmlType::kQ5_1));
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ8_0)), bytes(GgmlType::kQ8_0));
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ8_1)), bytes(GgmlType::kQ8_1));
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ2_K)), bytes(GgmlType::kQ2_K));
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ3_K)), bytes(GgmlType::kQ3_K));
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ4_K)), bytes(GgmlType::kQ4_K));
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ5_K)), bytes(GgmlType::kQ5_K));
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ6_K)), bytes(GgmlType::kQ6_K));
  EXPECT_EQ(static_cast<int64_t>(sizeof(BlockQ8_K)), bytes(GgmlType::kQ8_K));
}

TEST(GgufDequant, RandomBlocksMatchGgufPyBitExactly) {
  Reader r(kTestData / "gguf_blocks.bin");
  ASSERT_FALSE(r.empty()) << "missing fixture; run scripts/gen_gguf_quant_fixtures.py";
  ASSERT_TRUE(r.Magic("EGQB"));
  ASSERT_EQ(r.Get<uint32_t>(), 1u);
  const uint32_t count = r.Get<uint32_t>();
  std::vector<std::string> covered;
  for (uint32_t rec = 0; rec < count; ++rec) {
    const uint32_t kind = r.Get<uint32_t>();
    const uint32_t code = r.Get<uint32_t>();
    const uint32_t n = r.Get<uint32_t>();
    const std::vector<uint8_t> raw = r.Raw(r.Get<uint32_t>());
    const std::vector<float> values = r.Floats(n);
    const auto type = static_cast<GgmlType>(code);
    if (kind == 0) {
      std::vector<float> got(n);
      ASSERT_TRUE(DequantizeRow(type, raw.data(), n, got.data()).ok()) << TypeName(code);
      ExpectBitExact(got, values, "dequantize " + TypeName(code));
      covered.push_back(TypeName(code));
    } else {
      ASSERT_EQ(type, GgmlType::kQ8_0);
      std::vector<uint8_t> got(raw.size());
      QuantizeRowQ8_0(values.data(), n, reinterpret_cast<BlockQ8_0*>(got.data()));
      EXPECT_EQ(got, raw) << "QuantizeRowQ8_0 differs from gguf-py's Q8_0 quantizer";
      covered.push_back("quantize " + TypeName(code));
    }
  }
  // Every dequantizer gguf-py can check, and the Q8_0 quantizer.
  EXPECT_EQ(covered.size(), 14u);
}

std::filesystem::path ModelDir() {
  if (const char* env = std::getenv("EMBER_MODEL_CACHE")) return env;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/") / ".cache/ember/models";
}

uint64_t Fnv1a64(const std::vector<uint8_t>& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

// Rows of every tensor type in SmolLM2-135M-Instruct Q4_1 (Q4_1, Q8_0, F32) and Gemma 3 270M
// Q4_K_M (Q4_K, Q5_0, Q6_K, Q8_0, F32), read from the model files themselves.
TEST(GgufDequant, RealModelRowsMatchGgufPyBitExactly) {
  Reader r(kTestData / "gguf_real_rows.bin");
  ASSERT_FALSE(r.empty()) << "missing fixture; run scripts/gen_gguf_quant_fixtures.py";
  ASSERT_TRUE(r.Magic("EGQR"));
  ASSERT_EQ(r.Get<uint32_t>(), 1u);
  const uint32_t count = r.Get<uint32_t>();
  int checked = 0;
  std::vector<std::string> missing;
  for (uint32_t rec = 0; rec < count; ++rec) {
    const std::string model = r.String();
    const uint64_t file_size = r.Get<uint64_t>();
    const std::string tensor = r.String();
    const uint64_t row = r.Get<uint64_t>();
    const uint64_t offset = r.Get<uint64_t>();
    const uint32_t code = r.Get<uint32_t>();
    const uint32_t n = r.Get<uint32_t>();
    const uint32_t raw_bytes = r.Get<uint32_t>();
    const uint64_t checksum = r.Get<uint64_t>();
    const std::vector<float> values = r.Floats(n);

    const std::filesystem::path path = ModelDir() / model;
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) != file_size || ec) {
      missing.push_back(model);
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    std::vector<uint8_t> raw(raw_bytes);
    in.read(reinterpret_cast<char*>(raw.data()), raw_bytes);
    ASSERT_TRUE(in.good()) << path;
    ASSERT_EQ(Fnv1a64(raw), checksum) << model << " " << tensor << " row " << row
                                      << ": file contents differ from when the fixture was made";
    std::vector<float> got(n);
    ASSERT_TRUE(DequantizeRow(static_cast<GgmlType>(code), raw.data(), n, got.data()).ok());
    ExpectBitExact(got, values,
                   model + " " + tensor + " (" + TypeName(code) + ") row " + std::to_string(row));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "model files not found (or of another size) under " << ModelDir();
  if (!missing.empty()) std::cout << "[ note ] skipped rows of absent models, e.g. " << missing[0] << "\n";
}

TEST(GgufDequant, RejectsUnsupportedTypesAndPartialBlocks) {
  std::vector<uint8_t> row(1024);
  std::vector<float> out(64, 1.0f);
  EXPECT_EQ(DequantizeRow(GgmlType::kI8, row.data(), 8, out.data()).code(), StatusCode::kUnimplemented);
  EXPECT_EQ(DequantizeRow(static_cast<GgmlType>(16), row.data(), 256, out.data()).code(),  // IQ2_XXS
            StatusCode::kUnimplemented);
  EXPECT_EQ(DequantizeRow(GgmlType::kQ4_0, row.data(), 33, out.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DequantizeRow(GgmlType::kQ4_K, row.data(), 128, out.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out[0], 1.0f) << "output written on error";
  EXPECT_FALSE(CanDequantize(GgmlType::kI32));
  EXPECT_TRUE(CanDequantize(GgmlType::kQ6_K));
}

TEST(GgufDequant, F16NaNsStayNaN) {
  const uint16_t bits[4] = {0x7c01, 0xfe00, 0x7c00, 0x0001};
  float out[4];
  ASSERT_TRUE(DequantizeRow(GgmlType::kF16, bits, 4, out).ok());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_TRUE(std::signbit(out[1]));
  EXPECT_EQ(out[2], INFINITY);
  EXPECT_EQ(out[3], std::ldexp(1.0f, -24));
}

TEST(GgufDequant, Q8_1AndQ8_KAreScaleTimesQuant) {
  BlockQ8_1 b1{};
  b1.d = F32ToF16(0.25f);
  b1.s = F32ToF16(123.0f);  // ignored by dequantization
  for (int j = 0; j < kQK; ++j) b1.qs[j] = static_cast<int8_t>(j - 16);
  std::vector<float> out(kQKK);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ8_1, &b1, kQK, out.data()).ok());
  for (int j = 0; j < kQK; ++j) EXPECT_EQ(out[j], 0.25f * static_cast<float>(j - 16));

  BlockQ8_K bk{};
  bk.d = 0.1f;
  for (int j = 0; j < kQKK; ++j) bk.qs[j] = static_cast<int8_t>(j % 255 - 127);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ8_K, &bk, kQKK, out.data()).ok());
  for (int j = 0; j < kQKK; ++j) EXPECT_EQ(out[j], 0.1f * static_cast<float>(bk.qs[j]));
}

TEST(GgufQuantize, Q8_KRoundsWithinHalfAStepAndSumsGroups) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(3 * kQKK);
  for (float& v : x) v = 3.0f * unit(rng);
  std::fill(x.begin() + kQKK, x.begin() + 2 * kQKK, 0.0f);  // an all-zero block
  x[2 * kQKK + 5] = -50.0f;                                 // block 2's amax, negative
  std::vector<BlockQ8_K> q(3);
  QuantizeRowQ8_K(x.data(), static_cast<int64_t>(x.size()), q.data());
  EXPECT_EQ(q[1].d, 0.0f);
  EXPECT_EQ(q[2].qs[5], -127);
  for (int b = 0; b < 3; ++b) {
    for (int g = 0; g < kQKK / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += q[b].qs[16 * g + j];
      EXPECT_EQ(q[b].bsums[g], sum);
    }
    for (int j = 0; j < kQKK; ++j) {
      const float err = std::fabs(x[b * kQKK + j] - q[b].d * static_cast<float>(q[b].qs[j]));
      EXPECT_LE(err, 0.5001f * q[b].d) << "block " << b << " element " << j;
    }
  }
}

}  // namespace
}  // namespace ember::quant
