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

void lift_unchanged_opset(onnx::ModelProto& m) {
  onnx::OperatorSetIdProto* default_set = nullptr;
  for (auto& o : *m.mutable_opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") default_set = &o;
  if (!default_set || default_set->version() >= kMinOpset || default_set->version() < 1) return;
  const int64_t opset = default_set->version();
  const auto& registry = *onnx::OpSchemaRegistry::Instance();
  const onnx::GraphProto& g = m.graph();
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (!n.domain().empty() && n.domain() != "ai.onnx") return;  // refused by name later
    // The same schema at both opsets: the op means at kMinOpset what it
    // meant at the model's opset.
    const onnx::OpSchema* then = registry.GetSchema(n.op_type(), static_cast<int>(opset));
    const onnx::OpSchema* now = registry.GetSchema(n.op_type(), static_cast<int>(kMinOpset));
    if (then && now && then == now) continue;
    fail(
        Status::Unsupported,
        "the model uses ONNX opset {}; supported: opsets {} to {}, or an older opset whose ops are "
        "unchanged up to opset {} (node '{}' ({}) {})",
        opset, kMinOpset, max_opset(), kMinOpset,
        n.name().empty() ? fmt::format("{}#{}", n.op_type(), i) : n.name(), n.op_type(),
        !then || !now ? std::string("is not an op at both opsets")
                      : fmt::format("changed at opset {}", now->SinceVersion()));
  }
  default_set->set_version(kMinOpset);
}

namespace {

// libonnx 1.12's convPoolShapeInference takes the kernel's rank from the
// weight and indexes the input's dims with it unchecked: a Conv whose input
// has a lower rank than its weight reads out of bounds. Ranks known only from
// that same inference (an input computed by another node) cannot be checked
// before it runs, so the check runs inside it, ahead of libonnx's own.
void require_weight_rank_of_input(onnx::InferenceContext& ctx) {
  if (ctx.getNumInputs() < 2 || !onnx::hasInputShape(ctx, 0) || !onnx::hasInputShape(ctx, 1))
    return;
  const int input_rank = ctx.getInputType(0)->tensor_type().shape().dim_size();
  const int weight_rank = ctx.getInputType(1)->tensor_type().shape().dim_size();
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
    for (int64_t opset = kMinOpset; opset <= max_opset(); ++opset) {
      const onnx::OpSchema* conv = registry.GetSchema("Conv", static_cast<int>(opset));
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
