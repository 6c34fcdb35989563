// Shared helpers of the media tests: the fixture folder (scripts/make_media_fixtures.py) and its
// manifest.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/source_dir.h"

namespace ember::media::testing {

inline std::string TestdataPath(const std::string& name) {
  return std::string(EMBER_SOURCE_DIR) + "/tests/unit/media/testdata/" + name;
}

inline std::vector<uint8_t> ReadBytes(const std::string& name) {
  std::ifstream in(TestdataPath(name), std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::vector<float> ReadFloats(const std::string& name) {
  const std::vector<uint8_t> bytes = ReadBytes(name);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

inline const nlohmann::json& Manifest() {
  static const nlohmann::json manifest = [] {
    std::ifstream in(TestdataPath("manifest.json"));
    return nlohmann::json::parse(in);
  }();
  return manifest;
}

// The fixture stores pixel values as uint8 u with pixel = (u - 127.5f) / 127.5f (mean = std = 0.5),
// which the script checked is exactly transformers' float32 tensor.
inline std::vector<float> ExpectedPixels(const std::string& name) {
  std::vector<float> out;
  for (uint8_t u : ReadBytes(name)) out.push_back((static_cast<float>(u) - 127.5f) / 127.5f);
  return out;
}

}  // namespace ember::media::testing
