// Mixed precision (SambaFlow's mixed-precision compile, the rules of
// torch.autocast): bf16 products with fp32 accumulation, the numerically
// sensitive ops in fp32, and fp32 parameters the optimizer updates (master
// weights). The rewrite runs on the traced forward graph before autograd, so
// the backward is differentiated from the rewritten graph: a cast's gradient
// casts back, and every parameter's gradient is fp32.
#pragma once

#include <cstdint>
#include <string_view>

#include "compiler/ir/graph.h"

namespace samba::compiler {

enum class MixedPrecision : uint8_t {
  None = 0,  // every op in the dtypes the model traced (fp32)
  Bf16 = 1,  // the autocast_bf16 rewrite below
};

// "none" or "bf16".
std::string_view mixed_precision_name(MixedPrecision m);

// The mode named `name`: "none" or "bf16", or SambaFlow's GraphAMP presets
// "mp0" (none) and "mp1" (bf16 products). Throws InvalidArgument naming the
// accepted values for any other.
MixedPrecision mixed_precision_from_name(std::string_view name);

// What the bf16 rewrite does with an op's floating inputs.
enum class CastPolicy : uint8_t {
  Follow,   // nothing: the op runs in the dtype its inputs have
  Bf16,     // fp32 operands are cast to bf16 (products: the registry's contraction ops)
  Float32,  // inputs the rewrite made bf16 are cast back up (reductions, softmax,
            // normalizations, losses, exp, log)
};
CastPolicy cast_policy(const OpDef& op);

// The "autocast_bf16" pass, on a graph of forward nodes: inserts cast nodes
// on the inputs of products (when all their operands are fp32 or bf16; a
// product with integer or float64 operands is left alone) and on the bf16
// inputs of fp32 ops, and gives every node the output dtypes its new inputs
// imply. A follower op whose inputs became mixed and that refuses them gets
// its inputs' traced dtypes back. Values updated in place are never cast
// (the update would go to a copy). Graph outputs keep their traced dtype (a
// cast back after their producer), so the app's output tensors are the same.
Graph autocast_bf16(Graph g);

}  // namespace samba::compiler
