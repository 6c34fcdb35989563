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
  // AMX as CPUID reports it; whether it can run also takes the two flags after them.
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;
  // The OS saves the tile state (XCR0 bits 17 TILECFG and 18 TILEDATA).
  bool amx_os_state = false;
  // Linux granted this process the tile-data state (arch_prctl(ARCH_REQ_XCOMP_PERM,
  // XFEATURE_XTILEDATA), requested once at detection when the CPU and OS have AMX): without it
  // the first tile instruction raises SIGILL. Process-wide, so every thread may use the tiles.
  bool amx_permitted = false;

  // AVX2 + FMA + F16C, with the OS saving YMM state.
  bool HasAvx2Set() const { return avx2 && fma && f16c; }
  // The AVX-512 subset ember's avx512 kernels use (F, BW, VL, DQ, VNNI, BF16).
  bool HasAvx512Set() const {
    return HasAvx2Set() && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni && avx512bf16;
  }
  // The avx512 set plus AMX-TILE and AMX-INT8, with the OS state and the permission.
  bool HasAmxInt8Set() const { return HasAvx512Set() && amx_tile && amx_int8 && amx_os_state && amx_permitted; }
  // "avx2 fma f16c avx512f ..." for startup logs (AMX features only where they can run).
  std::string ToString() const;
};

// Detected once (CPUID + XGETBV); cheap to call afterwards.
const CpuFeatures& HostCpuFeatures();

}  // namespace ember
