// The kernel-variant registry: the ISA levels ember's kernels are built for, what each needs from
// the CPU, which one runs, and the per-family tables the kernels register their variants in.
//
// Every kernel family (kernels::KernelVariant: dense matmul, paged attention, GeGLU;
// quant::DotVariant: the GGUF dots; quant::BlockDotVariant: the NVFP4/MXFP4/FP8 dots) has one
// implementation per level, listed in an IsaTable. One level is active for all families at once,
// so a run is always "the avx2 kernels" or "the ref kernels", never a mix: the fastest level the
// host runs, unless EMBER_ISA names another (EMBER_ISA=ref to debug numerics). Tests and
// benchmarks switch with SelectIsa and enumerate AvailableIsas().
//
// A kernel looks its variant up once per call (IsaTable::Active, one atomic load and an index);
// the variant's function pointers then run the whole call or row chunk, never per element.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/status.h"

namespace ember {

// Slowest first: each level after generic needs a superset of the previous one's CPU features.
enum class Isa : uint8_t {
  kRef,      // scalar oracle: the numerics every other level is tested against
  kGeneric,  // portable C++ the compiler vectorises for baseline x86-64
  kAvx2,     // AVX2 + FMA + F16C
  kAvx512,   // AVX-512 F/BW/VL/DQ + VNNI + BF16
  kAmx,      // avx512's set + AMX-TILE / AMX-INT8, the OS's tile state and Linux's permission for it
};
inline constexpr int kIsaCount = 5;
// The environment variable that overrides the choice at startup.
inline constexpr const char* kIsaEnvVar = "EMBER_ISA";

// "ref", "generic", "avx2", "avx512", "amx".
std::string_view IsaName(Isa isa);
// The level named `name`, InvalidArgument listing the names if there is none.
Expected<Isa> ParseIsa(std::string_view name);
// Empty if a CPU with `cpu`'s features can run `isa`, else why not: the features it lacks, or that
// the compiler could not target the level (the ISA files were then built without its kernels).
std::string IsaUnavailableReason(Isa isa, const CpuFeatures& cpu = HostCpuFeatures());
inline bool IsaSupported(Isa isa) { return IsaUnavailableReason(isa).empty(); }
// The level `name` selects on a CPU with `cpu`'s features: InvalidArgument for an unknown name,
// Unimplemented naming what the CPU lacks for one it cannot run. SelectIsa and EMBER_ISA go
// through it.
Expected<Isa> ResolveIsa(std::string_view name, const CpuFeatures& cpu = HostCpuFeatures());

// The levels this host can run, slowest (ref) first.
const std::vector<Isa>& AvailableIsas();
// The level in use: EMBER_ISA's if set and available (a warning names why not otherwise), else the
// fastest available.
Isa ActiveIsa();
// Makes `name` the level of every kernel family (tests, benchmarks). InvalidArgument for an
// unknown name, Unimplemented naming the missing CPU features for one this host cannot run; the
// active level is unchanged then.
Status SelectIsa(std::string_view name);

// One kernel family's variants, indexed by level. A family with no AMX code of its own lists its
// avx512 object again in the amx slot (AMX only adds tile instructions, so the avx512 code is
// what that level runs). A null entry is a level the family has no implementation of; tests/unit/kernels/variant_registry_test.cc checks every family is complete
// for every level the host can run, so For() failing is a bug.
template <typename Variant>
class IsaTable {
 public:
  constexpr IsaTable(std::string_view family, std::array<const Variant*, kIsaCount> by_isa)
      : family_(family), by_isa_(by_isa) {}

  bool Has(Isa isa) const { return by_isa_[static_cast<int>(isa)] != nullptr; }
  const Variant& For(Isa isa) const {
    const Variant* v = by_isa_[static_cast<int>(isa)];
    EMBER_CHECK(v != nullptr, "{} has no {} variant", family_, IsaName(isa));
    return *v;
  }
  const Variant& Active() const { return For(ActiveIsa()); }

 private:
  std::string_view family_;
  std::array<const Variant*, kIsaCount> by_isa_;
};

namespace internal {
// Defined in isa_avx2.cc / isa_avx512.cc / isa_amx.cc, which get the same flags as every
// *_avx2.cc / *_avx512.cc / *_amx.cc kernel file (cmake/ember.cmake): true iff the compiler
// targeted the level there.
bool CompilerTargetsAvx2();
bool CompilerTargetsAvx512();
bool CompilerTargetsAmx();
}  // namespace internal

}  // namespace ember
