// The op registry: every op is defined once, in one file of engine/ops/, with
// its schema, shape/dtype inference, kernel, gradient rule and fusion class.
// Eager execution, tracing, the compiler, the runtime and the C ABI's generic
// samba_op_call all read it.
#pragma once

#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "engine/core/attrs.h"
#include "engine/core/tensor.h"
#include "engine/kernels/output_tail.h"

namespace samba {

// ---- schema -----------------------------------------------------------------

enum class Fusion { Elementwise, Reduction, Contraction, View, Creation, Opaque };
std::string_view fusion_name(Fusion f);

struct InputSpec {
  std::string name;
  std::string doc;
  bool optional = false;  // may be an undefined Tensor
  bool variadic = false;  // last input only: zero or more tensors
  bool mutated = false;   // written in place (running statistics)
};

// What a compiled program does with an attribute at run time. Plain ones are
// fixed at compile time; the others become argins (or are set by the
// runtime) so that run() can change them without recompiling.
enum class AttrRole : uint8_t {
  Plain = 0,
  DropoutRate = 1,  // an argin; evaluation mode (train = false) sets it to 0
  DropoutSeed = 2,  // an argin: the key of the op's random stream
  RngOffset = 3,    // set by the runtime to the step count, so each step draws anew
  Hyperparam = 4,   // a run-time argin the user sets by name (optimizer hyperparameters)
  Training = 5,     // a bool: evaluation mode (train = false) runs the op with it false
};

// The values a numeric attribute accepts, [min, max] with either end open.
// Part of the schema so that every front end validates, and documents, a
// hyperparameter the same way.
struct AttrRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;
  bool max_open = false;

  static AttrRange at_least(double lo) { return {lo, std::numeric_limits<double>::infinity(), false, false}; }
  static AttrRange above(double lo) { return {lo, std::numeric_limits<double>::infinity(), true, false}; }
  bool contains(double v) const;  // never for NaN or an infinity
  std::string str() const;  // ">= 0", "> 0", "in [0, 1)"
};

struct AttrSpec {
  std::string name;
  AttrType type;
  AttrValue default_value;  // monostate: required, unless `optional`
  bool optional = false;    // may be absent; kernels test attrs.has(name)
  std::string doc;
  AttrRole role = AttrRole::Plain;
  std::optional<AttrRange> range = std::nullopt;  // checked by check_attr_value
};

// The one check of a value given for attribute `spec`, whatever the path that
// gives it: eager calls and tracing (OpDef::resolve), PEF kernels at load,
// run-time argins (run and set_argin) and optimizer hyperparameters. Returns
// the value converted to the schema's type where the meaning is unambiguous
// (an int for a float, 0 or 1 for a bool, an integral float in int64's range
// for an int, so argins given as doubles can feed seeds); refuses any other
// type, and a number outside the schema's range (NaN and infinities are
// outside every range). Messages start "<what> '<name>'" ("argin 'lr' must
// be >= 0, got -1").
AttrValue check_attr_value(const AttrSpec& spec, const AttrValue& v, std::string_view what,
                           std::string_view name);

struct OutputSpec {
  std::string name;
  std::string doc;
  bool variadic = false;  // count decided by inference (split, chunk)
};

// ---- functions an op provides --------------------------------------------------

struct TensorMeta {
  DType dtype;
  Dims shape;
};

struct OpDef;
namespace ops {
struct PackedOperand;
}

struct InferContext {
  const OpDef& op;
  std::span<const Tensor> inputs;  // may be symbolic; optional ones may be undefined
  const Attrs& attrs;
};

struct KernelContext {
  const OpDef& op;
  std::span<const Tensor> inputs;  // contiguous unless the op accepts strided inputs
  std::span<Tensor> outputs;       // allocated, contiguous, shaped by inference
  const Attrs& attrs;
  // The product's B operand (input 1 of linear and matmul) packed when the
  // PEF was loaded (engine/runtime/prepacked_weights.h); null otherwise.
  const ops::PackedOperand* packed_b = nullptr;
  // Set by the runtime for the producer of a fused epilogue chain: kernels
  // that can run it on each block of outputs[0] do (output_tail.h).
  ops::OutputTail* tail = nullptr;
  // Set by the runtime for a product whose output rows a row-wise op reads
  // next: kernels that can run it on each run of finished rows do
  // (output_tail.h).
  ops::RowsWork* rows = nullptr;
};

struct GradContext {
  const OpDef& op;
  std::span<const Tensor> inputs;
  std::span<const Tensor> outputs;       // detached views of the forward outputs
  std::span<const Tensor> grad_outputs;  // undefined where an output got no gradient
  const Attrs& attrs;
  std::vector<bool> needs_input_grad;
  bool needs_grad(size_t i) const { return i < needs_input_grad.size() && needs_input_grad[i]; }
};

using InferFn = std::function<std::vector<TensorMeta>(const InferContext&)>;
using KernelFn = std::function<void(KernelContext&)>;
// Returns outputs that alias the inputs' storage (reshape, permute, slicing).
using ViewFn = std::function<std::vector<Tensor>(std::span<const Tensor> inputs, const Attrs&)>;
// One gradient per input (undefined when none), built by calling registry ops.
using GradFn = std::function<std::vector<Tensor>(const GradContext&)>;
// Floating-point operations one call performs, for cost estimates (the
// compiler's .pef.log and profiles). Inputs may be symbolic.
using FlopsFn = std::function<double(const InferContext&, std::span<const TensorMeta> outputs)>;
// An elementwise op's float32 compute over one block of n <= ew::kBlock
// adjacent elements: out[i] from in[0][i], in[1][i], ... (one array per
// input, all float32). Made once when a program is loaded; calling it
// allocates nothing, so a fused elementwise kernel can run a chain of them
// over small tiles that stay in L1.
using Float32Block = std::function<void(int64_t n, float* out, const float* const* in)>;
// The block function of the op with these resolved attributes; empty when
// the attributes select a form that has none (div with a rounding mode).
using Float32BlockFn = std::function<Float32Block(const Attrs&)>;

// A row-wise op's kernel as ops::RowsWork for these operands: fills `w`
// (its tail from c.tail) and returns true, or returns false when the
// operands need what only the kernel does (another dtype, a copy).
using RowsWorkFn = bool (*)(const KernelContext& c, ops::RowsWork& w);

struct OpDef {
  std::string name;
  std::string doc;
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;
  std::vector<AttrSpec> attrs;
  Fusion fusion = Fusion::Opaque;
  bool strided_inputs = false;  // the kernel reads any strides itself
  bool nondeterministic_seeded = false;  // uses the `seed` attribute (random ops)
  // A view op whose view function needs a contiguous input (reshape): the
  // tracer makes a non-contiguous input contiguous first.
  bool view_needs_contiguous = false;
  bool has_no_outputs = false;  // declared with no_outputs(): effects only
  InferFn infer;
  KernelFn kernel;
  ViewFn view;
  GradFn grad;
  FlopsFn flops;  // optional; the default estimate follows the fusion class
  // Optional, elementwise ops only: the same compute its kernel runs, for
  // float32 operands of the output's layout, exposed so the runtime can fuse.
  Float32BlockFn float32_block;
  // Optional, row-wise ops only: the kernel's work over ranges of rows, so
  // the runtime can run it on rows of a product as they are finished.
  RowsWorkFn rows_work = nullptr;

  const AttrSpec* find_attr(std::string_view n) const;
  // Validates and completes user attributes against the schema.
  Attrs resolve(const Attrs& given) const;
  // Validates the input list (count, required ones present).
  void check_inputs(std::span<const Tensor> in) const;
  std::string signature() const;  // "add(a, b, *, alpha: float = 1)"
};

// Builder used by the op files: r.def("add").doc(...).input("a")...
class OpBuilder {
 public:
  explicit OpBuilder(OpDef& d) : d_(d) {}
  OpBuilder& doc(std::string s);
  OpBuilder& input(std::string name, std::string doc = "");
  OpBuilder& optional_input(std::string name, std::string doc = "");
  OpBuilder& variadic_input(std::string name, std::string doc = "");
  OpBuilder& mutated_input(std::string name, std::string doc = "");
  // Zero or more tensors, each updated in place (last input only).
  OpBuilder& variadic_mutated_input(std::string name, std::string doc = "");
  // The op only updates inputs in place and returns nothing.
  OpBuilder& no_outputs();
  OpBuilder& output(std::string name = "out", std::string doc = "");
  OpBuilder& variadic_output(std::string name, std::string doc = "");
  OpBuilder& attr(std::string name, AttrType type, AttrValue def, std::string doc = "");
  OpBuilder& required_attr(std::string name, AttrType type, std::string doc = "");
  OpBuilder& optional_attr(std::string name, AttrType type, std::string doc = "");
  OpBuilder& fusion(Fusion f);
  OpBuilder& strided_inputs();
  OpBuilder& seeded();
  OpBuilder& view_of_contiguous();
  // Gives the already declared attribute `name` a run-time role.
  OpBuilder& attr_role(std::string_view name, AttrRole role);
  // Restricts the already declared numeric attribute `name` to `range`.
  OpBuilder& range(std::string_view name, AttrRange range);
  // Marks the already declared numeric attribute `name` as a run-time argin
  // (AttrRole::Hyperparam) accepting `range`.
  OpBuilder& argin(std::string_view name, AttrRange range);
  OpBuilder& flops(FlopsFn f);
  OpBuilder& float32_block(Float32BlockFn f);
  OpBuilder& rows_work(RowsWorkFn f);
  OpBuilder& infer(InferFn f);
  OpBuilder& kernel(KernelFn f);
  OpBuilder& view(ViewFn f);
  OpBuilder& grad(GradFn f);

 private:
  OpDef& d_;
};

class OpRegistry {
 public:
  static const OpRegistry& global();

  OpBuilder def(std::string name);
  const OpDef* find(std::string_view name) const;
  const OpDef& get(std::string_view name) const;  // throws NotFound, suggesting near names
  const std::vector<const OpDef*>& all() const { return ordered_; }  // sorted by name

  void finalize();  // sorts, checks every op is complete

 private:
  std::vector<std::unique_ptr<OpDef>> defs_;
  std::unordered_map<std::string_view, const OpDef*> by_name_;
  std::vector<const OpDef*> ordered_;
};

// ---- calling ops -----------------------------------------------------------------

// Something that records op calls instead of running them (the tracer).
class OpInterceptor {
 public:
  virtual ~OpInterceptor() = default;
  virtual std::vector<Tensor> record(const OpDef& op, std::span<const Tensor> inputs,
                                     const Attrs& resolved, std::vector<TensorMeta> metas) = 0;
};
// The interceptor for ops called on this thread; null outside tracing.
OpInterceptor*& current_interceptor();

// Runs `op` on `inputs`: traced when an interceptor is active, computed at
// once otherwise, recording autograd history when grad mode is on.
std::vector<Tensor> call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs);
std::vector<Tensor> call(std::string_view op, std::span<const Tensor> inputs, const Attrs& attrs = {});
std::vector<Tensor> call(std::string_view op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {});
// Single-output convenience.
Tensor call1(std::string_view op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {});

// Estimated floating-point operations of one call of `op` (its FlopsFn, or
// an estimate from its fusion class: one per output element for elementwise
// ops, one per input element for reductions).
double estimate_flops(const OpDef& op, const InferContext& c, std::span<const TensorMeta> outputs);

}  // namespace samba
