#include "engine/ops/operands.h"

namespace samba::ops {

DType result_type(std::span<const Tensor> ts) {
  ResultTypeState st;
  for (const auto& t : ts) {
    if (!t.defined()) continue;
    OperandTier tier = t.impl()->wrapped_scalar ? OperandTier::WrappedScalar
                       : t.dim() == 0            ? OperandTier::ZeroDim
                                                 : OperandTier::Dimensioned;
    st.add(t.dtype(), tier);
  }
  return st.result();
}

DType result_type(std::initializer_list<Tensor> ts) {
  return result_type(std::span<const Tensor>(ts.begin(), ts.size()));
}

Tensor wrap_scalar(double v) { return Tensor::scalar(v, DType::Float64, true); }
Tensor wrap_int(int64_t v) {
  Tensor t = Tensor::empty({}, DType::Int64);
  *t.data<int64_t>() = v;
  t.impl()->wrapped_scalar = true;
  return t;
}

Dims broadcast_all(std::span<const Tensor> ts, const char* what) {
  Dims out;
  bool first = true;
  for (const auto& t : ts) {
    if (!t.defined()) continue;
    out = first ? t.shape() : broadcast_shapes(out, t.shape(), what);
    first = false;
  }
  return out;
}

Tensor sum_to(const Tensor& g, const Dims& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  bool inner = false;  // a dim kept (size 1) in `shape` is summed
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) {
      dims.push_back(d);
      inner |= d >= lead;
    }
  // Summing only leading dims away gives `shape` directly (no reshape: the
  // result owns its bytes, which lets the compiler write a parameter's
  // gradient in place).
  if (!inner && !dims.empty()) return call1("sum", {g}, {{"dim", dims}, {"keepdim", false}});
  Tensor r = dims.empty() ? g : call1("sum", {g}, {{"dim", dims}, {"keepdim", true}});
  return call1("reshape", {r}, {{"shape", std::vector<int64_t>(shape.begin(), shape.end())}});
}

}  // namespace samba::ops
