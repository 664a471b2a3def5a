// Shape/dtype inference and gradient building blocks shared by the
// elementwise op families.
#pragma once

#include <string>
#include <utility>

#include "engine/ops/operands.h"

namespace samba::ops::ew {

// torch.result_type over the inputs, broadcast shape of all of them.
inline std::vector<TensorMeta> infer_promoted(const InferContext& c) {
  return {{result_type(c.inputs), broadcast_all(c.inputs, c.op.name.c_str())}};
}

// Predicates (comparisons, logical ops): bool of the broadcast shape.
inline std::vector<TensorMeta> infer_bool(const InferContext& c) {
  return {{DType::Bool, broadcast_all(c.inputs, c.op.name.c_str())}};
}

// The dtype a floating-point function of `dt` returns: integers and bool give
// float32, as in PyTorch.
inline DType float_result(DType dt) { return is_floating(dt) ? dt : DType::Float32; }

inline void require_not_bool(DType dt, const std::string& op, const char* hint) {
  SAMBA_CHECK(dt != DType::Bool, Status::DTypeMismatch, "{}: not supported on bool tensors{}", op,
              hint);
}

inline void require_bool(const Tensor& t, const std::string& op, const char* arg) {
  SAMBA_CHECK(t.dtype() == DType::Bool, Status::DTypeMismatch,
              "{}: argument '{}' must be a bool tensor, got {}", op, arg, dtype_name(t.dtype()));
}

inline std::vector<int64_t> shape_attr(const Dims& d) { return {d.begin(), d.end()}; }

// A gradient of zeros for an input of `shape` and `dtype` (piecewise-constant ops).
inline Tensor zeros_grad(const Dims& shape, DType dtype) {
  return call1("zeros", {}, {{"shape", shape_attr(shape)}, {"dtype", dtype}});
}

// g where `mask` holds, 0 elsewhere.
inline Tensor masked_grad(const Tensor& mask, const Tensor& g) {
  return call1("where", {mask, g, wrap_scalar(0.0)});
}

// The float32 block function of a kernel's compute function f(n, out, in0,
// ..., in{N-1}) (generic over the element type): the standalone kernel and
// the runtime's fused chains run the same code.
template <size_t N, typename F>
Float32Block float32_block_of(F f) {
  return [f](int64_t n, float* out, const float* const* in) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      f(n, out, in[I]...);
    }(std::make_index_sequence<N>{});
  };
}

// For an op whose compute does not depend on its attributes.
template <size_t N, typename F>
Float32BlockFn float32_block_fn(F f) {
  return [f](const Attrs&) { return float32_block_of<N>(f); };
}

}  // namespace samba::ops::ew
