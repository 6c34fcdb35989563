// What the host CPU (and the OS, for the wide register state) supports.
#pragma once

#include <string>

namespace ember {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;

  // AVX2 + FMA + F16C, with the OS saving YMM state.
  bool HasAvx2Set() const { return avx2 && fma && f16c; }
  // The AVX-512 subset ember's avx512 kernels use (F, BW, VL, DQ, VNNI, BF16).
  bool HasAvx512Set() const {
    return HasAvx2Set() && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni && avx512bf16;
  }
  // "avx2 fma f16c avx512f ..." for startup logs.
  std::string ToString() const;
};

// Detected once (CPUID + XGETBV); cheap to call afterwards.
const CpuFeatures& HostCpuFeatures();

}  // namespace ember
