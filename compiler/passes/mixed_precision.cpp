#include "compiler/passes/mixed_precision.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "engine/core/error.h"

namespace samba::compiler {
namespace {

// The sensitive ops the registry's fusion classes do not already mark (its
// reductions, softmax and log_softmax included, are fp32 ops by class): what
// torch.autocast keeps in fp32 and the device's bf16 mode runs in fp32.
constexpr std::string_view kFloat32Ops[] = {
    "batch_norm",    "layer_norm", "rms_norm", "group_norm", "normalize",
    "cross_entropy", "nll_loss",   "mse_loss", "l1_loss",    "binary_cross_entropy_with_logits",
    "exp",           "log",
};

bool lowerable(DType d) { return d == DType::Float32 || d == DType::BFloat16; }

class Autocast {
 public:
  explicit Autocast(Graph& g) : g_(g) {
    for (const Value& v : g.values) {
      traced_.push_back(v.dtype);
      names_.insert(v.name);
    }
  }

  void run() {
    std::vector<Node> traced = std::move(g_.nodes);
    g_.nodes.clear();
    for (Node& n : traced) rewrite(std::move(n));
  }

 private:
  bool changed(ValueId v) const { return v != kNone && g_.value(v).dtype != traced_[v]; }

  static bool mutated_input(const Node& n, size_t i) {
    return n.op->inputs[std::min(i, n.op->inputs.size() - 1)].mutated;
  }

  // A new intermediate named after its producer, as the tracer names them.
  ValueId add_result(const std::string& base, DType dtype, const Dims& shape, int32_t batch_dim) {
    std::string name = base;
    for (int k = 1; names_.count(name); ++k) name = fmt::format("{}_{}", base, k);
    names_.insert(name);
    const ValueId v = g_.add_value(name, dtype, shape, ValueKind::Intermediate);
    g_.value(v).batch_dim = batch_dim;
    traced_.push_back(dtype);
    return v;
  }

  // A cast node writing `out` from `in`.
  NodeId add_cast(ValueId in, ValueId out) {
    const OpDef& op = OpRegistry::global().get("cast");
    const NodeId id =
        g_.add_node(op, {in}, op.resolve(Attrs{{"dtype", g_.value(out).dtype}}), Phase::Forward);
    g_.node(id).outputs.push_back(out);
    g_.value(out).producer = id;
    g_.value(out).producer_output = 0;
    return id;
  }

  // `v` as `to`: one cast per value and dtype until something is updated in place.
  ValueId cast(ValueId v, DType to) {
    const auto key = std::make_pair(v, to);
    if (auto it = casts_.find(key); it != casts_.end()) return it->second;
    const Value src = g_.value(v);
    const std::string base = fmt::format("cast_{}", g_.nodes.size());
    const ValueId out = add_result(base, to, src.shape, src.batch_dim);
    add_cast(v, out);
    casts_[key] = out;
    return out;
  }

  // The output dtypes and shapes `n` has on its current inputs. Persistent
  // values go in with their host tensors (an op may read a constant's
  // values to infer), the rest as symbols.
  std::vector<TensorMeta> infer(const Node& n) const {
    std::vector<Tensor> in;
    for (ValueId v : n.inputs) {
      if (v == kNone) {
        in.emplace_back();
        continue;
      }
      const Value& val = g_.value(v);
      const bool host = val.host.defined() && val.host.has_data() &&
                        val.host.dtype() == val.dtype && val.host.shape() == val.shape;
      in.push_back(host ? val.host : Tensor::symbolic(val.shape, val.dtype));
    }
    return n.op->infer(InferContext{*n.op, in, n.attrs});
  }

  void cast_inputs(Node& n, CastPolicy policy) {
    if (policy == CastPolicy::Bf16) {
      // Integer or float64 operands: a product the device does not run in bf16.
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (n.inputs[i] != kNone && !lowerable(g_.value(n.inputs[i]).dtype)) return;
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (n.inputs[i] != kNone && !mutated_input(n, i) &&
            g_.value(n.inputs[i]).dtype == DType::Float32)
          n.inputs[i] = cast(n.inputs[i], DType::BFloat16);
    } else if (policy == CastPolicy::Float32) {
      restore_inputs(n);
    }
  }

  // Inputs the rewrite lowered go back to the dtype they were traced with.
  void restore_inputs(Node& n) {
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (changed(n.inputs[i]) && !mutated_input(n, i))
        n.inputs[i] = cast(n.inputs[i], traced_[n.inputs[i]]);
  }

  void rewrite(Node n) {
    const CastPolicy policy = n.phase == Phase::Forward ? cast_policy(*n.op) : CastPolicy::Follow;
    cast_inputs(n, policy);
    if (std::any_of(n.inputs.begin(), n.inputs.end(), [&](ValueId v) { return changed(v); }) ||
        policy == CastPolicy::Bf16)
      retype_outputs(n);
    if (!n.mutated().empty()) casts_.clear();  // a cast made before would be stale

    n.id = static_cast<NodeId>(g_.nodes.size());
    // The app reads outputs in the dtype it traced them with.
    std::vector<std::pair<ValueId, ValueId>> restore;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const ValueId o = n.outputs[k];
      Value& out = g_.value(o);
      out.producer = n.id;
      out.producer_output = static_cast<int32_t>(k);
      if (!out.is_output || !changed(o)) continue;
      const Value copy = out;
      const ValueId lowered =
          add_result(copy.name + "_bf16", copy.dtype, copy.shape, copy.batch_dim);
      g_.value(lowered).producer = n.id;
      g_.value(lowered).producer_output = static_cast<int32_t>(k);
      g_.value(o).dtype = traced_[o];
      n.outputs[k] = lowered;
      restore.emplace_back(lowered, o);
    }
    g_.nodes.push_back(std::move(n));
    for (const auto& [lowered, o] : restore) add_cast(lowered, o);
  }

  void retype_outputs(Node& n) {
    std::vector<TensorMeta> metas;
    try {
      metas = infer(n);
    } catch (const Error&) {
      // A follower that refuses the mixed dtypes the rewrite gave it (cat of
      // a bf16 and an fp32 tensor) runs as traced.
      restore_inputs(n);
      try {
        metas = infer(n);
      } catch (const Error& e) {
        fail(e.code(),
             "mixed precision: op '{}' ({}) does not take the dtypes the bf16 rewrite gave it: {}",
             n.name, n.op->name, e.what());
      }
    }
    SAMBA_CHECK(metas.size() == n.outputs.size(), Status::Internal,
                "mixed precision: op '{}' now infers {} outputs; it was traced with {}", n.name,
                metas.size(), n.outputs.size());
    for (size_t k = 0; k < metas.size(); ++k) {
      Value& out = g_.value(n.outputs[k]);
      SAMBA_CHECK(metas[k].shape == out.shape, Status::Internal,
                  "mixed precision: op '{}' now infers shape {} for '{}', traced as {}", n.name,
                  dims_str(metas[k].shape), out.name, dims_str(out.shape));
      out.dtype = metas[k].dtype;
    }
  }

  Graph& g_;
  std::vector<DType> traced_;  // by value id: the dtype the model traced
  std::unordered_set<std::string> names_;
  std::map<std::pair<ValueId, DType>, ValueId> casts_;
};

}  // namespace

std::string_view mixed_precision_name(MixedPrecision m) {
  return m == MixedPrecision::Bf16 ? "bf16" : "none";
}

MixedPrecision mixed_precision_from_name(std::string_view name) {
  if (name == "none" || name == "mp0") return MixedPrecision::None;
  if (name == "bf16" || name == "mp1") return MixedPrecision::Bf16;
  fail(Status::InvalidArgument,
       "mixed precision '{}' is not supported; expected 'none' or 'bf16' (SambaFlow's GraphAMP "
       "presets "
       "'mp0' and 'mp1' are accepted for them)",
       name);
}

CastPolicy cast_policy(const OpDef& op) {
  if (op.fusion == Fusion::Contraction) return CastPolicy::Bf16;
  if (op.fusion == Fusion::Reduction) return CastPolicy::Float32;
  for (std::string_view name : kFloat32Ops)
    if (op.name == name) return CastPolicy::Float32;
  return CastPolicy::Follow;
}

Graph autocast_bf16(Graph g) {
  Autocast(g).run();
  return g;
}

}  // namespace samba::compiler
