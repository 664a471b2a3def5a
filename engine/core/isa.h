// The vector ISA level the kernels run at: the best the CPU has among the
// levels this build compiled (cmake/SambaIsa.cmake), chosen once per process
// from CPUID, or a lower one forced with SAMBA_ISA in the environment (for
// testing a level on a machine that has a higher one).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace samba {

// Ordered: each level runs on every CPU that runs a higher one.
enum class IsaLevel : int {
  Generic = 0,     // portable C++ and Eigen at the build's baseline flags
  Avx2 = 1,        // AVX2 + FMA
  Avx512 = 2,      // AVX-512 F/BW/VL/DQ
  Avx512Bf16 = 3,  // AVX-512 with the bf16 dot product (AVX512_BF16)
};

std::string_view isa_name(IsaLevel l);  // "generic", "avx2", "avx512", "avx512_bf16"
std::optional<IsaLevel> isa_from_name(std::string_view name);
std::span<const IsaLevel> isa_levels();  // every level, lowest first

// The best level this CPU runs and this build compiled.
IsaLevel isa_best_supported();

// What a SAMBA_ISA value selects when `best` is the best usable level: the
// requested one when it is known and not above `best`, otherwise `best` and
// a warning that says why (empty when there is nothing to say). An empty or
// absent request selects `best` silently.
struct IsaChoice {
  IsaLevel level;
  std::string warning;
};
IsaChoice choose_isa(std::optional<std::string_view> requested, IsaLevel best);

// The level in use: chosen at the first call (SAMBA_ISA read then, a warning
// logged once for a value that cannot be honoured), the same for the rest of
// the process.
IsaLevel active_isa();

}  // namespace samba
