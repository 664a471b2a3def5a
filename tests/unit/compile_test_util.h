// Helpers for tests that compile models and run them: naming the tensors a
// graph binds by name, and the PEF round trip a loaded program goes through.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "engine/core/tensor.h"
#include "engine/pef/reader.h"
#include "engine/pef/writer.h"

namespace samba::testing {

// `t` named as the graph sees it (inputs, parameters), optionally a leaf
// that requires grad (a trainable parameter).
inline Tensor named(Tensor t, const std::string& name, bool requires_grad = false) {
  t.impl()->name = name;
  t.impl()->requires_grad = requires_grad;
  return t;
}

// An inference graph named `name`: `model` over `inputs`.
inline compiler::GraphSpec inference_graph(
    std::string name, std::function<std::vector<Tensor>(std::span<const Tensor>)> model,
    std::vector<Tensor> inputs) {
  compiler::GraphSpec s;
  s.name = std::move(name);
  s.inference = true;
  s.inputs = std::move(inputs);
  s.model = std::move(model);
  return s;
}

// The program as a runtime loads it: written to PEF bytes and parsed back.
inline pef::ProgramDesc round_trip(const pef::ProgramDesc& p) {
  return pef::parse_pef(pef::serialize_pef(p));
}

}  // namespace samba::testing
