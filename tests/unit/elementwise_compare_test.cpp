// Comparisons, logical and bitwise ops, where and masked_fill: values against
// naive references over broadcasting, layouts and dtypes; promotion; NaN;
// gradients of where and masked_fill; errors.
#include <cmath>
#include <limits>

#include "elementwise_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::pair<const char*, std::function<double(double, double)>> kComparisons[] = {
    {"eq", [](double a, double b) { return a == b ? 1.0 : 0.0; }},
    {"ne", [](double a, double b) { return a != b ? 1.0 : 0.0; }},
    {"lt", [](double a, double b) { return a < b ? 1.0 : 0.0; }},
    {"le", [](double a, double b) { return a <= b ? 1.0 : 0.0; }},
    {"gt", [](double a, double b) { return a > b ? 1.0 : 0.0; }},
    {"ge", [](double a, double b) { return a >= b ? 1.0 : 0.0; }},
};

// Small integers as floats, so ties happen; from 0 for unsigned dtypes, which
// cannot hold the negative ones.
Tensor ints_as(const Dims& shape, DType dt, uint32_t seed) {
  const double low = dt == DType::UInt8 ? 0 : -3;
  auto v = values(rand_tensor(shape, DType::Float64, seed, low, 3));
  for (auto& x : v) x = std::round(x);
  return make(v, shape, dt);
}

}  // namespace

TEST(ElementwiseCompare, ComparisonsMatchReference) {
  const DType dtypes[] = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16,
                          DType::Int64,   DType::Int32,   DType::Int8,     DType::UInt8};
  for (const auto& [op, ref] : kComparisons)
    for (DType dt : dtypes) {
      SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(dt)));
      Tensor a = ints_as({4, 3}, dt, 1), b = ints_as({3}, dt, 2);
      Tensor out = call1(op, {a, b});
      EXPECT_EQ(out.dtype(), DType::Bool);
      EXPECT_EQ(out.shape(), (Dims{4, 3}));
      expect_values(out, reference2(a, b, ref), 0);
      expect_values(call1(op, {noncontiguous(a), b}), reference2(a, b, ref), 0);
      Tensor col = ints_as({4, 1}, dt, 3);
      expect_values(call1(op, {col, b}), reference2(col, b, ref), 0);
    }
}

TEST(ElementwiseCompare, ComparedInThePromotedDType) {
  Tensor i = make({1, 2, 3}, {3}, DType::Int64);
  expect_values(call1("lt", {i, wrap_scalar(2.5)}), {1, 1, 0});
  expect_values(call1("eq", {i, wrap_scalar(2.0)}), {0, 1, 0});
  expect_values(call1("gt", {make({1, 0}, {2}, DType::Bool), wrap_scalar(0.5)}), {1, 0});
  expect_values(
      call1("ge", {make({-1, 255}, {2}, DType::Int16), make({255, 255}, {2}, DType::UInt8)}),
      {0, 1});
  // Mixed half types compare in float32 exactly.
  expect_values(
      call1("eq", {make({0.5, 1}, {2}, DType::BFloat16), make({0.5, 1.5}, {2}, DType::Float16)}),
      {1, 0});
  // NaN is unequal to everything, itself included.
  Tensor n = make({kNaN, 1}, {2}, DType::Float32);
  expect_values(call1("eq", {n, n}), {0, 1});
  expect_values(call1("ne", {n, n}), {1, 0});
  expect_values(call1("le", {n, n}), {0, 1});
  // Comparisons carry no gradient.
  Tensor x = make({1, 2}, {2});
  x.impl()->requires_grad = true;
  EXPECT_FALSE(call1("lt", {x, wrap_scalar(1.5)}).requires_grad());
}

TEST(ElementwiseCompare, LogicalOpsTakeAnyDType) {
  Tensor f = make({0, 0.5, kNaN, 0}, {4}, DType::Float32);
  Tensor i = make({0, 0, 7, -1}, {4}, DType::Int16);
  expect_values(call1("logical_and", {f, i}), {0, 0, 1, 0});
  expect_values(call1("logical_or", {f, i}), {0, 1, 1, 1});
  expect_values(call1("logical_xor", {f, i}), {0, 1, 0, 1});
  Tensor row = make({1, 0}, {2}, DType::Bool), col = make({1, 0, 2}, {3, 1}, DType::UInt8);
  Tensor o = call1("logical_or", {col, row});
  EXPECT_EQ(o.dtype(), DType::Bool);
  EXPECT_EQ(o.shape(), (Dims{3, 2}));
  expect_values(o, {1, 1, 1, 0, 1, 1});
  expect_values(
      call1("logical_and", {noncontiguous(make({1, 0, 3}, {3}, DType::BFloat16)), wrap_int(2)}),
      {1, 0, 1});
}

TEST(ElementwiseCompare, BitwiseOps) {
  Tensor a = make({12, -1, 0, 5}, {4}, DType::Int32), b = make({10, 6, 3, 5}, {4}, DType::Int64);
  Tensor x = call1("bitwise_xor", {a, b});
  EXPECT_EQ(x.dtype(), DType::Int64);
  expect_values(x, {6, -7, 3, 0});
  expect_values(call1("bitwise_and", {a, b}), {8, 6, 0, 5});
  expect_values(call1("bitwise_or", {a, b}), {14, -1, 3, 5});
  expect_values(call1("bitwise_and", {make({0xF0, 0x3C}, {2}, DType::UInt8), wrap_int(0x0F)}),
                {0, 0x0C});
  Tensor t = make({1, 1, 0, 0}, {4}, DType::Bool), u = make({1, 0, 1, 0}, {4}, DType::Bool);
  Tensor bx = call1("bitwise_xor", {t, u});
  EXPECT_EQ(bx.dtype(), DType::Bool);
  expect_values(bx, {0, 1, 1, 0});
  expect_values(call1("bitwise_or", {noncontiguous(t), u}), {1, 1, 1, 0});
  expect_values(
      call1("bitwise_and", {make({7, 6}, {2, 1}, DType::Int8), make({1, 2, 4}, {3}, DType::Int8)}),
      {1, 2, 4, 0, 2, 4});
}

TEST(ElementwiseCompare, Where) {
  Tensor cond = make({1, 0}, {2, 1}, DType::Bool);
  Tensor a = make({1, 2, 3}, {3}, DType::Int32);
  Tensor w = call1("where", {cond, a, wrap_scalar(-0.5)});
  EXPECT_EQ(w.dtype(), DType::Float32) << "a and b promote; cond does not take part";
  EXPECT_EQ(w.shape(), (Dims{2, 3}));
  expect_values(w, {1, 2, 3, -0.5, -0.5, -0.5});
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int8,
                   DType::Bool}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = make({1, 0, 1, 1, 0, 0}, {2, 3}, dt), y = make({0, 1, 0}, {3}, dt);
    Tensor m = make({1, 1, 0, 0, 1, 0}, {2, 3}, DType::Bool);
    Tensor r = call1("where", {noncontiguous(m), x, y});
    EXPECT_EQ(r.dtype(), dt);
    expect_values(r, {1, 0, 0, 0, 0, 0});
  }
  // Long enough for several tasks, with a broadcast condition.
  Tensor big = rand_tensor({512, 300}, DType::Float32, 4);
  Tensor mask = call1("gt", {rand_tensor({300}, DType::Float32, 5), wrap_scalar(0.0)});
  Tensor r = call1("where", {mask, big, wrap_scalar(7.0)});
  auto mv = broadcast_values(mask, {512, 300});
  auto bv = values(big);
  for (size_t k = 0; k < mv.size(); ++k) mv[k] = mv[k] != 0 ? bv[k] : 7.0;
  expect_values(r, mv, 0);
}

TEST(ElementwiseCompare, WhereGradients) {
  Tensor cond = make({1, 0, 0, 1, 1, 0}, {2, 3}, DType::Bool);
  check_gradients(
      "where", {cond, rand_tensor({2, 3}, DType::Float64, 6), rand_tensor({3}, DType::Float64, 7)});
  check_gradients(
      "where", {cond, rand_tensor({2, 1}, DType::Float64, 8), rand_tensor({}, DType::Float64, 9)});
  auto g = grads_of("where", {cond, make({1, 2, 3, 4, 5, 6}, {2, 3}), make({0, 0, 0}, {3})},
                    make({1, 1, 1, 1, 1, 1}, {2, 3}));
  EXPECT_FALSE(g[0].defined()) << "the condition gets no gradient";
  expect_values(g[1], {1, 0, 0, 1, 1, 0});
  expect_values(g[2], {0, 1, 2});
}

TEST(ElementwiseCompare, MaskedFill) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Float32);
  Tensor mask = make({1, 0, 1}, {3}, DType::Bool);
  Tensor y = call1("masked_fill", {x, mask}, {{"value", -1.5}});
  EXPECT_EQ(y.dtype(), DType::Float32);
  expect_values(y, {-1.5, 2, -1.5, -1.5, 5, -1.5});
  // The mask may broadcast x too (out-of-place masked_fill broadcasts both).
  Tensor wide = call1("masked_fill", {make({1, 2}, {2, 1}, DType::Int32), mask}, {{"value", 9.0}});
  EXPECT_EQ(wide.dtype(), DType::Int32);
  EXPECT_EQ(wide.shape(), (Dims{2, 3}));
  expect_values(wide, {9, 1, 9, 9, 2, 9});
  expect_values(call1("masked_fill", {noncontiguous(make({1, 0, 1}, {3}, DType::Bool)), mask},
                      {{"value", 0.0}}),
                {0, 0, 0});
  expect_values(
      call1("masked_fill", {make({1, 2}, {2}, DType::BFloat16), make({0, 1}, {2}, DType::Bool)},
            {{"value", 0.1}}),
      {1, 0.10009765625}, 0);
  check_gradients("masked_fill", {rand_tensor({2, 3}, DType::Float64, 10), mask}, {{"value", 3.0}});
  auto g =
      grads_of("masked_fill", {make({1, 2, 3}, {3}), mask}, make({1, 2, 3}, {3}), {{"value", 0.0}});
  expect_values(g[0], {0, 2, 0});
}

TEST(ElementwiseCompare, Errors) {
  Tensor f = make({1.5, 2}, {2}), i = make({1, 2}, {2}, DType::Int32);
  expect_status(Status::DTypeMismatch, [&] { call1("bitwise_and", {f, i}); },
                {"argument 'a' has dtype float64"});
  expect_status(Status::DTypeMismatch, [&] { call1("bitwise_or", {i, f}); }, {"integer or bool"});
  expect_status(Status::DTypeMismatch, [&] { call1("bitwise_xor", {i, wrap_scalar(1.0)}); },
                {"bitwise_xor"});
  expect_status(Status::DTypeMismatch, [&] { call1("where", {i, f, f}); },
                {"'cond' must be a bool tensor"});
  expect_status(Status::DTypeMismatch, [&] { call1("masked_fill", {f, i}, {{"value", 0.0}}); },
                {"mask"});
  expect_status(Status::InvalidArgument,
                [&] { call1("masked_fill", {f, make({1, 0}, {2}, DType::Bool)}); }, {"value"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("masked_fill", {make({1}, {1}, DType::Int8), make({1}, {1}, DType::Bool)},
                        {{"value", 300.0}});
                },
                {"does not fit in int8"});
  expect_status(Status::ShapeMismatch, [&] { call1("eq", {f, make({1, 2, 3}, {3})}); }, {"eq"});
  expect_status(Status::ShapeMismatch,
                [&] { call1("where", {make({1, 0, 1}, {3}, DType::Bool), f, f}); }, {"where"});
  expect_status(Status::InvalidArgument, [&] { call1("logical_and", {f}); }, {"logical_and"});
}
