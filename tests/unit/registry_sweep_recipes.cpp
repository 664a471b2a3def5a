// The registry sweep's recipes and exclusions: one line per registered op.
// Shapes are small so the whole sweep (finite differences for every input
// element, and a compile per op) stays within seconds.
#include "registry_sweep_recipes.h"

#include <limits>

#include "engine/kernels/gemm.h"
#include "engine/ops/autograd.h"
#include "op_test_util.h"

namespace samba::testing {

InputGen uniform(Dims shape, double lo, double hi) {
  return {InputGen::Kind::Uniform, std::move(shape), lo, hi, {}, DType::Float64};
}
InputGen index(Dims shape, int64_t bound) {
  return {InputGen::Kind::Index, std::move(shape), 0, static_cast<double>(bound), {}, DType::Int64};
}
InputGen mask(Dims shape) {
  return {InputGen::Kind::Mask, std::move(shape), 0, 2, {}, DType::Bool};
}
InputGen given(std::vector<double> values, Dims shape, DType dtype) {
  return {InputGen::Kind::Given, std::move(shape), 0, 0, std::move(values), dtype};
}
InputGen absent() { return {InputGen::Kind::Absent, {}, 0, 0, {}, DType::Float64}; }

std::vector<Tensor> recipe_inputs(const OpDef& op, const Recipe& r) {
  if (r.make_inputs) return r.make_inputs();
  std::vector<InputGen> gens = r.inputs;
  if (gens.empty())
    for (const InputSpec& in : op.inputs) gens.push_back(in.optional ? absent() : uniform({2, 3}));
  std::vector<Tensor> out;
  uint32_t seed = 1;
  for (const InputGen& g : gens) {
    ++seed;
    switch (g.kind) {
      case InputGen::Kind::Uniform:
        out.push_back(rand_tensor(g.shape, g.dtype, seed, g.lo, g.hi));
        break;
      case InputGen::Kind::Index:
      case InputGen::Kind::Mask: {
        std::vector<double> v = values(rand_tensor(g.shape, DType::Float64, seed, 0, g.hi));
        for (double& x : v) x = std::floor(x);
        out.push_back(make(v, g.shape, g.dtype));
        break;
      }
      case InputGen::Kind::Given:
        out.push_back(make(g.given, g.shape, g.dtype));
        break;
      case InputGen::Kind::Absent:
        out.emplace_back();
        break;
    }
  }
  return out;
}

namespace {

using Ints = std::vector<int64_t>;

Tensor eager1(std::string_view op, std::initializer_list<Tensor> in, const Attrs& attrs = {}) {
  autograd::NoGradGuard ng;
  return call1(op, in, attrs);
}

// A backward op of a reduction, fed the forward op's own result.
Recipe reduction_backward(std::string forward, Dims grad_shape, Attrs attrs) {
  Recipe r;
  r.attrs = attrs;
  r.make_inputs = [forward, grad_shape, attrs] {
    Tensor x = rand_tensor({2, 3}, DType::Float64, 2);
    Attrs fwd;
    for (const auto& [name, value] : attrs.items())
      if (name != "std") fwd.set(name, value);
    return std::vector<Tensor>{rand_tensor(grad_shape, DType::Float64, 3), x,
                               eager1(forward, {x}, fwd)};
  };
  // `result` is a function of `x`; perturbing either alone leaves the pair
  // inconsistent, so only the incoming gradient is differentiated.
  r.no_grad = {1, 2};
  return r;
}

Recipe with(std::vector<InputGen> inputs, Attrs attrs = {}) {
  Recipe r;
  r.inputs = std::move(inputs);
  r.attrs = std::move(attrs);
  return r;
}

const Attrs kPool = {{"kernel_size", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}};
const Attrs kConv = {{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"groups", int64_t{2}}};
const Attrs kSlice = {
    {"dim", int64_t{0}}, {"start", int64_t{1}}, {"end", int64_t{5}}, {"step", int64_t{2}}};

Attrs merged(Attrs a, const Attrs& b) {
  for (const auto& [name, value] : b.items()) a.set(name, value);
  return a;
}

// Second and later recipes: other kernel paths of the same ops (other
// attribute values, optional inputs left out, other ranks and layouts).
void add_variants(std::map<std::string, Recipes>& r) {
  const std::string kOtherReductions[] = {"none", "sum"};  // besides the default mean
  r["gelu"].push_back(with({uniform({2, 3})}, {{"approximate", std::string("tanh")}}));
  r["gelu_backward"].push_back(
      with({uniform({2, 3}), uniform({2, 3})}, {{"approximate", std::string("tanh")}}));
  r["clamp"].push_back(with({uniform({2, 3})}, {{"min", -0.25}}));
  r["clamp"].push_back(with({uniform({2, 3})}, {{"max", 0.25}}));
  r["pow"].push_back(with({uniform({2, 3}, 0.5, 2), uniform({})}));
  r["mul"].push_back(with({uniform({2, 1, 3}), uniform({4, 1})}));
  r["maximum"].push_back(with({uniform({2, 3}), uniform({3})}));
  r["where"].push_back(with({mask({3}), uniform({2, 1}), uniform({2, 3})}));
  for (const char* mode : {"floor", "trunc"}) {
    // Piecewise constant: the gradient is zero almost everywhere.
    r["div"].push_back(with({uniform({2, 3}, -4, 4), uniform({3}, 0.5, 2)},
                            {{"rounding_mode", std::string(mode)}}));
  }
  r["cast"].push_back(with({uniform({2, 3}, -4, 4)}, {{"dtype", DType::Int32}}));
  r["cast"].back().gradient = false;
  r["linear"].push_back(with({uniform({3}), uniform({4, 3})}));
  for (const auto& act : ops::epilogue_activations())
    r["linear"].push_back(with({uniform({2, 3}), uniform({4, 3}), uniform({4})},
                               {{"activation", std::string(act.name)}}));
  r["matmul"].push_back(with({uniform({3}), uniform({3, 4})}));
  r["matmul"].push_back(with({uniform({3}), uniform({3})}));
  r["matmul"].push_back(with({uniform({2, 1, 2, 3}), uniform({2, 3, 2})}));
  r["addmm"].push_back(with({uniform({2, 4}), uniform({2, 3}), uniform({3, 4})}));
  r["baddbmm"].push_back(with({uniform({2, 1, 4}), uniform({2, 2, 3}), uniform({2, 3, 4})},
                              {{"beta", 0.5}, {"alpha", -2.0}}));
  r["baddbmm"].push_back(with({uniform({4}), uniform({3, 2, 5}), uniform({3, 5, 4})}));
  // Convolutions: no bias, dilation, depthwise (groups = channels).
  r["conv2d"].push_back(with({uniform({2, 2, 5, 5}), uniform({3, 2, 2, 2}), absent()},
                             {{"padding", Ints{2, 1}}, {"dilation", Ints{2, 2}}}));
  r["conv2d"].push_back(with({uniform({1, 3, 4, 4}), uniform({3, 1, 3, 3}), uniform({3})},
                             {{"padding", Ints{1, 1}}, {"groups", int64_t{3}}}));
  r["conv2d"].push_back(with({uniform({2, 4, 4}), uniform({2, 2, 1, 1}), uniform({2})}));
  r["conv_transpose2d"].push_back(
      with({uniform({2, 2, 3, 3}), uniform({2, 3, 2, 2}), absent()}, {{"dilation", Ints{2, 1}}}));
  // Reductions over everything, other dims, keepdim.
  for (const char* op : {"sum", "mean", "max", "min", "logsumexp"})
    r[op].push_back(with({uniform({2, 3})}));
  for (const char* op : {"argmax", "argmin"}) r[op].push_back(with({uniform({2, 3})}));
  for (const char* op : {"std", "var"})
    r[op].push_back(with({uniform({2, 3, 2})},
                         {{"dim", Ints{0, 2}}, {"correction", int64_t{0}}, {"keepdim", true}}));
  r["sum"].push_back(with({uniform({2, 3})}, {{"dim", Ints{-1}}, {"dtype", DType::Float32}}));
  r["sum"].back().grad_eps = 1e-3, r["sum"].back().grad_tol = 1e-3;  // a float32 result
  r["cumsum"].push_back(with({uniform({2, 3})}, {{"dim", int64_t{0}}}));
  for (const char* op : {"softmax", "log_softmax"})
    r[op].push_back(with({uniform({2, 3, 2})}, {{"dim", int64_t{1}}}));
  // Normalization without affine parameters, and batch norm in evaluation.
  r["layer_norm"].push_back(
      with({uniform({2, 3, 4}), absent(), absent()}, {{"normalized_shape", Ints{3, 4}}}));
  r["group_norm"].push_back(
      with({uniform({2, 6, 2, 2}), absent(), absent()}, {{"num_groups", int64_t{3}}}));
  r["rms_norm"].push_back(with({uniform({2, 3, 4}), absent()}, {{"normalized_shape", Ints{3, 4}}}));
  r["batch_norm"].push_back(with({uniform({2, 3, 2, 2}), uniform({3}), uniform({3})}));
  r["batch_norm"].push_back(
      with({uniform({2, 3, 2, 2}), uniform({3}), uniform({3}), uniform({3}), uniform({3}, 0.5, 2)},
           {{"training", false}}));
  // The running statistics are buffers: read, never differentiated.
  r["batch_norm"].back().no_grad = {3, 4};
  // Training with running statistics: they are updated, and not differentiated.
  r["batch_norm"].push_back(
      with({uniform({4, 3}), uniform({3}), uniform({3}), uniform({3}), uniform({3}, 0.5, 2)}));
  r["batch_norm"].back().no_grad = {3, 4};
  // Counting batches: a cumulative average of the running statistics.
  r["batch_norm"].push_back(with({uniform({4, 3}), uniform({3}), uniform({3}), uniform({3}),
                                  uniform({3}, 0.5, 2), given({2}, {}, DType::Int64)},
                                 {{"cumulative_average", true}}));
  r["batch_norm"].back().no_grad = {3, 4};
  r["batch_norm_backward"].push_back(with({uniform({2, 3, 2, 2}), uniform({2, 3, 2, 2}),
                                           uniform({3}), uniform({3}), uniform({3}, 0.5, 2)},
                                          {{"training", false}}));
  // Losses: the other reductions, probability targets, ignored targets.
  for (const std::string& red : kOtherReductions) {
    const Attrs a = {{"reduction", red}};
    r["mse_loss"].push_back(with({uniform({2, 3}), uniform({2, 3})}, a));
    r["l1_loss"].push_back(with({uniform({2, 3}), uniform({2, 3})}, a));
    r["binary_cross_entropy_with_logits"].push_back(
        with({uniform({2, 3}), uniform({2, 3}, 0, 1), absent(), absent()}, a));
    r["nll_loss"].push_back(with({uniform({3, 4}), given({0, 1, 3}, {3}), absent()},
                                 merged(a, {{"ignore_index", int64_t{1}}})));
    r["cross_entropy"].push_back(with({uniform({3, 4}), uniform({3, 4}, 0, 1), absent()}, a));
    r["cross_entropy"].push_back(
        with({uniform({2, 4, 2}), given({0, 3, -100, 2}, {2, 2}), absent()}, a));
  }
  // Pooling: dilation and ceil mode, 3-D inputs, a divisor override.
  r["max_pool2d"].push_back(
      with({uniform({2, 6, 6})},
           {{"kernel_size", Ints{2, 2}}, {"dilation", Ints{2, 2}}, {"ceil_mode", true}}));
  r["max_pool2d_with_indices"].push_back(
      with({uniform({2, 6, 6})},
           {{"kernel_size", Ints{2, 2}}, {"dilation", Ints{2, 2}}, {"ceil_mode", true}}));
  r["avg_pool2d"].push_back(
      with({uniform({2, 5, 5})}, merged(kPool, {{"divisor_override", int64_t{2}}})));
  r["avg_pool2d"].push_back(with({uniform({1, 2, 4, 5})}, {{"kernel_size", Ints{2, 3}}}));
  r["adaptive_avg_pool2d"].push_back(with({uniform({2, 4, 5})}, {{"output_size", Ints{1, 1}}}));
  r["adaptive_avg_pool2d"].push_back(with({uniform({1, 1, 4, 5})}, {{"output_size", Ints{2, 3}}}));
  // Indexing along other dims, negative and open bounds.
  r["gather"].push_back(with({uniform({3, 4}), index({2, 4}, 3)}, {{"dim", int64_t{0}}}));
  r["scatter_add"].push_back(
      with({uniform({3, 4}), index({3, 2}, 4), uniform({3, 2})}, {{"dim", int64_t{1}}}));
  r["index_select"].push_back(with({uniform({2, 4}), given({1, 3}, {2})}, {{"dim", int64_t{1}}}));
  r["index_put"].push_back(
      with({uniform({3, 4}), given({3, 0}, {2}), uniform({3, 2})}, {{"dim", int64_t{1}}}));
  r["slice"].push_back(
      with({uniform({3, 5})}, {{"dim", int64_t{1}}, {"start", int64_t{-4}}, {"end", int64_t{-1}}}));
  r["slice"].push_back(with({uniform({5, 3})}, {{"start", int64_t{2}}}));
  r["select"].push_back(with({uniform({3, 4})}, {{"dim", int64_t{0}}, {"index", int64_t{-1}}}));
  r["narrow"].push_back(with(
      {uniform({3, 4})}, {{"dim", int64_t{-1}}, {"start", int64_t{0}}, {"length", int64_t{3}}}));
  r["embedding"].push_back(with({uniform({5, 3}), index({4}, 5)}));
  // Shapes.
  r["reshape"].push_back(with({uniform({2, 3, 2})}, {{"shape", Ints{-1, 4}}}));
  r["expand"].push_back(with({uniform({3})}, {{"shape", Ints{2, -1}}}));
  r["squeeze"].push_back(with({uniform({1, 3, 1})}));
  r["unsqueeze"].push_back(with({uniform({2, 3})}, {{"dim", int64_t{-1}}}));
  r["transpose"].push_back(with({uniform({2, 3})}, {{"dim0", int64_t{-1}}, {"dim1", int64_t{0}}}));
  r["flatten"].push_back(with({uniform({2, 3, 2})}));
  r["cat"].push_back(
      with({uniform({2, 3}), uniform({2, 1}), uniform({2, 2})}, {{"dim", int64_t{1}}}));
  r["stack"].push_back(with({uniform({3}), uniform({3}), uniform({3})}));
  r["split"].push_back(with({uniform({2, 5})}, {{"sections", Ints{1, 4}}, {"dim", int64_t{1}}}));
  r["chunk"].push_back(with({uniform({5, 2})}, {{"chunks", int64_t{3}}}));
  r["repeat"].push_back(with({uniform({2, 3})}, {{"repeats", Ints{3, 1}}}));
  r["pad"].push_back(with({uniform({2, 3, 3})}, {{"pad", Ints{1, 0, 2, 1}}, {"value", 0.5}}));
  for (const char* mode : {"constant", "replicate"})
    r["pad"].push_back(
        with({uniform({1, 3, 4})}, {{"pad", Ints{2, 1}}, {"mode", std::string(mode)}}));
  r["pad_backward"].push_back(
      with({uniform({2, 5})},
           {{"shape", Ints{2, 2}}, {"pad", Ints{1, 2}}, {"mode", std::string("replicate")}}));
  // A 0-dim tensor and a tensor with no elements, through the elementwise
  // and reduction paths.
  for (const Dims& shape : {Dims{}, Dims{0, 3}}) {
    for (const char* op : {"abs", "exp", "tanh", "sigmoid", "relu", "gelu", "silu", "neg", "sum",
                           "mean", "softmax", "log_softmax", "cumsum"})
      r[op].push_back(with({uniform(shape)},
                           std::string(op) == "cumsum" ? Attrs{{"dim", int64_t{0}}} : Attrs{}));
    for (const char* op : {"add", "mul", "maximum"})
      r[op].push_back(with({uniform(shape), uniform(shape)}));
  }
  r["sum"].push_back(with({uniform({0, 3})}, {{"dim", Ints{0}}}));
  // Norms of every kind of p, over all dims, other dims, keepdim.
  const double inf = std::numeric_limits<double>::infinity();
  r["norm"].push_back(with({uniform({2, 3})}));
  for (double p : {1.0, 3.0, 0.0, inf, -inf})
    r["norm"].push_back(
        with({uniform({2, 3, 2})}, {{"p", p}, {"dim", Ints{0, 2}}, {"keepdim", true}}));
  for (double p : {1.0, inf})
    r["norm_backward"].push_back(reduction_backward("norm", {2}, {{"dim", Ints{1}}, {"p", p}}));
  r["normalize"].push_back(with({uniform({2, 3, 2})}, {{"p", 3.0}, {"dim", Ints{0, 2}}}));
  r["tril"].push_back(with({uniform({2, 3, 3})}, {{"diagonal", int64_t{-1}}}));
  r["triu"].push_back(with({uniform({2, 4, 3})}));
  r["max"].push_back(with({uniform({2, 0})}, {{"dim", Ints{0}}}));
  r["matmul"].push_back(with({uniform({2, 0}), uniform({0, 3})}));
  r["linear"].push_back(with({uniform({0, 3}), uniform({4, 3}), uniform({4})}));
  r["cat"].push_back(with({uniform({0, 3}), uniform({2, 3})}));
  // Integer inputs (no gradient), alone and promoted with floating ones.
  auto integer = [](Recipe r) {
    r.gradient = false;
    return r;
  };
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum", "pow"})
    r[op].push_back(integer(with({given({1, -2, 3, 4, -5, 6}, {2, 3}), given({2, 1, 3}, {3})})));
  for (const char* op : {"add", "mul", "div", "where"})
    r[op].push_back(with({index({2, 3}, 5), uniform({3})}));
  r["where"].back().inputs.insert(r["where"].back().inputs.begin(), mask({2, 3}));
  for (const char* op : {"neg", "abs", "relu", "sum", "cumsum", "max", "argmax"})
    r[op].push_back(
        integer(with({given({1, -2, 3, 4, -5, 6}, {2, 3}, DType::Int32)},
                     std::string(op) == "cumsum" ? Attrs{{"dim", int64_t{1}}} : Attrs{})));
  r["cast"].push_back(integer(with({index({2, 3}, 9)}, {{"dtype", DType::Float64}})));
  r["mean"].push_back(integer(with({index({2, 3}, 9)}, {{"dtype", DType::Float64}})));
  r["clamp"].push_back(
      integer(with({given({1, -2, 3, 4, -5, 6}, {2, 3})}, {{"min", -1.0}, {"max", 3.0}})));
  for (const char* op : {"tril", "triu"})
    r[op].push_back(integer(with({given({1, -2, 3, 4, -5, 6}, {2, 3})})));
  // Sizes that are no multiple of a vector width or a GEMM tile: the
  // kernels' remainder loops.
  for (const char* op : {"exp", "tanh", "sigmoid", "gelu", "silu", "log_softmax", "softmax"})
    r[op].push_back(with({uniform({3, 37})}));
  r["add"].push_back(with({uniform({3, 37}), uniform({37})}));
  r["mul"].push_back(with({uniform({3, 37}), uniform({3, 1})}));
  for (const char* op : {"sum", "mean", "max", "var", "logsumexp"}) {
    r[op].push_back(with({uniform({3, 37})}, {{"dim", Ints{0}}}));
    r[op].push_back(with({uniform({3, 37})}, {{"dim", Ints{1}}}));
  }
  r["matmul"].push_back(with({uniform({5, 17}), uniform({17, 9})}));
  r["linear"].push_back(with({uniform({7, 19}), uniform({11, 19}), uniform({11})},
                             {{"activation", std::string("gelu_tanh")}}));
  r["bmm"].push_back(with({uniform({3, 5, 17}), uniform({3, 17, 6})}));
  r["conv2d"].push_back(with({uniform({2, 3, 9, 9}), uniform({5, 3, 3, 3}), uniform({5})},
                             {{"stride", Ints{1, 2}}, {"padding", Ints{1, 0}}}));
  r["layer_norm"].push_back(
      with({uniform({3, 37}), uniform({37}), uniform({37})}, {{"normalized_shape", Ints{37}}}));
  r["cross_entropy"].push_back(with({uniform({5, 37}), index({5}, 37), absent()}));
  // Creation in other dtypes.
  r["arange"].push_back(with({}, {{"end", 5.0}, {"dtype", DType::Int64}}));
  r["eye"].push_back(with({}, {{"n", int64_t{3}}, {"dtype", DType::Float64}}));
  r["full"].push_back(with({}, {{"shape", Ints{2}}, {"value", 3.0}, {"dtype", DType::Int32}}));
}

std::map<std::string, Recipes> build_recipes() {
  const Recipe defaults;
  const Recipe positive = with({uniform({2, 3}, 0.5, 2)});
  const Recipe binary_int = with({index({2, 3}, 16), index({2, 3}, 16)});
  const Recipe compare = with({index({2, 3}, 3), index({2, 3}, 3)});
  const Recipe logical = with({mask({2, 3}), mask({2, 3})});
  std::map<std::string, Recipes> r;
  // Elementwise.
  for (const char* op :
       {"abs", "cos", "sin", "exp", "erf", "neg", "tanh", "sigmoid", "silu", "relu", "gelu"})
    r[op].push_back(defaults);
  for (const char* op : {"log", "sqrt", "rsqrt", "reciprocal"}) r[op].push_back(positive);
  for (const char* op :
       {"gelu_backward", "leaky_relu_backward", "relu_backward", "sigmoid_backward",
        "silu_backward", "tanh_backward", "maximum", "minimum", "mul"})
    r[op].push_back(defaults);
  r["add"].push_back(with({uniform({2, 3}), uniform({3})}, {{"alpha", 0.5}}));
  r["sub"].push_back(with({uniform({2, 1}), uniform({2, 3})}, {{"alpha", 2.0}}));
  r["div"].push_back(with({uniform({2, 3}), uniform({3}, 0.5, 2)}));
  r["pow"].push_back(with({uniform({2, 3}, 0.5, 2), uniform({2, 3})}));
  r["leaky_relu"].push_back(with({uniform({2, 3})}, {{"negative_slope", 0.2}}));
  r["clamp"].push_back(with({uniform({2, 3})}, {{"min", -0.5}, {"max", 0.5}}));
  r["cast"].push_back(with({uniform({2, 3})}, {{"dtype", DType::Float32}}));
  // Float32 rounding (6e-8 relative) over a 2e-3 step.
  r["cast"][0].grad_eps = 1e-3, r["cast"][0].grad_tol = 1e-3;
  for (const char* op : {"bitwise_and", "bitwise_or", "bitwise_xor"}) r[op].push_back(binary_int);
  r["bitwise_not"].push_back(with({index({2, 3}, 16)}));
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) r[op].push_back(compare);
  for (const char* op : {"logical_and", "logical_or", "logical_xor"}) r[op].push_back(logical);
  r["logical_not"].push_back(with({mask({2, 3})}));
  r["where"].push_back(with({mask({2, 3}), uniform({2, 3}), uniform({3})}));
  r["masked_fill"].push_back(with({uniform({2, 3}), mask({3})}, {{"value", 2.5}}));
  // A compiled program's first step draws with offset 1 (the runtime sets the
  // offset to the step count), so eager calls use that offset too.
  r["dropout"].push_back(
      with({uniform({2, 3})}, {{"p", 0.5}, {"seed", int64_t{3}}, {"offset", int64_t{1}}}));
  // Contraction.
  r["matmul"].push_back(with({uniform({2, 2, 3}), uniform({3, 4})}));
  r["matmul_nt"].push_back(with({uniform({2, 3}), uniform({4, 3})}));
  r["matmul_tn"].push_back(with({uniform({3, 2}), uniform({3, 4})}));
  r["bmm"].push_back(with({uniform({2, 2, 3}), uniform({2, 3, 4})}));
  r["linear"].push_back(with({uniform({2, 3}), uniform({4, 3}), uniform({4})}));
  r["addmm"].push_back(
      with({uniform({4}), uniform({2, 3}), uniform({3, 4})}, {{"beta", 0.5}, {"alpha", 2.0}}));
  r["conv2d"].push_back(with({uniform({1, 2, 5, 5}), uniform({4, 1, 3, 3}), uniform({4})}, kConv));
  // The direct kernel's case (stride 1, one group) and im2col's (kConv).
  r["conv2d_max_pool2d"].push_back(
      with({uniform({2, 2, 6, 7}), uniform({5, 2, 3, 3}), uniform({5})},
           {{"padding", Ints{1, 1}}, {"activation", std::string("relu")}}));
  r["conv2d_max_pool2d"].push_back(
      with({uniform({1, 2, 9, 9}), uniform({4, 1, 3, 3})}, kConv));
  r["conv2d_backward_input"].push_back(with({uniform({1, 4, 3, 3}), uniform({4, 1, 3, 3})},
                                            merged(kConv, {{"input_size", Ints{1, 2, 5, 5}}})));
  r["conv2d_backward_weight"].push_back(with({uniform({1, 4, 3, 3}), uniform({1, 2, 5, 5})},
                                             merged(kConv, {{"weight_size", Ints{4, 1, 3, 3}}})));
  r["conv_transpose2d"].push_back(with({uniform({1, 2, 3, 3}), uniform({2, 2, 3, 3}), uniform({4})},
                                       merged(kConv, {{"output_padding", Ints{1, 1}}})));
  // Reductions.
  for (const char* op : {"argmax", "argmin"})
    r[op].push_back(with({uniform({2, 3})}, {{"dim", int64_t{1}}}));
  for (const char* op : {"max", "min", "std", "var", "logsumexp"})
    r[op].push_back(with({uniform({2, 3})}, {{"dim", Ints{1}}}));
  r["sum"].push_back(with({uniform({2, 3})}, {{"dim", Ints{1}}, {"keepdim", true}}));
  r["mean"].push_back(with({uniform({2, 3})}, {{"dim", Ints{0}}}));
  r["cumsum"].push_back(with({uniform({2, 3})}, {{"dim", int64_t{1}}, {"reverse", true}}));
  r["extremum_backward"].push_back(reduction_backward("max", {2}, {{"dim", Ints{1}}}));
  r["norm"].push_back(with({uniform({2, 3})}, {{"dim", Ints{1}}}));
  r["norm_backward"].push_back(reduction_backward("norm", {2}, {{"dim", Ints{1}}}));
  r["normalize"].push_back(with({uniform({2, 3})}));
  for (const char* op : {"tril", "triu"})
    r[op].push_back(with({uniform({3, 4})}, {{"diagonal", int64_t{1}}}));
  r["logsumexp_backward"].push_back(reduction_backward("logsumexp", {2}, {{"dim", Ints{1}}}));
  r["var_backward"].push_back(reduction_backward("std", {2}, {{"dim", Ints{1}}, {"std", true}}));
  for (const char* op : {"softmax", "log_softmax", "softmax_backward", "log_softmax_backward"})
    r[op].push_back(defaults);
  // Normalization.
  r["batch_norm"].push_back(
      with({uniform({4, 3}), uniform({3}), uniform({3}), absent(), absent()}));
  r["batch_norm_backward"].push_back(
      with({uniform({4, 3}), uniform({4, 3}), uniform({3}), absent(), absent()}));
  r["layer_norm"].push_back(
      with({uniform({2, 3, 4}), uniform({4}), uniform({4})}, {{"normalized_shape", Ints{4}}}));
  r["layer_norm_backward"].push_back(with({uniform({2, 3, 4}), uniform({2, 3, 4}), uniform({4})},
                                          {{"normalized_shape", Ints{4}}}));
  r["rms_norm"].push_back(with({uniform({2, 4}), uniform({4})}, {{"normalized_shape", Ints{4}}}));
  r["rms_norm_backward"].push_back(with({uniform({2, 4}), uniform({2, 4}), uniform({4})},
                                        {{"normalized_shape", Ints{4}}, {"eps", 1e-5}}));
  r["group_norm"].push_back(
      with({uniform({2, 4, 3}), uniform({4}), uniform({4})}, {{"num_groups", int64_t{2}}}));
  r["group_norm_backward"].push_back(
      with({uniform({2, 4, 3}), uniform({2, 4, 3}), uniform({4})}, {{"num_groups", int64_t{2}}}));
  // Losses.
  r["mse_loss"].push_back(defaults);
  r["l1_loss"].push_back(defaults);
  r["l1_loss_backward"].push_back(with({uniform({}), uniform({2, 3}), uniform({2, 3})}));
  r["binary_cross_entropy_with_logits"].push_back(
      with({uniform({2, 3}), uniform({2, 3}, 0, 1), uniform({3}, 0.5, 2), uniform({3}, 0.5, 2)}));
  r["binary_cross_entropy_with_logits_backward"].push_back(
      with({uniform({}), uniform({2, 3}), uniform({2, 3}, 0, 1), uniform({3}, 0.5, 2),
            uniform({3}, 0.5, 2)}));
  r["cross_entropy"].push_back(
      with({uniform({3, 4}), index({3}, 4), uniform({4}, 0.5, 2)}, {{"label_smoothing", 0.1}}));
  r["cross_entropy_backward"].push_back(
      with({uniform({}), uniform({3, 4}), index({3}, 4), uniform({4}, 0.5, 2)},
           {{"label_smoothing", 0.1}}));
  r["nll_loss"].push_back(with({uniform({3, 4}), index({3}, 4), uniform({4}, 0.5, 2)}));
  // The class weights get no gradient (as in PyTorch, which refuses to
  // differentiate them).
  r["cross_entropy"][0].no_grad = r["nll_loss"][0].no_grad = {2};
  r["nll_loss_backward"].push_back(
      with({uniform({}), uniform({3, 4}), index({3}, 4), uniform({4}, 0.5, 2)}));
  // Pooling.
  r["max_pool2d"].push_back(with({uniform({1, 2, 5, 5})}, kPool));
  r["max_pool2d_with_indices"].push_back(with({uniform({1, 2, 5, 5})}, kPool));
  r["max_pool2d_backward"].push_back(with({uniform({1, 2, 3, 3}), uniform({1, 2, 5, 5})}, kPool));
  const Attrs avg = merged(kPool, {{"ceil_mode", true}, {"count_include_pad", false}});
  r["avg_pool2d"].push_back(with({uniform({1, 2, 5, 5})}, avg));
  r["avg_pool2d_backward"].push_back(
      with({uniform({1, 2, 3, 3})}, merged(avg, {{"input_size", Ints{1, 2, 5, 5}}})));
  r["adaptive_avg_pool2d"].push_back(with({uniform({1, 2, 5, 5})}, {{"output_size", Ints{3, 3}}}));
  r["adaptive_avg_pool2d_backward"].push_back(
      with({uniform({1, 2, 3, 3})}, {{"input_size", Ints{1, 2, 5, 5}}}));
  // Indexing and embedding.
  // padding_idx only zeroes the gradient (the forward still reads the row),
  // so it would contradict finite differences by design.
  r["embedding"].push_back(with({uniform({5, 3}), index({2, 3}, 5)}));
  r["embedding_backward"].push_back(
      with({uniform({2, 3, 3}), index({2, 3}, 5)}, {{"num_weights", int64_t{5}}}));
  r["gather"].push_back(with({uniform({3, 4}), index({3, 2}, 4)}, {{"dim", int64_t{1}}}));
  r["index_select"].push_back(
      with({uniform({4, 3}), given({3, 0, 3}, {3})}, {{"dim", int64_t{0}}}));
  r["index_put"].push_back(
      with({uniform({4, 3}), given({2, 0}, {2}), uniform({2, 3})}, {{"accumulate", true}}));
  r["scatter_add"].push_back(
      with({uniform({3, 4}), index({2, 4}, 3), uniform({2, 4})}, {{"dim", int64_t{0}}}));
  r["scatter"].push_back(
      with({uniform({3, 4}), given({2, 0, 1, 1, 2, 0}, {2, 3}), uniform({2, 4})},
           {{"dim", int64_t{0}}}));
  r["scatter"].push_back(
      with({uniform({3, 4}), given({3, 0, 1, 2}, {2, 2}), uniform({2, 3})}, {{"dim", int64_t{1}}}));
  // Ordering: uniform values have no ties, so every order is one function.
  r["sort"].push_back(with({uniform({3, 5})}));
  r["sort"].push_back(with({uniform({4, 3, 2})}, {{"dim", int64_t{1}}, {"descending", true}}));
  Recipe ties = with({given({3, 1, 3, 2, 1, 3}, {6})}, {{"stable", true}});
  ties.gradient = false;  // integers
  r["sort"].push_back(ties);
  r["topk"].push_back(with({uniform({3, 5})}, {{"k", int64_t{2}}}));
  r["topk"].push_back(
      with({uniform({4, 3, 2})}, {{"k", int64_t{3}}, {"dim", int64_t{0}}, {"largest", false}}));
  r["kthvalue"].push_back(with({uniform({3, 5})}, {{"k", int64_t{2}}}));
  r["kthvalue"].push_back(
      with({uniform({4, 3, 2})}, {{"k", int64_t{4}}, {"dim", int64_t{0}}, {"keepdim", true}}));
  // Attention: a plain case, a causal one crossing the kernel's 64-row blocks,
  // a broadcast bool mask (every row attends some key) and a float mask,
  // whose gradient is checked too.
  r["scaled_dot_product_attention"].push_back(
      with({uniform({2, 3, 4}), uniform({2, 5, 4}), uniform({2, 5, 3})}));
  r["scaled_dot_product_attention"].push_back(
      with({uniform({1, 1, 70, 3}), uniform({1, 1, 70, 3}), uniform({1, 1, 70, 2})},
           {{"is_causal", true}, {"scale", 0.7}}));
  r["scaled_dot_product_attention"].push_back(
      with({uniform({2, 2, 3, 4}), uniform({2, 2, 5, 4}), uniform({2, 2, 5, 3}),
            given({1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1}, {3, 5}, DType::Bool)}));
  r["scaled_dot_product_attention"].push_back(
      with({uniform({2, 3, 4}), uniform({2, 5, 4}), uniform({2, 5, 3}), uniform({2, 1, 5})}));
  for (bool causal : {false, true}) {
    Recipe bwd;
    bwd.attrs = {{"is_causal", causal}};
    bwd.make_inputs = [causal] {
      const Dims qs{2, 66, 3}, ks{2, causal ? 66 : 67, 3};
      Tensor q = rand_tensor(qs, DType::Float64, 2), k = rand_tensor(ks, DType::Float64, 3),
             v = rand_tensor(ks, DType::Float64, 4);
      auto fwd = [&] {
        autograd::NoGradGuard ng;
        return call("scaled_dot_product_attention", {q, k, v}, {{"is_causal", causal}});
      }();
      const Tensor gout = rand_tensor(fwd[0].shape(), DType::Float64, 5);
      const Tensor glse = rand_tensor(fwd[1].shape(), DType::Float64, 6);
      return std::vector<Tensor>{gout, q, k, v, fwd[0], fwd[1], Tensor(), glse};
    };
    r["scaled_dot_product_attention_backward"].push_back(bwd);
  }
  r["slice"].push_back(with({uniform({5, 3})}, kSlice));
  r["slice_backward"].push_back(with({uniform({2, 3})}, merged(kSlice, {{"shape", Ints{5, 3}}})));
  r["narrow"].push_back(with({uniform({4, 3})},
                             {{"dim", int64_t{0}}, {"start", int64_t{1}}, {"length", int64_t{2}}}));
  r["select"].push_back(with({uniform({3, 4})}, {{"dim", int64_t{1}}, {"index", int64_t{2}}}));
  r["select_backward"].push_back(
      with({uniform({3})}, {{"shape", Ints{3, 4}}, {"dim", int64_t{1}}, {"index", int64_t{2}}}));
  // Shapes.
  r["reshape"].push_back(with({uniform({2, 3})}, {{"shape", Ints{3, 2}}}));
  r["expand"].push_back(with({uniform({3, 1})}, {{"shape", Ints{2, 3, 4}}}));
  r["permute"].push_back(with({uniform({2, 3, 4})}, {{"dims", Ints{2, 0, 1}}}));
  r["transpose"].push_back(
      with({uniform({2, 3, 4})}, {{"dim0", int64_t{0}}, {"dim1", int64_t{2}}}));
  r["t"].push_back(defaults);
  r["squeeze"].push_back(with({uniform({2, 1, 3})}, {{"dim", Ints{1}}}));
  r["unsqueeze"].push_back(with({uniform({2, 3})}, {{"dim", int64_t{1}}}));
  r["flatten"].push_back(with({uniform({2, 3, 2})}, {{"start_dim", int64_t{1}}}));
  r["cat"].push_back(with({uniform({2, 3}), uniform({1, 3})}));
  r["stack"].push_back(with({uniform({2, 3}), uniform({2, 3})}, {{"dim", int64_t{1}}}));
  r["split"].push_back(with({uniform({5, 3})}, {{"split_size", int64_t{2}}}));
  r["chunk"].push_back(with({uniform({2, 4})}, {{"chunks", int64_t{2}}, {"dim", int64_t{1}}}));
  r["repeat"].push_back(with({uniform({2, 3})}, {{"repeats", Ints{2, 1, 2}}}));
  r["pad"].push_back(
      with({uniform({2, 4})}, {{"pad", Ints{1, 2}}, {"mode", std::string("reflect")}}));
  r["pad_backward"].push_back(
      with({uniform({2, 7})},
           {{"shape", Ints{2, 4}}, {"pad", Ints{1, 2}}, {"mode", std::string("reflect")}}));
  // Creation.
  for (const char* op : {"zeros", "ones"}) r[op].push_back(with({}, {{"shape", Ints{2, 3}}}));
  r["full"].push_back(with({}, {{"shape", Ints{2, 3}}, {"value", 1.5}}));
  // The *_like ops read only x's shape: their result has no gradient.
  for (const char* op : {"zeros_like", "ones_like", "full_like"}) {
    r[op].push_back(with({uniform({2, 3})}, std::string(op) == "full_like"
                                                ? Attrs{{"value", 2.5}}
                                                : Attrs{}));
    r[op].back().gradient = false;
  }
  r["arange"].push_back(with({}, {{"start", 1.0}, {"end", 4.0}, {"step", 0.5}}));
  r["eye"].push_back(with({}, {{"n", int64_t{3}}, {"m", int64_t{4}}}));
  for (const char* op : {"rand", "randn"})
    r[op].push_back(with({}, {{"shape", Ints{2, 3}}, {"seed", int64_t{5}}}));
  r["normal"].push_back(
      with({}, {{"shape", Ints{2, 3}}, {"seed", int64_t{5}}, {"mean", 1.0}, {"std", 2.0}}));
  r["randint"].push_back(
      with({}, {{"shape", Ints{2, 3}}, {"seed", int64_t{5}}, {"high", int64_t{10}}}));
  add_variants(r);
  return r;
}

}  // namespace

const std::map<std::string, Recipes>& sweep_recipes() {
  static const std::map<std::string, Recipes> recipes = build_recipes();
  return recipes;
}

const std::map<std::string, std::string>& sweep_exclusions() {
  static const std::map<std::string, std::string> excluded = {
      {"empty", "its values are whatever the memory held: nothing to compare"},
      {"sgd_update",
       "an optimizer update: it has no outputs and is only emitted by the compiler's optimizer "
       "path, which optimizer tests check against reference updates"},
      {"adamw_update",
       "an optimizer update: it has no outputs and is only emitted by the compiler's "
       "optimizer path, which optimizer tests check against reference updates"},
      {"clip_grad_norm",
       "updates the gradients of an optimizer group in place; only the optimizer path "
       "emits it"},
      {"zero_", "an in-place update with no outputs: a one-op model has nothing to return"},
      {"add_", "an in-place update with no outputs: a one-op model has nothing to return"},
      {"copy_", "an in-place update with no outputs: a one-op model has nothing to return"},
  };
  return excluded;
}

}  // namespace samba::testing
