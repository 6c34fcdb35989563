#include "core/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace ember {
namespace {

uint64_t ReadXcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

// Linux 5.16+: a process must ask for the AMX tile-data state before its first tile instruction.
// The constants are the kernel's uapi values (asm/prctl.h, asm/fpu/xstate.h), spelled here because
// older headers lack them.
constexpr long kArchGetXcompPerm = 0x1022;
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

bool RequestAmxPermission() {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long permitted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &permitted) != 0) return false;
  return (permitted >> kXfeatureXtiledata) & 1;
}

CpuFeatures Detect() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = ecx & (1u << 27);
  const bool fma = ecx & (1u << 12);
  const bool f16c = ecx & (1u << 29);
  if (!osxsave) return f;
  const uint64_t xcr0 = ReadXcr0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;
  const bool zmm_state = ymm_state && (xcr0 & 0xe0) == 0xe0;
  const bool amx_state = (xcr0 & 0x60000) == 0x60000;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  if (ymm_state) {
    f.avx2 = ebx & (1u << 5);
    f.fma = fma;
    f.f16c = f16c;
  }
  if (zmm_state) {
    f.avx512f = ebx & (1u << 16);
    f.avx512dq = ebx & (1u << 17);
    f.avx512bw = ebx & (1u << 30);
    f.avx512vl = ebx & (1u << 31);
    f.avx512vnni = ecx & (1u << 11);
    unsigned eax1, ebx1, ecx1, edx1;
    if (__get_cpuid_count(7, 1, &eax1, &ebx1, &ecx1, &edx1)) f.avx512bf16 = eax1 & (1u << 5);
  }
  f.amx_bf16 = edx & (1u << 22);
  f.amx_tile = edx & (1u << 24);
  f.amx_int8 = edx & (1u << 25);
  f.amx_os_state = amx_state;
  f.amx_permitted = f.amx_tile && amx_state && RequestAmxPermission();
  return f;
}

}  // namespace

std::string CpuFeatures::ToString() const {
  std::string out;
  auto add = [&out](bool on, const char* name) {
    if (!on) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  add(avx512vnni, "avx512vnni");
  add(avx512bf16, "avx512bf16");
  const bool amx_usable = amx_os_state && amx_permitted;
  add(amx_tile && amx_usable, "amx-tile");
  add(amx_bf16 && amx_usable, "amx-bf16");
  add(amx_int8 && amx_usable, "amx-int8");
  return out.empty() ? "baseline x86-64" : out;
}

const CpuFeatures& HostCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

}  // namespace ember
