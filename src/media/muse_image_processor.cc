#include "media/muse_image_processor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "media/resize.h"

namespace ember::media {
namespace {

// CPython's hash of a 2-tuple of small non-negative ints (Objects/tupleobject.c, 64-bit xxHash
// variant; hash(int) is the int itself below 2^61 - 1).
uint64_t PythonTupleHash(int64_t a, int64_t b) {
  constexpr uint64_t kPrime1 = 11400714785074694791ull, kPrime2 = 14029467366897019727ull,
                     kPrime5 = 2870177450012600261ull;
  uint64_t acc = kPrime5;
  for (int64_t v : {a, b}) {
    acc += static_cast<uint64_t>(v == -1 ? -2 : v) * kPrime2;
    acc = (acc << 31) | (acc >> 33);
    acc *= kPrime1;
  }
  acc += 2 ^ (kPrime5 ^ 3527539ull);
  return acc == ~0ull ? 1546275796ull : acc;
}

// The iteration order of a CPython set built by adding `items` in order: at most 4 entries stay
// in the initial 8-slot table (no resize below 5), probed as setobject.c's set_add_entry does.
std::vector<std::pair<int64_t, int64_t>> PythonSetOrder(const std::vector<std::pair<int64_t, int64_t>>& items) {
  constexpr uint64_t kMask = 7;
  std::pair<int64_t, int64_t> table[8];
  bool used[8] = {};
  for (const auto& item : items) {
    const uint64_t hash = PythonTupleHash(item.first, item.second);
    uint64_t i = hash & kMask, perturb = hash;
    while (used[i] && table[i] != item) {
      perturb >>= 5;
      i = (i * 5 + 1 + perturb) & kMask;
    }
    used[i] = true;
    table[i] = item;
  }
  std::vector<std::pair<int64_t, int64_t>> order;
  for (uint64_t i = 0; i <= kMask; ++i) {
    if (used[i]) order.push_back(table[i]);
  }
  return order;
}

}  // namespace

std::pair<int64_t, int64_t> SmartResize(int64_t height, int64_t width, int64_t patch_size, int64_t max_tokens) {
  double ideal_h = static_cast<double>(height) / static_cast<double>(patch_size);
  double ideal_w = static_cast<double>(width) / static_cast<double>(patch_size);
  const double ratio = ideal_h > 0 ? ideal_w / ideal_h : 1.0;
  if (ideal_h * ideal_w > static_cast<double>(max_tokens)) {
    ideal_h = std::pow(static_cast<double>(max_tokens) / ratio, 0.5);
    ideal_w = ideal_h * ratio;
  }
  // Python builds set(itertools.product(floors/ceils)) and min() keeps the FIRST minimum in the
  // set's iteration order, which decides real ties (e.g. grids 1x2 and 2x2 for a 3:4 image both
  // miss the ratio by 0.25). CPython's order is its hash-table slot order, reproduced here.
  const double fh = std::floor(ideal_h), ch = std::ceil(ideal_h), fw = std::floor(ideal_w), cw = std::ceil(ideal_w);
  std::vector<std::pair<int64_t, int64_t>> candidates;
  for (const auto& [h, w] : PythonSetOrder({{static_cast<int64_t>(fh), static_cast<int64_t>(fw)},
                                            {static_cast<int64_t>(fh), static_cast<int64_t>(cw)},
                                            {static_cast<int64_t>(ch), static_cast<int64_t>(fw)},
                                            {static_cast<int64_t>(ch), static_cast<int64_t>(cw)}})) {
    if (h >= 1 && w >= 1 && h * w <= max_tokens) candidates.push_back({h, w});
  }
  if (candidates.empty()) {
    // Python's round(): half to even.
    candidates.push_back({std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(ideal_h))),
                          std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(ideal_w)))});
  }
  const double target = static_cast<double>(height) / static_cast<double>(width);
  std::pair<int64_t, int64_t> best = candidates.front();
  double best_diff = INFINITY;
  for (const auto& [h, w] : candidates) {
    const double diff = std::abs(static_cast<double>(h) / static_cast<double>(w) - target);
    if (diff < best_diff) {
      best_diff = diff;
      best = {h, w};
    }
  }
  return {best.first * patch_size, best.second * patch_size};
}

int64_t NumImageTokens(int64_t height, int64_t width, const MuseProcessorConfig& c) {
  const auto [h, w] = SmartResize(height, width, c.patch_size * c.merge_size, c.max_image_tokens);
  return (h / c.patch_size) * (w / c.patch_size) / (c.merge_size * c.merge_size);
}

void ResizeNormalizeFrame(const RgbImage& frame, int64_t out_h, int64_t out_w, const std::array<float, 3>& mean,
                          const std::array<float, 3>& std, double rescale_factor, float* dst) {
  std::vector<uint8_t> resized =
      ResizeLanczosAntialias(frame.pixels.data(), frame.height, frame.width, 3, out_h, out_w);
  // transformers fuses rescale into normalize: mean and std (float32 tensors) times 1/rescale
  // (a Python float, applied in float32), then (x - mean) / std in float32.
  const auto inv = static_cast<float>(1.0 / rescale_factor);
  float m[3], s[3];
  for (int c = 0; c < 3; ++c) {
    m[c] = mean[c] * inv;
    s[c] = std[c] * inv;
  }
  const int64_t plane = out_h * out_w;
  for (int64_t i = 0; i < plane; ++i) {
    for (int c = 0; c < 3; ++c) dst[c * plane + i] = (static_cast<float>(resized[i * 3 + c]) - m[c]) / s[c];
  }
}

Expected<ProcessedVisual> ProcessImage(const RgbImage& image, const MuseProcessorConfig& c, int64_t max_tokens) {
  if (max_tokens < 0) max_tokens = c.max_image_tokens;
  if (image.width <= 0 || image.height <= 0 || image.pixels.size() != size_t(image.width * image.height * 3)) {
    return InvalidArgument(fmt::format("image of {}x{} with {} bytes of pixels", image.width, image.height,
                                       image.pixels.size()));
  }
  const int64_t P = c.patch_size, T = c.temporal_patch_size;
  const auto [out_h, out_w] = SmartResize(image.height, image.width, P * c.merge_size, max_tokens);
  std::vector<float> planes(static_cast<size_t>(3 * out_h * out_w));
  ResizeNormalizeFrame(image, out_h, out_w, c.image_mean, c.image_std, c.rescale_factor, planes.data());
  ProcessedVisual v;
  const int64_t gh = out_h / P, gw = out_w / P;
  v.grid_thw = {1, gh, gw};
  v.num_patches = gh * gw;
  v.patch_dim = T * 3 * P * P;
  v.num_tokens = gh * gw / (c.merge_size * c.merge_size);
  v.pixel_values.resize(static_cast<size_t>(v.num_patches * v.patch_dim));
  const int64_t plane = out_h * out_w;
  for (int64_t i = 0; i < gh; ++i) {
    for (int64_t j = 0; j < gw; ++j) {
      float* patch = v.pixel_values.data() + (i * gw + j) * v.patch_dim;
      for (int64_t ch = 0; ch < 3; ++ch) {
        for (int64_t y = 0; y < P; ++y) {
          const float* src = planes.data() + ch * plane + (i * P + y) * out_w + j * P;
          std::memcpy(patch + (ch * P + y) * P, src, P * sizeof(float));
        }
      }
      // The temporal repeat: an image is T identical frames.
      for (int64_t t = 1; t < T; ++t) std::memcpy(patch + t * 3 * P * P, patch, 3 * P * P * sizeof(float));
    }
  }
  return v;
}

std::string RenderImagePlaceholder(const ProcessedVisual& v) {
  std::string s = "<|image_start|>";
  s.reserve(s.size() + v.num_tokens * 9 + 13);
  for (int64_t i = 0; i < v.num_tokens; ++i) s += "<|patch|>";
  s += "<|image_end|>";
  return s;
}

}  // namespace ember::media
