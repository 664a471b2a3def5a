// Creation ops: tensors made from attributes alone (constants, ranges, the
// identity, and Philox random values).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "engine/ops/operands.h"
#include "engine/rng/multithreaded_rng.h"

namespace samba::ops {
namespace {

Dims shape_attr(const Attrs& a) {
  const auto& s = a.ints("shape");
  return Dims(s.begin(), s.end());
}

// Writes `v` into every element of the contiguous `out`.
void fill(const Tensor& out, double v) {
  const int64_t n = out.numel();
  if (v == 0.0 && !std::signbit(v)) {
    char* p = static_cast<char*>(out.raw_data());
    const size_t bytes = out.nbytes();
    parallel_for(static_cast<int64_t>(bytes), kMinGrain * 8,
                 [&](int64_t b, int64_t e) { std::memset(p + b, 0, static_cast<size_t>(e - b)); });
    return;
  }
  SAMBA_DISPATCH_ALL(out.dtype(), "fill", [&] {
    const scalar_t x = convert_value<scalar_t>(v);
    scalar_t* p = out.data<scalar_t>();
    parallel_for(n, kMinGrain, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, x); });
  });
}

std::vector<TensorMeta> shaped_meta(const InferContext& c) {
  return {{c.attrs.dtype("dtype"), shape_attr(c.attrs)}};
}

void register_constants(OpRegistry& r) {
  r.def("zeros")
      .doc("A tensor of `shape` filled with 0.")
      .required_attr("shape", AttrType::Ints)
      .attr("dtype", AttrType::DType, DType::Float32)
      .fusion(Fusion::Creation)
      .infer(shaped_meta)
      .kernel([](KernelContext& c) { fill(c.outputs[0], 0.0); });

  r.def("ones")
      .doc("A tensor of `shape` filled with 1.")
      .required_attr("shape", AttrType::Ints)
      .attr("dtype", AttrType::DType, DType::Float32)
      .fusion(Fusion::Creation)
      .infer(shaped_meta)
      .kernel([](KernelContext& c) { fill(c.outputs[0], 1.0); });

  r.def("empty")
      .doc("A tensor of `shape` whose values are unspecified.")
      .required_attr("shape", AttrType::Ints)
      .attr("dtype", AttrType::DType, DType::Float32)
      .fusion(Fusion::Creation)
      .infer(shaped_meta)
      .kernel([](KernelContext&) {});

  r.def("full")
      .doc("A tensor of `shape` filled with `value` (converted to dtype).")
      .required_attr("shape", AttrType::Ints)
      .required_attr("value", AttrType::Float)
      .attr("dtype", AttrType::DType, DType::Float32)
      .fusion(Fusion::Creation)
      .infer(shaped_meta)
      .kernel([](KernelContext& c) { fill(c.outputs[0], c.attrs.f("value")); });

  // The *_like forms take their shape from a tensor, so a traced model's
  // symbolic batch size carries through; x's values are never read.
  struct Like {
    const char* name;
    const char* doc;
    std::optional<double> value;  // none: the `value` attribute
  };
  for (const Like& like :
       {Like{"zeros_like", "Zeros of x's shape, in x's dtype unless `dtype` is given.", 0.0},
        Like{"ones_like", "Ones of x's shape, in x's dtype unless `dtype` is given.", 1.0},
        Like{"full_like",
             "`value` in every element of x's shape, in x's dtype unless `dtype` is given.",
             std::nullopt}}) {
    OpBuilder b = r.def(like.name);
    b.doc(like.doc).input("x", "gives the shape (and the dtype when `dtype` is absent)");
    if (!like.value) b.required_attr("value", AttrType::Float, "converted to the dtype");
    b.optional_attr("dtype", AttrType::DType)
        .fusion(Fusion::Creation)
        .strided_inputs()  // only x's shape is read
        .infer([](const InferContext& c) -> std::vector<TensorMeta> {
          const Tensor& x = c.inputs[0];
          return {{c.attrs.has("dtype") ? c.attrs.dtype("dtype") : x.dtype(), x.shape()}};
        })
        .kernel([v = like.value](KernelContext& c) {
          fill(c.outputs[0], v ? *v : c.attrs.f("value"));
        });
  }
}

// ---- ranges -------------------------------------------------------------------------

bool integral_valued(double v) { return std::isfinite(v) && v == std::floor(v); }

int64_t arange_length(const Attrs& a) {
  const double start = a.f("start"), end = a.f("end"), step = a.f("step");
  SAMBA_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
              Status::InvalidArgument, "arange: start {}, end {} and step {} must be finite", start,
              end, step);
  SAMBA_CHECK(step != 0.0, Status::InvalidArgument, "arange: step must be non-zero");
  SAMBA_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), Status::InvalidArgument,
              "arange: end {} cannot be reached from start {} with step {}", end, start, step);
  const double n = std::ceil((end - start) / step);
  SAMBA_CHECK(n < 9.0e15, Status::OutOfRange, "arange: {} elements are too many", n);
  return static_cast<int64_t>(n);
}

DType arange_dtype(const Attrs& a) {
  if (a.has("dtype")) return a.dtype("dtype");
  const bool ints =
      integral_valued(a.f("start")) && integral_valued(a.f("end")) && integral_valued(a.f("step"));
  return ints ? DType::Int64 : DType::Float32;
}

void register_ranges(OpRegistry& r) {
  r.def("arange")
      .doc(
          "start, start+step, ... up to end (excluded); int64 when start, end and step are all "
          "integer-valued, else float32, unless dtype is given.")
      .required_attr("end", AttrType::Float)
      .attr("start", AttrType::Float, 0.0)
      .attr("step", AttrType::Float, 1.0)
      .optional_attr("dtype", AttrType::DType)
      .fusion(Fusion::Creation)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{arange_dtype(c.attrs), {arange_length(c.attrs)}}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        const double start = c.attrs.f("start"), step = c.attrs.f("step");
        SAMBA_DISPATCH_NUMERIC(out.dtype(), "arange", [&] {
          scalar_t* p = out.data<scalar_t>();
          parallel_for(out.numel(), kMinGrain, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i)
              p[i] = convert_value<scalar_t>(start + static_cast<double>(i) * step);
          });
        });
      });

  r.def("eye")
      .doc("An n x m matrix (m defaults to n) with ones on the diagonal.")
      .required_attr("n", AttrType::Int)
      .optional_attr("m", AttrType::Int)
      .attr("dtype", AttrType::DType, DType::Float32)
      .fusion(Fusion::Creation)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const int64_t n = c.attrs.i("n"), m = c.attrs.has("m") ? c.attrs.i("m") : n;
        SAMBA_CHECK(n >= 0 && m >= 0, Status::InvalidArgument, "eye: n {} and m {} must be >= 0", n,
                    m);
        return {{c.attrs.dtype("dtype"), {n, m}}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        fill(out, 0.0);
        const int64_t n = out.shape()[0], m = out.shape()[1];
        SAMBA_DISPATCH_ALL(out.dtype(), "eye", [&] {
          scalar_t* p = out.data<scalar_t>();
          for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = convert_value<scalar_t>(1.0);
        });
      });
}

// ---- random -----------------------------------------------------------------------------

// Stream `offset` under key `seed`, filled on the current pool.
rng::MultithreadedRng generator(const Attrs& a) {
  return rng::MultithreadedRng(
      rng::Philox{static_cast<uint64_t>(a.i("seed")), static_cast<uint64_t>(a.i("offset"))});
}

void check_float_dtype(DType dt, const char* what) {
  SAMBA_CHECK(is_floating(dt), Status::DTypeMismatch, "{}: dtype must be floating point, got {}",
              what, dtype_name(dt));
}

// Uniform [0, 1). bfloat16 and float16 take the top 8 / 11 bits of each
// element's word, a uniform grid that rounding to the type cannot push to 1.
void uniform_fill(const Tensor& out, const rng::MultithreadedRng& g) {
  if (!is_reduced_float(out.dtype())) {
    g.uniform(out, 0.0, 1.0);
    return;
  }
  const int bits = out.dtype() == DType::BFloat16 ? 8 : 11;
  const float step = 1.0f / static_cast<float>(1u << bits);
  SAMBA_DISPATCH_FLOAT(out.dtype(), "rand", [&] {
    scalar_t* p = out.data<scalar_t>();
    parallel_for(out.numel(), kMinGrain, [&](int64_t b, int64_t e) {
      uint32_t words[1024];
      for (int64_t i = b; i < e; i += 1024) {
        const int64_t n = std::min<int64_t>(1024, e - i);
        rng::generate_words(g.stream(), static_cast<uint64_t>(i), n, words);
        for (int64_t j = 0; j < n; ++j)
          p[i + j] = scalar_t(static_cast<float>(words[j] >> (32 - bits)) * step);
      }
    });
  });
}

// The range of integer values a dtype holds exactly.
std::pair<double, double> integer_limits(DType dt) {
  switch (dt) {
    case DType::UInt8:
      return {0, 255};
    case DType::Int8:
      return {-128, 127};
    case DType::Int16:
      return {-32768, 32767};
    case DType::Int32:
      return {-2147483648.0, 2147483647.0};
    case DType::BFloat16:
      return {-256, 256};
    case DType::Float16:
      return {-2048, 2048};
    case DType::Float32:
      return {-16777216.0, 16777216.0};
    default:
      return {-9.3e18, 9.3e18};
  }
}

OpBuilder random_attrs(OpBuilder b, DType dtype) {
  return b.required_attr("shape", AttrType::Ints)
      .attr("dtype", AttrType::DType, dtype)
      .attr("seed", AttrType::Int, int64_t{0}, "Philox key")
      .attr("offset", AttrType::Int, int64_t{0}, "Philox stream: another offset, other values")
      .fusion(Fusion::Creation)
      .seeded();
}

void register_random(OpRegistry& r) {
  random_attrs(r.def("rand"), DType::Float32)
      .doc("Uniform values in [0, 1) from Philox (seed, offset); element i depends only on i.")
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        check_float_dtype(c.attrs.dtype("dtype"), "rand");
        return shaped_meta(c);
      })
      .kernel([](KernelContext& c) { uniform_fill(c.outputs[0], generator(c.attrs)); });

  random_attrs(r.def("randn"), DType::Float32)
      .doc("Standard normal values from Philox (seed, offset) by Box-Muller.")
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        check_float_dtype(c.attrs.dtype("dtype"), "randn");
        return shaped_meta(c);
      })
      .kernel([](KernelContext& c) { generator(c.attrs).normal(c.outputs[0], 0.0, 1.0); });

  random_attrs(r.def("normal"), DType::Float32)
      .doc("Normal values of mean `mean` and standard deviation `std` from Philox (seed, offset).")
      .attr("mean", AttrType::Float, 0.0)
      .attr("std", AttrType::Float, 1.0, ">= 0")
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        check_float_dtype(c.attrs.dtype("dtype"), "normal");
        SAMBA_CHECK(c.attrs.f("std") >= 0.0, Status::InvalidArgument,
                    "normal: std must be >= 0, got {}", c.attrs.f("std"));
        return shaped_meta(c);
      })
      .kernel([](KernelContext& c) {
        generator(c.attrs).normal(c.outputs[0], c.attrs.f("mean"), c.attrs.f("std"));
      });

  random_attrs(r.def("randint"), DType::Int64)
      .doc("Uniform integers in [low, high) from Philox (seed, offset).")
      .attr("low", AttrType::Int, int64_t{0})
      .required_attr("high", AttrType::Int, "one past the largest value")
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const int64_t low = c.attrs.i("low"), high = c.attrs.i("high");
        const DType dt = c.attrs.dtype("dtype");
        SAMBA_CHECK(dt != DType::Bool, Status::DTypeMismatch,
                    "randint: dtype bool is not supported");
        SAMBA_CHECK(low < high, Status::InvalidArgument, "randint: low {} must be below high {}",
                    low, high);
        auto [lo, hi] = integer_limits(dt);
        SAMBA_CHECK(static_cast<double>(low) >= lo && static_cast<double>(high - 1) <= hi,
                    Status::OutOfRange, "randint: [{}, {}) does not fit in {} (values {} to {})",
                    low, high, dtype_name(dt), lo, hi);
        return shaped_meta(c);
      })
      .kernel([](KernelContext& c) {
        generator(c.attrs).integers(c.outputs[0], c.attrs.i("low"), c.attrs.i("high"));
      });
}

}  // namespace

void register_creation(OpRegistry& r) {
  register_constants(r);
  register_ranges(r);
  register_random(r);
}

}  // namespace samba::ops
