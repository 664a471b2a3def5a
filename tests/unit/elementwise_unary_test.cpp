// Unary elementwise ops: values against double references for every float
// dtype, integer inputs, layouts and long tensors; special values; gradients
// (including the fused backward ops); clamp, logical/bitwise not, cast; errors.
#include <cmath>
#include <limits>

#include "elementwise_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  const char* op;
  std::function<double(double)> ref;
  double lo, hi;  // input range where the function is smooth
  Attrs attrs;
  bool float_only;  // integer inputs give float32
};

const UnaryCase kCases[] = {
    {"neg", [](double x) { return -x; }, -3, 3, {}, false},
    {"abs", [](double x) { return std::abs(x); }, -3, 3, {}, false},
    {"relu", [](double x) { return x > 0 ? x : 0; }, -3, 3, {}, false},
    {"exp", [](double x) { return std::exp(x); }, -5, 5, {}, true},
    {"log", [](double x) { return std::log(x); }, 0.1, 10, {}, true},
    {"sqrt", [](double x) { return std::sqrt(x); }, 0.1, 10, {}, true},
    {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, 0.1, 10, {}, true},
    {"reciprocal", [](double x) { return 1 / x; }, 0.2, 5, {}, true},
    {"sin", [](double x) { return std::sin(x); }, -6, 6, {}, true},
    {"cos", [](double x) { return std::cos(x); }, -6, 6, {}, true},
    {"tanh", [](double x) { return std::tanh(x); }, -4, 4, {}, true},
    {"sigmoid", sigmoid, -6, 6, {}, true},
    {"gelu", gelu, -4, 4, {}, true},
    {"gelu", gelu_tanh, -4, 4, {{"approximate", "tanh"}}, true},
    {"silu", [](double x) { return x * sigmoid(x); }, -6, 6, {}, true},
    {"leaky_relu", [](double x) { return x > 0 ? x : 0.01 * x; }, -3, 3, {}, true},
    {"leaky_relu",
     [](double x) { return x > 0 ? x : 0.2 * x; },
     -3,
     3,
     {{"negative_slope", 0.2}},
     true},
    {"erf", [](double x) { return std::erf(x); }, -3, 3, {}, true},
    {"clamp",
     [](double x) { return std::min(std::max(x, -0.5), 1.0); },
     -2,
     2,
     {{"min", -0.5}, {"max", 1.0}},
     false},
    {"clamp", [](double x) { return std::max(x, 0.25); }, -2, 2, {{"min", 0.25}}, false},
    {"clamp", [](double x) { return std::min(x, -0.25); }, -2, 2, {{"max", -0.25}}, false},
};

std::string label(const UnaryCase& c) {
  std::string s = c.op;
  for (const auto& [k, v] : c.attrs.items()) s += " " + k + "=" + attr_value_str(v);
  return s;
}

}  // namespace

TEST(ElementwiseUnary, MatchesReferenceForEveryFloatDType) {
  for (const auto& c : kCases)
    for (DType dt : kFloatDTypes) {
      SCOPED_TRACE(label(c) + " " + std::string(dtype_name(dt)));
      Tensor x = rand_tensor({3, 7}, dt, 21, c.lo, c.hi);
      Tensor y = call(c.op, {x}, c.attrs)[0];
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_EQ(y.shape(), x.shape());
      expect_close(y, reference1(x, c.ref), tol_for(dt));
    }
}

TEST(ElementwiseUnary, LongTensorsAndLayouts) {
  // Past one block and one parallel task, with a ragged tail; then through
  // the strided path (a transposed view) and the converting path (bf16).
  for (const auto& c : kCases) {
    SCOPED_TRACE(label(c));
    Tensor x = rand_tensor({70001}, DType::Float32, 22, c.lo, c.hi);
    expect_close(call(c.op, {x}, c.attrs)[0], reference1(x, c.ref), 2e-6);
    Tensor m = rand_tensor({6, 5}, DType::Float64, 23, c.lo, c.hi);
    Tensor t = m.as_strided({5, 6}, {1, 5}, 0);
    ASSERT_FALSE(t.is_contiguous());
    expect_close(call(c.op, {t}, c.attrs)[0], reference1(t, c.ref), 1e-12);
    Tensor nb = noncontiguous(rand_tensor({4, 9}, DType::BFloat16, 24, c.lo, c.hi));
    expect_close(call(c.op, {nb}, c.attrs)[0], reference1(nb, c.ref), 1e-2);
  }
}

TEST(ElementwiseUnary, IntegerInputs) {
  Tensor i = make({-3, -1, 0, 2, 5}, {5}, DType::Int32);
  for (const auto& c : kCases) {
    if (std::string(c.op) == "clamp") continue;  // covered with its dtype rules below
    SCOPED_TRACE(label(c));
    Tensor y = call(c.op, {i}, c.attrs)[0];
    EXPECT_EQ(y.dtype(), c.float_only ? DType::Float32 : DType::Int32);
    expect_close(y, reference1(i, c.ref), 2e-6);
  }
  // Integer neg/abs wrap at the most negative value, as two's complement does.
  Tensor m = make({-128, 127, -5}, {3}, DType::Int8);
  expect_values(call1("neg", {m}), {-128, -127, 5});
  expect_values(call1("abs", {m}), {-128, 127, 5});
  expect_values(call1("relu", {make({200, 0}, {2}, DType::UInt8)}), {200, 0});
  expect_values(call1("exp", {make({1, 0}, {2}, DType::Bool)}), {std::exp(1.0), 1}, 1e-6);
}

TEST(ElementwiseUnary, SpecialValuesInTheVectorizedPath) {
  // float32, long enough that the SIMD body (not only a scalar tail) sees them.
  const std::vector<double> v = {kNaN, kInf, -kInf, 0.0, -0.0, 1e-40, 100, -100,
                                 -1,   50,   -50,   1,   88.8, -88.8, 20,  -20};
  Tensor x = make(v, {16}, DType::Float32);
  const std::pair<const char*, std::function<double(double)>> fns[] = {
      {"exp", [](double t) { return std::exp(t); }},
      {"log", [](double t) { return std::log(t); }},
      {"sqrt", [](double t) { return std::sqrt(t); }},
      {"rsqrt", [](double t) { return 1 / std::sqrt(t); }},
      {"reciprocal", [](double t) { return 1 / t; }},
      {"tanh", [](double t) { return std::tanh(t); }},
      {"sigmoid", sigmoid},
      {"erf", [](double t) { return std::erf(t); }},
      {"relu", [](double t) { return std::isnan(t) ? t : std::max(t, 0.0); }},
      {"abs", [](double t) { return std::abs(t); }},
  };
  for (const auto& [op, ref] : fns) {
    SCOPED_TRACE(op);
    Tensor y = call1(op, {x});
    auto want = reference1(x, ref);
    // float32 results of the reference: exp(100) overflows, 1/1e-40 too.
    for (auto& w : want) w = static_cast<float>(w);
    expect_close(y, want, 2e-6);
  }
  // Exact where it matters: underflow to 0 and subnormals, in both precisions.
  for (DType dt : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor e = call1("exp", {make({-kInf, -1000, -100, -746, 0}, {5}, dt)});
    EXPECT_EQ(values(e)[0], 0);
    EXPECT_EQ(values(e)[1], 0);
    EXPECT_EQ(values(e)[3], 0);
    const double tiny = dt == DType::Float32 ? 1e-42 : 1e-320;
    const double want_exp =
        dt == DType::Float32 ? static_cast<float>(std::exp(-100.0)) : std::exp(-100.0);
    EXPECT_NEAR(values(e)[2], want_exp, want_exp * 1e-6);
    Tensor l = call1("log", {make({tiny, 0}, {2}, dt)});
    EXPECT_NEAR(values(l)[0], std::log(values(make({tiny}, {1}, dt))[0]), 1e-5);
    EXPECT_EQ(values(l)[1], -kInf);
  }
  // The activations built from exp and tanh stay finite for large |x|.
  Tensor big = make({-100, 100, -20, 20, kNaN, 0, -1, 1}, {8}, DType::Float32);
  expect_close(call1("silu", {big}), reference1(big, [](double t) { return t * sigmoid(t); }),
               2e-6);
  expect_close(call1("gelu", {big}), reference1(big, gelu), 2e-6);
  expect_close(call1("gelu", {big}, {{"approximate", "tanh"}}), reference1(big, gelu_tanh), 2e-6);
}

TEST(ElementwiseUnary, Float32ExpIsAccurateOverItsWholeRange) {
  // From where e^x underflows to 0, through subnormal results, to overflow.
  const int64_t n = 200001;
  std::vector<double> xs(n);
  for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<float>(-105.0 + 195.0 * i / (n - 1));
  Tensor x = make(xs, {n}, DType::Float32);
  auto e = values(call1("exp", {x})), s = values(call1("sigmoid", {x}));
  auto ulp = [](float v) { return std::nextafter(std::abs(v), INFINITY) - std::abs(v); };
  int bad_exp = 0, bad_sigmoid = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(std::exp(xs[i]));
    if (std::isinf(want) ? e[i] != want : std::abs(e[i] - want) > ulp(want)) ++bad_exp;
    // Below -88, e^-x overflows and 1 / (1 + e^-x) is 0, as in PyTorch.
    const float sw = static_cast<float>(1 / (1 + std::exp(-xs[i])));
    if (xs[i] > -88 && std::abs(s[i] - sw) > 4 * ulp(sw)) ++bad_sigmoid;
  }
  EXPECT_EQ(bad_exp, 0) << "exp results more than one ulp from the rounded exact value";
  EXPECT_EQ(bad_sigmoid, 0) << "sigmoid results more than four ulp from the rounded exact value";
}

TEST(ElementwiseUnary, Gradients) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(label(c));
    // Keep away from kinks (relu, abs, leaky_relu, clamp bounds) so finite
    // differences are valid.
    std::vector<double> v = values(rand_tensor({2, 5}, DType::Float64, 31, c.lo, c.hi));
    for (auto& x : v)
      for (double kink : {0.0, -0.5, 1.0, 0.25, -0.25})
        if (std::abs(x - kink) < 1e-3) x += 0.01;
    check_gradients(c.op, {make(v, {2, 5})}, c.attrs, 1e-6, 1e-6);
  }
  check_gradients("cast", {rand_tensor({3})}, {{"dtype", DType::Float64}});
}

TEST(ElementwiseUnary, BackwardOpsInReducedPrecision) {
  // The fused backward ops run in fp32 for bf16 and agree with the float64 gradient.
  const char* ops[] = {"tanh", "sigmoid", "gelu", "silu", "relu", "leaky_relu"};
  Tensor x64 = rand_tensor({9}, DType::Float64, 41, -3, 3);
  Tensor w = rand_tensor({9}, DType::Float64, 42);
  for (const char* op : ops) {
    SCOPED_TRACE(op);
    Tensor want = grads_of(op, {x64.to(DType::BFloat16).to(DType::Float64)}, w)[0];
    Tensor got = grads_of(op, {x64.to(DType::BFloat16)}, w.to(DType::BFloat16))[0];
    EXPECT_EQ(got.dtype(), DType::BFloat16);
    expect_close(got, values(want), 3e-2);
  }
}

TEST(ElementwiseUnary, ClampRules) {
  Tensor f = make({-2, kNaN, 0.5, 3}, {4}, DType::Float32);
  expect_close(call1("clamp", {f}, {{"min", -1.0}, {"max", 1.0}}), {-1, kNaN, 0.5, 1}, 0);
  // min > max: everything becomes max, as in PyTorch.
  expect_close(call1("clamp", {f}, {{"min", 2.0}, {"max", 1.0}}), {1, kNaN, 1, 1}, 0);
  // A NaN bound makes every element NaN.
  expect_close(call1("clamp", {f}, {{"min", kNaN}}), {kNaN, kNaN, kNaN, kNaN}, 0);
  // Integer tensors keep their dtype with integral bounds (saturated to the
  // dtype's range), and become float32 with a fractional one.
  Tensor i = make({-100, 0, 100}, {3}, DType::Int8);
  Tensor ci = call1("clamp", {i}, {{"min", -1000.0}, {"max", 50.0}});
  EXPECT_EQ(ci.dtype(), DType::Int8);
  expect_values(ci, {-100, 0, 50});
  Tensor cf = call1("clamp", {i}, {{"max", 2.5}});
  EXPECT_EQ(cf.dtype(), DType::Float32);
  expect_values(cf, {-100, 0, 2.5});
  // The gradient passes where min <= x <= max, bounds included.
  auto g = grads_of("clamp", {make({-2, -1, 0, 1, 2}, {5})}, make({1, 1, 1, 1, 1}, {5}),
                    {{"min", -1.0}, {"max", 1.0}});
  expect_values(g[0], {0, 1, 1, 1, 0});
}

TEST(ElementwiseUnary, LogicalAndBitwiseNot) {
  Tensor x = make({0, 1, -2.5, kNaN}, {4}, DType::Float32);
  Tensor n = call1("logical_not", {x});
  EXPECT_EQ(n.dtype(), DType::Bool);
  expect_values(n, {1, 0, 0, 0});
  expect_values(call1("logical_not", {noncontiguous(make({0, 3, 0}, {3}, DType::Int64))}),
                {1, 0, 1});
  expect_values(call1("bitwise_not", {make({0, 5, -1}, {3}, DType::Int32)}), {-1, -6, 0});
  expect_values(call1("bitwise_not", {make({0, 5, 255}, {3}, DType::UInt8)}), {255, 250, 0});
  Tensor b = call1("bitwise_not", {make({1, 0}, {2}, DType::Bool)});
  EXPECT_EQ(b.dtype(), DType::Bool);
  expect_values(b, {0, 1});
}

TEST(ElementwiseUnary, Cast) {
  Tensor x = make({-2.7, -0.5, 0, 1.5, 300.25}, {5}, DType::Float32);
  Tensor i = call1("cast", {x}, {{"dtype", DType::Int32}});
  EXPECT_EQ(i.dtype(), DType::Int32);
  expect_values(i, {-2, 0, 0, 1, 300});
  expect_values(call1("cast", {x}, {{"dtype", "bool"}}), {1, 1, 0, 1, 1});
  Tensor h = call1("cast", {x}, {{"dtype", DType::BFloat16}});
  EXPECT_EQ(h.dtype(), DType::BFloat16);
  expect_values(h, {-2.703125, -0.5, 0, 1.5, 300}, 0);  // rounded to 8 significant bits
  expect_values(call1("cast", {make({1, 0, 1}, {3}, DType::Bool)}, {{"dtype", DType::Float16}}),
                {1, 0, 1});
  expect_values(
      call1("cast", {noncontiguous(make({7, 8, 9}, {3}, DType::Int64))}, {{"dtype", DType::Int8}}),
      {7, 8, 9});
  // The gradient is cast back to the input's dtype.
  auto g = grads_of("cast", {make({1, 2}, {2}, DType::Float32)}, make({0.5, 0.25}, {2}),
                    {{"dtype", DType::Float64}});
  EXPECT_EQ(g[0].dtype(), DType::Float32);
  expect_values(g[0], {0.5, 0.25});
  // Casting to an integer dtype ends the gradient history.
  Tensor leaf = make({1.5}, {1});
  leaf.impl()->requires_grad = true;
  EXPECT_FALSE(call1("cast", {leaf}, {{"dtype", DType::Int64}}).requires_grad());
}

// A float outside the integer target's range (or NaN) converts as PyTorch's
// x86 casts do, not as C++'s undefined behaviour: through int32 (targets up
// to 4 bytes) or int64, out-of-range to that type's minimum, then wrapped.
// The expected values are torch 1.13's x.to(dtype) for these inputs.
TEST(ElementwiseUnary, CastOutOfRangeMatchesTorch) {
  for (DType from : {DType::Float32, DType::Float64}) {
    Tensor x = make({-2.0, 300.0, kNaN, 1e20, 3e9, 3.7, -3.7, -1e20}, {8}, from);
    expect_values(call1("cast", {x}, {{"dtype", DType::UInt8}}), {254, 44, 0, 0, 0, 3, 253, 0});
    expect_values(call1("cast", {x}, {{"dtype", DType::Int8}}), {-2, 44, 0, 0, 0, 3, -3, 0});
    expect_values(call1("cast", {x}, {{"dtype", DType::Int16}}), {-2, 300, 0, 0, 0, 3, -3, 0});
    const double i32 = -2147483648.0;
    expect_values(call1("cast", {x}, {{"dtype", DType::Int32}}), {-2, 300, i32, i32, i32, 3, -3, i32});
    const double i64 = -9223372036854775808.0;
    expect_values(call1("cast", {x}, {{"dtype", DType::Int64}}), {-2, 300, i64, i64, 3e9, 3, -3, i64});
  }
}

TEST(ElementwiseUnary, Errors) {
  Tensor b = make({1, 0}, {2}, DType::Bool);
  Tensor f = make({1, 2}, {2});
  expect_status(Status::DTypeMismatch, [&] { call1("neg", {b}); }, {"neg"});
  expect_status(Status::DTypeMismatch, [&] { call1("abs", {b}); }, {"bool"});
  expect_status(Status::DTypeMismatch, [&] { call1("relu", {b}); }, {"relu"});
  expect_status(Status::DTypeMismatch, [&] { call1("bitwise_not", {f}); }, {"float64"});
  expect_status(Status::InvalidArgument, [&] { call1("clamp", {f}); },
                {"at least one of 'min' and 'max'"});
  expect_status(Status::DTypeMismatch, [&] { call1("clamp", {b}, {{"min", 0.0}}); }, {"clamp"});
  expect_status(Status::InvalidArgument, [&] { call1("gelu", {f}, {{"approximate", "fast"}}); },
                {"approximate"});
  expect_status(Status::InvalidArgument, [&] { call1("cast", {f}); }, {"dtype"});
  expect_status(Status::InvalidArgument, [&] { call1("cast", {f}, {{"dtype", "float128"}}); },
                {"float128"});
  expect_status(Status::InvalidArgument,
                [&] { call1("leaky_relu", {f}, {{"negative_slope", "x"}}); }, {"negative_slope"});
  expect_status(Status::InvalidArgument, [&] { call1("exp", {f, f}); }, {"exp"});
}
