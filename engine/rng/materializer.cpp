#include "engine/rng/materializer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "engine/core/dispatch.h"
#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/rng/init_math.h"

namespace samba::rng {
namespace {

enum class ParamType { Number, Integer, String };

std::string_view param_type_name(ParamType t) {
  switch (t) {
    case ParamType::Number:
      return "a number";
    case ParamType::Integer:
      return "an integer";
    case ParamType::String:
      return "a string";
  }
  return "?";
}

struct ParamSpec {
  std::string_view name;
  ParamType type;
  AttrValue default_value;  // monostate: required, unless optional
  bool optional = false;    // may be absent and has no default
};

// A descriptor's parameters checked against its kind: every declared one
// present (given or defaulted) with its declared type, except absent
// optional ones.
class Params {
 public:
  void set(std::string_view name, AttrValue v) { values_.emplace_back(name, std::move(v)); }
  bool has(std::string_view name) const { return find(name) != nullptr; }
  double number(std::string_view name) const { return std::get<double>(*find(name)); }
  int64_t integer(std::string_view name) const { return std::get<int64_t>(*find(name)); }
  const std::string& string(std::string_view name) const {
    return std::get<std::string>(*find(name));
  }

 private:
  const AttrValue* find(std::string_view name) const {
    for (const auto& [n, v] : values_)
      if (n == name) return &v;
    return nullptr;
  }
  std::vector<std::pair<std::string_view, AttrValue>> values_;
};

// What a kind's check sees: the target and how to name it in messages.
struct Target {
  DType dtype;
  const Dims& shape;
  const std::string& what;  // "materializer 'kind' for tensor 'name'"
};

enum class Domain { Floating, AnyDtype };

struct KindSpec {
  std::string_view name;
  std::vector<ParamSpec> params;
  Domain domain;
  void (*check)(const Params&, const Target&);
  void (*fill)(const Params&, const Tensor&, const MultithreadedRng&);
};

// ---- checks -------------------------------------------------------------------------

void finite(const Params& p, const Target& t, std::string_view name) {
  const double v = p.number(name);
  SAMBA_CHECK(std::isfinite(v), Status::InvalidArgument,
              "{}: parameter '{}' must be finite, got {}", t.what, name, v);
}

void non_negative(const Params& p, const Target& t, std::string_view name) {
  finite(p, t, name);
  SAMBA_CHECK(p.number(name) >= 0.0, Status::InvalidArgument,
              "{}: parameter '{}' must be >= 0, got {}", t.what, name, p.number(name));
}

Fans fans_of(const Target& t) { return calculate_fans(t.shape, t.what); }

void check_rank(const Target& t, size_t min_rank, size_t max_rank, std::string_view expected) {
  SAMBA_CHECK(t.shape.size() >= min_rank && t.shape.size() <= max_rank, Status::InvalidArgument,
              "{}: tensor of shape {} is not {}", t.what, dims_str(t.shape), expected);
}

void check_kaiming(const Params& p, const Target& t) {
  finite(p, t, "a");
  const std::string& mode = p.string("mode");
  SAMBA_CHECK(mode == "fan_in" || mode == "fan_out", Status::InvalidArgument,
              "{}: parameter 'mode' must be 'fan_in' or 'fan_out', got '{}'", t.what, mode);
  try {
    calculate_gain(p.string("nonlinearity"), p.number("a"));
  } catch (const Error& e) {
    fail(Status::InvalidArgument, "{}: parameter 'nonlinearity': {}", t.what, e.what());
  }
  fans_of(t);
}

void check_constant(const Params& p, const Target& t) {
  const double v = p.number("val");
  if (is_floating(t.dtype)) return;
  SAMBA_CHECK(std::isfinite(v) && v == std::floor(v), Status::InvalidArgument,
              "{}: parameter 'val' {} is not an integer, as dtype {} needs", t.what, v,
              dtype_name(t.dtype));
  double lo = 0, hi = 1;
  switch (t.dtype) {
    case DType::UInt8:
      hi = 255;
      break;
    case DType::Int8:
      lo = -128, hi = 127;
      break;
    case DType::Int16:
      lo = -32768, hi = 32767;
      break;
    case DType::Int32:
      lo = -2147483648.0, hi = 2147483647.0;
      break;
    case DType::Int64:  // the doubles that convert to int64 without overflow
      lo = -9223372036854775808.0, hi = 9223372036854774784.0;
      break;
    default:  // bool
      break;
  }
  SAMBA_CHECK(v >= lo && v <= hi, Status::InvalidArgument,
              "{}: parameter 'val' {} does not fit dtype {} ({} to {})", t.what, v,
              dtype_name(t.dtype), lo, hi);
}

// ---- fills --------------------------------------------------------------------------

// Writes v into every element of out, on the rng's pool like the random fills.
void fill_value(const Tensor& out, double v, const MultithreadedRng& rng) {
  if (!out.is_contiguous()) {
    out.copy_from(Tensor::scalar(v, out.dtype()));
    return;
  }
  auto body = [&] {
    SAMBA_DISPATCH_ALL(out.dtype(), "materialize", [&] {
      const scalar_t x = convert_value<scalar_t>(v);
      scalar_t* p = out.data<scalar_t>();
      parallel_for(out.numel(), kMinGrain,
                   [&](int64_t b, int64_t e) { std::fill(p + b, p + e, x); });
    });
  };
  if (rng.options().threads == 0) {
    body();
  } else {
    ThreadPool::Scope scope(&pool_with_threads(rng.options().threads));
    body();
  }
}

double kaiming_std(const Params& p, const Dims& shape) {
  const Fans f = calculate_fans(shape);
  const auto fan = static_cast<double>(p.string("mode") == "fan_in" ? f.fan_in : f.fan_out);
  return calculate_gain(p.string("nonlinearity"), p.number("a")) / std::sqrt(fan);
}

double xavier_std(const Params& p, const Dims& shape) {
  const Fans f = calculate_fans(shape);
  return p.number("gain") * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
}

// Linear and conv biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), 0 when fan_in is 0.
void fill_bias(const Params& p, const Tensor& out, const MultithreadedRng& rng) {
  const int64_t fan_in = p.integer("fan_in");
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  rng.uniform(out, -bound, bound);
}

// The default weights of Linear and Conv: kaiming_uniform(a = sqrt 5), whose
// bound is gain sqrt(3 / fan_in) with gain = sqrt(2 / (1 + 5)).
void fill_layer_weight(const Params&, const Tensor& out, const MultithreadedRng& rng) {
  const double gain = calculate_gain("leaky_relu", std::sqrt(5.0));
  const double bound =
      gain * std::sqrt(3.0 / static_cast<double>(calculate_fans(out.shape()).fan_in));
  rng.uniform(out, -bound, bound);
}

void no_check(const Params&, const Target&) {}

const std::vector<KindSpec>& kinds() {
  using PT = ParamType;
  static const std::vector<KindSpec> table = {
      {"uniform",
       {{"a", PT::Number, 0.0}, {"b", PT::Number, 1.0}},
       Domain::Floating,
       [](const Params& p, const Target& t) {
         finite(p, t, "a");
         finite(p, t, "b");
         SAMBA_CHECK(p.number("a") <= p.number("b"), Status::InvalidArgument,
                     "{}: parameter 'a' {} must be <= 'b' {}", t.what, p.number("a"),
                     p.number("b"));
       },
       [](const Params& p, const Tensor& out, const MultithreadedRng& rng) {
         rng.uniform(out, p.number("a"), p.number("b"));
       }},
      {"normal",
       {{"mean", PT::Number, 0.0}, {"std", PT::Number, 1.0}},
       Domain::Floating,
       [](const Params& p, const Target& t) {
         finite(p, t, "mean");
         non_negative(p, t, "std");
       },
       [](const Params& p, const Tensor& out, const MultithreadedRng& rng) {
         rng.normal(out, p.number("mean"), p.number("std"));
       }},
      {"zeros",
       {},
       Domain::AnyDtype,
       no_check,
       [](const Params&, const Tensor& out, const MultithreadedRng& rng) {
         fill_value(out, 0.0, rng);
       }},
      {"ones",
       {},
       Domain::AnyDtype,
       no_check,
       [](const Params&, const Tensor& out, const MultithreadedRng& rng) {
         fill_value(out, 1.0, rng);
       }},
      {"constant",
       {{"val", PT::Number, {}}},
       Domain::AnyDtype,
       check_constant,
       [](const Params& p, const Tensor& out, const MultithreadedRng& rng) {
         fill_value(out, p.number("val"), rng);
       }},
      {"xavier_uniform",
       {{"gain", PT::Number, 1.0}},
       Domain::Floating,
       [](const Params& p, const Target& t) {
         non_negative(p, t, "gain");
         fans_of(t);
       },
       [](const Params& p, const Tensor& out, const MultithreadedRng& rng) {
         const double bound = std::sqrt(3.0) * xavier_std(p, out.shape());
         rng.uniform(out, -bound, bound);
       }},
      {"xavier_normal",
       {{"gain", PT::Number, 1.0}},
       Domain::Floating,
       [](const Params& p, const Target& t) {
         non_negative(p, t, "gain");
         fans_of(t);
       },
       [](const Params& p, const Tensor& out, const MultithreadedRng& rng) {
         rng.normal(out, 0.0, xavier_std(p, out.shape()));
       }},
      {"kaiming_uniform",
       {{"a", PT::Number, 0.0},
        {"mode", PT::String, std::string("fan_in")},
        {"nonlinearity", PT::String, std::string("leaky_relu")}},
       Domain::Floating,
       check_kaiming,
       [](const Params& p, const Tensor& out, const MultithreadedRng& rng) {
         const double bound = std::sqrt(3.0) * kaiming_std(p, out.shape());
         rng.uniform(out, -bound, bound);
       }},
      {"kaiming_normal",
       {{"a", PT::Number, 0.0},
        {"mode", PT::String, std::string("fan_in")},
        {"nonlinearity", PT::String, std::string("leaky_relu")}},
       Domain::Floating,
       check_kaiming,
       [](const Params& p, const Tensor& out, const MultithreadedRng& rng) {
         rng.normal(out, 0.0, kaiming_std(p, out.shape()));
       }},
      {"trunc_normal",
       {{"mean", PT::Number, 0.0},
        {"std", PT::Number, 1.0},
        {"a", PT::Number, -2.0},
        {"b", PT::Number, 2.0}},
       Domain::Floating,
       [](const Params& p, const Target& t) {
         finite(p, t, "mean");
         non_negative(p, t, "std");
         const double a = p.number("a"), b = p.number("b");
         SAMBA_CHECK(!std::isnan(a) && !std::isnan(b) && a <= b && a < INFINITY && b > -INFINITY,
                     Status::InvalidArgument,
                     "{}: bounds 'a' {} and 'b' {} must satisfy a <= b and hold a finite value",
                     t.what, a, b);
       },
       [](const Params& p, const Tensor& out, const MultithreadedRng& rng) {
         rng.trunc_normal(out, {p.number("mean"), p.number("std"), p.number("a"), p.number("b")});
       }},
      {"linear_weight",
       {},
       Domain::Floating,
       [](const Params&, const Target& t) {
         check_rank(t, 2, 2, "a linear weight (out_features, in_features)");
       },
       fill_layer_weight},
      {"linear_bias",
       {{"fan_in", PT::Integer, {}}},
       Domain::Floating,
       [](const Params& p, const Target& t) {
         SAMBA_CHECK(p.integer("fan_in") >= 0, Status::InvalidArgument,
                     "{}: parameter 'fan_in' must be >= 0, got {}", t.what, p.integer("fan_in"));
       },
       fill_bias},
      {"conv_weight",
       {},
       Domain::Floating,
       [](const Params&, const Target& t) {
         check_rank(t, 3, kMaxRank,
                    "a convolution weight (out_channels, in_channels / groups, kernel...)");
       },
       fill_layer_weight},
      {"conv_bias",
       {{"fan_in", PT::Integer, {}}},
       Domain::Floating,
       [](const Params& p, const Target& t) {
         SAMBA_CHECK(p.integer("fan_in") >= 0, Status::InvalidArgument,
                     "{}: parameter 'fan_in' must be >= 0, got {}", t.what, p.integer("fan_in"));
       },
       fill_bias},
      {"embedding",
       {{"padding_idx", PT::Integer, {}, true}},
       Domain::Floating,
       [](const Params& p, const Target& t) {
         check_rank(t, 2, 2, "an embedding table (num_embeddings, embedding_dim)");
         if (!p.has("padding_idx")) return;
         const int64_t rows = t.shape[0], i = p.integer("padding_idx");
         SAMBA_CHECK(i >= -rows && i < rows, Status::InvalidArgument,
                     "{}: parameter 'padding_idx' {} is outside [-{}, {})", t.what, i, rows, rows);
       },
       [](const Params& p, const Tensor& out, const MultithreadedRng& rng) {
         rng.normal(out, 0.0, 1.0);
         if (!p.has("padding_idx")) return;
         int64_t row = p.integer("padding_idx");
         if (row < 0) row += out.shape()[0];
         const Tensor r = out.as_strided({out.shape()[1]}, {out.strides()[1]},
                                         out.offset() + row * out.strides()[0]);
         r.copy_from(Tensor::scalar(0.0, out.dtype()));
       }},
      {"norm_weight",
       {},
       Domain::AnyDtype,
       no_check,
       [](const Params&, const Tensor& out, const MultithreadedRng& rng) {
         fill_value(out, 1.0, rng);
       }},
      {"norm_bias",
       {},
       Domain::AnyDtype,
       no_check,
       [](const Params&, const Tensor& out, const MultithreadedRng& rng) {
         fill_value(out, 0.0, rng);
       }},
  };
  return table;
}

std::string kind_list() {
  std::string s;
  for (const auto& k : kinds()) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

std::string param_list(const KindSpec& k) {
  if (k.params.empty()) return "no parameters";
  std::string names;
  for (const auto& p : k.params) names += (names.empty() ? "" : ", ") + std::string(p.name);
  return "parameters " + names;
}

// The given value as the declared type: numbers from int or float
// attributes, integers from int attributes or integral floats.
std::optional<AttrValue> coerce(const AttrValue& v, ParamType t) {
  switch (t) {
    case ParamType::Number:
      if (auto* d = std::get_if<double>(&v)) return *d;
      if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
      return std::nullopt;
    case ParamType::Integer:
      if (auto* i = std::get_if<int64_t>(&v)) return *i;
      if (auto* d = std::get_if<double>(&v);
          d && std::isfinite(*d) && *d == std::floor(*d) && std::abs(*d) < 0x1.0p62)
        return static_cast<int64_t>(*d);
      return std::nullopt;
    case ParamType::String:
      if (std::holds_alternative<std::string>(v)) return v;
      return std::nullopt;
  }
  return std::nullopt;
}

struct Resolved {
  const KindSpec* kind;
  Params params;
};

Resolved resolve(const MaterializerDesc& desc, DType dtype, const Dims& shape,
                 std::string_view tensor_name) {
  const std::string what = tensor_name.empty() ? fmt::format("materializer '{}'", desc.kind)
                                               : fmt::format("materializer '{}' for tensor '{}'",
                                                             desc.kind, tensor_name);
  const KindSpec* kind = nullptr;
  for (const auto& k : kinds())
    if (k.name == desc.kind) kind = &k;
  SAMBA_CHECK(kind, Status::NotFound,
              "unknown materializer kind '{}' (tensor '{}'); the built-in kinds are {}", desc.kind,
              tensor_name, kind_list());

  const auto& given = desc.params.items();
  for (size_t i = 0; i < given.size(); ++i) {
    // Not a structured binding: clang before 16 cannot capture one in a lambda.
    const std::string& name = given[i].first;
    const auto spec = std::find_if(kind->params.begin(), kind->params.end(),
                                   [&](const ParamSpec& p) { return p.name == name; });
    SAMBA_CHECK(spec != kind->params.end(), Status::InvalidArgument,
                "{}: unknown parameter '{}'; {} takes {}", what, name, desc.kind,
                param_list(*kind));
    for (size_t j = 0; j < i; ++j)
      SAMBA_CHECK(given[j].first != name, Status::InvalidArgument,
                  "{}: parameter '{}' is given twice", what, name);
  }
  Resolved r{kind, {}};
  for (const ParamSpec& spec : kind->params) {
    const AttrValue* v = desc.params.find(spec.name);
    if (!v || std::holds_alternative<std::monostate>(*v)) {
      if (spec.optional) continue;
      SAMBA_CHECK(!std::holds_alternative<std::monostate>(spec.default_value),
                  Status::InvalidArgument, "{}: missing parameter '{}' ({})", what, spec.name,
                  param_type_name(spec.type));
      r.params.set(spec.name, spec.default_value);
      continue;
    }
    auto c = coerce(*v, spec.type);
    SAMBA_CHECK(c.has_value(), Status::InvalidArgument, "{}: parameter '{}' must be {}, got {}",
                what, spec.name, param_type_name(spec.type), attr_value_str(*v));
    r.params.set(spec.name, std::move(*c));
  }

  check_shape(shape);
  SAMBA_CHECK(kind->domain == Domain::AnyDtype || is_floating(dtype), Status::DTypeMismatch,
              "{}: cannot fill dtype {}; it needs a floating dtype", what, dtype_name(dtype));
  kind->check(r.params, Target{dtype, shape, what});
  return r;
}

}  // namespace

MultithreadedRng materializer_rng(const MaterializeOptions& o) {
  return MultithreadedRng(o.seed, o.sn_name,
                          RngOptions{o.init_threads,
                                     o.inverse_transform_sampling ? NormalMethod::InverseTransform
                                                                  : NormalMethod::BoxMuller,
                                     o.fp32_to_bf16_rounding});
}

void check_materializer(const MaterializerDesc& desc, DType dtype, const Dims& shape,
                        std::string_view tensor_name) {
  resolve(desc, dtype, shape, tensor_name);
}

namespace {
// The options with the stream named after the tensor when no name is given.
MaterializeOptions named(const MaterializeOptions& o, const Tensor& out) {
  MaterializeOptions n = o;
  if (n.sn_name.empty()) n.sn_name = out.name();
  return n;
}
}  // namespace

void materialize(const MaterializerDesc& desc, const Tensor& out,
                 const MaterializeOptions& o) {
  SAMBA_CHECK(out.defined(), Status::NullPointer, "materializer '{}': the tensor is undefined",
              desc.kind);
  const MaterializeOptions opts = named(o, out);
  const Resolved r = resolve(desc, out.dtype(), out.shape(), opts.sn_name);
  SAMBA_CHECK(out.has_data(), Status::InvalidState,
              "materializer '{}' for tensor '{}': the tensor has no storage to fill", desc.kind,
              opts.sn_name);
  const MultithreadedRng rng = materializer_rng(opts);
  if (out.numel() == 0) return;
  r.kind->fill(r.params, out, rng);
}

void materialize(const MaterializerFn& fn, const Tensor& out, const MaterializeOptions& o) {
  SAMBA_CHECK(out.defined(), Status::NullPointer, "custom materializer: the tensor is undefined");
  const MaterializeOptions opts = named(o, out);
  SAMBA_CHECK(static_cast<bool>(fn), Status::NullPointer,
              "custom materializer for tensor '{}' is empty", opts.sn_name);
  SAMBA_CHECK(out.has_data(), Status::InvalidState,
              "custom materializer for tensor '{}': the tensor has no storage to fill",
              opts.sn_name);
  fn(out, materializer_rng(opts));
}

std::vector<std::string_view> materializer_kinds() {
  std::vector<std::string_view> names;
  for (const auto& k : kinds()) names.push_back(k.name);
  return names;
}

}  // namespace samba::rng
