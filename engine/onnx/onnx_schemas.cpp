// What the importer asks of libonnx's op schemas before its checker and
// shape inference run on a model.
#include "engine/onnx/onnx_schemas.h"

#include <fmt/format.h>
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "engine/core/error.h"
#include "engine/onnx/onnx_model.h"

namespace samba::onnx_import {

namespace {

bool same_parameters(const std::vector<onnx::OpSchema::FormalParameter>& a,
                     const std::vector<onnx::OpSchema::FormalParameter>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].GetName() != b[i].GetName() || a[i].GetTypeStr() != b[i].GetTypeStr() ||
        a[i].GetOption() != b[i].GetOption())
      return false;
  return true;
}

// Whether `now` only widens `then`'s types (as most ops did at opset 13, to
// add bfloat16): the same inputs, outputs and attributes (types, whether
// required, defaults), and each type parameter allowing at least the same
// types. A model valid at `then` then means the same at `now`. Ops whose
// meaning changed did so with a changed signature or default (Softmax's axis
// at 13, Squeeze's axes becoming an input), which this refuses.
bool widened_only(const onnx::OpSchema& then, const onnx::OpSchema& now) {
  if (!same_parameters(then.inputs(), now.inputs()) ||
      !same_parameters(then.outputs(), now.outputs()))
    return false;
  const auto& then_attrs = then.attributes();
  const auto& now_attrs = now.attributes();
  if (then_attrs.size() != now_attrs.size()) return false;
  for (const auto& [name, a] : then_attrs) {
    auto it = now_attrs.find(name);
    if (it == now_attrs.end() || it->second.type != a.type || it->second.required != a.required ||
        it->second.default_value.SerializeAsString() != a.default_value.SerializeAsString())
      return false;
  }
  const auto& now_types = now.typeConstraintParams();
  if (then.typeConstraintParams().size() != now_types.size()) return false;
  for (const auto& t : then.typeConstraintParams()) {
    auto it = std::find_if(now_types.begin(), now_types.end(),
                           [&](const auto& n) { return n.type_param_str == t.type_param_str; });
    if (it == now_types.end()) return false;
    for (const std::string& allowed : t.allowed_type_strs)
      if (std::find(it->allowed_type_strs.begin(), it->allowed_type_strs.end(), allowed) ==
          it->allowed_type_strs.end())
        return false;
  }
  return true;
}

}  // namespace

namespace {

// The first node of `g` or of its subgraphs (a Loop's body, an If's
// branches: they are read at the model's opset too) whose op does not mean
// the same at kMinOpset as at `opset`; fails naming it.
void require_unchanged(const onnx::GraphProto& g, int64_t opset) {
  const auto& registry = *onnx::OpSchemaRegistry::Instance();
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;  // refused by name later
    // The same schema at both opsets, or one that only widened its types:
    // the op means at kMinOpset what it meant at the model's opset.
    const onnx::OpSchema* then = registry.GetSchema(n.op_type(), static_cast<int>(opset));
    const onnx::OpSchema* now = registry.GetSchema(n.op_type(), static_cast<int>(kMinOpset));
    const bool same =
        then && now && !now->Deprecated() && (then == now || widened_only(*then, *now));
    if (!same)
      fail(Status::Unsupported,
           "the model uses ONNX opset {}; supported: opsets {} to {}, or an older opset whose ops "
           "are unchanged up to opset {} (node '{}' ({}) {})",
           opset, kMinOpset, max_opset(), kMinOpset,
           n.name().empty() ? fmt::format("{}#{}", n.op_type(), i) : n.name(), n.op_type(),
           !then || !now || now->Deprecated()
               ? std::string("is not an op at both opsets")
               : fmt::format("changed at opset {}", now->SinceVersion()));
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g()) require_unchanged(a.g(), opset);
      for (const onnx::GraphProto& sub : a.graphs()) require_unchanged(sub, opset);
    }
  }
}

}  // namespace

void lift_unchanged_opset(onnx::ModelProto& m) {
  onnx::OperatorSetIdProto* default_set = nullptr;
  for (auto& o : *m.mutable_opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") default_set = &o;
  if (!default_set || default_set->version() >= kMinOpset || default_set->version() < 1) return;
  require_unchanged(m.graph(), default_set->version());
  default_set->set_version(kMinOpset);
}

namespace {

// libonnx 1.12's convPoolShapeInference and convTransposeShapeInference take
// the kernel's rank from the weight and index the input's dims with it
// unchecked: a Conv whose input has a lower rank than its weight reads out
// of bounds, and a ConvTranspose whose weight has no spatial dim reads
// through a null pointer (both found by fuzzing). Ranks known only from that
// same inference (an input computed by another node) cannot be checked
// before it runs, so the check runs inside it, ahead of libonnx's own.
void require_weight_rank_of_input(onnx::InferenceContext& ctx) {
  if (ctx.getNumInputs() < 2 || !onnx::hasInputShape(ctx, 1)) return;
  const int weight_rank = ctx.getInputType(1)->tensor_type().shape().dim_size();
  if (weight_rank < 3)
    fail_shape_inference("the weight has rank ", weight_rank,
                         "; expected (M, C/group, kernel...) with at least one kernel dim");
  if (!onnx::hasInputShape(ctx, 0)) return;
  const int input_rank = ctx.getInputType(0)->tensor_type().shape().dim_size();
  if (input_rank != weight_rank)
    fail_shape_inference("the input has rank ", input_rank, " but the weight has rank ",
                         weight_rank,
                         "; expected equal ranks (N, C, spatial...) and (M, C/group, "
                         "kernel...)");
}

}  // namespace

void guard_window_shape_inference() {
  static std::once_flag once;
  std::call_once(once, [] {
    const auto& registry = *onnx::OpSchemaRegistry::Instance();
    std::vector<const onnx::OpSchema*> wrapped;
    for (const char* op : {"Conv", "ConvTranspose"})
      for (int64_t opset = kMinOpset; opset <= max_opset(); ++opset) {
        const onnx::OpSchema* conv = registry.GetSchema(op, static_cast<int>(opset));
        if (!conv || !conv->has_type_and_shape_inference_function()) continue;
        // Each version's schema is wrapped once: the registry returns the
        // same schema for every opset until the op changes.
        if (std::find(wrapped.begin(), wrapped.end(), conv) != wrapped.end()) continue;
        wrapped.push_back(conv);
        onnx::InferenceFunction original = conv->GetTypeAndShapeInferenceFunction();
        // The registry hands out const schemas of objects it owns and never
        // shares across threads before this first load.
        const_cast<onnx::OpSchema*>(conv)->TypeAndShapeInferenceFunction(
            [original](onnx::InferenceContext& ctx) {
              require_weight_rank_of_input(ctx);
              original(ctx);
            });
      }
  });
}

}  // namespace samba::onnx_import
