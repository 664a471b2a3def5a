// Helpers for the pass tests: a small graph recorded from registry op calls
// (the tracer, as the compiler records a model, but no autograd and no
// passes), and the IR interpreter's results for a graph, so each test can
// check that a pass changed the graph as intended and not what it computes.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "compiler/compile.h"
#include "compiler/ir/interpreter.h"
#include "op_test_util.h"

namespace samba::compiler::testing {

using samba::testing::make;
using samba::testing::rand_tensor;
using samba::testing::values;

// A float64 tensor named `name`: a graph input when passed as an example
// input, a buffer when an op reads it.
inline Tensor named(const std::string& name, const Dims& shape, uint32_t seed) {
  Tensor t = rand_tensor(shape, DType::Float64, seed);
  t.impl()->name = name;
  return t;
}

// A trainable parameter (requires_grad), which tracing keeps as a graph value.
inline Tensor parameter(const std::string& name, const Dims& shape, uint32_t seed) {
  Tensor t = named(name, shape, seed);
  t.impl()->requires_grad = true;
  return t;
}

// The forward graph of `model` over symbolic stand-ins for `inputs`.
inline Graph record(std::vector<Tensor> inputs, ModelFn model) {
  GraphSpec spec;
  spec.name = "under_test";
  spec.inference = true;
  spec.inputs = std::move(inputs);
  spec.model = std::move(model);
  return trace_forward(spec).graph;
}

inline int count_ops(const Graph& g, std::string_view op) {
  int c = 0;
  for (const Node& n : g.nodes) c += n.op->name == op;
  return c;
}

// The graph's outputs for `inputs` (in g.inputs order); parameters and
// buffers start from copies of their host values, so runs do not interfere.
inline std::vector<Tensor> evaluate(const Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> vals(g.values.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) vals[g.inputs[i]] = inputs.at(i);
  for (const Value& v : g.values)
    if ((v.kind == ValueKind::Parameter || v.kind == ValueKind::Buffer) && v.host.has_data())
      vals[v.id] = v.host.clone();
  interpret(g, vals, {Phase::Forward});
  std::vector<Tensor> out;
  for (ValueId o : g.outputs) out.push_back(vals[o]);
  return out;
}

// Runs both graphs on the same inputs and expects the same outputs.
inline void expect_same_results(const Graph& before, const Graph& after,
                                const std::vector<Tensor>& inputs, double tol = 1e-12) {
  const std::vector<Tensor> want = evaluate(before, inputs), got = evaluate(after, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    samba::testing::expect_values(got[i], values(want[i]), tol);
}

}  // namespace samba::compiler::testing
