// softmax / log_softmax against a naive double reference, their gradients, and
// the edge cases of the online max (-inf rows, growing maxima across blocks).
#include <limits>

#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// Two plain passes per (outer, inner) line: max, then sum of exps.
std::vector<double> reference(const std::vector<double>& x, const Dims& shape, int64_t dim,
                              bool log) {
  int64_t outer = 1, len = 1, inner = 1;
  if (!shape.empty()) {
    if (dim < 0) dim += static_cast<int64_t>(shape.size());
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      (d < dim ? outer : d == dim ? len : inner) *= shape[d];
  }
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return o * len * inner + j * inner + i; };
      double m = -kInf;
      for (int64_t j = 0; j < len; ++j) m = std::max(m, x[at(j)]);
      double s = 0;
      for (int64_t j = 0; j < len; ++j) s += std::exp(x[at(j)] - m);
      for (int64_t j = 0; j < len; ++j)
        y[at(j)] = log ? x[at(j)] - m - std::log(s) : std::exp(x[at(j)] - m) / s;
    }
  return y;
}

void expect_matches_reference(const Tensor& x, int64_t dim, double tol = 1e-12) {
  for (bool log : {false, true}) {
    SCOPED_TRACE(::testing::Message()
                 << (log ? "log_softmax" : "softmax") << " dim " << dim << " shape "
                 << dims_str(x.shape()) << " " << dtype_name(x.dtype()));
    Tensor y = call1(log ? "log_softmax" : "softmax", {x}, {{"dim", dim}});
    EXPECT_EQ(y.dtype(), x.dtype());
    EXPECT_EQ(y.shape(), x.shape());
    expect_close(y, reference(values(x), x.shape(), dim, log), tol);
  }
}

}  // namespace

TEST(Softmax, HandComputedRow) {
  // exp(0), exp(ln 2), exp(ln 5) sum to 8.
  Tensor x = make({0, std::log(2.0), std::log(5.0)}, {3});
  expect_values(call1("softmax", {x}), {1.0 / 8, 2.0 / 8, 5.0 / 8}, 1e-14);
  expect_values(call1("log_softmax", {x}), {-std::log(8.0), std::log(2.0 / 8), std::log(5.0 / 8)},
                1e-14);
  // Shifting a row does not change it.
  Tensor big = make({1000, 1000 + std::log(2.0), 1000 + std::log(5.0)}, {3});
  expect_values(call1("softmax", {big}), {1.0 / 8, 2.0 / 8, 5.0 / 8}, 1e-12);
}

TEST(Softmax, EveryDimMatchesReference) {
  Tensor x = rand_tensor({3, 4, 5}, DType::Float64, 7, -4, 4);
  for (int64_t dim : {-1, 0, 1, 2, -3}) expect_matches_reference(x, dim);
}

TEST(Softmax, LongRowsAndTilesMatchReference) {
  // Rows longer than one block with the max growing block after block, so
  // the running sum is rescaled; tiles with more rows and columns than one.
  std::vector<double> v(2 * 1300);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.02 * static_cast<double>(i % 1300) + std::sin(i);
  Tensor rising = make(v, {2, 1300});
  expect_matches_reference(rising, -1);
  expect_matches_reference(make(v, {2, 1300}, DType::Float32), -1, 2e-6);
  expect_matches_reference(make(v, {10, 260}), 0);    // 260 columns: a full and a partial tile
  expect_matches_reference(make(v, {2, 65, 20}), 1);  // 65 rows: 3 row blocks per tile
  expect_matches_reference(make(v, {2, 65, 20}, DType::Float32), 1, 2e-6);
  expect_matches_reference(rand_tensor({64, 1000}, DType::Float32, 3, -20, 20), -1, 2e-6);
}

TEST(Softmax, NegativeInfinityAndNaN) {
  // A first block of only -inf, then finite values: -inf entries give 0.
  // Around -1000 too: the stand-in reference 0 of the -inf blocks is then
  // above the final max, and the values it produced must stay exact zeros.
  for (double base : {0.0, -1000.0})
    for (DType dt : {DType::Float64, DType::Float32}) {
      std::vector<double> v(1100, -kInf);
      for (size_t i = 600; i < v.size(); ++i) v[i] = base + std::cos(i);
      expect_matches_reference(make(v, {1100}, dt), 0, 1e-5);
      // The tiled path: column 0 as above, column 1 only -inf (a NaN column).
      std::vector<double> two(2 * v.size(), -kInf);
      for (size_t i = 0; i < v.size(); ++i) two[2 * i] = v[i];
      expect_matches_reference(make(two, {1100, 2}, dt), 0, 1e-5);
    }
  Tensor y = call1("softmax", {make({-kInf, 0, -kInf, 1}, {4})});
  expect_values(y, {0, 1 / (1 + std::exp(1.0)), 0, std::exp(1.0) / (1 + std::exp(1.0))}, 1e-14);
  // All -inf and any NaN give NaN rows, as in PyTorch.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const char* op : {"softmax", "log_softmax"}) {
    expect_values(call1(op, {make({-kInf, -kInf, 1, 2}, {2, 2})}), {nan, nan, 0, 0}, kInf);
    expect_values(call1(op, {make({-kInf, -kInf}, {2, 1})}, {{"dim", 0}}), {nan, nan});
    expect_values(call1(op, {make({1, nan, 2}, {3}, DType::Float32)}), {nan, nan, nan});
  }
}

TEST(Softmax, DtypesAndConversion) {
  Tensor x = rand_tensor({4, 6}, DType::Float64, 5, -3, 3);
  auto want = reference(values(x), x.shape(), -1, false);
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    Tensor xd = x.to(dt);
    const double tol = dt == DType::Float32 ? 1e-6 : 2e-2;
    auto ref = reference(values(xd), x.shape(), -1, false);
    Tensor y = call1("softmax", {xd});
    EXPECT_EQ(y.dtype(), dt);
    expect_values(y, ref, tol);
    expect_values(call1("log_softmax", {xd}), reference(values(xd), x.shape(), -1, true), tol);
  }
  // dtype converts the input first: float32 in, float64 out.
  Tensor y = call1("softmax", {x.to(DType::Float32)}, {{"dtype", DType::Float64}});
  EXPECT_EQ(y.dtype(), DType::Float64);
  expect_values(y, want, 1e-6);
  // Integer input needs dtype.
  Tensor ints = make({1, 2, 3, 4}, {2, 2}, DType::Int64);
  Tensor yi = call1("log_softmax", {ints}, {{"dtype", DType::Float32}});
  EXPECT_EQ(yi.dtype(), DType::Float32);
  expect_values(yi, reference({1, 2, 3, 4}, {2, 2}, -1, true), 1e-6);
}

TEST(Softmax, NonContiguousAndZeroDim) {
  Tensor x = rand_tensor({3, 5}, DType::Float64, 9);
  Tensor nc = noncontiguous(x);
  for (int64_t dim : {0, 1}) {
    expect_values(call1("softmax", {nc}, {{"dim", dim}}),
                  reference(values(x), x.shape(), dim, false), 1e-12);
    expect_values(call1("log_softmax", {nc}, {{"dim", dim}}),
                  reference(values(x), x.shape(), dim, true), 1e-12);
  }
  // A transposed view: softmax along its last dim reads with stride 3.
  Tensor t = x.as_strided({5, 3}, {1, 5}, 0);
  std::vector<double> tv(15);
  auto xv = values(x);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) tv[i * 3 + j] = xv[j * 5 + i];
  expect_values(call1("softmax", {t}), reference(tv, {5, 3}, -1, false), 1e-12);

  Tensor s = Tensor::scalar(3.5, DType::Float32);
  expect_values(call1("softmax", {s}), {1.0});
  expect_values(call1("log_softmax", {s}, {{"dim", -1}}), {0.0});
  EXPECT_EQ(call1("softmax", {Tensor::zeros({2, 0}, DType::Float32)}).shape(), (Dims{2, 0}));
}

TEST(Softmax, Gradients) {
  for (const char* op : {"softmax", "log_softmax"}) {
    check_gradients(op, {rand_tensor({3, 4}, DType::Float64, 1, -2, 2)});
    check_gradients(op, {rand_tensor({2, 3, 4}, DType::Float64, 2, -2, 2)}, {{"dim", 1}});
    check_gradients(op, {rand_tensor({3, 4}, DType::Float64, 3, -2, 2)}, {{"dim", 0}});
    check_gradients(op, {noncontiguous(rand_tensor({2, 5}, DType::Float64, 4, -2, 2))},
                    {{"dim", -1}});
  }
}

TEST(Softmax, GradientConvertsBackToInputDtype) {
  Tensor x = rand_tensor({2, 3}, DType::Float32, 5);
  x.impl()->requires_grad = true;
  Tensor y = call1("softmax", {x}, {{"dtype", DType::Float64}});
  autograd::backward({y}, {rand_tensor({2, 3}, DType::Float64, 6)}, false);
  EXPECT_EQ(x.grad().dtype(), DType::Float32);
}

TEST(Softmax, BackwardOpsDirectly) {
  // y = softmax([0, ln 3]) = [1/4, 3/4]; g = [1, 0]: dx = y * (g - y0) = [3/16, -3/16].
  Tensor y = make({0.25, 0.75}, {2});
  Tensor g = make({1, 0}, {2});
  expect_values(call1("softmax_backward", {g, y}), {0.25 * 0.75, -0.75 * 0.25}, 1e-14);
  // log_softmax: dx = g - exp(out) * sum(g).
  Tensor ly = make({std::log(0.25), std::log(0.75)}, {2});
  expect_values(call1("log_softmax_backward", {make({1, 2}, {2}), ly}), {1 - 0.75, 2 - 2.25},
                1e-14);
}

TEST(Softmax, Errors) {
  auto status = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return Status::Ok;
  };
  Tensor x = rand_tensor({2, 3}, DType::Float32);
  EXPECT_EQ(status([&] { call1("softmax", {x}, {{"dim", 2}}); }), Status::OutOfRange);
  EXPECT_EQ(status([&] { call1("log_softmax", {x}, {{"dim", -3}}); }), Status::OutOfRange);
  EXPECT_EQ(status([&] {
              call1("softmax", {make({1, 2}, {2}, DType::Int32)});
            }),
            Status::DTypeMismatch);
  EXPECT_EQ(status([&] {
              call1("softmax", {x}, {{"dtype", DType::Int64}});
            }),
            Status::DTypeMismatch);
  EXPECT_EQ(status([&] { call1("softmax", {x}, {{"dim", 0.5}}); }), Status::InvalidArgument);
  EXPECT_EQ(status([&] {
              call1("softmax_backward", {rand_tensor({3, 2}), rand_tensor({2, 3})});
            }),
            Status::ShapeMismatch);
  try {
    call1("softmax", {make({1, 2}, {2}, DType::Int32)});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("softmax"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
}
