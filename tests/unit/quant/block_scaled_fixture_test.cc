// The reference quantizers and DequantizeRow bit for bit against the producers' own code:
// nvidia-modelopt 0.47 for NVFP4, the OCP MX rule in torch with ModelOpt's e2m1 encoder for MXFP4
// (+0 for what rounds to 0, as amd-quark writes it), torch's float8_e4m3fn cast for FP8
// (scripts/gen_block_scaled_fixtures.py writes the fixture).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "quant/block_scaled.h"
#include "support/source_dir.h"

namespace ember::quant {
namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(EMBER_SOURCE_DIR) / "tests/unit/quant/testdata/block_scaled.bin";

struct Record {
  WeightFormat format;
  Fp8ScaleKind kind;
  int64_t rows, cols;
  float global_scale;
  std::vector<float> input, dequantized;
  std::vector<uint8_t> codes, scales;
};

class Reader {
 public:
  explicit Reader(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  uint32_t U32() { return Get<uint32_t>(); }
  float F32() { return Get<float>(); }
  std::vector<float> Floats(int64_t n) {
    std::vector<float> v(n);
    Copy(v.data(), n * 4);
    return v;
  }
  std::vector<uint8_t> Bytes() {
    std::vector<uint8_t> v(U32());
    Copy(v.data(), static_cast<int64_t>(v.size()));
    return v;
  }
  bool AtEnd() const { return pos_ == bytes_.size(); }

 private:
  template <typename T>
  T Get() {
    T v;
    Copy(&v, sizeof(T));
    return v;
  }
  void Copy(void* out, int64_t n) {
    EXPECT_LE(pos_ + n, bytes_.size());
    if (n == 0) return;  // an empty field's destination may be an empty vector's null data()
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
  }
  std::vector<uint8_t> bytes_;
  size_t pos_ = 0;
};

std::vector<Record> ReadFixture() {
  std::ifstream in(kFixture, std::ios::binary);
  EXPECT_TRUE(in.good()) << kFixture;
  Reader r(std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {}));
  EXPECT_EQ(r.U32(), 0x46534245u);  // "EBSF"
  EXPECT_EQ(r.U32(), 1u);
  std::vector<Record> records(r.U32());
  for (Record& rec : records) {
    rec.format = static_cast<WeightFormat>(r.U32());
    rec.kind = static_cast<Fp8ScaleKind>(r.U32());
    rec.rows = r.U32();
    rec.cols = r.U32();
    rec.global_scale = r.F32();
    rec.input = r.Floats(rec.rows * rec.cols);
    rec.codes = r.Bytes();
    rec.scales = r.Bytes();
    rec.dequantized = r.Floats(rec.rows * rec.cols);
  }
  EXPECT_TRUE(r.AtEnd());
  return records;
}

TEST(BlockScaledFixture, QuantizeAndDequantizeMatchTheProducersBitForBit) {
  const std::vector<Record> records = ReadFixture();
  ASSERT_EQ(records.size(), 7u);
  for (const Record& rec : records) {
    SCOPED_TRACE(std::string(WeightFormatName(rec.format)) + " " + std::to_string(rec.rows) + "x" +
                 std::to_string(rec.cols));
    std::vector<uint8_t> codes(rec.codes.size()), scales(rec.scales.size());
    float global = 1.0f;
    switch (rec.format) {
      case WeightFormat::kMxfp4:
        ASSERT_TRUE(QuantizeMxfp4(rec.input.data(), rec.rows, rec.cols, codes.data(), scales.data()).ok());
        break;
      case WeightFormat::kNvfp4:
        global = Nvfp4GlobalScale(AbsMax(rec.input.data(), rec.rows * rec.cols));
        ASSERT_TRUE(QuantizeNvfp4(rec.input.data(), rec.rows, rec.cols, global, codes.data(), scales.data()).ok());
        break;
      case WeightFormat::kFp8E4m3:
        ASSERT_TRUE(QuantizeFp8(rec.input.data(), rec.rows, rec.cols, rec.kind, codes.data(),
                                reinterpret_cast<float*>(scales.data()), &global)
                        .ok());
        break;
    }
    EXPECT_EQ(0, std::memcmp(&global, &rec.global_scale, 4)) << global << " vs " << rec.global_scale;
    EXPECT_EQ(codes, rec.codes);
    EXPECT_EQ(scales, rec.scales);

    // DequantizeRow on the producer's bytes.
    const BlockScaledMatrix w = DenseBlockScaledMatrix(rec.format, rec.rows, rec.cols, rec.codes.data(),
                                                       rec.scales.data(), rec.global_scale, rec.kind);
    ASSERT_TRUE(ValidateBlockScaledMatrix(w).ok());
    std::vector<float> row(rec.cols);
    for (int64_t r = 0; r < rec.rows; ++r) {
      DequantizeRow(w, r, row.data());
      for (int64_t k = 0; k < rec.cols; ++k) {
        const float want = rec.dequantized[r * rec.cols + k];
        // Bit for bit, except that ModelOpt's table decodes e2m1 code 8 (-0) as +0.
        if (want == 0.0f && row[k] == 0.0f) continue;
        ASSERT_EQ(0, std::memcmp(&row[k], &want, 4)) << "(" << r << ", " << k << "): " << row[k] << " vs " << want;
      }
    }
  }
}

}  // namespace
}  // namespace ember::quant
