// Tests for GgufFile on files written byte by byte from C++, so every corruption is exact.
#include "formats/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace ember {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using VT = GgufValueType;

template <typename T>
std::string Pod(T value) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}
std::string U32(uint32_t v) { return Pod(v); }
std::string U64(uint64_t v) { return Pod(v); }
std::string Str(std::string_view s) { return U64(s.size()) + std::string(s); }
std::string Type(VT t) { return U32(static_cast<uint32_t>(t)); }
// An array value: element type, count, then the already-encoded elements.
std::string Array(VT element, uint64_t count, const std::string& elements) {
  return Type(element) + U64(count) + elements;
}
// Deterministic filler bytes for tensor data.
std::string Bytes(int64_t n, int seed) {
  std::string out(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<char>((i * 31 + seed * 7) & 0xff);
  return out;
}

struct TestTensor {
  std::string name;
  uint32_t type;  // ggml code
  std::vector<uint64_t> dims;
  std::string data;
  std::optional<uint64_t> offset;  // default: packed after the previous tensor, aligned
};

// A small GGUF writer: the layout the format prescribes, with knobs to break each field.
struct GgufBuilder {
  std::string magic = "GGUF";
  uint32_t version = 3;
  uint64_t alignment = 32;  // layout only; add a general.alignment key to declare it
  std::optional<uint64_t> kv_count, tensor_count;
  std::vector<std::string> kvs;
  std::vector<TestTensor> tensors;

  GgufBuilder& Kv(std::string_view key, VT type, const std::string& value) {
    kvs.push_back(Str(key) + Type(type) + value);
    return *this;
  }
  GgufBuilder& Tensor(std::string name, uint32_t type, std::vector<uint64_t> dims, std::string data,
                      std::optional<uint64_t> offset = std::nullopt) {
    tensors.push_back({std::move(name), type, std::move(dims), std::move(data), offset});
    return *this;
  }
  std::string Build() const {
    std::string out = magic + U32(version) + U64(tensor_count.value_or(tensors.size())) +
                      U64(kv_count.value_or(kvs.size()));
    for (const std::string& kv : kvs) out += kv;
    std::string data;
    uint64_t cursor = 0;
    for (const TestTensor& t : tensors) {
      const uint64_t offset = t.offset.value_or(cursor);
      out += Str(t.name) + U32(static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) out += U64(d);
      out += U32(t.type) + U64(offset);
      if (data.size() < offset + t.data.size()) data.resize(offset + t.data.size());
      data.replace(offset, t.data.size(), t.data);
      cursor = (offset + t.data.size() + alignment - 1) / alignment * alignment;
    }
    out.append((alignment - out.size() % alignment) % alignment, '\0');
    return out + data;
  }
};

class GgufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("ember_gguf_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& bytes, const std::string& name = "model.gguf") {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
    return path;
  }
  std::unique_ptr<GgufFile> OpenOk(const std::string& bytes) {
    auto file = GgufFile::Open(Write(bytes));
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    return file.ok() ? std::move(file).value() : nullptr;
  }
  // Opens `bytes`, expects failure with `code`, and returns the message.
  std::string OpenError(const std::string& bytes, StatusCode code) {
    const std::string path = Write(bytes);
    auto file = GgufFile::Open(path);
    EXPECT_FALSE(file.ok());
    if (file.ok()) return "";
    EXPECT_EQ(file.status().code(), code) << file.status().ToString();
    EXPECT_THAT(file.status().message(), HasSubstr("GGUF file '" + path + "'"));
    return file.status().message();
  }

  fs::path dir_;
};

TEST_F(GgufTest, EveryMetadataValueTypeRoundTrips) {
  GgufBuilder b;
  b.Kv("u8", VT::kUint8, Pod<uint8_t>(200))
      .Kv("i8", VT::kInt8, Pod<int8_t>(-100))
      .Kv("u16", VT::kUint16, Pod<uint16_t>(60000))
      .Kv("i16", VT::kInt16, Pod<int16_t>(-30000))
      .Kv("u32", VT::kUint32, Pod<uint32_t>(4000000000u))
      .Kv("i32", VT::kInt32, Pod<int32_t>(-2000000000))
      .Kv("f32", VT::kFloat32, Pod<float>(1.5f))
      .Kv("bool", VT::kBool, Pod<uint8_t>(1))
      .Kv("str", VT::kString, Str("hello"))
      .Kv("u64", VT::kUint64, Pod<uint64_t>(std::numeric_limits<uint64_t>::max()))
      .Kv("i64", VT::kInt64, Pod<int64_t>(std::numeric_limits<int64_t>::min()))
      .Kv("f64", VT::kFloat64, Pod<double>(0.1))
      .Kv("empty_str", VT::kString, Str(""))
      .Kv("a_i16", VT::kArray, Array(VT::kInt16, 3, Pod<int16_t>(-1) + Pod<int16_t>(2) +
                                                        Pod<int16_t>(-300)))
      .Kv("a_u64", VT::kArray, Array(VT::kUint64, 2, U64(7) + U64(~0ull)))
      .Kv("a_f32", VT::kArray, Array(VT::kFloat32, 2, Pod<float>(-0.25f) + Pod<float>(3e38f)))
      .Kv("a_f64", VT::kArray, Array(VT::kFloat64, 1, Pod<double>(2.5)))
      .Kv("a_bool", VT::kArray, Array(VT::kBool, 2, std::string("\x01\x00", 2)))
      .Kv("a_empty", VT::kArray, Array(VT::kInt32, 0, ""))
      .Kv("a_nested", VT::kArray,
          Array(VT::kArray, 2, Array(VT::kInt32, 2, Pod<int32_t>(1) + Pod<int32_t>(2)) +
                                   Array(VT::kString, 1, Str("x"))));
  auto f = OpenOk(b.Build());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  ASSERT_EQ(f->Keys().size(), 20u);
  EXPECT_EQ(f->Keys()[0], "u8");
  EXPECT_EQ(f->Keys()[19], "a_nested");

  EXPECT_EQ(f->GetInt("u8"), 200);
  EXPECT_EQ(f->GetInt("i8"), -100);
  EXPECT_EQ(f->GetInt("u16"), 60000);
  EXPECT_EQ(f->GetInt("i16"), -30000);
  EXPECT_EQ(f->GetInt("u32"), 4000000000);
  EXPECT_EQ(f->GetInt("i32"), -2000000000);
  EXPECT_EQ(f->GetFloat("f32"), 1.5);
  EXPECT_EQ(f->GetBool("bool"), true);
  EXPECT_EQ(f->GetString("str"), "hello");
  EXPECT_EQ(f->GetInt("u64"), std::nullopt);  // above INT64_MAX
  EXPECT_EQ(f->Find("u64")->AsUint(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->GetInt("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->GetFloat("f64"), 0.1);
  EXPECT_EQ(f->GetString("empty_str"), "");
  const std::pair<const char*, const char*> kTypeNames[] = {
      {"u8", "uint8"},     {"i8", "int8"},   {"u16", "uint16"},   {"i16", "int16"},
      {"u32", "uint32"},   {"i32", "int32"}, {"f32", "float32"},  {"bool", "bool"},
      {"str", "string"},   {"u64", "uint64"}, {"i64", "int64"},   {"f64", "float64"},
      {"a_i16", "array"}};
  for (const auto& [key, name] : kTypeNames) {
    EXPECT_EQ(GgufValueTypeName(f->Find(key)->type()), name) << key;
  }
  // Kinds do not convert into each other, except integers into floats.
  EXPECT_EQ(f->GetInt("str"), std::nullopt);
  EXPECT_EQ(f->GetInt("f32"), std::nullopt);
  EXPECT_EQ(f->GetInt("bool"), std::nullopt);
  EXPECT_EQ(f->GetBool("u8"), std::nullopt);
  EXPECT_EQ(f->GetString("u8"), std::nullopt);
  EXPECT_EQ(f->GetFloat("i16"), -30000.0);
  EXPECT_EQ(f->GetInt("missing"), std::nullopt);
  EXPECT_EQ(f->Find("missing"), nullptr);

  EXPECT_THAT(*f->GetIntArray("a_i16"), ElementsAre(-1, 2, -300));
  EXPECT_EQ(f->GetIntArray("a_u64"), std::nullopt);  // ~0ull does not fit int64
  EXPECT_EQ(f->Find("a_u64")->At(1).AsUint(), ~0ull);
  EXPECT_THAT(*f->GetFloatArray("a_f32"), ElementsAre(-0.25f, 3e38f));
  EXPECT_THAT(*f->GetFloatArray("a_f64"), ElementsAre(2.5f));
  EXPECT_THAT(*f->GetFloatArray("a_i16"), ElementsAre(-1.f, 2.f, -300.f));
  EXPECT_EQ(f->GetFloatArray("a_bool"), std::nullopt);
  EXPECT_EQ(f->Find("a_bool")->At(0).AsBool(), true);
  EXPECT_EQ(f->Find("a_bool")->At(1).AsBool(), false);
  EXPECT_EQ(f->Find("a_f64")->element_type(), VT::kFloat64);
  EXPECT_TRUE(f->GetIntArray("a_empty")->empty());
  EXPECT_EQ(f->GetIntArray("u8"), std::nullopt);

  const GgufValue* nested = f->Find("a_nested");
  ASSERT_EQ(nested->size(), 2);
  EXPECT_EQ(nested->element_type(), VT::kArray);
  EXPECT_THAT(*nested->nested()[0].AsIntArray(), ElementsAre(1, 2));
  EXPECT_EQ(nested->At(1).At(0).AsString(), "x");
  EXPECT_EQ(nested->At(2).type(), VT::kUint8);  // out of range: an empty value, not a crash
}

TEST_F(GgufTest, StringArrays) {
  const std::vector<std::string> tokens = {"<s>", "", "\xc4\xa0the", std::string("a\0b", 3),
                                           "\xe2\x96\x81hello"};
  std::string encoded;
  for (const std::string& t : tokens) encoded += Str(t);
  GgufBuilder b;
  b.Kv("tokenizer.ggml.tokens", VT::kArray, Array(VT::kString, tokens.size(), encoded));
  auto f = OpenOk(b.Build());
  ASSERT_NE(f, nullptr);
  auto got = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->size(), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ((*got)[i], tokens[i]) << i;
    EXPECT_EQ(f->Find("tokenizer.ggml.tokens")->At(i).AsString(), tokens[i]);
  }
  EXPECT_EQ(f->GetIntArray("tokenizer.ggml.tokens"), std::nullopt);
}

TEST_F(GgufTest, TensorTypesHaveTheRightByteSizes) {
  // Sizes from the ggml block layouts: f32 4 B, f16 2 B, q8_0 34 B per 32, q4_K 144 B per 256.
  GgufBuilder b;
  b.Kv("general.architecture", VT::kString, Str("llama"))
      .Tensor("f32", 0, {4, 3}, Bytes(48, 1))
      .Tensor("f16", 1, {8, 2}, Bytes(32, 2))
      .Tensor("q8_0", 8, {64, 3}, Bytes(2 * 3 * 34, 3))
      .Tensor("q4_k", 12, {512, 2, 1, 1}, Bytes(2 * 2 * 144, 4))
      .Tensor("scalar", 0, {}, Bytes(4, 5))
      .Tensor("empty", 0, {0, 7}, "");
  const std::string bytes = b.Build();
  auto f = OpenOk(bytes);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->tensors().size(), 6u);
  EXPECT_EQ(f->alignment(), 32);
  EXPECT_EQ(f->data_offset() % 32, 0);
  struct Want {
    const char* name;
    GgmlType type;
    std::vector<int64_t> dims;
    int64_t bytes;
  };
  const Want wants[] = {{"f32", GgmlType::kF32, {4, 3}, 48},
                        {"f16", GgmlType::kF16, {8, 2}, 32},
                        {"q8_0", GgmlType::kQ8_0, {64, 3}, 204},
                        {"q4_k", GgmlType::kQ4_K, {512, 2, 1, 1}, 576},
                        {"scalar", GgmlType::kF32, {}, 4},
                        {"empty", GgmlType::kF32, {0, 7}, 0}};
  for (size_t i = 0; i < std::size(wants); ++i) {
    const GgufTensor* t = f->FindTensor(wants[i].name);
    ASSERT_NE(t, nullptr) << wants[i].name;
    EXPECT_EQ(t, &f->tensors()[i]);
    EXPECT_EQ(t->type.type, wants[i].type) << t->name;
    EXPECT_EQ(t->dims, wants[i].dims) << t->name;
    EXPECT_EQ(t->bytes, wants[i].bytes) << t->name;
    EXPECT_EQ(t->offset % 32, 0) << t->name;
    if (t->bytes == 0) {
      EXPECT_EQ(t->data, nullptr);
      continue;
    }
    ASSERT_EQ(t->data, f->mapped_bytes() + f->data_offset() + t->offset);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t->data), t->bytes),
              b.tensors[i].data) << t->name;
  }
  EXPECT_EQ(f->FindTensor("q4_k")->NumElements(), 1024);
  EXPECT_EQ(f->FindTensor("scalar")->NumElements(), 1);
  EXPECT_EQ(f->FindTensor("nope"), nullptr);
  EXPECT_EQ(f->file_size(), static_cast<int64_t>(bytes.size()));
}

TEST_F(GgufTest, CustomAlignmentAndVersion2) {
  for (uint32_t alignment : {1u, 64u, 4096u}) {
    GgufBuilder b;
    b.version = 2;
    b.alignment = alignment;
    b.Kv("general.alignment", VT::kUint32, U32(alignment))
        .Tensor("a", 0, {3}, Bytes(12, 1))
        .Tensor("b", 0, {5}, Bytes(20, 2));
    auto f = OpenOk(b.Build());
    ASSERT_NE(f, nullptr) << alignment;
    EXPECT_EQ(f->version(), 2u);
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->data_offset() % alignment, 0);
    EXPECT_EQ(f->FindTensor("b")->offset, (12 + alignment - 1) / alignment * alignment);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->FindTensor("b")->data), 20),
              Bytes(20, 2));
  }
}

// ---- bad inputs: each names the file (checked in OpenError) and the key or tensor ----

TEST_F(GgufTest, RejectsFilesThatAreNotGguf) {
  auto missing = GgufFile::Open((dir_ / "absent.gguf").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(OpenError("GGML\x03\0\0\0", StatusCode::kInvalidArgument),
              AllOf(HasSubstr("not a GGUF file"), HasSubstr("47 47 4d 4c")));
  EXPECT_THAT(OpenError("PK\x03\x04zzzz", StatusCode::kInvalidArgument), HasSubstr("zip"));
  EXPECT_THAT(OpenError("version https://git-lfs.github.com/spec/v1\n", StatusCode::kInvalidArgument),
              HasSubstr("git lfs pull"));
  EXPECT_THAT(OpenError("", StatusCode::kDataLoss), HasSubstr("truncated"));
  EXPECT_THAT(OpenError("GG", StatusCode::kDataLoss), HasSubstr("truncated"));
  EXPECT_THAT(OpenError("GGUF\x03\0", StatusCode::kDataLoss), HasSubstr("truncated"));
}

TEST_F(GgufTest, RejectsUnsupportedVersions) {
  GgufBuilder b;
  b.version = 1;
  EXPECT_THAT(OpenError(b.Build(), StatusCode::kUnimplemented), HasSubstr("version 1"));
  b.version = 4;
  EXPECT_THAT(OpenError(b.Build(), StatusCode::kUnimplemented),
              AllOf(HasSubstr("unsupported GGUF version 4"), HasSubstr("versions 2 and 3")));
  b.version = 0x03000000;  // a big-endian v3 file read as little-endian
  EXPECT_THAT(OpenError(b.Build(), StatusCode::kUnimplemented), HasSubstr("big-endian"));
}

TEST_F(GgufTest, RejectsCountsThatCannotFit) {
  GgufBuilder b;
  b.kv_count = 1ull << 40;
  EXPECT_THAT(OpenError(b.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("1099511627776 metadata key/value pairs"), HasSubstr("can hold")));
  b.kv_count.reset();
  b.tensor_count = ~0ull;
  EXPECT_THAT(OpenError(b.Build(), StatusCode::kDataLoss), HasSubstr("tensors"));
}

TEST_F(GgufTest, RejectsLengthsRunningPastTheEnd) {
  GgufBuilder b;
  b.Kv("general.name", VT::kString, U64(1ull << 40) + "abc");
  EXPECT_THAT(OpenError(b.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("key 'general.name'"), HasSubstr("runs past the end")));
  GgufBuilder key;
  key.kvs.push_back(U64(~0ull) + "k");
  EXPECT_THAT(OpenError(key.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("metadata entry #0"), HasSubstr("runs past the end")));
  GgufBuilder array;
  array.Kv("tokenizer.ggml.scores", VT::kArray, Array(VT::kFloat32, 1ull << 60, Pod(1.f)));
  EXPECT_THAT(OpenError(array.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("key 'tokenizer.ggml.scores'"), HasSubstr("array of"),
                    HasSubstr("truncated")));
  GgufBuilder strings;
  strings.Kv("tokenizer.ggml.tokens", VT::kArray, Array(VT::kString, 2, Str("a") + U64(99) + "b"));
  EXPECT_THAT(OpenError(strings.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("key 'tokenizer.ggml.tokens'"), HasSubstr("runs past the end")));
  GgufBuilder tensor;
  tensor.Tensor("blk.0.attn_q.weight", 0, {4}, Bytes(16, 0));
  const std::string bytes = tensor.Build();
  // Cut inside the dims: header, name (8 + 19), n_dims, 3 of the 8 bytes of dims[0].
  EXPECT_THAT(OpenError(bytes.substr(0, 24 + 27 + 4 + 3), StatusCode::kDataLoss),
              AllOf(HasSubstr("tensor 'blk.0.attn_q.weight'"), HasSubstr("reading the dims"),
                    HasSubstr("truncated")));
}

TEST_F(GgufTest, RejectsBadValueTypes) {
  GgufBuilder b;
  b.Kv("x.y", static_cast<VT>(13), U32(0));
  EXPECT_THAT(OpenError(b.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("key 'x.y'"), HasSubstr("unknown value type 13")));
  GgufBuilder array;
  array.Kv("x.arr", VT::kArray, U32(77) + U64(1) + U32(0));
  EXPECT_THAT(OpenError(array.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("key 'x.arr'"), HasSubstr("unknown array element type 77")));
  GgufBuilder boolean;
  boolean.Kv("x.flag", VT::kBool, Pod<uint8_t>(2));
  EXPECT_THAT(OpenError(boolean.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("key 'x.flag'"), HasSubstr("expected 0 or 1")));
  std::string deep = Array(VT::kInt8, 0, "");
  for (int i = 0; i < 20; ++i) deep = Array(VT::kArray, 1, deep);
  GgufBuilder nested;
  nested.Kv("x.deep", VT::kArray, deep);
  EXPECT_THAT(OpenError(nested.Build(), StatusCode::kUnimplemented),
              AllOf(HasSubstr("key 'x.deep'"), HasSubstr("nested")));
}

TEST_F(GgufTest, RejectsDuplicates) {
  GgufBuilder keys;
  keys.Kv("general.name", VT::kString, Str("a")).Kv("general.name", VT::kString, Str("b"));
  EXPECT_THAT(OpenError(keys.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("key 'general.name'"), HasSubstr("twice")));
  GgufBuilder tensors;
  tensors.Tensor("w", 0, {1}, Bytes(4, 0)).Tensor("w", 0, {1}, Bytes(4, 1));
  EXPECT_THAT(OpenError(tensors.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("twice")));
}

TEST_F(GgufTest, RejectsUnsupportedTensorTypes) {
  GgufBuilder iq;
  iq.Tensor("blk.0.attn_q.weight", 19, {256}, Bytes(64, 0));
  EXPECT_THAT(OpenError(iq.Build(), StatusCode::kUnimplemented),
              AllOf(HasSubstr("tensor 'blk.0.attn_q.weight'"), HasSubstr("ggml type 19 (iq1_s)"),
                    HasSubstr("does not support IQ* quant types yet")));
  GgufBuilder unknown;
  unknown.Tensor("w", 200, {1}, Bytes(4, 0));
  EXPECT_THAT(OpenError(unknown.Build(), StatusCode::kUnimplemented),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("ggml type 200")));
}

TEST_F(GgufTest, RejectsBadDims) {
  GgufBuilder rank;
  rank.Tensor("w", 0, {1, 1, 1, 1, 1}, Bytes(4, 0));
  EXPECT_THAT(OpenError(rank.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("5 dims")));
  GgufBuilder block;
  block.Tensor("blk.3.ffn_down.weight", 12, {100, 2}, Bytes(288, 0));
  EXPECT_THAT(OpenError(block.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("tensor 'blk.3.ffn_down.weight'"),
                    HasSubstr("dims[0] = 100 is not a multiple of the q4_K block size 256")));
  GgufBuilder overflow;
  overflow.Tensor("w", 0, {1ull << 40, 1ull << 40}, "");
  EXPECT_THAT(OpenError(overflow.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("overflow")));
}

TEST_F(GgufTest, RejectsBadAlignment) {
  for (uint32_t value : {0u, 48u}) {
    GgufBuilder b;
    b.Kv("general.alignment", VT::kUint32, U32(value));
    EXPECT_THAT(OpenError(b.Build(), StatusCode::kDataLoss),
                AllOf(HasSubstr("key 'general.alignment'"), HasSubstr("not a power of two")));
  }
  GgufBuilder type;
  type.Kv("general.alignment", VT::kInt32, Pod<int32_t>(32));
  EXPECT_THAT(OpenError(type.Build(), StatusCode::kDataLoss), HasSubstr("requires uint32"));
  GgufBuilder offset;
  offset.Tensor("w", 0, {4}, Bytes(16, 0), 16);
  EXPECT_THAT(OpenError(offset.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("not a multiple of the alignment 32")));
}

TEST_F(GgufTest, TruncatedDataSaysSo) {
  GgufBuilder b;
  b.Tensor("a", 0, {8}, Bytes(32, 0)).Tensor("output.weight", 0, {64}, Bytes(256, 1));
  const std::string bytes = b.Build();
  const std::string message =
      OpenError(bytes.substr(0, bytes.size() - 1), StatusCode::kDataLoss);
  EXPECT_THAT(message, AllOf(HasSubstr("tensor 'output.weight'"), HasSubstr("truncated"),
                             HasSubstr("re-downloaded")));
  EXPECT_THAT(OpenError(bytes.substr(0, bytes.size() - 300), StatusCode::kDataLoss),
              HasSubstr("tensor 'a'"));  // the first tensor whose bytes are missing
}

TEST_F(GgufTest, RejectsOverlappingTensors) {
  GgufBuilder b;
  b.Tensor("a", 0, {16}, Bytes(64, 0), 0).Tensor("b", 0, {8}, Bytes(32, 1), 32);
  EXPECT_THAT(OpenError(b.Build(), StatusCode::kDataLoss),
              AllOf(HasSubstr("tensor 'b'"), HasSubstr("overlaps tensor 'a'")));
}

// Deterministic corruptions of a valid file: Open() may fail but must never crash or read out of
// bounds (run under -DEMBER_SANITIZE=ON to check the latter), and whatever it accepts must be
// consistent.
TEST_F(GgufTest, SurvivesMutationsAndTruncations) {
  std::string tokens;
  for (int i = 0; i < 20; ++i) tokens += Str("tok" + std::to_string(i));
  GgufBuilder b;
  b.Kv("general.architecture", VT::kString, Str("llama"))
      .Kv("llama.block_count", VT::kUint32, U32(2))
      .Kv("general.alignment", VT::kUint32, U32(32))
      .Kv("x.f64", VT::kFloat64, Pod(1.25))
      .Kv("x.flag", VT::kBool, Pod<uint8_t>(1))
      .Kv("tokenizer.ggml.tokens", VT::kArray, Array(VT::kString, 20, tokens))
      .Kv("tokenizer.ggml.scores", VT::kArray, Array(VT::kFloat32, 3, std::string(12, '\1')))
      .Kv("x.nested", VT::kArray, Array(VT::kArray, 1, Array(VT::kUint16, 2, U32(0x10002))))
      .Tensor("token_embd.weight", 8, {32, 4}, Bytes(4 * 34, 1))
      .Tensor("blk.0.ffn_down.weight", 12, {256, 2}, Bytes(2 * 144, 2))
      .Tensor("output_norm.weight", 0, {32}, Bytes(128, 3));
  const std::string valid = b.Build();
  auto original = OpenOk(valid);
  ASSERT_NE(original, nullptr);
  const size_t header_end = static_cast<size_t>(original->data_offset());

  std::mt19937 rng(1234);
  int accepted = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::string bytes = valid;
    const int kind = iter % 4;
    if (kind == 0) {
      bytes.resize(rng() % valid.size());  // truncation
    } else {
      // 1..4 byte mutations, mostly in the header where they matter; some set "interesting" values
      const int n = 1 + rng() % 4;
      for (int m = 0; m < n; ++m) {
        const size_t at = (rng() % 8 != 0 ? rng() % header_end : rng() % bytes.size());
        static constexpr uint8_t kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x20, 0x0c};
        bytes[at] = static_cast<char>(kind == 1 ? rng() & 0xff : kInteresting[rng() % 7]);
      }
      if (kind == 3) bytes.erase(rng() % bytes.size(), 1 + rng() % 8);  // shift everything after
    }
    auto file = GgufFile::Open(Write(bytes, "fuzz.gguf"));
    if (!file.ok()) {
      EXPECT_FALSE(file.status().message().empty());
      continue;
    }
    ++accepted;
    // Touch everything the file hands out.
    const GgufFile& f = **file;
    uint64_t sum = 0;
    for (std::string_view key : f.Keys()) {
      const GgufValue* v = f.Find(key);
      ASSERT_NE(v, nullptr);
      for (int64_t i = 0; i < v->size(); ++i) {
        GgufValue e = v->At(i);
        if (auto s = e.AsString()) for (char c : *s) sum += static_cast<uint8_t>(c);
        if (auto x = e.AsFloat()) sum += static_cast<uint64_t>(*x != 0);
      }
      if (auto s = v->AsString()) sum += s->size();
    }
    for (const GgufTensor& t : f.tensors()) {
      ASSERT_EQ(t.offset % f.alignment(), 0);
      ASSERT_LE(f.data_offset() + t.offset + t.bytes, f.file_size());
      for (int64_t i = 0; i < t.bytes; ++i) sum += t.data[i];
    }
    EXPECT_GE(sum, 0u);
  }
  EXPECT_GT(accepted, 0);  // some mutations hit data bytes or values and stay valid
}

}  // namespace
}  // namespace ember
