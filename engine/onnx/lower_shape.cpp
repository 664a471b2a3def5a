// Lowerings of ONNX shape, constant and data-movement ops to registry ops.
#include <algorithm>
#include <limits>

#include "engine/onnx/lowerings.h"
#include "engine/ops/registry.h"

namespace samba::onnx_import::lower {
Tensor int64_vector(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::Int64);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

namespace {

// Clamps a Slice bound into [0, size] as numpy does (negative counts from the end).
int64_t slice_bound(int64_t v, int64_t size) {
  if (v < 0) v += size;
  return std::clamp<int64_t>(v, 0, size);
}

}  // namespace

int64_t axis_in(const NodeContext& c, int64_t axis, int64_t rank, std::string_view what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    c.invalid("{} {} is out of range for a tensor of rank {}", what, axis, rank);
  return axis < 0 ? axis + rank : axis;
}

Out identity(const NodeContext& c) { return {c.input(0)}; }

Out constant(const NodeContext& c) {
  if (const Tensor* t = c.attr_tensor("value")) return {*t};
  if (c.node().attrs.has("value_float"))
    return {Tensor::scalar(c.attr_float("value_float", 0), DType::Float32)};
  if (c.node().attrs.has("value_int"))
    return {Tensor::scalar(static_cast<double>(c.attr_int("value_int", 0)), DType::Int64)};
  if (auto ints = c.attr_ints("value_ints")) return {int64_vector(*ints)};
  if (const AttrValue* fs = c.node().attrs.find("value_floats");
      fs && c.node().attrs.has("value_floats")) {
    const auto& v = std::get<std::vector<double>>(*fs);
    Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::Float32);
    std::transform(v.begin(), v.end(), t.data<float>(),
                   [](double d) { return static_cast<float>(d); });
    return {t};
  }
  c.unsupported(
      "no value attribute; supported: value, value_float(s), value_int(s) (no sparse_value or "
      "string)");
}

Out constant_of_shape(const NodeContext& c) {
  const std::vector<int64_t> shape = c.constant_ints(0, "shape");
  double value = 0;
  DType dtype = DType::Float32;
  if (const Tensor* v = c.attr_tensor("value")) {
    if (v->numel() != 1)
      c.invalid("'value' must hold one element, got shape {}", dims_str(v->shape()));
    value = v->item_double();
    dtype = v->dtype();
  }
  return {call1("full", {}, {{"shape", Dims(shape)}, {"value", value}, {"dtype", dtype}})};
}

Out shape(const NodeContext& c) {
  const Dims& s = c.input(0).shape();
  const auto rank = static_cast<int64_t>(s.size());
  const int64_t start = slice_bound(c.attr_int("start", 0), rank);
  const int64_t end = slice_bound(c.attr_int("end", rank), rank);
  return {int64_vector(std::vector<int64_t>(s.begin() + start, s.begin() + std::max(start, end)))};
}

Out cast(const NodeContext& c) {
  const int64_t to = c.attr_int("to", 0);
  const DType dt = dtype_of_onnx(static_cast<int32_t>(to), c.where() + " attribute 'to'");
  return {call1("cast", {c.input(0)}, {{"dtype", dt}})};
}

Out reshape(const NodeContext& c) {
  const Tensor& x = c.input(0);
  std::vector<int64_t> shape = c.constant_ints(1, "shape");
  const bool allow_zero = c.attr_int("allowzero", 0) != 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allow_zero) {
      if (static_cast<int64_t>(i) >= x.dim())
        c.invalid("shape[{}] = 0 copies a dim the input of rank {} lacks", i, x.dim());
      shape[i] = x.size(static_cast<int64_t>(i));
    }
  }
  return {call1("reshape", {x}, {{"shape", Dims(shape)}})};
}

Out flatten(const NodeContext& c) {
  const Tensor& x = c.input(0);
  // The axis may be the rank itself (everything in the outer dim); a
  // negative one counts from the rank, not from rank + 1.
  int64_t axis = c.attr_int("axis", 1);
  if (axis < -x.dim() || axis > x.dim())
    c.invalid("axis {} is out of range [-{}, {}] for a tensor of rank {}", axis, x.dim(), x.dim(),
              x.dim());
  if (axis < 0) axis += x.dim();
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.size(d);
  return {call1("reshape", {x}, {{"shape", Dims{outer, -1}}})};
}

Out transpose(const NodeContext& c) {
  const Tensor& x = c.input(0);
  std::vector<int64_t> perm = c.attr_ints("perm").value_or(std::vector<int64_t>());
  if (perm.empty())
    for (int64_t d = x.dim() - 1; d >= 0; --d) perm.push_back(d);
  return {call1("permute", {x}, {{"dims", perm}})};
}

Out concat(const NodeContext& c) {
  std::vector<Tensor> parts;
  for (size_t i = 0; i < c.input_count(); ++i) parts.push_back(c.input(i));
  const int64_t axis = axis_in(c, c.attr_int("axis", 0), parts.at(0).dim(), "axis");
  return call("cat", parts, {{"dim", axis}});
}

Out gather(const NodeContext& c) {
  const Tensor& data = c.input(0);
  Tensor indices = c.input(1);
  const int64_t axis = axis_in(c, c.attr_int("axis", 0), data.dim(), "axis");
  // ONNX counts negative indices from the end; known ones are wrapped here.
  if (indices.has_data() && !indices.is_symbolic()) {
    Tensor wrapped = indices.to(DType::Int64);
    int64_t* p = wrapped.data<int64_t>();
    for (int64_t i = 0; i < wrapped.numel(); ++i)
      if (p[i] < 0) p[i] += data.size(axis);
    indices = wrapped;
  }
  // The embedding layout (a table looked up by rows) has its own op and gradient.
  if (axis == 0 && data.dim() == 2 && indices.dim() >= 1)
    return {call1("embedding", {data, indices})};
  Dims out_shape(data.shape().begin(), data.shape().begin() + axis);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), data.shape().begin() + axis + 1, data.shape().end());
  Tensor flat = call1("reshape", {indices}, {{"shape", Dims{-1}}});
  Tensor picked = call1("index_select", {data, flat}, {{"dim", axis}});
  return {call1("reshape", {picked}, {{"shape", out_shape}})};
}

Out slice(const NodeContext& c) {
  Tensor x = c.input(0);
  const std::vector<int64_t> starts = c.constant_ints(1, "starts");
  const std::vector<int64_t> ends = c.constant_ints(2, "ends");
  std::vector<int64_t> axes;
  if (c.optional_input(3))
    axes = c.constant_ints(3, "axes");
  else
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> steps(starts.size(), 1);
  if (c.optional_input(4)) steps = c.constant_ints(4, "steps");
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.invalid("starts, ends, axes and steps must have one value per sliced axis ({}, {}, {}, {})",
              starts.size(), ends.size(), axes.size(), steps.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t axis = axis_in(c, axes[i], x.dim(), "axes");
    if (steps[i] == 0) c.invalid("step 0 on axis {}; steps must not be 0", axis);
    const int64_t size = x.size(axis);
    if (steps[i] < 0) {
      // Backwards: the registry's slice steps forwards, so the elements are
      // picked by index, start clamped into [0, size - 1], end into [-1, size - 1].
      int64_t start = starts[i] < 0 ? starts[i] + size : starts[i];
      int64_t end = ends[i] < 0 ? ends[i] + size : ends[i];
      start = std::clamp<int64_t>(start, -1, size - 1);
      end = std::clamp<int64_t>(end, -1, size - 1);
      std::vector<int64_t> picked;
      for (int64_t j = start; j > end; j += steps[i]) picked.push_back(j);
      x = call1("index_select", {x, int64_vector(picked)}, {{"dim", axis}});
      continue;
    }
    const int64_t start = slice_bound(starts[i], size);
    const int64_t end = std::max(start, slice_bound(ends[i], size));
    if (start == 0 && end == size && steps[i] == 1) continue;
    x = call1("slice", {x}, {{"dim", axis}, {"start", start}, {"end", end}, {"step", steps[i]}});
  }
  return {x};
}

Out squeeze(const NodeContext& c) {
  const Tensor& x = c.input(0);
  if (!c.optional_input(1)) return {call1("squeeze", {x})};
  std::vector<int64_t> axes = c.constant_ints(1, "axes");
  for (int64_t& a : axes) {
    a = axis_in(c, a, x.dim(), "axes");
    if (x.size(a) != 1)
      c.invalid("axis {} has size {}; only dims of size 1 can be squeezed", a, x.size(a));
  }
  return {call1("squeeze", {x}, {{"dim", axes}})};
}

Out unsqueeze(const NodeContext& c) {
  Tensor x = c.input(0);
  std::vector<int64_t> axes = c.constant_ints(1, "axes");
  const int64_t out_rank = x.dim() + static_cast<int64_t>(axes.size());
  for (int64_t& a : axes) a = axis_in(c, a, out_rank, "axes");
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.invalid("axes repeat a dim");
  // Ascending positions of the output: each insert leaves the later ones valid.
  for (int64_t a : axes) x = call1("unsqueeze", {x}, {{"dim", a}});
  return {x};
}

Out expand(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const std::vector<int64_t> shape = c.constant_ints(1, "shape");
  // Bidirectional broadcast: the result has the larger rank and, per dim, the larger size.
  const size_t rank = std::max(shape.size(), x.shape().size());
  Dims out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t a = i + x.shape().size() >= rank ? x.shape()[i + x.shape().size() - rank] : 1;
    const int64_t b = i + shape.size() >= rank ? shape[i + shape.size() - rank] : 1;
    if (a != b && a != 1 && b != 1)
      c.invalid("shape {} does not broadcast with the input's {}", fmt::join(shape, ","),
                dims_str(x.shape()));
    out[i] = a == 1 ? b : a;
  }
  return {call1("expand", {x}, {{"shape", out}})};
}

Out split(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = axis_in(c, c.attr_int("axis", 0), x.dim(), "axis");
  std::vector<int64_t> sizes;
  if (c.optional_input(1)) {
    sizes = c.constant_ints(1, "split");
  } else {
    const auto parts = static_cast<int64_t>(c.node().outputs.size());
    if (parts == 0 || x.size(axis) % parts != 0)
      c.invalid("dim {} of size {} does not split into {} equal parts", axis, x.size(axis), parts);
    sizes.assign(static_cast<size_t>(parts), x.size(axis) / parts);
  }
  return call("split", std::initializer_list<Tensor>{x}, {{"sections", sizes}, {"dim", axis}});
}

Out pad(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const std::vector<int64_t> pads = c.constant_ints(1, "pads");
  if (c.optional_input(3))
    c.unsupported("the 'axes' input is not supported; supported: pads for every axis");
  if (pads.size() != 2 * static_cast<size_t>(x.dim()))
    c.invalid("'pads' has {} values; a tensor of rank {} needs {}", pads.size(), x.dim(),
              2 * x.dim());
  const std::string mode = c.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    c.unsupported("mode '{}'; supported: constant, reflect, edge", mode);
  double value = 0;
  if (const Tensor* v = c.optional_input(2)) {
    if (!v->has_data() || v->is_symbolic()) c.unsupported("constant_value must be known at import");
    value = v->item_double();
  }
  // ONNX lists all begins then all ends, first dim first; the registry takes
  // (before, after) pairs, last dim first.
  std::vector<int64_t> pairs;
  for (int64_t d = x.dim() - 1; d >= 0; --d) {
    pairs.push_back(pads[static_cast<size_t>(d)]);
    pairs.push_back(pads[static_cast<size_t>(d + x.dim())]);
  }
  return {call1("pad", {x},
                {{"pad", pairs},
                 {"mode", mode == "edge" ? std::string("replicate") : mode},
                 {"value", value}})};
}

Out where(const NodeContext& c) { return {call1("where", {c.input(0), c.input(1), c.input(2)})}; }

}  // namespace samba::onnx_import::lower
