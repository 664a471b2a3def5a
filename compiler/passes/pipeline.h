// Optimization levels as data: each level is a named list of graph passes
// run in order, plus how kernels are formed from the resulting nodes. The
// compile driver only walks the list, so what a level does can be read (and
// tested) here and is recorded in each PEF's metadata ("compiler.passes").
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "compiler/passes/mixed_precision.h"
#include "compiler/passes/passes.h"

namespace samba::compiler {

struct Pass {
  std::string_view name;
  Graph (*run)(Graph);
};

struct OptLevel {
  std::span<const Pass> passes;
  // Chains of elementwise ops that feed each other become one kernel
  // (schedule.h); otherwise every op is its own kernel.
  bool fuse_elementwise = false;
};

// The level `opt_level` names (0 or 1); throws InvalidArgument for others.
const OptLevel& opt_level(int opt_level);

// The rewrites of the traced forward graph that mixed precision `m` asks
// for, run before autograd so the backward is built from their result.
std::span<const Pass> forward_passes(MixedPrecision m);

// The names of the passes a compile runs, in order: the forward rewrites of
// `m`, then the level's passes.
std::vector<std::string_view> pass_names(int opt_level, MixedPrecision m = MixedPrecision::None);

// Runs `passes` on g in order, checking the graph's invariants after each;
// an invariant a pass broke is reported with the pass's name.
Graph run_passes(Graph g, std::span<const Pass> passes);

}  // namespace samba::compiler
