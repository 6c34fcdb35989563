// The weight-type traits tables (formats/ggml_type.h with quant/gguf_type_kernels.h, quant/block_scaled.h) against the kernels:
// every row a matmul can reach has its dot in every variant the host runs, its activation
// format has a converter, and nothing has a kernel without a row. Adding a type means adding a
// row; this test names what the row or the variants still lack.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/isa.h"
#include "quant/block_scaled.h"
#include "quant/block_scaled_dot.h"
#include "formats/ggml_type.h"
#include "quant/gguf_dequant.h"
#include "quant/gguf_dot.h"
#include "quant/gguf_matmul.h"
#include "quant/gguf_type_kernels.h"

namespace ember::quant {
namespace {

TEST(GgmlTraitsTable, RowsAreUniqueAndFoundByCode) {
  std::set<uint32_t> codes;
  std::set<std::string> names;
  for (const GgmlTypeTraits& row : GgmlTypeTable()) {
    const auto code = static_cast<uint32_t>(row.type);
    ASSERT_LT(code, kGgmlTypeCodeLimit) << row.name;
    EXPECT_TRUE(codes.insert(code).second) << "code " << code << " twice";
    EXPECT_TRUE(names.insert(std::string(row.name)).second) << row.name << " twice";
    EXPECT_GT(row.block_elements, 0) << row.name;
    EXPECT_GT(row.block_bytes, 0) << row.name;
    EXPECT_EQ(FindGgmlType(row.type), &row);
    ASSERT_TRUE(GgmlTypeInfo(code).has_value());
    EXPECT_EQ(GgmlTypeInfo(code)->name, row.name);
  }
  for (uint32_t code = 0; code < kGgmlTypeCodeLimit + 4; ++code) {
    EXPECT_EQ(FindGgmlType(static_cast<GgmlType>(code)) != nullptr, codes.contains(code)) << code;
  }
}

// The types GgufMatMul multiplies by, and through which activation format: what the models ember
// runs need. A new type joins this list together with its row.
TEST(GgmlTraitsTable, MatmulTypesAndTheirActivationFormats) {
  const std::vector<std::pair<GgmlType, GgmlType>> expected = {
      {GgmlType::kF32, GgmlType::kF32},   {GgmlType::kF16, GgmlType::kF32},   {GgmlType::kBF16, GgmlType::kF32},
      {GgmlType::kQ4_0, GgmlType::kQ8_0}, {GgmlType::kQ4_1, GgmlType::kQ8_0}, {GgmlType::kQ5_0, GgmlType::kQ8_0},
      {GgmlType::kQ5_1, GgmlType::kQ8_0}, {GgmlType::kQ8_0, GgmlType::kQ8_0}, {GgmlType::kQ4_K, GgmlType::kQ8_K},
      {GgmlType::kQ5_K, GgmlType::kQ8_K}, {GgmlType::kQ6_K, GgmlType::kQ8_K},
  };
  std::set<GgmlType> with_format;
  for (const GgufTypeKernels& row : GgufKernelTable()) {
    if (row.activation.has_value()) with_format.insert(row.type);
  }
  EXPECT_EQ(with_format.size(), expected.size());
  for (const auto& [weight, format] : expected) {
    EXPECT_EQ(ActivationFormatFor(weight), format) << FindGgmlType(weight)->name;
    EXPECT_TRUE(GgufMatMulSupports(weight));
  }
}

TEST(GgmlTraitsTable, EveryKernelRowHasAGeometryRow) {
  for (const GgufTypeKernels& row : GgufKernelTable()) {
    EXPECT_NE(FindGgmlType(row.type), nullptr) << static_cast<uint32_t>(row.type);
    EXPECT_EQ(FindGgufKernels(row.type), &row);
  }
}

TEST(GgmlTraitsTable, EveryMatmulTypeHasItsKernelsInEveryVariant) {
  for (const GgmlTypeTraits& geometry : GgmlTypeTable()) {
    SCOPED_TRACE(std::string(geometry.name));
    static const GgufTypeKernels kNone{};
    const GgufTypeKernels& row = FindGgufKernels(geometry.type) ? *FindGgufKernels(geometry.type) : kNone;
    for (const Isa isa : AvailableIsas()) {
      const DotVariant& v = kDotVariants.For(isa);
      // A dot without a row is unreachable; a row without a dot would fail in GgufMatMul.
      EXPECT_EQ(v.For(geometry.type) != nullptr, row.activation.has_value()) << IsaName(isa);
      if (!row.activation.has_value()) {
        EXPECT_EQ(v.RowsFor(geometry.type), nullptr) << IsaName(isa);
      }
    }
    if (!row.activation.has_value()) continue;
    const GgufTypeKernels* format = FindGgufKernels(*row.activation);
    const GgmlTypeTraits* format_geometry = FindGgmlType(*row.activation);
    ASSERT_NE(format, nullptr);
    ASSERT_NE(format_geometry, nullptr);
    EXPECT_NE(format->quantize_activation, nullptr) << format_geometry->name;
    EXPECT_NE(format->activation_row_bytes, nullptr) << format_geometry->name;
    // Activation blocks tile the weight's blocks, so any row of whole weight blocks converts.
    EXPECT_EQ(geometry.block_elements % format_geometry->block_elements, 0) << format_geometry->name;
    EXPECT_NE(row.dequantize, nullptr) << "ReadRow (embeddings) needs the dequantizer";
    if (row.packed != nullptr) {
      EXPECT_NE(row.packed->bytes, nullptr);
      EXPECT_NE(row.packed->pack, nullptr);
      EXPECT_NE(row.packed->rows_avx512, nullptr);
    }
  }
}

// Every dequantizer in the table turns an all-zero row (zero scales) into zeros.
TEST(GgmlTraitsTable, DequantizersDecodeZeroBlocks) {
  for (const GgmlTypeTraits& row : GgmlTypeTable()) {
    const GgufTypeKernels* kernels = FindGgufKernels(row.type);
    const bool has_dequantizer = kernels != nullptr && kernels->dequantize != nullptr;
    EXPECT_EQ(CanDequantize(row.type), has_dequantizer) << row.name;
    if (!has_dequantizer) continue;
    const int64_t n = 2 * row.block_elements;
    const std::vector<uint8_t> zeros(static_cast<size_t>(2 * row.block_bytes), 0);
    std::vector<float> out(static_cast<size_t>(n), 1.0f);
    ASSERT_TRUE(DequantizeRow(row.type, zeros.data(), n, out.data()).ok()) << row.name;
    for (float v : out) ASSERT_EQ(v, 0.0f) << row.name;
  }
}

TEST(WeightFormatTraitsTable, EveryFormatHasARowAndItsKernels) {
  std::set<std::string> names;
  for (int f = 0; f < kWeightFormatCount; ++f) {
    const auto format = static_cast<WeightFormat>(f);
    const WeightFormatTraits& row = FormatTraits(format);
    EXPECT_EQ(row.format, format);
    EXPECT_TRUE(names.insert(std::string(row.name)).second) << row.name;
    EXPECT_GT(row.k_block, 0);
    EXPECT_GT(row.codes_per_byte, 0);
    for (const Isa isa : AvailableIsas()) {
      const BlockDotVariant& v = kBlockDotVariants.For(isa);
      EXPECT_EQ(v.Fp4For(format) != nullptr, row.int8_activations) << row.name << " " << IsaName(isa);
      EXPECT_NE(v.fp8, nullptr) << IsaName(isa);
    }
  }
  // The geometry read from the rows, as the formats define it (block_scaled.h).
  EXPECT_EQ(WeightFormatName(WeightFormat::kNvfp4), "nvfp4");
  EXPECT_EQ(KBlockSize(WeightFormat::kMxfp4), 32);
  EXPECT_EQ(CodesRowBytes(WeightFormat::kMxfp4, 256), 128);
  EXPECT_EQ(ScalesRowBytes(WeightFormat::kMxfp4, 256), 8);
  EXPECT_EQ(ScalesRowBytes(WeightFormat::kNvfp4, 256), 16);
  EXPECT_EQ(CodesRowBytes(WeightFormat::kFp8E4m3, 256), 256);
  EXPECT_EQ(ScalesRowBytes(WeightFormat::kFp8E4m3, 256), 0);
}

}  // namespace
}  // namespace ember::quant
