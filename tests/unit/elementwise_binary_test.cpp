// add, sub, mul, div, pow, maximum, minimum: values against naive double
// references over broadcasting, layouts and dtypes; promotion; gradients;
// integer semantics; errors.
#include <cmath>
#include <limits>

#include "elementwise_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

struct BinaryCase {
  const char* op;
  std::function<double(double, double)> ref;
  double lo, hi;  // operand range for random values
  Attrs attrs;
};

double py_floor_div(double a, double b) { return std::floor(a / b); }

const BinaryCase kCases[] = {
    {"add", [](double a, double b) { return a + b; }, -2, 2, {}},
    {"add", [](double a, double b) { return a + 0.5 * b; }, -2, 2, {{"alpha", 0.5}}},
    {"sub", [](double a, double b) { return a - b; }, -2, 2, {}},
    {"sub", [](double a, double b) { return a - 3 * b; }, -2, 2, {{"alpha", 3.0}}},
    {"mul", [](double a, double b) { return a * b; }, -2, 2, {}},
    {"div", [](double a, double b) { return a / b; }, 0.5, 3, {}},
    {"pow", [](double a, double b) { return std::pow(a, b); }, 0.5, 2, {}},
    {"maximum", [](double a, double b) { return std::max(a, b); }, -2, 2, {}},
    {"minimum", [](double a, double b) { return std::min(a, b); }, -2, 2, {}},
};

void check_case(const BinaryCase& c, const Tensor& a, const Tensor& b, DType dt) {
  SCOPED_TRACE(::testing::Message() << c.op << " " << dims_str(a.shape()) << " "
                                    << dims_str(b.shape()) << " " << dtype_name(dt));
  Tensor ad = a.to(dt), bd = b.to(dt);
  Tensor out = call(c.op, {ad, bd}, c.attrs)[0];
  EXPECT_EQ(out.dtype(), dt);
  EXPECT_EQ(out.shape(), broadcast_shapes(a.shape(), b.shape(), "test"));
  // The reference sees the operands rounded to dt, as the op does.
  expect_close(out, reference2(ad, bd, c.ref), tol_for(dt));
}

}  // namespace

TEST(ElementwiseBinary, MatchesReferenceAcrossDTypesAndBroadcasting) {
  const std::pair<Dims, Dims> shapes[] = {{{2, 3}, {2, 3}},    {{2, 3}, {3}}, {{4, 1}, {1, 5}},
                                          {{2, 1, 3}, {4, 1}}, {{3}, {}},     {{}, {3}}};
  for (const auto& c : kCases)
    for (const auto& [sa, sb] : shapes) {
      Tensor a = rand_tensor(sa, DType::Float64, 1, c.lo, c.hi);
      Tensor b = rand_tensor(sb, DType::Float64, 2, c.lo, c.hi);
      for (DType dt : kFloatDTypes) check_case(c, a, b, dt);
    }
}

// A row vector (a bias) on either side, over few rows and over enough rows to
// be split between threads: the runner reads it again for every row.
TEST(ElementwiseBinary, RowVectorOperandsOnEitherSide) {
  const std::pair<Dims, Dims> shapes[] = {
      {{3}, {2, 3}}, {{5, 3, 7}, {1, 1, 7}}, {{1, 7}, {7}}, {{600, 300}, {300}}, {{300}, {600, 300}}};
  for (const auto& c : kCases)
    for (const auto& [sa, sb] : shapes) {
      Tensor a = rand_tensor(sa, DType::Float64, 3, c.lo, c.hi);
      Tensor b = rand_tensor(sb, DType::Float64, 4, c.lo, c.hi);
      for (DType dt : kFloatDTypes) check_case(c, a, b, dt);
    }
}

TEST(ElementwiseBinary, NonContiguousOperands) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.op);
    Tensor a = rand_tensor({3, 4}, DType::Float64, 3, c.lo, c.hi);
    Tensor b = rand_tensor({3, 4}, DType::Float64, 4, c.lo, c.hi);
    expect_close(call(c.op, {noncontiguous(a), b}, c.attrs)[0], reference2(a, b, c.ref), 1e-12);
    expect_close(call(c.op, {a, noncontiguous(b)}, c.attrs)[0], reference2(a, b, c.ref), 1e-12);
    // A transposed view broadcast against a row.
    Tensor at = a.as_strided({4, 3}, {1, 4}, 0);
    Tensor row = rand_tensor({3}, DType::Float64, 5, c.lo, c.hi);
    expect_close(call(c.op, {at, row}, c.attrs)[0], reference2(at, row, c.ref), 1e-12);
    // float32 through the converting path.
    Tensor af = noncontiguous(a.to(DType::Float32));
    expect_close(call(c.op, {af, b.to(DType::Float32)}, c.attrs)[0],
                 reference2(af, b.to(DType::Float32), c.ref), 2e-6);
  }
}

TEST(ElementwiseBinary, LargeTensorsCrossBlocksThreadsAndStreaming) {
  // 5M floats: many blocks, several tasks, outputs above the streaming-store size.
  const int64_t n = 5 << 20;
  Tensor a = Tensor::empty({n}, DType::Float32), b = Tensor::empty({n}, DType::Float32);
  for (int64_t i = 0; i < n; ++i) {
    a.data<float>()[i] = static_cast<float>(i % 1000) * 0.5f;
    b.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  }
  Tensor s = call1("add", {a, b}), p = call1("mul", {a, b});
  for (int64_t i = 0; i < n; i += 9973) {
    ASSERT_EQ(s.data<float>()[i], a.data<float>()[i] + b.data<float>()[i]) << i;
    ASSERT_EQ(p.data<float>()[i], a.data<float>()[i] * b.data<float>()[i]) << i;
  }
  EXPECT_EQ(s.data<float>()[n - 1], a.data<float>()[n - 1] + b.data<float>()[n - 1]);
  // Broadcast rows through the strided path with bf16 conversion.
  Tensor m = rand_tensor({300, 700}, DType::BFloat16, 6);
  Tensor r = rand_tensor({700}, DType::Float32, 7);
  Tensor out = call1("add", {m, r});
  EXPECT_EQ(out.dtype(), DType::Float32);
  expect_close(out, reference2(m, r, [](double x, double y) { return x + y; }), 2e-6);
}

TEST(ElementwiseBinary, TypePromotion) {
  Tensor i32 = make({1, 2, 3}, {3}, DType::Int32);
  Tensor i8 = make({1, 2, 3}, {3}, DType::Int8);
  Tensor u8 = make({1, 2, 3}, {3}, DType::UInt8);
  Tensor f16 = make({1, 2, 3}, {3}, DType::Float16);
  EXPECT_EQ(call1("add", {i32, i8}).dtype(), DType::Int32);
  EXPECT_EQ(call1("add", {u8, i8}).dtype(), DType::Int16);
  EXPECT_EQ(call1("mul", {i32, wrap_scalar(2.5)}).dtype(), DType::Float32);
  EXPECT_EQ(call1("sub", {i8, wrap_int(1000)}).dtype(), DType::Int8);
  EXPECT_EQ(call1("add", {f16, wrap_scalar(1.5)}).dtype(), DType::Float16);
  EXPECT_EQ(call1("maximum", {f16, i32}).dtype(), DType::Float16);
  EXPECT_EQ(call1("pow", {i32, wrap_scalar(0.5)}).dtype(), DType::Float32);
  expect_values(call1("mul", {i32, wrap_scalar(2.5)}), {2.5, 5, 7.5});
  expect_values(call1("sub", {wrap_scalar(10.0), i32}), {9, 8, 7});
  // bool + bool is "or"; bool * bool is "and".
  Tensor t = make({1, 1, 0, 0}, {4}, DType::Bool), u = make({1, 0, 1, 0}, {4}, DType::Bool);
  EXPECT_EQ(call1("add", {t, u}).dtype(), DType::Bool);
  expect_values(call1("add", {t, u}), {1, 1, 1, 0});
  expect_values(call1("mul", {t, u}), {1, 0, 0, 0});
  expect_values(call1("maximum", {t, u}), {1, 1, 1, 0});
  expect_values(call1("minimum", {t, u}), {1, 0, 0, 0});
  expect_values(call1("add", {t, wrap_int(2)}), {3, 3, 2, 2});
}

TEST(ElementwiseBinary, IntegerArithmeticWrapsLikePyTorch) {
  Tensor a = make({100, -100, 127, -128}, {4}, DType::Int8);
  Tensor b = make({100, -100, 1, -1}, {4}, DType::Int8);
  expect_values(call1("add", {a, b}), {-56, 56, -128, 127});
  expect_values(call1("mul", {a, b}), {16, 16, 127, -128});
  expect_values(call1("add", {a, b}, {{"alpha", 2.0}}), {44, -44, -127, 126});
  expect_values(call1("sub", {a, b}, {{"alpha", 2.0}}), {-100, 100, 125, -126});
  const int64_t big = std::numeric_limits<int64_t>::max();
  Tensor l = make({0, 0}, {2}, DType::Int64);
  l.data<int64_t>()[0] = big;
  l.data<int64_t>()[1] = std::numeric_limits<int64_t>::min();
  Tensor s = call1("add", {l, wrap_int(1)});
  EXPECT_EQ(s.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  Tensor abs_min = call1("mul", {l, wrap_int(-1)});
  EXPECT_EQ(abs_min.data<int64_t>()[1], std::numeric_limits<int64_t>::min());
  expect_values(
      call1("maximum", {make({3, -4, 5}, {3}, DType::Int32), make({-1, 2}, {2, 1}, DType::Int32)}),
      {3, -1, 5, 3, 2, 5});
}

TEST(ElementwiseBinary, DivRoundingModes) {
  Tensor a = make({7, -7, 7, -7, 0.5, -0.5}, {6});
  Tensor b = make({2, 2, -2, -2, 1, 1}, {6});
  expect_values(call1("div", {a, b}), {3.5, -3.5, -3.5, 3.5, 0.5, -0.5});
  expect_values(call1("div", {a, b}, {{"rounding_mode", "trunc"}}), {3, -3, -3, 3, 0, -0.0});
  expect_values(call1("div", {a, b}, {{"rounding_mode", "floor"}}), {3, -4, -4, 3, 0, -1});
  // Float floor division follows Python, including signed zeros and a zero divisor.
  Tensor f = call1(
      "div", {make({-0.0, 1, -1, 0, 5.5, 1e300}, {6}), make({3, 0, 0, 0, -0.25, 1e-300}, {6})},
      {{"rounding_mode", "floor"}});
  auto fv = values(f);
  EXPECT_TRUE(std::signbit(fv[0]) && fv[0] == 0);
  EXPECT_EQ(fv[1], kInf);
  EXPECT_EQ(fv[2], -kInf);
  EXPECT_TRUE(std::isnan(fv[3]));
  EXPECT_EQ(fv[4], py_floor_div(5.5, -0.25));
  EXPECT_TRUE(std::isinf(fv[5]));
  // float32 floor/trunc agree with the double reference on random values.
  Tensor x = rand_tensor({40}, DType::Float32, 8, -50, 50),
         y = rand_tensor({40}, DType::Float32, 9, -5, 5);
  expect_values(call1("div", {x, y}, {{"rounding_mode", "floor"}}),
                reference2(x, y, [](double p, double q) { return std::floor(p / q); }), 1e-6);
  expect_values(call1("div", {x, y}, {{"rounding_mode", "trunc"}}),
                reference2(x, y, [](double p, double q) { return std::trunc(p / q); }), 1e-6);
  // bf16 keeps its dtype.
  Tensor h =
      call1("div", {a.to(DType::BFloat16), b.to(DType::BFloat16)}, {{"rounding_mode", "floor"}});
  EXPECT_EQ(h.dtype(), DType::BFloat16);
  expect_values(h, {3, -4, -4, 3, 0, -1});
}

TEST(ElementwiseBinary, IntegerDivision) {
  Tensor a = make({7, -7, 7, -7, 6}, {5}, DType::Int32),
         b = make({2, 2, -2, -2, 3}, {5}, DType::Int32);
  Tensor q = call1("div", {a, b});
  EXPECT_EQ(q.dtype(), DType::Float32) << "true division of integers gives float32";
  expect_values(q, {3.5, -3.5, -3.5, 3.5, 2});
  Tensor t = call1("div", {a, b}, {{"rounding_mode", "trunc"}});
  EXPECT_EQ(t.dtype(), DType::Int32);
  expect_values(t, {3, -3, -3, 3, 2});
  expect_values(call1("div", {a, b}, {{"rounding_mode", "floor"}}), {3, -4, -4, 3, 2});
  expect_values(
      call1("div", {make({200, 9}, {2}, DType::UInt8), wrap_int(4)}, {{"rounding_mode", "floor"}}),
      {50, 2});
  // The most negative value over -1 wraps instead of trapping.
  Tensor m = make({-128, -127}, {2}, DType::Int8);
  expect_values(call1("div", {m, wrap_int(-1)}, {{"rounding_mode", "trunc"}}), {-128, 127});
  expect_values(call1("div", {m, wrap_int(-1)}, {{"rounding_mode", "floor"}}), {-128, 127});
  // Integer division by zero is an error; true division gives inf.
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("div", {a, make({1, 0, 1, 1, 1}, {5}, DType::Int32)},
                        {{"rounding_mode", "floor"}});
                },
                {"division by zero"});
  expect_values(call1("div", {a, wrap_int(0)}), {kInf, -kInf, kInf, -kInf, kInf});
}

TEST(ElementwiseBinary, PowScalarExponentsAndSpecialValues) {
  Tensor x = make({-2, -0.5, 0, 0.25, 3}, {5}, DType::Float32);
  for (double e : {2.0, 3.0, 1.0, 0.0, -1.0, -2.0, 0.5, -0.5, 2.5, -1.5, 4.0}) {
    SCOPED_TRACE(e);
    expect_close(call1("pow", {x, wrap_scalar(e)}),
                 reference1(x, [e](double v) { return std::pow(v, e); }), 2e-6);
  }
  // A scalar base raised to a tensor.
  expect_close(call1("pow", {wrap_scalar(2.0), x}),
               reference1(x, [](double v) { return std::pow(2.0, v); }), 2e-6);
  // Special values as std::pow defines them.
  Tensor s = make({kNaN, 0, -1, kInf, 1}, {5});
  Tensor e = make({0, -1, kInf, -1, kNaN}, {5});
  expect_close(call1("pow", {s, e}), {1, kInf, 1, 0, 1}, 0);
}

TEST(ElementwiseBinary, IntegerPow) {
  Tensor b = make({2, -3, 0, 1, -1, 5}, {6}, DType::Int64);
  expect_values(call1("pow", {b, wrap_int(3)}), {8, -27, 0, 1, -1, 125});
  Tensor e = make({10, 3, 0, -2, -3, -1}, {6}, DType::Int64);
  expect_values(call1("pow", {b, e}), {1024, -27, 1, 1, -1, 0});
  // Overflow wraps (2^70 mod 2^64 = 0; 3^41 wraps to a fixed value).
  Tensor w = call1("pow", {make({2, 3}, {2}, DType::Int64), make({70, 41}, {2}, DType::Int64)});
  uint64_t p = 1;
  for (int i = 0; i < 41; ++i) p *= 3;
  EXPECT_EQ(w.data<int64_t>()[0], 0);
  EXPECT_EQ(w.data<int64_t>()[1], static_cast<int64_t>(p));
  expect_values(call1("pow", {make({3, 2}, {2}, DType::UInt8), wrap_int(5)}), {243, 32});
}

TEST(ElementwiseBinary, MaximumMinimumPropagateNaN) {
  Tensor a = make({kNaN, 1, kNaN, -kInf}, {4}, DType::Float32);
  Tensor b = make({1, kNaN, kNaN, 0}, {4}, DType::Float32);
  expect_close(call1("maximum", {a, b}), {kNaN, kNaN, kNaN, 0}, 0);
  expect_close(call1("minimum", {a, b}), {kNaN, kNaN, kNaN, -kInf}, 0);
}

TEST(ElementwiseBinary, Gradients) {
  Tensor a = rand_tensor({2, 3}, DType::Float64, 11, 0.5, 2);
  Tensor b = rand_tensor({3}, DType::Float64, 12, 0.5, 2);
  Tensor c = rand_tensor({2, 1}, DType::Float64, 13, -1, 1);
  check_gradients("add", {a, c}, {{"alpha", -1.5}});
  check_gradients("sub", {a, b});
  check_gradients("sub", {c, b}, {{"alpha", 2.0}});
  check_gradients("mul", {a, c});
  check_gradients("div", {a, b});
  check_gradients("div", {c, a});
  check_gradients("pow", {a, b});
  check_gradients("pow", {a, c});
  check_gradients("pow", {a, wrap_scalar(2.5)});
  check_gradients("pow", {a, wrap_int(3)});
  check_gradients("pow", {wrap_scalar(1.7), c});
  check_gradients("maximum", {a, call1("mul", {b, wrap_scalar(1.1)})});
  check_gradients("minimum", {c, b});
  check_gradients("mul", {noncontiguous(a), noncontiguous(a)});
  check_gradients("div", {noncontiguous(c), noncontiguous(b)});
}

TEST(ElementwiseBinary, GradientEdgeCases) {
  // Ties split the gradient evenly.
  Tensor a = make({1, 2, 3}, {3}), b = make({1, 5, 3}, {3});
  Tensor w = make({1, 1, 1}, {3});
  auto gmax = grads_of("maximum", {a, b}, w);
  expect_values(gmax[0], {0.5, 0, 0.5});
  expect_values(gmax[1], {0.5, 1, 0.5});
  auto gmin = grads_of("minimum", {a, b}, w);
  expect_values(gmin[0], {0.5, 1, 0.5});
  expect_values(gmin[1], {0.5, 0, 0.5});
  // 0^b: no NaN from log(0) in the exponent's gradient; b == 0 gives 0 for the base.
  auto gp = grads_of("pow", {make({0, 0, 2}, {3}), make({2, 0, 0}, {3})}, w);
  expect_values(gp[0], {0, 0, 0});
  expect_values(gp[1], {0, 0, std::log(2.0)});
  // A wrapped scalar exponent stays a number: d(x^2.5)/dx = 2.5 x^1.5.
  Tensor x = make({0.5, 2}, {2});
  x.impl()->requires_grad = true;
  autograd::backward({call1("pow", {x, wrap_scalar(2.5)})}, {make({1, 1}, {2})}, false);
  expect_values(x.grad(), {2.5 * std::pow(0.5, 1.5), 2.5 * std::pow(2.0, 1.5)}, 1e-12);
  // Rounded division is piecewise constant: zero gradients.
  auto gd = grads_of("div", {make({3, 4}, {2}), make({2, 2}, {2})}, make({1, 1}, {2}),
                     {{"rounding_mode", "floor"}});
  expect_values(gd[0], {0, 0});
  expect_values(gd[1], {0, 0});
  // Gradients come back in each input's dtype.
  auto gm =
      grads_of("mul", {make({1, 2}, {2}, DType::Float32), make({3, 4}, {2})}, make({1, 1}, {2}));
  EXPECT_EQ(gm[0].dtype(), DType::Float32);
  EXPECT_EQ(gm[1].dtype(), DType::Float64);
  expect_values(gm[0], {3, 4});
}

TEST(ElementwiseBinary, Errors) {
  Tensor a = make({1, 2, 3}, {3}), b = make({1, 2}, {2});
  expect_status(Status::ShapeMismatch, [&] { call1("add", {a, b}); }, {"add"});
  expect_status(Status::ShapeMismatch, [&] { call1("pow", {a, b}); }, {"pow"});
  Tensor i = make({1, 2}, {2}, DType::Int32);
  expect_status(Status::InvalidArgument, [&] { call1("add", {i, i}, {{"alpha", 0.5}}); },
                {"alpha"});
  expect_status(Status::InvalidArgument, [&] { call1("sub", {i, i}, {{"alpha", 1.5}}); },
                {"alpha"});
  Tensor t = make({1, 0}, {2}, DType::Bool);
  expect_status(Status::DTypeMismatch, [&] { call1("sub", {t, t}); }, {"logical_xor"});
  expect_status(Status::DTypeMismatch, [&] { call1("pow", {t, t}); }, {"bool"});
  expect_status(Status::DTypeMismatch, [&] { call1("div", {t, t}, {{"rounding_mode", "floor"}}); },
                {"bool"});
  expect_status(Status::InvalidArgument,
                [&] { call1("div", {a, a}, {{"rounding_mode", "round"}}); }, {"rounding_mode"});
  expect_status(Status::InvalidArgument, [&] { call1("div", {a, a}, {{"rounding_mode", 1.0}}); },
                {"rounding_mode"});
  expect_status(Status::InvalidArgument, [&] { call1("mul", {a}); }, {"mul"});
}

TEST(ElementwiseBinary, EmptyAndZeroDim) {
  Tensor e = Tensor::empty({0, 3}, DType::Float32);
  EXPECT_EQ(call1("add", {e, make({1, 2, 3}, {3}, DType::Float32)}).shape(), (Dims{0, 3}));
  Tensor s = call1("mul", {Tensor::scalar(3, DType::Float64), Tensor::scalar(4, DType::Float64)});
  EXPECT_EQ(s.dim(), 0);
  expect_values(s, {12});
}
