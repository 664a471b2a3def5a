// Ordering ops: sort, topk and kthvalue. Each returns values and int64
// indices along one dim. Lines are ordered with ties broken by position, so
// results are deterministic (sort is always stable) and NaN orders above
// every number, as in PyTorch. The values' gradient is scattered back to the
// positions the indices name, which are distinct within a line, so the
// scatter is exact.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

// Sizes of x before `dim`, along it and after it (a 0-dim x is one line of one).
struct Lines {
  int64_t outer = 1, size = 1, inner = 1;
  Lines(const Dims& shape, int64_t dim) {
    for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
    if (shape.empty()) return;
    size = shape[dim];
    for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  }
};

int64_t ordered_dim(const Tensor& x, const Attrs& a, const char* what) {
  return wrap_dim(a.i("dim"), std::max<int64_t>(x.dim(), 1), what);
}

Dims with_size_at(const Tensor& x, int64_t dim, int64_t size) {
  Dims s = x.shape();
  if (!s.empty()) s[dim] = size;
  return s;
}

template <typename A>
bool is_nan_value(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return std::isnan(v);
  else
    return false;
}

// Writes, for every line of x along `dim`, its first `count` entries in the
// order `descending` asks (NaN largest; ties by position) to values and
// indices, whose dim `dim` has `count` entries. `select` chooses how much of
// the line is ordered: a full sort, a partial sort, or one nth element.
enum class Selection { Sort, Partial, Nth };

template <typename T>
void order_lines(const Tensor& x, int64_t dim, bool descending, Selection sel, int64_t count,
                 const Tensor& values, const Tensor& indices) {
  using A = acc_t<T>;
  const Lines l(x.shape(), dim);
  const T* px = x.data<T>();
  T* pv = values.data<T>();
  int64_t* pi = indices.data<int64_t>();
  struct Entry {
    A v;
    int64_t i;
  };
  auto before = [descending](const Entry& a, const Entry& b) {
    const bool an = is_nan_value(a.v), bn = is_nan_value(b.v);
    if (an || bn) {
      if (an && bn) return a.i < b.i;
      return descending ? an : bn;
    }
    if (a.v != b.v) return descending ? a.v > b.v : a.v < b.v;
    return a.i < b.i;
  };
  const int64_t kept = sel == Selection::Nth ? 1 : count;  // entries per line in the outputs
  const int64_t lines = l.outer * l.inner;
  const int64_t grain = std::max<int64_t>(1, kMinGrain / std::max<int64_t>(l.size * 8, 1));
  parallel_for(lines, grain, [&](int64_t b, int64_t e) {
    std::vector<Entry> line(l.size);
    for (int64_t n = b; n < e; ++n) {
      const int64_t o = n / l.inner, in = n % l.inner;
      const int64_t src = o * l.size * l.inner + in, dst = o * kept * l.inner + in;
      for (int64_t j = 0; j < l.size; ++j) line[j] = {static_cast<A>(px[src + j * l.inner]), j};
      switch (sel) {
        case Selection::Sort:
          std::sort(line.begin(), line.end(), before);
          break;
        case Selection::Partial:
          std::partial_sort(line.begin(), line.begin() + count, line.end(), before);
          break;
        case Selection::Nth:
          // The one wanted entry is moved to the front.
          std::nth_element(line.begin(), line.begin() + (count - 1), line.end(), before);
          line[0] = line[count - 1];
          break;
      }
      for (int64_t j = 0; j < kept; ++j) {
        pv[dst + j * l.inner] = convert_value<T>(line[j].v);
        pi[dst + j * l.inner] = line[j].i;
      }
    }
  });
}

void run_ordering(KernelContext& c, int64_t dim, bool descending, Selection sel, int64_t count,
                  const char* what) {
  const Tensor& x = c.inputs[0];
  if (x.numel() == 0 || count == 0) return;
  SAMBA_DISPATCH_NUMERIC(x.dtype(), what, [&] {
    order_lines<scalar_t>(x, dim, descending, sel, count, c.outputs[0], c.outputs[1]);
  });
}

void check_orderable(const Tensor& x, const char* what) {
  SAMBA_CHECK(x.dtype() != DType::Bool, Status::DTypeMismatch,
              "{}: dtype bool is not supported; cast to an integer dtype first", what);
}

// topk / kthvalue: x is orderable and k in [lowest, size of dim]; returns the dim.
int64_t checked_k(const Tensor& x, const Attrs& a, int64_t lowest, const char* what) {
  check_orderable(x, what);
  const int64_t dim = ordered_dim(x, a, what);
  const int64_t size = x.dim() == 0 ? 1 : x.shape()[dim], k = a.i("k");
  SAMBA_CHECK(k >= lowest && k <= size, Status::OutOfRange,
              "{}: k = {} is out of range for dim {} of size {} (shape {})", what, k, dim, size,
              dims_str(x.shape()));
  return dim;
}

// The values' gradient placed at the positions the indices name (dims of
// size 1 are put back where the forward op dropped `dim`).
std::vector<Tensor> values_grad(const GradContext& c, int64_t dim, bool dropped_dim) {
  Tensor g = c.grad_outputs[0];
  if (!g.defined() || !c.needs_grad(0)) return {Tensor()};
  const Tensor& x = c.inputs[0];
  if (x.dim() == 0) return {call1("reshape", {g}, {{"shape", std::vector<int64_t>{}}})};
  Tensor idx = c.outputs[1];
  if (dropped_dim) {
    g = call1("unsqueeze", {g}, {{"dim", dim}});
    idx = call1("unsqueeze", {idx}, {{"dim", dim}});
  }
  Tensor zero = call1("zeros", {},
                      {{"shape", std::vector<int64_t>(x.shape().begin(), x.shape().end())},
                       {"dtype", g.dtype()}});
  return {call1("scatter_add", {zero, idx, g}, {{"dim", dim}})};
}

}  // namespace

void register_sorting(OpRegistry& r) {
  r.def("sort")
      .doc(
          "x's elements along `dim` in ascending (or descending) order, and their positions "
          "(int64). Always stable: equal elements keep their order; NaN sorts above every "
          "number.")
      .input("x")
      .output("values")
      .output("indices")
      .attr("dim", AttrType::Int, int64_t{-1})
      .attr("descending", AttrType::Bool, false)
      .attr("stable", AttrType::Bool, false, "accepted for torch's signature; the sort is stable")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        check_orderable(x, "sort");
        ordered_dim(x, c.attrs, "sort");
        return {meta_of(x), {DType::Int64, x.shape()}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& x = c.inputs[0];
        const int64_t dim = ordered_dim(x, c.attrs, "sort");
        run_ordering(c, dim, c.attrs.b("descending"), Selection::Sort,
                     x.dim() == 0 ? 1 : x.shape()[dim], "sort");
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return values_grad(c, ordered_dim(c.inputs[0], c.attrs, "sort"), false);
      });

  r.def("topk")
      .doc(
          "The k largest (or smallest) elements of x along `dim`, in order, and their positions "
          "(int64). Ties go to the earlier position; NaN counts as the largest value. The result "
          "is sorted whatever `sorted` says.")
      .input("x")
      .output("values")
      .output("indices")
      .required_attr("k", AttrType::Int, "how many elements to keep, in [0, size of dim]")
      .attr("dim", AttrType::Int, int64_t{-1})
      .attr("largest", AttrType::Bool, true, "false: the k smallest")
      .attr("sorted", AttrType::Bool, true, "accepted for torch's signature; always sorted")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        const int64_t dim = checked_k(x, c.attrs, 0, "topk");
        const Dims out = with_size_at(x, dim, c.attrs.i("k"));
        return {{x.dtype(), out}, {DType::Int64, out}};
      })
      .kernel([](KernelContext& c) {
        const int64_t dim = ordered_dim(c.inputs[0], c.attrs, "topk");
        run_ordering(c, dim, c.attrs.b("largest"), Selection::Partial, c.attrs.i("k"), "topk");
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return values_grad(c, ordered_dim(c.inputs[0], c.attrs, "topk"), false);
      });

  r.def("kthvalue")
      .doc(
          "The k-th smallest element of x along `dim` (k counts from 1) and its position "
          "(int64); of equal elements the earliest is chosen. NaN counts as the largest value.")
      .input("x")
      .output("values")
      .output("indices")
      .required_attr("k", AttrType::Int, "rank of the element, in [1, size of dim]")
      .attr("dim", AttrType::Int, int64_t{-1})
      .attr("keepdim", AttrType::Bool, false)
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        const int64_t dim = checked_k(x, c.attrs, 1, "kthvalue");
        Dims out = with_size_at(x, dim, 1);
        if (!c.attrs.b("keepdim") && !out.empty()) out.erase(out.begin() + dim);
        return {{x.dtype(), out}, {DType::Int64, out}};
      })
      .kernel([](KernelContext& c) {
        const int64_t dim = ordered_dim(c.inputs[0], c.attrs, "kthvalue");
        run_ordering(c, dim, false, Selection::Nth, c.attrs.i("k"), "kthvalue");
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return values_grad(c, ordered_dim(c.inputs[0], c.attrs, "kthvalue"),
                           !c.attrs.b("keepdim"));
      });
}

}  // namespace samba::ops
