// The registry sweep's table: for every registered op, how to build inputs
// and attributes it accepts (a recipe), or why the sweep cannot cover it (an
// exclusion). An op in neither fails the sweep, so a new op lands with a line
// here or not at all.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/ops/registry.h"

namespace samba::testing {

// How one input is generated. Float inputs are float64 so gradients can be
// checked against finite differences.
struct InputGen {
  enum class Kind { Uniform, Index, Mask, Given, Absent };
  Kind kind = Kind::Uniform;
  Dims shape;
  double lo = -1, hi = 1;     // Uniform: the value range; Index: [0, hi)
  std::vector<double> given;  // Given: the values, in `dtype`
  DType dtype = DType::Float64;
};

InputGen uniform(Dims shape, double lo = -1, double hi = 1);
// Int64 indices in [0, bound).
InputGen index(Dims shape, int64_t bound);
InputGen mask(Dims shape);
InputGen given(std::vector<double> values, Dims shape, DType dtype = DType::Int64);
// An optional input left out.
InputGen absent();

struct Recipe {
  // Empty: one uniform {2, 3} tensor per required input, optional ones absent.
  std::vector<InputGen> inputs;
  Attrs attrs;
  // Inputs that depend on each other (a backward op's `result` must be the
  // forward op's output on its `x`) are built by this instead.
  std::function<std::vector<Tensor>()> make_inputs;
  // Input indices the gradient check leaves alone: integer-valued ones are
  // skipped anyway; these are float inputs the op is not differentiable in.
  std::vector<size_t> no_grad;
  double grad_eps = 1e-6, grad_tol = 1e-6;
  // Whether the gradient is checked: false where no output is floating
  // point (a cast to an integer type).
  bool gradient = true;
  // Non-empty: the eager-vs-compiled comparison is skipped, for this reason.
  std::string not_compiled;
};

// The recipes of one op: its main case, then variants through other kernel
// paths (other attribute values, optional inputs left out, other ranks).
using Recipes = std::vector<Recipe>;

// Every op the sweep covers, by name.
const std::map<std::string, Recipes>& sweep_recipes();
// Every op the sweep cannot cover, with the reason.
const std::map<std::string, std::string>& sweep_exclusions();

// The inputs a recipe describes, for `op` (generated from its schema when
// the recipe lists none).
std::vector<Tensor> recipe_inputs(const OpDef& op, const Recipe& r);

}  // namespace samba::testing
