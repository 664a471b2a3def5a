// Evaluating an imported ONNX graph through the op table.
#include <unordered_map>
#include <unordered_set>

#include "engine/onnx/op_table.h"
#include "engine/ops/autograd.h"
#include "engine/ops/registry.h"

namespace samba::onnx_import {
namespace {

// Values known at import: data, no gradient, not a trace's symbol.
bool is_constant(const Tensor& t) { return t.has_data() && !t.is_symbolic() && !t.requires_grad(); }

// Runs ops eagerly even while a model is traced: a node whose inputs are all
// constants (shape arithmetic, Constant folding) is computed at import, so
// ops that need known values (Reshape's shape, Slice's bounds) get them.
class EagerScope {
 public:
  EagerScope() : saved_(current_interceptor()) { current_interceptor() = nullptr; }
  ~EagerScope() { current_interceptor() = saved_; }
  EagerScope(const EagerScope&) = delete;
  EagerScope& operator=(const EagerScope&) = delete;

 private:
  OpInterceptor* saved_;
  autograd::NoGradGuard no_grad_;
};

}  // namespace

Model::Model(Graph g) : graph_(std::move(g)) { check_supported(graph_); }

void check_supported(const Graph& g) {
  for (const Node& n : g.nodes) rule_for(n.name, n.op_type, g.opset);
}

std::vector<Tensor> Model::forward(std::span<const Tensor> inputs) const {
  SAMBA_CHECK(inputs.size() == graph_.inputs.size(), Status::InvalidArgument,
              "the ONNX model takes {} inputs, got {}", graph_.inputs.size(), inputs.size());
  std::unordered_map<std::string_view, Tensor> values;
  for (const Tensor& t : graph_.initializers) values[t.name()] = t;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo& info = graph_.inputs[i];
    const Tensor& t = inputs[i];
    SAMBA_CHECK(t.defined(), Status::NullPointer, "ONNX model input '{}' is undefined", info.name);
    bool fits = t.dim() == static_cast<int64_t>(info.shape.size());
    for (size_t d = 0; fits && d < info.shape.size(); ++d)
      fits = info.shape[d] < 0 || info.shape[d] == t.shape()[d];
    SAMBA_CHECK(fits && t.dtype() == info.dtype, Status::ShapeMismatch,
                "ONNX model input '{}' is {} of shape {} (-1: any size), got {} of shape {}",
                info.name, dtype_name(info.dtype), dims_str(info.shape), dtype_name(t.dtype()),
                dims_str(t.shape()));
    values[info.name] = t;
  }
  for (const Node& node : graph_.nodes) {
    const OpRule* rule = find_rule(node.op_type, graph_.opset);
    std::vector<Tensor> in;
    bool all_constant = true;
    for (const std::string& name : node.inputs) {
      if (name.empty()) {
        in.emplace_back();
        continue;
      }
      auto it = values.find(name);
      SAMBA_CHECK(
          it != values.end(), Status::CorruptFile,
          "node '{}' ({}): input '{}' is not produced by any earlier node, input or initializer",
          node.name, node.op_type, name);
      all_constant = all_constant && is_constant(it->second);
      in.push_back(it->second);
    }
    NodeContext ctx(node, graph_.opset, std::move(in));
    std::vector<Tensor> out;
    if (all_constant) {
      EagerScope eager;
      out = rule->lower(ctx);
    } else {
      out = rule->lower(ctx);
    }
    SAMBA_CHECK(out.size() >= ctx.output_count(), Status::Internal,
                "{}: lowered to {} outputs, {} expected", ctx.where(), out.size(),
                ctx.output_count());
    for (size_t i = 0; i < node.outputs.size() && i < out.size(); ++i)
      if (!node.outputs[i].empty()) values[node.outputs[i]] = out[i];
  }
  std::vector<Tensor> result;
  for (const ValueInfo& o : graph_.outputs) {
    auto it = values.find(o.name);
    SAMBA_CHECK(it != values.end(), Status::CorruptFile, "ONNX graph output '{}' is never produced",
                o.name);
    result.push_back(it->second);
  }
  return result;
}

}  // namespace samba::onnx_import
