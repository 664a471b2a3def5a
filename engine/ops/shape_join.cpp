// Ops that join or split tensors along a dim (cat, stack, split, chunk) and
// copies that tile or border them (repeat, pad).
#include <algorithm>
#include <cstring>

#include "engine/kernels/pad_maps.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

// PyTorch still accepts 1-D empty tensors in cat whatever the other shapes are.
bool skipped_in_cat(const Tensor& t) { return t.dim() == 1 && t.shape()[0] == 0; }

DType promoted_dtype(std::span<const Tensor> ts) {
  DType dt = ts[0].dtype();
  for (const auto& t : ts) dt = promote_types(dt, t.dtype());
  return dt;
}

struct CatPlan {
  int64_t dim = 0;  // wrapped; meaningless when every input is skipped
  Dims shape;
  DType dtype = DType::Float32;
};

CatPlan plan_cat(std::span<const Tensor> ts, int64_t dim) {
  SAMBA_CHECK(!ts.empty(), Status::InvalidArgument, "cat: expects at least one tensor");
  CatPlan p;
  p.dtype = promoted_dtype(ts);
  const Tensor* ref = nullptr;
  size_t ref_i = 0;
  for (size_t i = 0; i < ts.size() && !ref; ++i)
    if (!skipped_in_cat(ts[i])) ref = &ts[i], ref_i = i;
  if (!ref) {
    p.shape = {0};
    return p;
  }
  SAMBA_CHECK(ref->dim() > 0, Status::InvalidArgument,
              "cat: tensor #{} is 0-dim; zero-dimensional tensors cannot be concatenated", ref_i);
  p.dim = wrap_dim(dim, ref->dim(), "cat");
  p.shape = ref->shape();
  p.shape[p.dim] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (skipped_in_cat(t)) continue;
    bool ok = t.dim() == ref->dim();
    for (int64_t d = 0; ok && d < t.dim(); ++d) ok = d == p.dim || t.shape()[d] == ref->shape()[d];
    SAMBA_CHECK(ok, Status::ShapeMismatch,
                "cat: tensor #{} has shape {}, tensor #{} has shape {}; they must match except in "
                "dim {}",
                i, dims_str(t.shape()), ref_i, dims_str(ref->shape()), p.dim);
    p.shape[p.dim] += t.shape()[p.dim];
  }
  return p;
}

// Writes `parts` one after another along `dim` of the contiguous `out`.
void cat_into(const Tensor& out, std::span<const Tensor> parts, int64_t dim) {
  bool fast = true;
  for (const auto& t : parts) fast &= t.dtype() == out.dtype() && t.is_contiguous();
  if (!fast) {
    int64_t off = 0;
    for (const auto& t : parts) {
      const int64_t n = t.shape()[dim];
      Dims shape = out.shape();
      shape[dim] = n;
      out.as_strided(shape, out.strides(), out.offset() + off * out.strides()[dim]).copy_from(t);
      off += n;
    }
    return;
  }
  // Every part contributes one contiguous block to each outer row of out.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.shape()[d];
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.shape()[d];
  const size_t es = element_size(out.dtype());
  const int64_t row_bytes = out.shape()[dim] * inner * static_cast<int64_t>(es);
  std::vector<const char*> src(parts.size());
  std::vector<int64_t> bytes(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    bytes[i] = parts[i].shape()[dim] * inner * static_cast<int64_t>(es);
    src[i] = bytes[i] * outer > 0 ? static_cast<const char*>(parts[i].raw_data()) : nullptr;
  }
  char* dst = static_cast<char*>(out.raw_data());
  const int64_t grain = std::max<int64_t>(1, kMinGrain * 16 / std::max<int64_t>(row_bytes, 1));
  parallel_for(outer, grain, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      char* d = dst + o * row_bytes;
      for (size_t i = 0; i < parts.size(); ++i) {
        if (bytes[i] == 0) continue;
        std::memcpy(d, src[i] + o * bytes[i], static_cast<size_t>(bytes[i]));
        d += bytes[i];
      }
    }
  });
}

Tensor zeros_like_shape(const Dims& shape, DType dtype) {
  return call1("zeros", {},
               {{"shape", std::vector<int64_t>(shape.begin(), shape.end())}, {"dtype", dtype}});
}

// ---- cat / stack ------------------------------------------------------------------

void register_cat_stack(OpRegistry& r) {
  r.def("cat")
      .doc(
          "The tensors joined along `dim` (promoted to a common dtype; 1-D empty tensors are "
          "ignored, as in PyTorch).")
      .variadic_input("tensors")
      .attr("dim", AttrType::Int, int64_t{0})
      .fusion(Fusion::Opaque)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        CatPlan p = plan_cat(c.inputs, c.attrs.i("dim"));
        return {{p.dtype, p.shape}};
      })
      .kernel([](KernelContext& c) {
        CatPlan p = plan_cat(c.inputs, c.attrs.i("dim"));
        std::vector<Tensor> parts;
        for (const auto& t : c.inputs)
          if (!skipped_in_cat(t)) parts.push_back(t);
        if (!parts.empty()) cat_into(c.outputs[0], parts, p.dim);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        CatPlan p = plan_cat(c.inputs, c.attrs.i("dim"));
        const Tensor& g = c.grad_outputs[0];
        std::vector<Tensor> grads(c.inputs.size());
        int64_t off = 0;
        for (size_t i = 0; i < c.inputs.size(); ++i) {
          const Tensor& t = c.inputs[i];
          if (skipped_in_cat(t)) {
            if (c.needs_grad(i)) grads[i] = zeros_like_shape(t.shape(), g.dtype());
            continue;
          }
          const int64_t n = t.shape()[p.dim];
          if (c.needs_grad(i))
            grads[i] = call1("slice", {g}, {{"dim", p.dim}, {"start", off}, {"end", off + n}});
          off += n;
        }
        return grads;
      });

  r.def("stack")
      .doc("The tensors (all of one shape) joined along a new dim `dim`.")
      .variadic_input("tensors")
      .attr("dim", AttrType::Int, int64_t{0})
      .fusion(Fusion::Opaque)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        SAMBA_CHECK(!c.inputs.empty(), Status::InvalidArgument,
                    "stack: expects at least one tensor");
        const Tensor& ref = c.inputs[0];
        for (size_t i = 1; i < c.inputs.size(); ++i)
          SAMBA_CHECK(c.inputs[i].shape() == ref.shape(), Status::ShapeMismatch,
                      "stack: tensor #{} has shape {} but tensor #0 has shape {}; all must match",
                      i, dims_str(c.inputs[i].shape()), dims_str(ref.shape()));
        Dims shape = ref.shape();
        const int64_t d = wrap_dim(c.attrs.i("dim"), ref.dim() + 1, "stack");
        shape.insert(shape.begin() + d, static_cast<int64_t>(c.inputs.size()));
        return {{promoted_dtype(c.inputs), shape}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        const int64_t d = wrap_dim(c.attrs.i("dim"), out.dim(), "stack");
        std::vector<Tensor> parts;
        for (const auto& t : c.inputs) {
          Dims shape = t.shape(), strides = t.strides();
          shape.insert(shape.begin() + d, 1);
          strides.insert(strides.begin() + d, d < t.dim() ? t.shape()[d] * t.strides()[d] : 1);
          parts.push_back(t.as_strided(shape, strides, t.offset()));
        }
        cat_into(out, parts, d);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& g = c.grad_outputs[0];
        const int64_t d = wrap_dim(c.attrs.i("dim"), g.dim(), "stack");
        std::vector<Tensor> grads(c.inputs.size());
        for (size_t i = 0; i < c.inputs.size(); ++i)
          if (c.needs_grad(i))
            grads[i] = call1("select", {g}, {{"dim", d}, {"index", static_cast<int64_t>(i)}});
        return grads;
      });
}

// ---- split / chunk ---------------------------------------------------------------

// The sizes along `dim` that split or chunk cut x into.
std::vector<int64_t> split_sizes(const Tensor& x, const Attrs& a, int64_t dim) {
  const int64_t size = x.shape()[dim];
  const bool by_size = a.has("split_size"), by_sections = a.has("sections");
  SAMBA_CHECK(by_size != by_sections, Status::InvalidArgument,
              "split: give exactly one of split_size (int) and sections (ints)");
  if (by_sections) {
    const auto& sec = a.ints("sections");
    int64_t total = 0;
    for (int64_t s : sec) {
      SAMBA_CHECK(s >= 0, Status::InvalidArgument, "split: sections [{}] has a negative size",
                  fmt::join(sec, ", "));
      total += s;
    }
    SAMBA_CHECK(total == size, Status::ShapeMismatch,
                "split: sections [{}] sum to {} but dim {} of shape {} has size {}",
                fmt::join(sec, ", "), total, dim, dims_str(x.shape()), size);
    return sec;
  }
  const int64_t step = a.i("split_size");
  SAMBA_CHECK(step > 0 || (step == 0 && size == 0), Status::InvalidArgument,
              "split: split_size must be > 0, got {}", step);
  if (size == 0) return {0};
  std::vector<int64_t> out;
  for (int64_t at = 0; at < size; at += step) out.push_back(std::min(step, size - at));
  return out;
}

std::vector<int64_t> chunk_sizes(const Tensor& x, int64_t chunks, int64_t dim) {
  SAMBA_CHECK(chunks > 0, Status::InvalidArgument, "chunk: chunks must be > 0, got {}", chunks);
  const int64_t size = x.shape()[dim];
  if (size == 0) return std::vector<int64_t>(chunks, 0);
  const int64_t step = (size + chunks - 1) / chunks;
  std::vector<int64_t> out;
  for (int64_t at = 0; at < size; at += step) out.push_back(std::min(step, size - at));
  return out;
}

int64_t split_dim(const Tensor& x, int64_t dim, const char* what) {
  SAMBA_CHECK(x.dim() > 0, Status::InvalidArgument, "{}: cannot split a 0-dim tensor", what);
  return wrap_dim(dim, x.dim(), what);
}

std::vector<TensorMeta> pieces_meta(const Tensor& x, int64_t dim,
                                    const std::vector<int64_t>& sizes) {
  std::vector<TensorMeta> out;
  for (int64_t n : sizes) {
    Dims shape = x.shape();
    shape[dim] = n;
    out.push_back({x.dtype(), shape});
  }
  return out;
}

std::vector<Tensor> piece_views(const Tensor& x, int64_t dim, const std::vector<int64_t>& sizes) {
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t n : sizes) {
    Dims shape = x.shape();
    shape[dim] = n;
    out.push_back(x.as_strided(shape, x.strides(), x.offset() + at * x.strides()[dim]));
    at += n;
  }
  return out;
}

// Gradient of split/chunk: the pieces' gradients joined, zeros where a piece got none.
Tensor join_piece_grads(const GradContext& c, int64_t dim) {
  std::vector<Tensor> parts;
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    const Tensor& g = c.grad_outputs[k];
    parts.push_back(g.defined() ? g : zeros_like_shape(c.outputs[k].shape(), c.outputs[k].dtype()));
  }
  return call("cat", parts, {{"dim", dim}})[0];
}

void register_split_chunk(OpRegistry& r) {
  r.def("split")
      .doc(
          "Views of consecutive pieces of x along `dim`: of split_size each (the last may be "
          "smaller), or of the sizes in sections.")
      .input("x")
      .variadic_output("pieces")
      .optional_attr("split_size", AttrType::Int, "size of each piece")
      .optional_attr("sections", AttrType::Ints, "size of every piece; they sum to the dim's size")
      .attr("dim", AttrType::Int, int64_t{0})
      .fusion(Fusion::View)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        const int64_t d = split_dim(x, c.attrs.i("dim"), "split");
        return pieces_meta(x, d, split_sizes(x, c.attrs, d));
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        const int64_t d = split_dim(in[0], a.i("dim"), "split");
        return piece_views(in[0], d, split_sizes(in[0], a, d));
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {join_piece_grads(c, split_dim(c.inputs[0], c.attrs.i("dim"), "split"))};
      });

  r.def("chunk")
      .doc(
          "Views of x cut into `chunks` pieces along `dim` of ceil(size / chunks) each (fewer "
          "pieces when the size runs out, as in PyTorch).")
      .input("x")
      .variadic_output("pieces")
      .required_attr("chunks", AttrType::Int)
      .attr("dim", AttrType::Int, int64_t{0})
      .fusion(Fusion::View)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        const int64_t d = split_dim(x, c.attrs.i("dim"), "chunk");
        return pieces_meta(x, d, chunk_sizes(x, c.attrs.i("chunks"), d));
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        const int64_t d = split_dim(in[0], a.i("dim"), "chunk");
        return piece_views(in[0], d, chunk_sizes(in[0], a.i("chunks"), d));
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {join_piece_grads(c, split_dim(c.inputs[0], c.attrs.i("dim"), "chunk"))};
      });
}

// ---- repeat -------------------------------------------------------------------------

// x with leading size-1 dims so that it has one dim per repeat.
Dims repeat_source_shape(const Tensor& x, const std::vector<int64_t>& reps) {
  SAMBA_CHECK(reps.size() >= static_cast<size_t>(x.dim()), Status::InvalidArgument,
              "repeat: repeats [{}] has {} entries; the tensor of shape {} needs at least {}",
              fmt::join(reps, ", "), reps.size(), dims_str(x.shape()), x.dim());
  for (int64_t n : reps)
    SAMBA_CHECK(n >= 0, Status::InvalidArgument, "repeat: repeats [{}] has a negative count",
                fmt::join(reps, ", "));
  Dims src(reps.size() - x.dim(), 1);
  src.insert(src.end(), x.shape().begin(), x.shape().end());
  return src;
}

// The output seen as [r0, s0, r1, s1, ...]: tile index then source index per dim.
Dims interleaved(const std::vector<int64_t>& reps, const Dims& src) {
  Dims out;
  for (size_t i = 0; i < reps.size(); ++i) out.push_back(reps[i]), out.push_back(src[i]);
  return out;
}

void register_repeat(OpRegistry& r) {
  r.def("repeat")
      .doc(
          "x tiled repeats[i] times along dim i (x gets leading size-1 dims when repeats is "
          "longer than its rank).")
      .input("x")
      .required_attr("repeats", AttrType::Ints)
      .fusion(Fusion::Opaque)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const auto& reps = c.attrs.ints("repeats");
        Dims src = repeat_source_shape(c.inputs[0], reps);
        for (size_t i = 0; i < src.size(); ++i) src[i] *= reps[i];
        return {{c.inputs[0].dtype(), src}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& x = c.inputs[0];
        const Tensor& out = c.outputs[0];
        if (out.numel() == 0) return;
        const auto& reps = c.attrs.ints("repeats");
        Dims src = repeat_source_shape(x, reps);
        Dims xs(src.size() - x.dim(), 0);
        xs.insert(xs.end(), x.strides().begin(), x.strides().end());
        Dims src_strides, out_strides;
        for (size_t i = 0; i < src.size(); ++i) {
          const int64_t os = out.strides()[i];
          src_strides.push_back(0), src_strides.push_back(xs[i]);
          out_strides.push_back(os * src[i]), out_strides.push_back(os);
        }
        Dims shape = interleaved(reps, src);
        out.as_strided(shape, out_strides, out.offset())
            .copy_from(x.as_strided(shape, src_strides, x.offset()));
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const auto& reps = c.attrs.ints("repeats");
        Dims src = repeat_source_shape(c.inputs[0], reps);
        Dims shape = interleaved(reps, src);
        std::vector<int64_t> tiles;
        for (size_t i = 0; i < reps.size(); ++i) tiles.push_back(2 * static_cast<int64_t>(i));
        Tensor g = call1("reshape", {c.grad_outputs[0]}, {{"shape", std::vector<int64_t>(shape)}});
        g = call1("sum", {g}, {{"dim", tiles}});
        const Dims& xs = c.inputs[0].shape();
        return {call1("reshape", {g}, {{"shape", std::vector<int64_t>(xs.begin(), xs.end())}})};
      });
}

// ---- pad ----------------------------------------------------------------------------

void register_pad(OpRegistry& r) {
  using namespace pad_detail;
  r.def("pad")
      .doc(
          "x padded as torch.nn.functional.pad: `pad` holds (before, after) pairs starting "
          "with the last dim; constant mode fills `value` (negative padding crops), reflect "
          "mirrors without repeating the edge, replicate repeats the edge.")
      .input("x")
      .required_attr("pad", AttrType::Ints, "(before, after) pairs, last dim first")
      .attr("mode", AttrType::String, std::string("constant"),
            "'constant', 'reflect' or 'replicate'")
      .attr("value", AttrType::Float, 0.0, "fill value of constant mode")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        return {{x.dtype(),
                 plan_pad(x.shape(), c.attrs.ints("pad"), c.attrs.s("mode"), false).out_shape}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& x = c.inputs[0];
        const Tensor& out = c.outputs[0];
        PadPlan p = plan_pad(x.shape(), c.attrs.ints("pad"), c.attrs.s("mode"), true);
        if (p.maps.empty()) return out.copy_from(x);
        if (out.numel() == 0) return;
        SAMBA_DISPATCH_ALL(x.dtype(), "pad", [&] {
          const scalar_t v = convert_value<scalar_t>(c.attrs.f("value"));
          scalar_t* po = out.data<scalar_t>();
          if (x.numel() == 0) return std::fill(po, po + out.numel(), v);  // all constant padding
          pad_rows<scalar_t>(p, x.data<scalar_t>(), po, v);
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Dims& xs = c.inputs[0].shape();
        return {call1("pad_backward", {c.grad_outputs[0]},
                      {{"shape", std::vector<int64_t>(xs.begin(), xs.end())},
                       {"pad", c.attrs.ints("pad")},
                       {"mode", c.attrs.s("mode")}})};
      });

  r.def("pad_backward")
      .doc(
          "Gradient of pad: each element of g added to the element of a zero tensor of `shape` "
          "that pad read it from.")
      .input("g")
      .required_attr("shape", AttrType::Ints, "shape of pad's input")
      .required_attr("pad", AttrType::Ints)
      .attr("mode", AttrType::String, std::string("constant"))
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const auto& sa = c.attrs.ints("shape");
        Dims shape(sa.begin(), sa.end());
        PadPlan p = plan_pad(shape, c.attrs.ints("pad"), c.attrs.s("mode"), false);
        SAMBA_CHECK(p.out_shape == c.inputs[0].shape(), Status::ShapeMismatch,
                    "pad_backward: gradient of shape {} does not match the padded shape {}",
                    dims_str(c.inputs[0].shape()), dims_str(p.out_shape));
        return {{c.inputs[0].dtype(), shape}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& g = c.inputs[0];
        const Tensor& out = c.outputs[0];
        PadPlan p = plan_pad(out.shape(), c.attrs.ints("pad"), c.attrs.s("mode"), true);
        if (p.maps.empty()) return out.copy_from(g);
        SAMBA_DISPATCH_FLOAT(out.dtype(), "pad_backward", [&] {
          using A = acc_t<scalar_t>;
          // bf16/fp16 accumulate in a float32 buffer.
          Tensor acc =
              std::is_same_v<A, scalar_t> ? out : Tensor::empty(out.shape(), dtype_of<A>());
          Tensor ga = as_dtype(g, dtype_of<A>());
          std::fill(acc.data<A>(), acc.data<A>() + acc.numel(), A(0));
          if (g.numel() > 0) pad_backward_rows<A>(p, ga.data<A>(), acc.data<A>());
          if (!std::is_same_v<A, scalar_t>) out.copy_from(acc);
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("pad", {c.grad_outputs[0]},
                      {{"pad", c.attrs.ints("pad")}, {"mode", c.attrs.s("mode")}})};
      });
}

}  // namespace

void register_shape_join(OpRegistry& r) {
  register_cat_stack(r);
  register_split_chunk(r);
  register_repeat(r);
  register_pad(r);
}

}  // namespace samba::ops
