#include "core/isa.h"

#include <atomic>
#include <cstdlib>

#include "core/cpu_features.h"
#include "core/logging.h"

namespace ember {
namespace {

constexpr std::array<std::string_view, kIsaCount> kNames = {"ref", "generic", "avx2", "avx512", "amx"};

// The CPU features a level needs that the host lacks, space-separated.
std::string MissingFeatures(Isa isa, const CpuFeatures& cpu) {
  struct Need {
    bool have;
    const char* name;
  };
  std::vector<Need> needs;
  if (isa >= Isa::kAvx2) needs.insert(needs.end(), {{cpu.avx2, "avx2"}, {cpu.fma, "fma"}, {cpu.f16c, "f16c"}});
  if (isa >= Isa::kAvx512) {
    needs.insert(needs.end(), {{cpu.avx512f, "avx512f"},
                               {cpu.avx512bw, "avx512bw"},
                               {cpu.avx512vl, "avx512vl"},
                               {cpu.avx512dq, "avx512dq"},
                               {cpu.avx512vnni, "avx512vnni"},
                               {cpu.avx512bf16, "avx512bf16"}});
  }
  if (isa >= Isa::kAmx) needs.insert(needs.end(), {{cpu.amx_tile, "amx-tile"}, {cpu.amx_int8, "amx-int8"}});
  std::string missing;
  for (const Need& n : needs) {
    if (n.have) continue;
    if (!missing.empty()) missing += ' ';
    missing += n.name;
  }
  return missing;
}

// Why a CPU that has the AMX instructions still cannot run them, or empty.
std::string AmxStateProblem(const CpuFeatures& cpu) {
  if (!cpu.amx_os_state) return "the OS does not enable the AMX tile state (XCR0 bits 17 and 18)";
  if (!cpu.amx_permitted) {
    return "Linux did not grant the AMX tile-data permission (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)";
  }
  return {};
}

// -1 until the first ActiveIsa / SelectIsa, then the active Isa. Atomic because kernels on pool
// threads read it while a test may select another level between calls.
std::atomic<int> g_active{-1};

int Fastest() { return static_cast<int>(AvailableIsas().back()); }

int FromEnvironment() {
  const char* forced = std::getenv(kIsaEnvVar);
  if (forced == nullptr) return Fastest();
  const Expected<Isa> isa = ResolveIsa(forced);
  if (!isa.ok()) {
    EMBER_LOG_WARN("{}={} ignored ({}); using {}", kIsaEnvVar, forced, isa.status().message(),
                   IsaName(AvailableIsas().back()));
    return Fastest();
  }
  return static_cast<int>(*isa);
}

}  // namespace

std::string_view IsaName(Isa isa) { return kNames[static_cast<int>(isa)]; }

Expected<Isa> ParseIsa(std::string_view name) {
  for (int i = 0; i < kIsaCount; ++i) {
    if (kNames[i] == name) return static_cast<Isa>(i);
  }
  return InvalidArgument("unknown kernel variant '" + std::string(name) +
                         "': expected ref, generic, avx2, avx512 or amx");
}

std::string IsaUnavailableReason(Isa isa, const CpuFeatures& cpu) {
  const bool compiled = isa == Isa::kAvx2     ? internal::CompilerTargetsAvx2()
                        : isa == Isa::kAvx512 ? internal::CompilerTargetsAvx512()
                        : isa == Isa::kAmx    ? internal::CompilerTargetsAmx()
                                              : true;
  if (!compiled) return "ember was built by a compiler that cannot target " + std::string(IsaName(isa));
  const std::string missing = MissingFeatures(isa, cpu);
  if (!missing.empty()) return "this CPU lacks " + missing;
  if (isa >= Isa::kAmx) return AmxStateProblem(cpu);
  return {};
}

const std::vector<Isa>& AvailableIsas() {
  static const std::vector<Isa> available = [] {
    std::vector<Isa> list;
    for (int i = 0; i < kIsaCount; ++i) {
      if (IsaSupported(static_cast<Isa>(i))) list.push_back(static_cast<Isa>(i));
    }
    return list;
  }();
  return available;
}

Isa ActiveIsa() {
  int active = g_active.load(std::memory_order_acquire);
  if (active < 0) {
    // Racing first callers compute the same answer (and at most repeat the warning).
    active = FromEnvironment();
    int expected = -1;
    if (!g_active.compare_exchange_strong(expected, active, std::memory_order_acq_rel)) active = expected;
  }
  return static_cast<Isa>(active);
}

Expected<Isa> ResolveIsa(std::string_view name, const CpuFeatures& cpu) {
  EMBER_ASSIGN_OR_RETURN(const Isa isa, ParseIsa(name));
  const std::string why = IsaUnavailableReason(isa, cpu);
  if (!why.empty()) return Unimplemented("kernel variant " + std::string(name) + " cannot run here: " + why);
  return isa;
}

Status SelectIsa(std::string_view name) {
  EMBER_ASSIGN_OR_RETURN(const Isa isa, ResolveIsa(name));
  g_active.store(static_cast<int>(isa), std::memory_order_release);
  return Status::Ok();
}

}  // namespace ember
