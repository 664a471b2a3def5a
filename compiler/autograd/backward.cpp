#include "compiler/autograd/backward.h"

#include "engine/core/error.h"
#include "engine/core/log.h"

namespace samba::compiler {
namespace {

bool differentiable_dtype(DType d) { return is_floating(d); }

// requires[v]: the value depends on a trainable parameter through ops that
// have gradient rules.
std::vector<bool> requires_grad_values(const Graph& g) {
  std::vector<bool> req(g.values.size(), false);
  for (const Value& v : g.values)
    if (v.kind == ValueKind::Parameter && v.requires_grad) req[v.id] = true;
  for (const Node& n : g.nodes) {
    if (n.phase != Phase::Forward || !n.op->grad) continue;
    bool any = false;
    for (ValueId in : n.inputs) any |= in != kNone && req[in];
    if (!any) continue;
    for (ValueId o : n.outputs) req[o] = differentiable_dtype(g.value(o).dtype);
  }
  return req;
}

// Nodes a gradient rule emitted take the run-time bindings of the forward
// node they derive from, for attributes they share with the same value: the
// backward of dropout must draw the mask the forward drew, under whatever
// seed and rate run() sets.
void inherit_bindings(Graph& g, const Node& forward, size_t first_new) {
  if (forward.bindings.empty()) return;
  for (size_t i = first_new; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    for (const Binding& b : forward.bindings) {
      const AttrValue* mine = n.attrs.find(b.attr);
      const AttrValue* theirs = forward.attrs.find(b.attr);
      if (mine && theirs && *mine == *theirs && n.op->find_attr(b.attr)->role != AttrRole::Plain)
        n.bindings.push_back(b);
    }
  }
}

Tensor filled_like(const Value& v, double value) {
  Tensor t = Tensor::empty(v.shape, v.dtype);
  t.copy_from(Tensor::scalar(value, v.dtype));
  return t;
}

// Without loss_indices every output is differentiated; which of them are
// losses (a gradient of ones) and which only outputs (zeros) follows the
// contract in BackwardOptions. Returns, per output, whether its default
// gradient is zero.
std::vector<bool> non_loss_outputs(const Graph& g, const std::vector<bool>& req,
                                   const BackwardOptions& opts) {
  std::vector<bool> zeroed(g.outputs.size(), false);
  if (!opts.loss_indices.empty()) return zeroed;
  auto defaulted = [&](size_t i) {
    const Value& out = g.value(g.outputs[i]);
    return req[out.id] && !out.shape.empty() && !(i < opts.output_grads.size() && opts.output_grads[i].given);
  };
  bool scalar_loss = false;
  for (ValueId o : g.outputs) scalar_loss |= req[o] && g.value(o).shape.empty();
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    if (!defaulted(i)) continue;
    const Value& out = g.value(g.outputs[i]);
    if (scalar_loss) {
      zeroed[i] = true;
      log::info("compile: output {} ('{}', shape {}) is not a scalar and the model has a scalar loss, so its "
                "gradient starts at zero; give it values with the output-gradient options or run's "
                "grad_of_outputs",
                i, out.name, dims_str(out.shape));
    } else {
      log::warn("compile: output {} ('{}', shape {}) is not a scalar but is treated as a loss (a gradient of "
                "ones, as if its sum were the loss) because no loss_indices were given and no output is a "
                "scalar; pass loss_indices, or give its output gradient, if that is not meant",
                i, out.name, dims_str(out.shape));
    }
  }
  return zeroed;
}

}  // namespace

void build_backward(Graph& g, Tracer& tracer, const BackwardOptions& opts) {
  const std::vector<bool> req = requires_grad_values(g);
  std::vector<int64_t> losses = opts.loss_indices;
  if (losses.empty())
    for (size_t i = 0; i < g.outputs.size(); ++i) losses.push_back(static_cast<int64_t>(i));

  const std::vector<bool> zeroed = non_loss_outputs(g, req, opts);
  g.output_grads.assign(g.outputs.size(), kNone);
  std::vector<ValueId> grads(g.values.size(), kNone);
  bool any = false;
  for (int64_t li : losses) {
    SAMBA_CHECK(li >= 0 && li < static_cast<int64_t>(g.outputs.size()), Status::OutOfRange,
                "compile: loss index {} is out of range; the model returned {} outputs", li,
                g.outputs.size());
    const ValueId o = g.outputs[li];
    if (!req[o] || g.output_grads[li] != kNone) continue;
    any = true;
    const Value out = g.value(o);
    ValueId og = g.add_value(out.name + ".grad", out.dtype, out.shape, ValueKind::OutputGrad);
    Value& ogv = g.value(og);
    ogv.owner = out.name;
    ogv.batch_dim = out.batch_dim;  // split like its output when micro-batched
    const OutputGradSpec spec =
        static_cast<size_t>(li) < opts.output_grads.size() ? opts.output_grads[li] : OutputGradSpec{};
    if (zeroed[li]) {
      ogv.host = filled_like(out, 0.0);
    } else if (spec.mode == OutputGradMode::Ones) {
      ogv.host = filled_like(out, 1.0);
    } else if (spec.mode == OutputGradMode::Custom) {
      SAMBA_CHECK(spec.values.defined() && spec.values.has_data(), Status::InvalidArgument,
                  "compile: the custom gradient of output {} ('{}') has no values", li, out.name);
      SAMBA_CHECK(spec.values.shape() == out.shape, Status::ShapeMismatch,
                  "compile: the custom gradient of output {} ('{}') has shape {}; the output has "
                  "shape {}",
                  li, out.name, dims_str(spec.values.shape()), dims_str(out.shape));
      Tensor vals = Tensor::empty(out.shape, out.dtype);
      vals.copy_from(spec.values);
      ogv.host = vals;
    }
    g.output_grads[li] = og;
    grads[o] = grads[o] == kNone ? og : grads[o];
  }
  SAMBA_CHECK(any, Status::InvalidArgument,
              "compile: none of the differentiated outputs depends on a parameter that requires "
              "grad, so there is nothing to train; compile for inference, or mark the weights "
              "with requires_grad");

  tracer.set_phase(Phase::Backward);
  Tracer::Active active(tracer);
  const size_t n_forward = g.nodes.size();

  // A parameter's gradient is complete once every forward node reading it
  // has been differentiated; it is written to its Gradient value right then,
  // so the backward graph stores each gradient as soon as it exists.
  std::vector<int32_t> uses(g.values.size(), 0);
  for (size_t idx = 0; idx < n_forward; ++idx)
    if (g.nodes[idx].phase == Phase::Forward)
      for (ValueId in : g.nodes[idx].inputs)
        if (in != kNone && g.value(in).kind == ValueKind::Parameter) ++uses[in];
  std::vector<bool> finalized(g.values.size(), false);
  auto finalize = [&](ValueId p) {
    if (finalized[p]) return;
    finalized[p] = true;
    Value& pv = g.value(p);
    if (!pv.requires_grad) return;
    const std::string gname = pv.name + ".grad";
    const ValueId computed = grads[p];
    ValueId gradient;
    const bool can_rename = computed != kNone && !opts.grad_accumulation &&
                            g.value(computed).kind == ValueKind::Intermediate && !g.value(computed).is_view() &&
                            g.value(computed).producer != kNone &&
                            g.node(g.value(computed).producer).phase == Phase::Backward;
    if (can_rename) {
      // The last backward op writes straight into the gradient's bytes.
      gradient = computed;
      Value& gv = g.value(gradient);
      gv.kind = ValueKind::Gradient;
      gv.name = gname;
    } else {
      gradient = g.add_value(gname, pv.dtype, pv.shape, ValueKind::Gradient);
      if (computed != kNone) {
        const Tensor dst = tracer.symbol(gradient), src = tracer.symbol(computed);
        call(opts.grad_accumulation ? "add_" : "copy_", {dst, src}, {});
      }
    }
    Value& gv = g.value(gradient);
    gv.owner = g.value(p).name;
    g.value(p).grad = gradient;
  };
  auto done_with = [&](const Node& node) {
    for (ValueId in : node.inputs)
      if (in != kNone && g.value(in).kind == ValueKind::Parameter && --uses[in] == 0) finalize(in);
  };

  // Differentiates one forward node (appending its gradient nodes).
  auto differentiate = [&](const Node& node) {
    if (!node.op->grad) return;
    bool has_grad = false;
    for (ValueId o : node.outputs) has_grad |= grads[o] != kNone;
    if (!has_grad) return;
    std::vector<Tensor> ins, outs, gouts;
    std::vector<bool> needs(node.inputs.size(), false);
    bool needed = false;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ValueId in = node.inputs[i];
      ins.push_back(in == kNone ? Tensor() : tracer.symbol(in));
      needs[i] = in != kNone && req[in];
      needed |= needs[i];
    }
    if (!needed) return;
    for (ValueId o : node.outputs) {
      outs.push_back(tracer.symbol(o));
      gouts.push_back(grads[o] == kNone ? Tensor() : tracer.symbol(grads[o]));
    }
    GradContext gc{*node.op, ins, outs, gouts, node.attrs, needs};
    std::vector<Tensor> gin;
    const size_t first_new = g.nodes.size();
    try {
      gin = node.op->grad(gc);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("compile: the gradient of '{}' ({}) failed: {}", node.name,
                                        node.op->name, e.what()));
    }
    inherit_bindings(g, node, first_new);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (!needs[i] || i >= gin.size() || !gin[i].defined()) continue;
      Tensor gi = gin[i];
      const Value& target = g.value(node.inputs[i]);
      SAMBA_CHECK(gi.shape() == target.shape, Status::Internal,
                  "compile: the gradient rule of op '{}' returned shape {} for input #{} ('{}') of "
                  "shape {}",
                  node.op->name, dims_str(gi.shape()), i, target.name, dims_str(target.shape));
      if (gi.dtype() != target.dtype) gi = call1("cast", {gi}, {{"dtype", target.dtype}});
      ValueId gv = tracer.value_of(gi);
      ValueId& acc = grads[node.inputs[i]];
      acc = acc == kNone ? gv : tracer.value_of(call1("add", {tracer.symbol(acc), gi}));
    }
  };
  for (size_t idx = n_forward; idx-- > 0;) {
    const Node node = g.nodes[idx];  // a copy: the tracer appends to g.nodes
    if (node.phase != Phase::Forward) continue;
    differentiate(node);
    done_with(node);
  }

  // Parameters whose gradient never got a contribution (unused, or only
  // through paths without gradients) still get a Gradient value (zero).
  for (ValueId p : g.parameters) finalize(p);

  if (opts.grad_accumulation) {
    tracer.set_phase(Phase::ZeroGrad);
    for (ValueId p : g.parameters)
      if (g.value(p).grad != kNone) call("zero_", {tracer.symbol(g.value(p).grad)}, {});
  }
  tracer.set_phase(Phase::Forward);
}

}  // namespace samba::compiler
