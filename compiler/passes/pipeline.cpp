#include "compiler/passes/pipeline.h"

#include "engine/core/error.h"

namespace samba::compiler {
namespace {

// Dead-code elimination runs last: the passes before it leave values unread.
constexpr Pass kO0Passes[] = {
    {"eliminate_dead_code", eliminate_dead_code},
};
constexpr Pass kO1Passes[] = {
    {"fold_constants", fold_constants},
    {"eliminate_common_subexpressions", eliminate_common_subexpressions},
    {"fuse_gemm_epilogues", fuse_gemm_epilogues},
    {"eliminate_dead_code", eliminate_dead_code},
};
constexpr Pass kBf16ForwardPasses[] = {
    {"autocast_bf16", autocast_bf16},
};
const OptLevel kLevels[] = {
    {kO0Passes, false},
    {kO1Passes, true},
};

}  // namespace

const OptLevel& opt_level(int level) {
  SAMBA_CHECK(level >= 0 && level < static_cast<int>(std::size(kLevels)), Status::InvalidArgument,
              "compile: optimization level {} is not supported; expected 0 (o0) or 1 (o1)", level);
  return kLevels[level];
}

std::span<const Pass> forward_passes(MixedPrecision m) {
  if (m == MixedPrecision::Bf16) return kBf16ForwardPasses;
  return {};
}

std::vector<std::string_view> pass_names(int level, MixedPrecision m) {
  std::vector<std::string_view> names;
  for (const Pass& p : forward_passes(m)) names.push_back(p.name);
  for (const Pass& p : opt_level(level).passes) names.push_back(p.name);
  return names;
}

Graph run_passes(Graph g, std::span<const Pass> passes) {
  for (const Pass& p : passes) {
    g = p.run(std::move(g));
    try {
      g.verify();
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("after pass '{}': {}", p.name, e.what()));
    }
  }
  return g;
}

}  // namespace samba::compiler
