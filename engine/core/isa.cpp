#include "engine/core/isa.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "engine/core/log.h"

namespace samba {

namespace {

constexpr IsaLevel kLevels[] = {IsaLevel::Generic, IsaLevel::Avx2, IsaLevel::Avx512,
                                IsaLevel::Avx512Bf16};

// The highest level whose kernel files this build compiled (the bf16 level
// runs the AVX-512 files where it has no kernels of its own).
constexpr IsaLevel kBuiltLevel =
#if defined(SAMBA_ISA_AVX512_BUILT)
    IsaLevel::Avx512Bf16;
#elif defined(SAMBA_ISA_AVX2_BUILT)
    IsaLevel::Avx2;
#else
    IsaLevel::Generic;
#endif

// The best level of the CPU. __builtin_cpu_supports reports a feature only
// when the OS also saves its registers (XCR0), so "avx512f" is usable as is.
IsaLevel cpu_level() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return IsaLevel::Generic;
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
    return IsaLevel::Avx2;
  return __builtin_cpu_supports("avx512bf16") ? IsaLevel::Avx512Bf16 : IsaLevel::Avx512;
#else
  return IsaLevel::Generic;
#endif
}

std::string level_names() {
  std::vector<std::string_view> names;
  for (IsaLevel l : kLevels) names.push_back(isa_name(l));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::string_view isa_name(IsaLevel l) {
  switch (l) {
    case IsaLevel::Generic:
      return "generic";
    case IsaLevel::Avx2:
      return "avx2";
    case IsaLevel::Avx512:
      return "avx512";
    case IsaLevel::Avx512Bf16:
      return "avx512_bf16";
  }
  return "?";
}

std::optional<IsaLevel> isa_from_name(std::string_view name) {
  for (IsaLevel l : kLevels)
    if (isa_name(l) == name) return l;
  return std::nullopt;
}

std::span<const IsaLevel> isa_levels() { return kLevels; }

IsaLevel isa_best_supported() { return std::min(cpu_level(), kBuiltLevel); }

IsaChoice choose_isa(std::optional<std::string_view> requested, IsaLevel best) {
  if (!requested || requested->empty()) return {best, ""};
  const std::optional<IsaLevel> want = isa_from_name(*requested);
  if (!want)
    return {best, fmt::format("SAMBA_ISA='{}' is not an ISA level (expected one of {}); using {}",
                              *requested, level_names(), isa_name(best))};
  if (*want > best)
    return {best, fmt::format("SAMBA_ISA='{}' is above what this CPU and build support; using {}",
                              *requested, isa_name(best))};
  return {*want, ""};
}

IsaLevel active_isa() {
  static const IsaLevel level = [] {
    const char* env = std::getenv("SAMBA_ISA");
    IsaChoice c =
        choose_isa(env ? std::optional<std::string_view>(env) : std::nullopt, isa_best_supported());
    if (!c.warning.empty()) log::warn("{}", c.warning);
    return c.level;
  }();
  return level;
}

}  // namespace samba
