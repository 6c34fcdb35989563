#include "media/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ember::media {
namespace {

double Sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}

double Lanczos3(double x) { return (x >= -3.0 && x < 3.0) ? Sinc(x) * Sinc(x / 3.0) : 0.0; }

inline uint8_t ClampShift(int32_t acc, int32_t precision) {
  return static_cast<uint8_t>(std::clamp(acc >> precision, 0, 255));
}

// out[y][x][c] = sum_k in[y][first[x] + k][c] * w[x][k], every row of `in`.
void Horizontal(const uint8_t* in, int64_t rows, int64_t in_w, int64_t channels, const ResampleTaps& t,
                int64_t out_w, uint8_t* out) {
  const int32_t round = 1 << (t.precision - 1);
  for (int64_t y = 0; y < rows; ++y) {
    const uint8_t* src = in + y * in_w * channels;
    uint8_t* dst = out + y * out_w * channels;
    for (int64_t x = 0; x < out_w; ++x) {
      const int16_t* w = &t.weights[x * t.max_taps];
      const uint8_t* s = src + int64_t(t.first[x]) * channels;
      const int32_t n = t.count[x];
      if (channels == 3) {
        int32_t a0 = round, a1 = round, a2 = round;
        for (int32_t k = 0; k < n; ++k) {
          a0 += s[k * 3 + 0] * w[k];
          a1 += s[k * 3 + 1] * w[k];
          a2 += s[k * 3 + 2] * w[k];
        }
        dst[x * 3 + 0] = ClampShift(a0, t.precision);
        dst[x * 3 + 1] = ClampShift(a1, t.precision);
        dst[x * 3 + 2] = ClampShift(a2, t.precision);
      } else {
        for (int64_t c = 0; c < channels; ++c) {
          int32_t a = round;
          for (int32_t k = 0; k < n; ++k) a += s[k * channels + c] * w[k];
          dst[x * channels + c] = ClampShift(a, t.precision);
        }
      }
    }
  }
}

// out[y] = sum_k in[first[y] + k] * w[y][k], whole rows at a time (row_len = width * channels).
void Vertical(const uint8_t* in, int64_t row_len, const ResampleTaps& t, int64_t out_h, uint8_t* out) {
  const int32_t round = 1 << (t.precision - 1);
  std::vector<int32_t> acc(static_cast<size_t>(row_len));
  for (int64_t y = 0; y < out_h; ++y) {
    std::fill(acc.begin(), acc.end(), round);
    const int16_t* w = &t.weights[y * t.max_taps];
    for (int32_t k = 0; k < t.count[y]; ++k) {
      const uint8_t* s = in + (int64_t(t.first[y]) + k) * row_len;
      const int32_t wk = w[k];
      for (int64_t i = 0; i < row_len; ++i) acc[i] += s[i] * wk;
    }
    uint8_t* dst = out + y * row_len;
    for (int64_t i = 0; i < row_len; ++i) dst[i] = ClampShift(acc[i], t.precision);
  }
}

}  // namespace

ResampleTaps LanczosAntialiasTaps(int64_t in_size, int64_t out_size) {
  // torch's _compute_index_ranges_weights with align_corners=False and antialias: scale =
  // in / out, the filter widened by the scale when downsampling.
  constexpr double kInterpSize = 6.0;  // Lanczos-3: 3 taps each side
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double support = scale >= 1.0 ? (kInterpSize * 0.5) * scale : kInterpSize * 0.5;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  ResampleTaps t;
  t.max_taps = static_cast<int32_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  std::vector<double> w(static_cast<size_t>(out_size * t.max_taps), 0.0);
  double w_max = 0.0;
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t xsize = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size) - xmin;
    t.first[i] = static_cast<int32_t>(xmin);
    t.count[i] = static_cast<int32_t>(std::min<int64_t>(xsize, t.max_taps));
    double total = 0.0;
    double* wi = &w[i * t.max_taps];
    for (int32_t j = 0; j < t.count[i]; ++j) {
      wi[j] = Lanczos3((static_cast<double>(j + xmin) - center + 0.5) * invscale);
      total += wi[j];
    }
    for (int32_t j = 0; j < t.count[i]; ++j) {
      if (total != 0.0) wi[j] /= total;
      w_max = std::max(w_max, wi[j]);
    }
  }
  // The most precision bits (< 22) for which the largest weight still fits an int16.
  int32_t precision = 0;
  for (; precision < 22; ++precision) {
    if (static_cast<int>(0.5 + w_max * (1 << (precision + 1))) >= (1 << 15)) break;
  }
  t.precision = precision;
  t.weights.resize(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * (1 << precision);
    t.weights[k] = static_cast<int16_t>(w[k] < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return t;
}

std::vector<uint8_t> ResizeLanczosAntialias(const uint8_t* in, int64_t in_h, int64_t in_w, int64_t channels,
                                            int64_t out_h, int64_t out_w) {
  std::vector<uint8_t> cur(in, in + in_h * in_w * channels);
  if (out_w != in_w) {
    const ResampleTaps t = LanczosAntialiasTaps(in_w, out_w);
    std::vector<uint8_t> next(static_cast<size_t>(in_h * out_w * channels));
    Horizontal(cur.data(), in_h, in_w, channels, t, out_w, next.data());
    cur.swap(next);
  }
  if (out_h != in_h) {
    const ResampleTaps t = LanczosAntialiasTaps(in_h, out_h);
    std::vector<uint8_t> next(static_cast<size_t>(out_h * out_w * channels));
    Vertical(cur.data(), out_w * channels, t, out_h, next.data());
    cur.swap(next);
  }
  return cur;
}

}  // namespace ember::media
