// Indexing ops: slice/select/narrow views and their gradients, then the ops
// that read or write along a dim through an index tensor.
#include <algorithm>
#include <cstring>

#include "engine/kernels/index_loops.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

// A normalized slice of one dim: elements start, start+step, ... < end.
struct DimSlice {
  int64_t dim = 0;
  int64_t start = 0;
  int64_t end = 0;
  int64_t step = 1;
  int64_t length() const { return end > start ? (end - start + step - 1) / step : 0; }
};

int64_t sliced_dim(const Tensor& x, int64_t dim, const char* what) {
  SAMBA_CHECK(x.dim() > 0, Status::InvalidArgument, "{}: cannot index a 0-dim tensor", what);
  return wrap_dim(dim, x.dim(), what);
}

// Python slice bounds: negative ones count from the end, out-of-range ones clamp.
DimSlice python_slice(const Tensor& x, const Attrs& a) {
  DimSlice s;
  s.dim = sliced_dim(x, a.i("dim"), "slice");
  s.step = a.i("step");
  SAMBA_CHECK(s.step >= 1, Status::InvalidArgument, "slice: step must be >= 1, got {}", s.step);
  const int64_t size = x.shape()[s.dim];
  auto clamp_bound = [size](int64_t v) {
    if (v < 0) v += size;
    return std::clamp<int64_t>(v, 0, size);
  };
  s.start = a.has("start") ? clamp_bound(a.i("start")) : 0;
  s.end = a.has("end") ? clamp_bound(a.i("end")) : size;
  if (s.end < s.start) s.end = s.start;
  return s;
}

DimSlice narrow_slice(const Tensor& x, const Attrs& a) {
  DimSlice s;
  s.dim = sliced_dim(x, a.i("dim"), "narrow");
  const int64_t size = x.shape()[s.dim];
  const int64_t start = a.i("start"), length = a.i("length");
  SAMBA_CHECK(length >= 0, Status::InvalidArgument, "narrow: length must be >= 0, got {}", length);
  SAMBA_CHECK(start >= -size && start <= size, Status::OutOfRange,
              "narrow: start {} is out of range for dim {} of size {}", start, s.dim, size);
  s.start = start < 0 ? start + size : start;
  SAMBA_CHECK(s.start + length <= size, Status::OutOfRange,
              "narrow: start {} + length {} exceeds dim {} of size {}", s.start, length, s.dim,
              size);
  s.end = s.start + length;
  return s;
}

int64_t select_index(const Tensor& x, int64_t dim, int64_t index) {
  const int64_t size = x.shape()[dim];
  SAMBA_CHECK(index >= -size && index < size, Status::OutOfRange,
              "select: index {} is out of range for dim {} of size {}", index, dim, size);
  return index < 0 ? index + size : index;
}

Dims sliced_shape(const Dims& shape, const DimSlice& s) {
  Dims out = shape;
  out[s.dim] = s.length();
  return out;
}

Tensor slice_view(const Tensor& x, const DimSlice& s) {
  Dims strides = x.strides();
  const int64_t offset = x.offset() + s.start * strides[s.dim];
  strides[s.dim] *= s.step;
  return x.as_strided(sliced_shape(x.shape(), s), strides, offset);
}

Tensor select_view(const Tensor& x, int64_t dim, int64_t index) {
  Dims shape = x.shape(), strides = x.strides();
  const int64_t offset = x.offset() + index * strides[dim];
  shape.erase(shape.begin() + dim);
  strides.erase(strides.begin() + dim);
  return x.as_strided(shape, strides, offset);
}

void zero_fill(const Tensor& t) {
  char* p = static_cast<char*>(t.raw_data());
  const int64_t n = static_cast<int64_t>(t.nbytes());
  parallel_for(n, kMinGrain * 8, [&](int64_t b, int64_t e) { std::memset(p + b, 0, e - b); });
}

Dims shape_attr(const Attrs& a) {
  const auto& s = a.ints("shape");
  return Dims(s.begin(), s.end());
}

Tensor slice_backward(const Tensor& g, const Dims& shape, const DimSlice& s) {
  return call1("slice_backward", {g},
               {{"shape", std::vector<int64_t>(shape.begin(), shape.end())},
                {"dim", s.dim},
                {"start", s.start},
                {"end", s.end},
                {"step", s.step}});
}

// The slice a slice_backward writes, checked against its gradient's shape.
DimSlice backward_slice(const Tensor& g, const Attrs& a) {
  Dims shape = shape_attr(a);
  Tensor probe = Tensor::symbolic(shape, g.dtype());
  DimSlice s = python_slice(probe, a);
  SAMBA_CHECK(sliced_shape(shape, s) == g.shape(), Status::ShapeMismatch,
              "slice_backward: gradient of shape {} does not match the slice {} of shape {}",
              dims_str(g.shape()), dims_str(sliced_shape(shape, s)), dims_str(shape));
  return s;
}

void register_views(OpRegistry& r) {
  r.def("slice")
      .doc(
          "x[start:end:step] along `dim` with Python slice bounds (negative counts from the end, "
          "out-of-range clamps); a view.")
      .input("x")
      .attr("dim", AttrType::Int, int64_t{0})
      .optional_attr("start", AttrType::Int, "first index; none: 0")
      .optional_attr("end", AttrType::Int, "one past the last index; none: the dim's size")
      .attr("step", AttrType::Int, int64_t{1}, ">= 1")
      .fusion(Fusion::View)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        return {{x.dtype(), sliced_shape(x.shape(), python_slice(x, c.attrs))}};
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        return {slice_view(in[0], python_slice(in[0], a))};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& x = c.inputs[0];
        return {slice_backward(c.grad_outputs[0], x.shape(), python_slice(x, c.attrs))};
      });

  r.def("narrow")
      .doc("x[start:start+length] along `dim` (start may be negative); a view.")
      .input("x")
      .required_attr("dim", AttrType::Int)
      .required_attr("start", AttrType::Int)
      .required_attr("length", AttrType::Int)
      .fusion(Fusion::View)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        return {{x.dtype(), sliced_shape(x.shape(), narrow_slice(x, c.attrs))}};
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        return {slice_view(in[0], narrow_slice(in[0], a))};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& x = c.inputs[0];
        return {slice_backward(c.grad_outputs[0], x.shape(), narrow_slice(x, c.attrs))};
      });

  r.def("select")
      .doc(
          "x[..., index, ...] at `dim`, removing that dim (negative index counts from the end); "
          "a view.")
      .input("x")
      .required_attr("dim", AttrType::Int)
      .required_attr("index", AttrType::Int)
      .fusion(Fusion::View)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        const int64_t d = sliced_dim(x, c.attrs.i("dim"), "select");
        select_index(x, d, c.attrs.i("index"));
        Dims shape = x.shape();
        shape.erase(shape.begin() + d);
        return {{x.dtype(), shape}};
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        const int64_t d = sliced_dim(in[0], a.i("dim"), "select");
        return {select_view(in[0], d, select_index(in[0], d, a.i("index")))};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& x = c.inputs[0];
        const int64_t d = sliced_dim(x, c.attrs.i("dim"), "select");
        return {call1("select_backward", {c.grad_outputs[0]},
                      {{"shape", std::vector<int64_t>(x.shape().begin(), x.shape().end())},
                       {"dim", d},
                       {"index", select_index(x, d, c.attrs.i("index"))}})};
      });

  r.def("slice_backward")
      .doc("Gradient of slice: a zero tensor of `shape` with g written at the slice.")
      .input("g")
      .required_attr("shape", AttrType::Ints, "shape of the sliced tensor")
      .required_attr("dim", AttrType::Int)
      .optional_attr("start", AttrType::Int)
      .optional_attr("end", AttrType::Int)
      .attr("step", AttrType::Int, int64_t{1})
      .fusion(Fusion::Opaque)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        backward_slice(c.inputs[0], c.attrs);
        return {{c.inputs[0].dtype(), shape_attr(c.attrs)}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        zero_fill(out);
        slice_view(out, backward_slice(c.inputs[0], c.attrs)).copy_from(c.inputs[0]);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        DimSlice s = backward_slice(c.inputs[0], c.attrs);
        return {call1("slice", {c.grad_outputs[0]},
                      {{"dim", s.dim}, {"start", s.start}, {"end", s.end}, {"step", s.step}})};
      });

  r.def("select_backward")
      .doc("Gradient of select: a zero tensor of `shape` with g written at `index` of `dim`.")
      .input("g")
      .required_attr("shape", AttrType::Ints, "shape of the tensor select read")
      .required_attr("dim", AttrType::Int)
      .required_attr("index", AttrType::Int)
      .fusion(Fusion::Opaque)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        Dims shape = shape_attr(c.attrs);
        Tensor probe = Tensor::symbolic(shape, c.inputs[0].dtype());
        const int64_t d = sliced_dim(probe, c.attrs.i("dim"), "select_backward");
        select_index(probe, d, c.attrs.i("index"));
        Dims want = shape;
        want.erase(want.begin() + d);
        SAMBA_CHECK(
            want == c.inputs[0].shape(), Status::ShapeMismatch,
            "select_backward: gradient of shape {} does not match {} (shape {} without dim {})",
            dims_str(c.inputs[0].shape()), dims_str(want), dims_str(shape), d);
        return {{c.inputs[0].dtype(), shape}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        zero_fill(out);
        const int64_t d = wrap_dim(c.attrs.i("dim"), out.dim(), "select_backward");
        select_view(out, d, select_index(out, d, c.attrs.i("index"))).copy_from(c.inputs[0]);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("select", {c.grad_outputs[0]},
                      {{"dim", c.attrs.i("dim")}, {"index", c.attrs.i("index")}})};
      });
}

// ---- ops that index through a tensor -------------------------------------------------

using namespace index_detail;

Tensor zeros_of(const Dims& shape, DType dtype) {
  return call1("zeros", {},
               {{"shape", std::vector<int64_t>(shape.begin(), shape.end())}, {"dtype", dtype}});
}

// index_select / index_put: a 1-D (or 0-D) integer index along `dim` of x.
int64_t vector_index_dim(const Tensor& x, const Tensor& index, int64_t dim, const char* what) {
  check_index_dtype(index, what);
  SAMBA_CHECK(index.dim() <= 1, Status::ShapeMismatch, "{}: index must be 0-D or 1-D, got shape {}",
              what, dims_str(index.shape()));
  return sliced_dim(x, dim, what);
}

Dims selected_shape(const Tensor& x, const Tensor& index, int64_t dim) {
  Dims shape = x.shape();
  shape[dim] = index.numel();
  return shape;
}

// Sizes of x before `dim`, along it and after it.
struct Split3 {
  int64_t outer = 1, size = 1, inner = 1;
  Split3(const Dims& shape, int64_t dim) {
    for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
    size = shape[dim];
    for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  }
};

// gather / scatter_add: index has x's rank and fits x outside `dim`.
int64_t aligned_index_dim(const Tensor& x, const Tensor& index, int64_t dim, const char* what) {
  check_index_dtype(index, what);
  const int64_t d = sliced_dim(x, dim, what);
  bool ok = index.dim() == x.dim();
  for (int64_t q = 0; ok && q < x.dim(); ++q) ok = q == d || index.shape()[q] <= x.shape()[q];
  SAMBA_CHECK(ok, Status::ShapeMismatch,
              "{}: index of shape {} must have the rank of the input {} and be no larger outside "
              "dim {}",
              what, dims_str(index.shape()), dims_str(x.shape()), d);
  return d;
}

// scatter / scatter_add (x, index, src): the index fits x outside `dim` and src everywhere.
void check_scatter_shapes(const InferContext& c, const char* what) {
  const Tensor &x = c.inputs[0], &index = c.inputs[1], &src = c.inputs[2];
  aligned_index_dim(x, index, c.attrs.i("dim"), what);
  bool ok = src.dim() == index.dim();
  for (int64_t q = 0; ok && q < src.dim(); ++q) ok = index.shape()[q] <= src.shape()[q];
  SAMBA_CHECK(ok, Status::ShapeMismatch,
              "{}: index of shape {} must have src's rank and be no larger than src {}", what,
              dims_str(index.shape()), dims_str(src.shape()));
}

// The gradient of scatter's and scatter_add's src: the incoming gradient read
// at the index, zero where src lies outside the index.
Tensor scattered_src_grad(const GradContext& c) {
  if (!c.needs_grad(2)) return Tensor();
  const Tensor &index = c.inputs[1], &src = c.inputs[2];
  Tensor gsrc = call1("gather", {c.grad_outputs[0], index}, {{"dim", c.attrs.i("dim")}});
  if (src.shape() == index.shape()) return gsrc;
  std::vector<int64_t> pad;
  for (int64_t q = src.dim() - 1; q >= 0; --q)
    pad.push_back(0), pad.push_back(src.shape()[q] - index.shape()[q]);
  return call1("pad", {gsrc}, {{"pad", pad}});
}

// The schema scatter and scatter_add share; the caller adds kernel and gradient.
OpBuilder scatter_op(OpRegistry& r, const char* name, std::string doc) {
  OpBuilder b = r.def(name);
  b.doc(std::move(doc))
      .input("x")
      .input("index", "integer indices with x's rank (not differentiable)")
      .input("src")
      .required_attr("dim", AttrType::Int)
      .fusion(Fusion::Opaque)
      .infer([name](const InferContext& c) -> std::vector<TensorMeta> {
        check_scatter_shapes(c, name);
        return {meta_of(c.inputs[0])};
      });
  return b;
}

// out = x, then run(walk, src in out's dtype, index values, out) combines src in.
template <typename F>
void scatter_kernel(KernelContext& c, const char* what, F run) {
  const Tensor &x = c.inputs[0], &index = c.inputs[1], &out = c.outputs[0];
  const int64_t d = wrap_dim(c.attrs.i("dim"), x.dim(), what);
  const IndexValues idx(index, x.shape()[d], what, d);
  out.copy_from(x);
  if (idx.empty()) return;
  const Tensor src = as_dtype(c.inputs[2], out.dtype()).contiguous();
  run(DimWalk(index.shape(), out.shape(), src.shape(), d), src, idx.data(), out);
}

void register_index_ops(OpRegistry& r) {
  r.def("index_select")
      .doc(
          "The entries of x at `index` (1-D integers; negative ones count from the end) along "
          "`dim`.")
      .input("x")
      .input("index", "integer indices (not differentiable)")
      .required_attr("dim", AttrType::Int)
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor &x = c.inputs[0], &index = c.inputs[1];
        const int64_t d = vector_index_dim(x, index, c.attrs.i("dim"), "index_select");
        return {{x.dtype(), selected_shape(x, index, d)}};
      })
      .kernel([](KernelContext& c) {
        const Tensor &x = c.inputs[0], &out = c.outputs[0];
        const int64_t d = wrap_dim(c.attrs.i("dim"), x.dim(), "index_select");
        const IndexValues idx(c.inputs[1], x.shape()[d], "index_select", d);
        const Split3 g(x.shape(), d);
        const int64_t n = idx.size();
        if (out.numel() == 0) return;
        dispatch_by_size(x.dtype(), [&](auto tag) {
          using T = decltype(tag);
          const T* px = static_cast<const T*>(x.raw_data());
          T* po = static_cast<T*>(out.raw_data());
          if (g.inner == 1) {  // selecting single elements: runs of j per outer row
            for_outer_inner(g.outer, n, 1, [&](int64_t o, int64_t j0, int64_t j1) {
              const T* src = px + o * g.size;
              T* dst = po + o * n;
              for (int64_t j = j0; j < j1; ++j) dst[j] = src[idx[j]];
            });
            return;
          }
          // Every output row (o, j) is written once: rows are independent tasks.
          const int64_t grain = std::max<int64_t>(1, kMinGrain / std::max<int64_t>(g.inner, 1));
          parallel_for(g.outer * n, grain, [&](int64_t b, int64_t e) {
            for (int64_t row = b; row < e; ++row) {
              const int64_t o = row / n, j = row % n;
              const T* src = px + (o * g.size + idx[j]) * g.inner;
              std::copy(src, src + g.inner, po + row * g.inner);
            }
          });
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& g = c.grad_outputs[0];
        Tensor zero = zeros_of(c.inputs[0].shape(), g.dtype());
        return {call1("index_put", {zero, c.inputs[1], g},
                      {{"dim", c.attrs.i("dim")}, {"accumulate", true}}),
                Tensor()};
      });

  r.def("index_put")
      .doc(
          "A copy of x with x[..., index[j], ...] (along `dim`) set to, or with accumulate "
          "increased by, values[..., j, ...]; values broadcast to that shape. With repeated "
          "indices and no accumulate the last write wins.")
      .input("x")
      .input("index", "1-D integer indices (not differentiable); negative ones count from the end")
      .input("values")
      .attr("dim", AttrType::Int, int64_t{0})
      .attr("accumulate", AttrType::Bool, false)
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor &x = c.inputs[0], &index = c.inputs[1], &values = c.inputs[2];
        const int64_t d = vector_index_dim(x, index, c.attrs.i("dim"), "index_put");
        Dims target = selected_shape(x, index, d);
        SAMBA_CHECK(broadcast_shapes(values.shape(), target, "index_put") == target,
                    Status::ShapeMismatch,
                    "index_put: values of shape {} do not broadcast to the indexed shape {}",
                    dims_str(values.shape()), dims_str(target));
        return {meta_of(x)};
      })
      .kernel([](KernelContext& c) {
        const Tensor &x = c.inputs[0], &out = c.outputs[0];
        const int64_t d = wrap_dim(c.attrs.i("dim"), x.dim(), "index_put");
        const IndexValues idx(c.inputs[1], x.shape()[d], "index_put", d);
        out.copy_from(x);
        Dims target = selected_shape(x, c.inputs[1], d);
        Tensor vals = c.inputs[2];
        if (vals.shape() != target || vals.dtype() != out.dtype()) {
          vals = Tensor::empty(target, out.dtype());
          vals.copy_from(c.inputs[2]);
        }
        const Split3 g(x.shape(), d);
        const int64_t n = idx.size();
        if (vals.numel() == 0) return;
        auto walk = [&](auto* po, const auto* pv, auto op) {
          for_outer_inner(g.outer, g.inner, n, [&](int64_t o, int64_t i0, int64_t i1) {
            for (int64_t j = 0; j < n; ++j) {
              auto* dst = po + (o * g.size + idx[j]) * g.inner;
              const auto* src = pv + (o * n + j) * g.inner;
              for (int64_t i = i0; i < i1; ++i) op(dst[i], src[i]);
            }
          });
        };
        if (!c.attrs.b("accumulate")) {
          return dispatch_by_size(out.dtype(), [&](auto tag) {
            using T = decltype(tag);
            walk(static_cast<T*>(out.raw_data()), static_cast<const T*>(vals.raw_data()),
                 [](T& a, T b) { a = b; });
          });
        }
        if (out.dtype() == DType::Bool)
          return walk(out.data<bool>(), vals.data<bool>(), [](bool& a, bool b) { a = a || b; });
        SAMBA_DISPATCH_NUMERIC(out.dtype(), "index_put", [&] {
          using A = acc_t<scalar_t>;
          walk(out.data<scalar_t>(), vals.data<scalar_t>(), [](scalar_t& a, scalar_t b) {
            a = static_cast<scalar_t>(static_cast<A>(a) + static_cast<A>(b));
          });
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& g = c.grad_outputs[0];
        const Tensor& index = c.inputs[1];
        const int64_t d = c.attrs.i("dim");
        Tensor gx, gv;
        if (c.needs_grad(0))
          gx = c.attrs.b("accumulate")
                   ? g
                   : call1("index_put", {g, index, zeros_of({}, g.dtype())}, {{"dim", d}});
        if (c.needs_grad(2))
          gv = sum_to(call1("index_select", {g, index}, {{"dim", d}}), c.inputs[2].shape());
        return {gx, Tensor(), gv};
      });

  r.def("gather")
      .doc(
          "out[i][j][k] = x[i][index[i][j][k]][k] for dim 1 (likewise for any dim); out has the "
          "index's shape.")
      .input("x")
      .input("index", "integer indices with x's rank (not differentiable)")
      .required_attr("dim", AttrType::Int)
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        aligned_index_dim(c.inputs[0], c.inputs[1], c.attrs.i("dim"), "gather");
        return {{c.inputs[0].dtype(), c.inputs[1].shape()}};
      })
      .kernel([](KernelContext& c) {
        const Tensor &x = c.inputs[0], &index = c.inputs[1], &out = c.outputs[0];
        const int64_t d = wrap_dim(c.attrs.i("dim"), x.dim(), "gather");
        const IndexValues idx(index, x.shape()[d], "gather", d);
        if (out.numel() == 0) return;
        DimWalk w(index.shape(), x.shape(), index.shape(), d);
        dispatch_by_size(x.dtype(), [&](auto tag) {
          using T = decltype(tag);
          gather_loop<T>(w, static_cast<const T*>(x.raw_data()), idx.data(),
                         static_cast<T*>(out.raw_data()));
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& g = c.grad_outputs[0];
        Tensor zero = zeros_of(c.inputs[0].shape(), g.dtype());
        return {call1("scatter_add", {zero, c.inputs[1], g}, {{"dim", c.attrs.i("dim")}}),
                Tensor()};
      });

  scatter_op(r, "scatter_add",
             "A copy of x with src[i][j][k] added at x[i][index[i][j][k]][k] for dim 1 (likewise "
             "for any dim); src may be larger than the index, whose extent is what is read.")
      .kernel([](KernelContext& c) {
        scatter_kernel(c, "scatter_add", [](const DimWalk& w, const Tensor& src,
                                            const int64_t* idx, const Tensor& out) {
          SAMBA_DISPATCH_NUMERIC(out.dtype(), "scatter_add", [&] {
            using A = acc_t<scalar_t>;
            scatter_loop(w, src.data<scalar_t>(), idx, out.data<scalar_t>(),
                         [](scalar_t& d, scalar_t v) {
                           d = static_cast<scalar_t>(static_cast<A>(d) + static_cast<A>(v));
                         });
          });
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& g = c.grad_outputs[0];
        return {c.needs_grad(0) ? g : Tensor(), Tensor(), scattered_src_grad(c)};
      });

  scatter_op(r, "scatter",
             "A copy of x with src[i][j][k] written at x[i][index[i][j][k]][k] for dim 1 (likewise "
             "for any dim); src may be larger than the index, whose extent is what is read. Where "
             "an index repeats along dim the last write wins.")
      .kernel([](KernelContext& c) {
        scatter_kernel(c, "scatter", [](const DimWalk& w, const Tensor& src, const int64_t* idx,
                                        const Tensor& out) {
          dispatch_by_size(out.dtype(), [&](auto tag) {
            using T = decltype(tag);
            scatter_loop(w, static_cast<const T*>(src.raw_data()), idx,
                         static_cast<T*>(out.raw_data()), [](T& d, T v) { d = v; });
          });
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& g = c.grad_outputs[0];
        const Tensor& index = c.inputs[1];
        Tensor gx;  // the overwritten positions get nothing
        if (c.needs_grad(0))
          gx = call1("scatter", {g, index, zeros_of(index.shape(), g.dtype())},
                     {{"dim", c.attrs.i("dim")}});
        return {gx, Tensor(), scattered_src_grad(c)};
      });
}

}  // namespace

void register_indexing(OpRegistry& r) {
  register_views(r);
  register_index_ops(r);
}

}  // namespace samba::ops
