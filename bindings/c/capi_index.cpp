// SambaTensor.__getitem__ / __setitem__ through C: an index expression is
// built item by item, then applied as registry ops (select, slice,
// unsqueeze for the basic items; index_select / index_put for the one tensor
// or list item), so reads are views where PyTorch gives views and gradients
// flow through them.
#include <cmath>
#include <optional>

#include "bindings/c/capi.h"
#include "engine/ops/autograd.h"

using namespace samba;
using namespace samba::capi;

namespace {

struct IndexItem {
  enum Kind { Int, Slice, None, Ellipsis, Positions };
  Kind kind = None;
  int64_t value = 0;  // Int
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  Tensor positions;  // Positions: an index tensor, or a list as a 1-D int64 tensor
  bool from_list = false;
};

}  // namespace

struct samba_index {
  std::vector<IndexItem> items;
};

namespace {

const char* kind_name(const IndexItem& it) {
  switch (it.kind) {
    case IndexItem::Int:
      return "an integer";
    case IndexItem::Slice:
      return "a slice";
    case IndexItem::None:
      return "None";
    case IndexItem::Ellipsis:
      return "an ellipsis";
    case IndexItem::Positions:
      return it.from_list ? "a list" : "a tensor";
  }
  return "?";
}

void check_single_advanced(const samba_index& idx, const char* adding) {
  for (const auto& it : idx.items)
    SAMBA_CHECK(it.kind != IndexItem::Positions, Status::Unsupported,
                "an index expression may hold only one tensor or list index (it already has {}); "
                "cannot add {}: index one dim at a time instead",
                kind_name(it), adding);
}

samba_status add_item(const char* fn, samba_index* idx, const std::function<IndexItem()>& make) {
  return guarded(fn, [&] {
    require(idx, "idx");
    IndexItem it = make();
    idx->items.push_back(std::move(it));
  });
}

// The positions a tensor or list item picks along a dim of `size`, as a
// contiguous 1-D int64 tensor with negative positions wrapped. Checked in
// full before anything is read or written through them.
Tensor dim_positions(const IndexItem& it, int64_t dim, int64_t size) {
  Tensor p = it.positions;
  if (p.dtype() == DType::Bool) {
    SAMBA_CHECK(p.numel() == size, Status::ShapeMismatch,
                "bool mask of length {} cannot index dim {} of size {}", p.numel(), dim, size);
    Tensor mask = p.contiguous();
    // Read as bytes: memory wrapped from C may hold any nonzero byte for true.
    const auto* m = static_cast<const uint8_t*>(mask.raw_data());
    std::vector<int64_t> picked;
    for (int64_t i = 0; i < size; ++i)
      if (m[i]) picked.push_back(i);
    Tensor out = Tensor::empty({static_cast<int64_t>(picked.size())}, DType::Int64);
    std::copy(picked.begin(), picked.end(), out.data<int64_t>());
    return out;
  }
  if (is_floating(p.dtype())) {
    Tensor f = p.to(DType::Float64);
    const double* v = f.data<double>();
    for (int64_t i = 0; i < f.numel(); ++i)
      SAMBA_CHECK(std::isfinite(v[i]) && v[i] == std::trunc(v[i]) && std::fabs(v[i]) < 9.0e18,
                  Status::InvalidArgument,
                  "index tensor of dtype {} holds {} at position {}; index values must be whole "
                  "numbers",
                  dtype_name(p.dtype()), v[i], i);
  }
  Tensor out = p.to(DType::Int64);  // always a fresh buffer: wrapping below writes it
  int64_t* v = out.data<int64_t>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    SAMBA_CHECK(v[i] >= -size && v[i] < size, Status::OutOfRange,
                "index {} (at position {} of the {}) is out of range for dim {} of size {}", v[i],
                i, it.from_list ? "list" : "index tensor", dim, size);
    if (v[i] < 0) v[i] += size;
  }
  return out;
}

// The value of a 0-dim index tensor, which indexes like an integer.
int64_t scalar_position(const Tensor& p) {
  double v = p.item_double();
  SAMBA_CHECK(std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 9.0e18,
              Status::InvalidArgument,
              "0-dim index tensor of dtype {} holds {}; index values must be whole numbers",
              dtype_name(p.dtype()), v);
  return p.item_int();
}

Tensor op1(std::string_view name, const Tensor& x, const Attrs& attrs) {
  return run_op1(nullptr, name, std::span<const Tensor>(&x, 1), attrs);
}

// An index applied to a tensor: `view` is t after every basic item, with the
// dim of the tensor/list item (if any) kept whole at `dim`.
struct BasicIndexed {
  Tensor view;
  std::optional<int64_t> dim;
  const IndexItem* positions_item = nullptr;
};

BasicIndexed apply_basic(const Tensor& t, const samba_index& idx) {
  int64_t consumed = 0;
  for (const auto& it : idx.items)
    if (it.kind == IndexItem::Int || it.kind == IndexItem::Slice || it.kind == IndexItem::Positions)
      ++consumed;
  SAMBA_CHECK(consumed <= t.dim(), Status::OutOfRange,
              "too many indices: {} dims indexed on a tensor of shape {} (rank {})", consumed,
              dims_str(t.shape()), t.dim());
  BasicIndexed r{t, std::nullopt, nullptr};
  int64_t d = 0;  // the dim of r.view the next item applies to
  for (const auto& it : idx.items) {
    switch (it.kind) {
      case IndexItem::Int:
        r.view = op1("select", r.view, {{"dim", d}, {"index", it.value}});
        break;
      case IndexItem::Slice: {
        // `:` keeps the dim whole, as `...` does: no op, so a graph does not
        // copy the tensor once more in its backward (Hugging Face's LM loss,
        // logits[..., :-1, :], would add a slice_backward of all the logits).
        if (!it.start && !it.stop && it.step == 1) {
          ++d;
          break;
        }
        Attrs a{{"dim", d}, {"step", it.step}};
        if (it.start) a.set("start", *it.start);
        if (it.stop) a.set("end", *it.stop);
        r.view = op1("slice", r.view, a);
        ++d;
        break;
      }
      case IndexItem::None:
        r.view = op1("unsqueeze", r.view, {{"dim", d}});
        ++d;
        break;
      case IndexItem::Ellipsis:
        d += t.dim() - consumed;
        break;
      case IndexItem::Positions:
        if (it.positions.dim() == 0) {
          r.view = op1("select", r.view, {{"dim", d}, {"index", scalar_position(it.positions)}});
        } else {
          r.dim = d;
          r.positions_item = &it;
          ++d;
        }
        break;
    }
  }
  return r;
}

Tensor gather(const Tensor& t, const BasicIndexed& b) {
  if (!b.dim) {
    // x[()] and x[...] are new views of x, as in PyTorch, not x itself.
    if (b.view.impl() == t.impl()) return op1("expand", t, {{"shape", t.shape()}});
    return b.view;
  }
  const int64_t d = *b.dim;
  Tensor positions = dim_positions(*b.positions_item, d, b.view.shape()[d]);
  return run_op1(nullptr, "index_select", std::vector<Tensor>{b.view, positions}, {{"dim", d}});
}

// The value as it will be written into a region of `shape`: leading size-1
// dims beyond that rank dropped (PyTorch allows them) and checked to
// broadcast, so the write itself cannot fail halfway.
Tensor value_for(const Tensor& value, const Dims& shape) {
  Tensor v = value;
  size_t lead = 0;
  while (v.shape().size() - lead > shape.size() && v.shape()[lead] == 1) ++lead;
  if (lead) {
    Dims s(v.shape().begin() + lead, v.shape().end()),
        st(v.strides().begin() + lead, v.strides().end());
    v = v.as_strided(s, st, v.offset());
  }
  SAMBA_CHECK(
      v.shape().size() <= shape.size() && broadcast_shapes(shape, v.shape(), "index_put") == shape,
      Status::ShapeMismatch,
      "index_put: value of shape {} cannot be broadcast to the indexed shape {}",
      dims_str(value.shape()), dims_str(shape));
  v.raw_data();  // a value without data fails before anything is written
  return v;
}

void index_put(const Tensor& t, const samba_index& idx, const Tensor& value) {
  SAMBA_CHECK(!t.requires_grad(), Status::InvalidState,
              "index_put: tensor of shape {} requires grad; writing into it in place would "
              "invalidate its gradients (detach it first)",
              dims_str(t.shape()));
  t.raw_data();
  autograd::NoGradGuard no_grad;
  BasicIndexed b = apply_basic(t, idx);
  if (!b.dim) {
    Tensor v = value_for(value, b.view.shape());
    // A value sharing memory with t is copied first, so the write never
    // reads elements it has already overwritten.
    if (v.impl()->storage == t.impl()->storage) v = v.clone();
    b.view.copy_from(v);
    return;
  }
  const int64_t d = *b.dim;
  Tensor positions = dim_positions(*b.positions_item, d, b.view.shape()[d]);
  Dims shape = b.view.shape();
  shape[d] = positions.numel();
  Tensor v = value_for(value, shape);
  // index_put computes the updated region out of place; it is then written
  // back through the view.
  Tensor updated =
      run_op1(nullptr, "index_put", std::vector<Tensor>{b.view, positions, v}, {{"dim", d}});
  b.view.copy_from(updated);
}

}  // namespace

extern "C" {

samba_status samba_index_create(samba_index** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    *out = new samba_index();
  });
}

void samba_index_release(samba_index* idx) { delete idx; }

samba_status samba_index_add_int(samba_index* idx, int64_t i) {
  return add_item(__func__, idx, [&] {
    IndexItem it;
    it.kind = IndexItem::Int;
    it.value = i;
    return it;
  });
}

samba_status samba_index_add_slice(samba_index* idx, int64_t start, int64_t stop, int64_t step,
                                   uint32_t flags) {
  return add_item(__func__, idx, [&] {
    SAMBA_CHECK((flags & ~(SAMBA_SLICE_NO_START | SAMBA_SLICE_NO_STOP)) == 0,
                Status::InvalidArgument,
                "slice flags {:#x} hold unknown bits (expected SAMBA_SLICE_NO_START | "
                "SAMBA_SLICE_NO_STOP)",
                flags);
    SAMBA_CHECK(step != 0, Status::InvalidArgument, "slice step cannot be zero");
    SAMBA_CHECK(step > 0, Status::Unsupported,
                "slice step {} is negative; only steps >= 1 are supported", step);
    IndexItem it;
    it.kind = IndexItem::Slice;
    if (!(flags & SAMBA_SLICE_NO_START)) it.start = start;
    if (!(flags & SAMBA_SLICE_NO_STOP)) it.stop = stop;
    it.step = step;
    return it;
  });
}

samba_status samba_index_add_none(samba_index* idx) {
  return add_item(__func__, idx, [] { return IndexItem{}; });
}

samba_status samba_index_add_ellipsis(samba_index* idx) {
  return add_item(__func__, idx, [&] {
    for (const auto& it : idx->items)
      SAMBA_CHECK(it.kind != IndexItem::Ellipsis, Status::InvalidArgument,
                  "an index expression can hold only one ellipsis");
    IndexItem it;
    it.kind = IndexItem::Ellipsis;
    return it;
  });
}

samba_status samba_index_add_tensor(samba_index* idx, samba_tensor* index) {
  return add_item(__func__, idx, [&] {
    Tensor p = tensor_arg(index, "index");
    check_single_advanced(*idx, "a tensor");
    SAMBA_CHECK(
        p.dim() <= 1, Status::Unsupported,
        "index tensor of shape {} has {} dims; only 0-dim and 1-D index tensors are supported",
        dims_str(p.shape()), p.dim());
    SAMBA_CHECK(p.dim() == 1 || p.dtype() != DType::Bool, Status::Unsupported,
                "a 0-dim bool index tensor is not supported; use a 1-D mask");
    IndexItem it;
    it.kind = IndexItem::Positions;
    it.positions = p;
    return it;
  });
}

samba_status samba_index_add_list(samba_index* idx, const int64_t* values, size_t n) {
  return add_item(__func__, idx, [&] {
    if (n) require(values, "values");
    check_single_advanced(*idx, "a list");
    IndexItem it;
    it.kind = IndexItem::Positions;
    it.from_list = true;
    it.positions = Tensor::empty({static_cast<int64_t>(n)}, DType::Int64);
    std::copy(values, values + n, it.positions.data<int64_t>());
    return it;
  });
}

samba_status samba_tensor_index(samba_tensor* t, const samba_index* idx, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    Tensor x = tensor_arg(t, "t");
    require(idx, "idx");
    *out = to_handle(gather(x, apply_basic(x, *idx)));
  });
}

samba_status samba_tensor_index_put(samba_tensor* t, const samba_index* idx,
                                    const samba_tensor* value) {
  return SAMBA_GUARDED({
    Tensor x = tensor_arg(t, "t");
    require(idx, "idx");
    index_put(x, *idx, tensor_arg(value, "value"));
  });
}

samba_status samba_tensor_index_put_scalar(samba_tensor* t, const samba_index* idx, double value) {
  return SAMBA_GUARDED({
    Tensor x = tensor_arg(t, "t");
    require(idx, "idx");
    const DType dt = x.dtype();
    check_representable(value, dt, "index_put value");
    index_put(x, *idx, Tensor::scalar(value, dt));
  });
}

}  // extern "C"
