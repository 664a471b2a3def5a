// The tracer: while it is active on a thread, every registry op called on
// that thread (by the model callback, by gradient rules, by optimizers) is
// recorded as a node of a Graph instead of computing, and returns symbolic
// tensors (shape and dtype, no data) standing for the node's outputs.
//
// Host tensors that reach an op are classified once, when first seen: a leaf
// that requires grad (or is marked as a parameter) is a Parameter; a named
// tensor is a Buffer (persistent device state the app can read and update);
// any other is a Constant whose values are captured into the program.
#pragma once

#include <span>
#include <unordered_map>
#include <vector>

#include "compiler/ir/graph.h"
#include "engine/ops/autograd.h"

namespace samba::compiler {

class Tracer final : public OpInterceptor {
 public:
  explicit Tracer(Graph& g);
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // The phase new nodes belong to.
  void set_phase(Phase p) { phase_ = p; }

  // A graph input standing for `example` (its name, dtype and shape, with
  // `shape` replacing the example's when given). Returns the symbolic tensor
  // the model receives.
  Tensor add_input(const Tensor& example, const Dims& shape, int32_t batch_dim);

  // Drops the symbolic tensors made so far, after a pass changed the graph
  // under the tracer (values retyped, values added): symbol() then makes
  // them anew from the graph. Host tensors keep their values.
  void forget_symbols();

  // The symbolic tensor standing for value `v`.
  Tensor symbol(ValueId v);
  // The value `t` stands for: a symbol of this trace, or a host tensor
  // classified on first sight (see above). `mutated` says the op writes it.
  ValueId value_of(const Tensor& t, bool mutated = false);

  std::vector<Tensor> record(const OpDef& op, std::span<const Tensor> inputs, const Attrs& resolved,
                             std::vector<TensorMeta> metas) override;

  // Makes this tracer the current interceptor of the calling thread for the
  // guard's lifetime (and grad mode off: the graph's autograd is the
  // compiler's, not the eager tape's).
  class Active {
   public:
    explicit Active(Tracer& t);
    ~Active();
    Active(const Active&) = delete;
    Active& operator=(const Active&) = delete;

   private:
    OpInterceptor* prev_;
    autograd::NoGradGuard no_grad_;
  };

 private:
  // A node for `op` on values `in`; its outputs get values described by `metas`.
  NodeId emit(const OpDef& op, std::vector<ValueId> in, const Attrs& attrs,
              const std::vector<TensorMeta>& metas);
  // A contiguous copy of value v (a `cast` to its own dtype).
  ValueId contiguous_copy(ValueId v);
  std::string unique_name(std::string base, const char* fallback_prefix);

  Graph& g_;
  Phase phase_ = Phase::Forward;
  std::unordered_map<const TensorImpl*, ValueId> ids_;
  std::vector<Tensor> symbols_;  // by value id; keeps the symbolic TensorImpls alive
  std::vector<Tensor> hosts_;    // host tensors seen, kept alive so pointers stay unique
  std::unordered_map<std::string, ValueId> by_name_;
  int32_t constant_counter_ = 0;
  int32_t param_counter_ = 0;
};

// The canonical one-line description of a forward node used as the graph
// signature: "linear(x: float32[64, 784], gemm1.weight: float32[1024, 784],
// gemm1.bias: float32[1024]) activation='none' -> float32[64, 1024]".
std::string signature_line(const Graph& g, const Node& n);

}  // namespace samba::compiler
