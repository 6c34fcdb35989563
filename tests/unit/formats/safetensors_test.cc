// Tests for SafetensorsFile and Checkpoint: files are written byte by byte from C++, so each
// corruption is exact and no Python is needed.
#include "formats/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "formats/checkpoint.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using ::testing::HasSubstr;

struct TestTensor {
  std::string name;
  std::string dtype;  // safetensors spelling: "F32", "BF16", ...
  std::vector<int64_t> shape;
  std::string bytes;
};

std::string LittleEndian64(uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

// The file as the format lays it out, with whatever header text the test wants.
std::string RawFile(const std::string& header, const std::string& data) {
  return LittleEndian64(header.size()) + header + data;
}

// A well-formed file: tensors packed in order, header padded with spaces to a multiple of 8 as
// the reference writer does, so that the data section stays aligned.
std::string BuildFile(const std::vector<TestTensor>& tensors, const Json& metadata = Json()) {
  Json header = Json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  std::string data;
  for (const TestTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return RawFile(text, data);
}

std::string FloatBytes(std::vector<float> values) {
  std::string out(values.size() * sizeof(float), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::temp_directory_path() /
            (std::string("ember_safetensors_") + info->name() + "_" + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (fs::path(dir_) / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  // Writes `header` (+ `data`) and expects Open() to fail with `code` and every substring.
  void ExpectOpenError(const std::string& header, const std::string& data, StatusCode code,
                       std::vector<std::string> substrings) {
    const std::string path = Write("bad.safetensors", RawFile(header, data));
    ExpectError(SafetensorsFile::Open(path).status(), code, substrings, path);
  }

  static void ExpectError(const Status& status, StatusCode code,
                          const std::vector<std::string>& substrings,
                          const std::string& path = "") {
    ASSERT_FALSE(status.ok()) << "expected " << StatusCodeName(code);
    EXPECT_EQ(status.code(), code) << status.ToString();
    if (!path.empty()) {
      EXPECT_THAT(status.message(), HasSubstr(path));
    }
    for (const std::string& s : substrings) EXPECT_THAT(status.message(), HasSubstr(s));
  }

  std::string dir_;
};

std::vector<TestTensor> SampleTensors() {
  return {
      {"weight", "F32", {2, 3}, FloatBytes({1, 2, 3, 4, 5, 6})},
      {"bias", "BF16", {3}, std::string("\x80\x3f\x00\x40\x40\x40", 6)},
      {"packed", "F4", {5}, std::string("\x12\x34\x05", 3)},  // 5 nibbles -> 3 bytes
      {"empty", "F32", {0, 4}, ""},
      {"flag", "BOOL", {}, std::string("\x01", 1)},
  };
}

// ---- valid files --------------------------------------------------------------------------

TEST_F(SafetensorsTest, ValidFileRoundTrips) {
  const std::vector<TestTensor> tensors = SampleTensors();
  const std::string path = Write("model.safetensors", BuildFile(tensors, {{"format", "pt"}}));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const SafetensorsFile& f = **file;

  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.file_size(), static_cast<int64_t>(fs::file_size(path)));
  EXPECT_EQ(f.names(), (std::vector<std::string>{"weight", "bias", "packed", "empty", "flag"}));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.Find("missing"), nullptr);

  const std::vector<DType> dtypes = {DType::kF32, DType::kBF16, DType::kF4E2M1, DType::kF32,
                                     DType::kBool};
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorTensor* t = f.Find(tensors[i].name);
    ASSERT_NE(t, nullptr) << tensors[i].name;
    EXPECT_EQ(t->name, tensors[i].name);
    EXPECT_EQ(t->dtype, dtypes[i]);
    EXPECT_EQ(t->view.dtype, dtypes[i]);
    EXPECT_EQ(t->shape, Shape(tensors[i].shape));
    EXPECT_EQ(t->view.shape, t->shape);
    ASSERT_EQ(t->NumBytes(), static_cast<int64_t>(tensors[i].bytes.size()));
    EXPECT_EQ(t->view.NumBytes(), t->NumBytes());
    EXPECT_EQ(std::memcmp(t->view.data, tensors[i].bytes.data(), tensors[i].bytes.size()), 0);
    total += t->NumBytes();
  }
  EXPECT_EQ(f.TotalTensorBytes(), total);
  EXPECT_FLOAT_EQ(f.Find("weight")->view.As<float>()[5], 6.0f);
  f.Prefetch();  // a hint; must simply not fail
}

TEST_F(SafetensorsTest, HeaderOnlyFileWithNoTensorsIsValid) {
  const std::string path = Write("none.safetensors", RawFile("{}      ", ""));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->size(), 0u);
}

TEST_F(SafetensorsTest, SingleFileCheckpointDirectory) {
  Write("model.safetensors", BuildFile(SampleTensors()));
  auto checkpoint = Checkpoint::OpenDirectory(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  const Checkpoint& c = **checkpoint;
  EXPECT_EQ(c.Names(), (std::vector<std::string>{"bias", "empty", "flag", "packed", "weight"}));
  EXPECT_TRUE(c.Has("weight"));
  EXPECT_FALSE(c.Has("weights"));
  EXPECT_EQ(c.FileOf("weight"), (fs::path(dir_) / "model.safetensors").string());
  EXPECT_EQ(c.FileOf("nope"), "");
  EXPECT_EQ(c.TotalTensorBytes(), 24 + 6 + 3 + 0 + 1);
  auto view = c.Require("weight", {DType::kF32}, Shape{2, 3});
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_FLOAT_EQ(view->As<float>()[0], 1.0f);
  EXPECT_TRUE(c.Require("weight", {}, Shape{-1, 3}).ok());  // -1: any size, no dtype constraint

  auto single = Checkpoint::OpenFile((fs::path(dir_) / "model.safetensors").string());
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_EQ((*single)->size(), 5u);
}

// Writes a two-shard checkpoint with an index; returns the shard paths.
std::vector<std::string> WriteShardedCheckpoint(SafetensorsTest* test, const std::string& dir,
                                                const Json& weight_map_override = Json()) {
  (void)test;
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream out(fs::path(dir) / name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return (fs::path(dir) / name).string();
  };
  const std::string a = "model-00001-of-00002.safetensors";
  const std::string b = "model-00002-of-00002.safetensors";
  std::vector<std::string> paths;
  paths.push_back(write(a, BuildFile({{"embed", "F32", {2, 2}, FloatBytes({1, 2, 3, 4})},
                                      {"layer.0.w", "BF16", {2}, std::string(4, '\x3f')}})));
  paths.push_back(write(b, BuildFile({{"layer.1.w", "BF16", {2}, std::string(4, '\x40')},
                                      {"lm_head", "F32", {1}, FloatBytes({9})}})));
  Json weight_map = weight_map_override;
  if (weight_map.is_null()) {
    weight_map = {{"embed", a}, {"layer.0.w", a}, {"layer.1.w", b}, {"lm_head", b}};
  }
  write(Checkpoint::kIndexFileName,
        Json{{"metadata", {{"total_size", 28}}}, {"weight_map", weight_map}}.dump(2));
  return paths;
}

TEST_F(SafetensorsTest, ShardedDirectoryWithIndex) {
  const std::vector<std::string> shards = WriteShardedCheckpoint(this, dir_);
  auto checkpoint = Checkpoint::OpenDirectory(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  const Checkpoint& c = **checkpoint;
  EXPECT_EQ(c.files().size(), 2u);
  EXPECT_EQ(c.Names(), (std::vector<std::string>{"embed", "layer.0.w", "layer.1.w", "lm_head"}));
  EXPECT_EQ(c.FileOf("embed"), shards[0]);
  EXPECT_EQ(c.FileOf("lm_head"), shards[1]);
  EXPECT_EQ(c.TotalTensorBytes(), 16 + 4 + 4 + 4);
  EXPECT_EQ(c.index_metadata().at("total_size"), "28");
  auto lm_head = c.Get("lm_head");
  ASSERT_TRUE(lm_head.ok());
  EXPECT_FLOAT_EQ(lm_head->As<float>()[0], 9.0f);
}

TEST_F(SafetensorsTest, ShardTensorsMissingFromIndexAreStillServed) {
  const std::string a = "model-00001-of-00002.safetensors";
  WriteShardedCheckpoint(this, dir_,
                         {{"embed", a}, {"layer.1.w", "model-00002-of-00002.safetensors"}});
  auto checkpoint = Checkpoint::OpenDirectory(dir_);  // logs a warning
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  EXPECT_TRUE((*checkpoint)->Has("layer.0.w"));
  EXPECT_TRUE((*checkpoint)->Has("lm_head"));
}

// ---- bad safetensors files ----------------------------------------------------------------

TEST_F(SafetensorsTest, MissingFileIsNotFound) {
  const std::string path = (fs::path(dir_) / "absent.safetensors").string();
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kNotFound, {}, path);
}

TEST_F(SafetensorsTest, FileShorterThanEightBytes) {
  const std::string path = Write("short.safetensors", "abc");
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kDataLoss,
              {"3 bytes", "re-download"}, path);
  const std::string empty = Write("empty.safetensors", "");
  ExpectError(SafetensorsFile::Open(empty).status(), StatusCode::kDataLoss, {"0 bytes"}, empty);
}

TEST_F(SafetensorsTest, HeaderLengthLargerThanFile) {
  const std::string path = Write("lying.safetensors", LittleEndian64(5000) + "{}");
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kDataLoss, {"5000", "2 bytes"},
              path);
  const std::string huge = Write("huge.safetensors", LittleEndian64(~0ull) + "{}");
  ExpectError(SafetensorsFile::Open(huge).status(), StatusCode::kDataLoss, {"limit"}, huge);
}

TEST_F(SafetensorsTest, HeaderNotJson) {
  ExpectOpenError("{\"w\": {\"dtype\": ", "", StatusCode::kDataLoss, {"not valid JSON"});
  ExpectOpenError("", "", StatusCode::kDataLoss, {"not valid JSON"});
  ExpectOpenError("{\"w\": 1e999}", "", StatusCode::kDataLoss, {"not valid JSON"});
  ExpectOpenError(std::string("{\"\xff\": 1}"), "", StatusCode::kDataLoss, {"not valid JSON"});
}

TEST_F(SafetensorsTest, HeaderJsonNotAnObject) {
  ExpectOpenError("[1, 2, 3]", "", StatusCode::kDataLoss, {"array", "expected an object"});
  ExpectOpenError("{\"w\": 7}", "", StatusCode::kDataLoss, {"'w'", "expected an object"});
}

TEST_F(SafetensorsTest, UnknownDtype) {
  ExpectOpenError(R"({"w": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 1]}})", "x",
                  StatusCode::kDataLoss, {"'w'", "unknown dtype \"Q7\""});
  ExpectOpenError(R"({"w": {"dtype": 7, "shape": [1], "data_offsets": [0, 1]}})", "x",
                  StatusCode::kDataLoss, {"'w'", "dtype"});
  ExpectOpenError(R"({"w": {"shape": [1], "data_offsets": [0, 1]}})", "x", StatusCode::kDataLoss,
                  {"'w'", "no dtype"});
  // Valid safetensors, but a type ember has no DType for.
  ExpectOpenError(R"({"w": {"dtype": "U32", "shape": [1], "data_offsets": [0, 4]}})", "abcd",
                  StatusCode::kUnimplemented, {"'w'", "U32"});
}

TEST_F(SafetensorsTest, BadShape) {
  ExpectOpenError(R"({"w": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}})", "x",
                  StatusCode::kDataLoss, {"'w'", "[-1]", "non-negative integers"});
  ExpectOpenError(R"({"w": {"dtype": "U8", "shape": [2.5], "data_offsets": [0, 1]}})", "x",
                  StatusCode::kDataLoss, {"'w'", "2.5"});
  ExpectOpenError(R"({"w": {"dtype": "U8", "shape": ["4"], "data_offsets": [0, 4]}})", "xxxx",
                  StatusCode::kDataLoss, {"'w'", "shape"});
  ExpectOpenError(R"({"w": {"dtype": "U8", "shape": 4, "data_offsets": [0, 4]}})", "xxxx",
                  StatusCode::kDataLoss, {"'w'", "shape"});
  ExpectOpenError(
      R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 4]}})",
      "xxxx", StatusCode::kDataLoss, {"'w'", "64 bits"});
  ExpectOpenError(R"({"w": {"dtype": "U8", "shape": [1,1,1,1,1,1,1], "data_offsets": [0, 1]}})",
                  "x", StatusCode::kUnimplemented, {"'w'", "rank 7"});
}

TEST_F(SafetensorsTest, BadDataOffsets) {
  ExpectOpenError(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0]}})", "x",
                  StatusCode::kDataLoss, {"'w'", "data_offsets"});
  ExpectOpenError(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}})", "x",
                  StatusCode::kDataLoss, {"'w'", "data_offsets"});
  ExpectOpenError(R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [1, 0]}})", "x",
                  StatusCode::kDataLoss, {"'w'", "begin after end"});
}

TEST_F(SafetensorsTest, DataOffsetsBeyondFile) {
  // A lying header: the sizes agree with each other, but the file has 16 bytes of data.
  ExpectOpenError(R"({"w": {"dtype": "F32", "shape": [1024], "data_offsets": [0, 4096]}})",
                  std::string(16, 'x'), StatusCode::kDataLoss,
                  {"'w'", "[0, 4096)", "only 16 bytes", "truncated"});
}

TEST_F(SafetensorsTest, OffsetsInconsistentWithShapeAndDtype) {
  ExpectOpenError(R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})",
                  std::string(16, 'x'), StatusCode::kDataLoss,
                  {"'w'", "12 bytes", "F32", "[2,2]", "needs 16 bytes"});
  // Sub-byte dtypes round up: 5 F4 values need 3 bytes, not 2.
  ExpectOpenError(R"({"w": {"dtype": "F4", "shape": [5], "data_offsets": [0, 2]}})", "xx",
                  StatusCode::kDataLoss, {"'w'", "needs 3 bytes"});
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  ExpectOpenError(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                      "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
                  std::string(24, 'x'), StatusCode::kDataLoss, {"'a'", "'b'", "overlap"});
}

TEST_F(SafetensorsTest, DuplicateTensorNameAndBadMetadata) {
  ExpectOpenError(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                      "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                  "xy", StatusCode::kDataLoss, {"'a'", "more than once"});
  ExpectOpenError(R"({"__metadata__": {"format": 3}})", "", StatusCode::kDataLoss,
                  {"__metadata__", "format"});
  ExpectOpenError(R"({"__metadata__": "pt"})", "", StatusCode::kDataLoss, {"__metadata__"});
}

TEST_F(SafetensorsTest, TruncatedFileNamesTheCutTensor) {
  const std::string full = BuildFile(SampleTensors());
  // Cut in the middle of "packed": "weight" and "bias" survive, "packed" (and "flag") do not.
  const size_t cut = full.size() - 1 - 2;
  const std::string path = Write("cut.safetensors", full.substr(0, cut));
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kDataLoss,
              {"'packed'", "truncated", "re-download"}, path);
}

// ---- bad checkpoints directories ----------------------------------------------------------

TEST_F(SafetensorsTest, DirectoryWithoutWeights) {
  Write("pytorch_model.bin", "PK");
  ExpectError(Checkpoint::OpenDirectory(dir_).status(), StatusCode::kNotFound,
              {dir_, "model.safetensors", "pytorch_model.bin", "convert"});
  ExpectError(Checkpoint::OpenDirectory(dir_ + "/nope").status(), StatusCode::kNotFound, {"nope"});
}

TEST_F(SafetensorsTest, IndexNamesMissingShard) {
  WriteShardedCheckpoint(this, dir_);
  fs::remove(fs::path(dir_) / "model-00002-of-00002.safetensors");
  ExpectError(Checkpoint::OpenDirectory(dir_).status(), StatusCode::kNotFound,
              {"model-00002-of-00002.safetensors", "'layer.1.w'", "incomplete"});
}

TEST_F(SafetensorsTest, IndexNamesTensorMissingFromItsShard) {
  const std::string a = "model-00001-of-00002.safetensors";
  const std::string b = "model-00002-of-00002.safetensors";
  WriteShardedCheckpoint(this, dir_,
                         {{"embed", a}, {"layer.0.w", a}, {"layer.1.w", a}, {"lm_head", b}});
  ExpectError(Checkpoint::OpenDirectory(dir_).status(), StatusCode::kDataLoss,
              {"'layer.1.w'", a, "no such tensor", b + "' instead"});
  WriteShardedCheckpoint(this, dir_, {{"embed", a}, {"ghost", b}});
  ExpectError(Checkpoint::OpenDirectory(dir_).status(), StatusCode::kDataLoss,
              {"'ghost'", b, "no other shard"});
}

TEST_F(SafetensorsTest, TensorInTwoShards) {
  const std::string a = "model-00001-of-00002.safetensors";
  WriteShardedCheckpoint(this, dir_);
  Write(a, BuildFile(
               {{"embed", "F32", {1}, FloatBytes({1})}, {"lm_head", "F32", {1}, FloatBytes({2})}}));
  ExpectError(Checkpoint::OpenDirectory(dir_).status(), StatusCode::kDataLoss,
              {"'lm_head'", "two shards", a, "model-00002-of-00002.safetensors"});
}

TEST_F(SafetensorsTest, MalformedIndex) {
  WriteShardedCheckpoint(this, dir_);
  const std::string index = Write(Checkpoint::kIndexFileName, "{\"weight_map\": {");
  ExpectError(Checkpoint::OpenDirectory(dir_).status(), StatusCode::kDataLoss, {"not valid JSON"},
              index);
  Write(Checkpoint::kIndexFileName, "[]");
  ExpectError(Checkpoint::OpenDirectory(dir_).status(), StatusCode::kDataLoss, {"weight_map"},
              index);
  Write(Checkpoint::kIndexFileName, R"({"metadata": {}})");
  ExpectError(Checkpoint::OpenDirectory(dir_).status(), StatusCode::kDataLoss, {"weight_map"},
              index);
  Write(Checkpoint::kIndexFileName, R"({"weight_map": {"embed": 3}})");
  ExpectError(Checkpoint::OpenDirectory(dir_).status(), StatusCode::kDataLoss, {"'embed'"}, index);
  Write(Checkpoint::kIndexFileName, R"({"weight_map": {"embed": "../../etc/passwd"}})");
  ExpectError(Checkpoint::OpenDirectory(dir_).status(), StatusCode::kDataLoss,
              {"embed", "same directory"}, index);
}

// ---- Get / Require --------------------------------------------------------------------------

TEST_F(SafetensorsTest, RequireChecksDtypeAndShape) {
  const std::string path = Write("model.safetensors", BuildFile(SampleTensors()));
  auto checkpoint = Checkpoint::OpenDirectory(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  const Checkpoint& c = **checkpoint;
  ExpectError(c.Require("bias", {DType::kF32, DType::kF16}, Shape{3}).status(),
              StatusCode::kInvalidArgument,
              {"tensor 'bias'", path, "has dtype bf16, expected one of f32, f16"});
  ExpectError(
      c.Require("weight", {DType::kF32}, Shape{3, 2}, "config.json says hidden_size=2").status(),
      StatusCode::kInvalidArgument,
      {"tensor 'weight'", path, "has shape [2, 3], expected [3, 2]",
       "(config.json says hidden_size=2)"});
  ExpectError(c.Require("weight", {DType::kF32}, Shape{6}).status(), StatusCode::kInvalidArgument,
              {"[2, 3]", "[6]"});
  ExpectError(c.Require("nope", {DType::kF32}, Shape{6}).status(), StatusCode::kNotFound, {"nope"});
}

TEST_F(SafetensorsTest, GetMissingTensorSuggestsCloseName) {
  Write("model.safetensors", BuildFile({{"model.layers.0.self_attn.q_proj.weight", "U8", {1}, "a"},
                                        {"model.norm.weight", "U8", {1}, "b"}}));
  auto checkpoint = Checkpoint::OpenDirectory(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  const Checkpoint& c = **checkpoint;
  ExpectError(c.Get("lm_head.weight").status(), StatusCode::kNotFound,
              {"'lm_head.weight'", dir_, "2 tensors"});
  ExpectError(c.Get("layers.0.self_attn.q_proj.weight").status(), StatusCode::kNotFound,
              {"did you mean 'model.layers.0.self_attn.q_proj.weight'"});
  ExpectError(c.Get("model.norm.wieght").status(), StatusCode::kNotFound,
              {"did you mean 'model.norm.weight'"});
}

// ---- robustness -----------------------------------------------------------------------------

// Mutates a valid file in a few hundred deterministic ways; Open() must answer OK or an error and
// never crash, and whatever it accepts must be self-consistent. Run under ASan/UBSan too.
TEST_F(SafetensorsTest, FuzzedHeadersNeverCrash) {
  const std::string original = BuildFile(SampleTensors(), {{"format", "pt"}});
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(original[i]);
  const size_t header_end = 8 + header_len;
  const std::string json_chars = "{}[]\":,-0123456789.e \\x";
  std::mt19937_64 rng(20240601);
  int accepted = 0, rejected = 0;
  for (int iteration = 0; iteration < 400; ++iteration) {
    std::string bytes = original;
    switch (iteration % 4) {
      case 0:  // flip random bits anywhere in the length field or header
        for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
          bytes[rng() % header_end] ^= static_cast<char>(1u << (rng() % 8));
        }
        break;
      case 1:  // overwrite header bytes with JSON punctuation and digits
        for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
          bytes[8 + rng() % header_len] = json_chars[rng() % json_chars.size()];
        }
        break;
      case 2:  // truncate anywhere
        bytes.resize(rng() % bytes.size());
        break;
      case 3:  // random byte in the header plus a truncation of the data
        bytes[8 + rng() % header_len] = static_cast<char>(rng() & 0xff);
        bytes.resize(header_end + rng() % (bytes.size() - header_end + 1));
        break;
    }
    const std::string path = Write("fuzz.safetensors", bytes);
    auto file = SafetensorsFile::Open(path);
    if (!file.ok()) {
      ++rejected;
      EXPECT_FALSE(file.status().message().empty());
      EXPECT_THAT(file.status().message(), HasSubstr(path)) << "iteration " << iteration;
      continue;
    }
    ++accepted;
    const SafetensorsFile& f = **file;
    const uint8_t* data_begin = f.mapped_bytes() + f.data_offset();
    const uint8_t* file_end = f.mapped_bytes() + f.file_size();
    for (const SafetensorTensor& t : f.tensors()) {
      const auto* p = static_cast<const uint8_t*>(t.view.data);
      ASSERT_GE(p, data_begin) << t.name;
      ASSERT_LE(p + t.NumBytes(), file_end) << t.name;
      ASSERT_EQ(t.NumBytes(), DTypeBytes(t.dtype, t.shape.NumElements())) << t.name;
      unsigned sum = 0;  // touch every byte: an out-of-mapping view would fault here
      for (int64_t b = 0; b < t.NumBytes(); ++b) sum += p[b];
      (void)sum;
    }
  }
  EXPECT_GT(rejected, 100);
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace ember
