// What the importer asks of libonnx's op schemas before its checker and
// shape inference run on a model (built only with the ONNX library).
#pragma once

#include <onnx/onnx_pb.h>

namespace samba::onnx_import {

// A model at an opset below kMinOpset whose every op is the same schema at
// that opset and at kMinOpset, or one whose types were only widened since,
// means the same at kMinOpset: its default-domain opset is raised to
// kMinOpset. Any other model below it is refused, naming the first node
// whose op changed.
void lift_unchanged_opset(onnx::ModelProto& m);

// Makes libonnx's Conv shape inference refuse an input whose rank differs
// from the weight's (libonnx reads out of bounds on it). Installed once per
// process, before the first shape inference.
void guard_window_shape_inference();

}  // namespace samba::onnx_import
