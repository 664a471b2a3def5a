// Reductions (sum, mean, max, min, argmax, argmin, var, std, logsumexp,
// cumsum) against naive double-precision loops written here.
#include <functional>
#include <limits>

#include "engine/core/parallel.h"
#include "error_test_util.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

using Ints = std::vector<int64_t>;
using Group = std::vector<double>;

// Groups the row-major `v` of `shape` by the coordinates outside `dims`
// (all dims when empty) and applies f to each group, in result order.
std::vector<double> ref_reduce(const std::vector<double>& v, const Dims& shape, Ints dims,
                               const std::function<double(const Group&)>& f) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> red(rank, dims.empty());
  for (int64_t d : dims) red[d < 0 ? d + rank : d] = true;
  int64_t outs = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (!red[d]) outs *= shape[d];
  std::vector<Group> groups(outs);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i), o = 0, mult = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t c = rem % shape[d];
      rem /= shape[d];
      if (!red[d]) o += c * mult, mult *= shape[d];
    }
    groups[o].push_back(v[i]);
  }
  std::vector<double> out;
  for (const auto& g : groups) out.push_back(f(g));
  return out;
}

double gsum(const Group& g) {
  double s = 0;
  for (double x : g) s += x;
  return s;
}
double gmean(const Group& g) { return gsum(g) / static_cast<double>(g.size()); }
double gmax(const Group& g) { return *std::max_element(g.begin(), g.end()); }
double gmin(const Group& g) { return *std::min_element(g.begin(), g.end()); }
std::function<double(const Group&)> gvar(int64_t correction) {
  return [correction](const Group& g) {
    double m = gmean(g), ss = 0;
    for (double x : g) ss += (x - m) * (x - m);
    return ss / std::max<double>(0, static_cast<double>(g.size()) - correction);
  };
}
double glse(const Group& g) {
  double m = gmax(g), s = 0;
  for (double x : g) s += std::exp(x - m);
  return m + std::log(s);
}

Attrs dims(Ints d, bool keepdim = false) { return {{"dim", d}, {"keepdim", keepdim}}; }

// A transposed view: shape (b, a) over a contiguous (a, b) buffer.
Tensor transposed(const Tensor& t) {
  return t.as_strided({t.shape()[1], t.shape()[0]}, {1, t.shape()[1]}, 0);
}

}  // namespace

TEST(Sum, LayoutsAgainstReference) {
  // Trailing dims (rows), leading dims (columns), a middle dim, split dims
  // (permuted copy) and everything.
  Dims shape{3, 4, 5};
  Tensor x = rand_tensor(shape, DType::Float64, 7);
  auto v = values(x);
  for (Ints d :
       {Ints{2}, Ints{1, 2}, Ints{0}, Ints{0, 1}, Ints{1}, Ints{0, 2}, Ints{}, Ints{-1, 0}}) {
    Tensor s = call1("sum", {x}, dims(d));
    expect_values(s, ref_reduce(v, shape, d, gsum), 1e-12);
  }
  Tensor k = call1("sum", {x}, dims({1}, true));
  EXPECT_EQ(k.shape(), (Dims{3, 1, 5}));
  EXPECT_EQ(call1("sum", {x}, dims({0, 2})).shape(), (Dims{4}));
  EXPECT_EQ(call1("sum", {x}).shape(), Dims{});
}

TEST(Sum, StridedInputs) {
  Tensor x = rand_tensor({4, 6}, DType::Float32, 3);
  Tensor nc = noncontiguous(x);
  Tensor t = transposed(x);  // (6, 4), strides (1, 6)
  auto vt = values(t);
  for (Ints d : {Ints{0}, Ints{1}, Ints{}}) {
    expect_values(call1("sum", {nc}, dims(d)), ref_reduce(values(x), {4, 6}, d, gsum), 1e-5);
    expect_values(call1("sum", {t}, dims(d)), ref_reduce(vt, {6, 4}, d, gsum), 1e-5);
  }
  Tensor y = rand_tensor({3, 4, 5}, DType::Float64, 4);
  for (Ints d : {Ints{0, 2}, Ints{1}, Ints{0, 1}})
    expect_values(call1("sum", {noncontiguous(y)}, dims(d)),
                  ref_reduce(values(y), {3, 4, 5}, d, gsum), 1e-12);
}

TEST(Sum, LongRowsAndColumnsSplitAcrossPieces) {
  // Long enough to take the lane, chunk and split paths of the kernel.
  const int64_t n = 300001;
  Tensor row = rand_tensor({2, n}, DType::Float32, 11, 0.0, 1.0);
  auto v = values(row);
  expect_values(call1("sum", {row}, dims({1})), ref_reduce(v, {2, n}, {1}, gsum), 1e-5);
  expect_values(call1("sum", {row}), {gsum(v)}, 1e-5);
  Tensor col = rand_tensor({n / 3, 3}, DType::Float32, 12, 0.0, 1.0);
  expect_values(call1("sum", {col}, dims({0})), ref_reduce(values(col), {n / 3, 3}, {0}, gsum),
                1e-5);
  Tensor wide = rand_tensor({5000, 300}, DType::Float32, 13);
  expect_values(call1("sum", {wide}, dims({0})), ref_reduce(values(wide), {5000, 300}, {0}, gsum),
                1e-4);
  // Reduced dims on both sides of a kept one, with long runs; and many column blocks.
  Tensor seg = rand_tensor({2, 3, 70000}, DType::Float32, 14);
  expect_values(call1("sum", {seg}, dims({0, 2})),
                ref_reduce(values(seg), {2, 3, 70000}, {0, 2}, gsum), 1e-5);
  Tensor deep = rand_tensor({20, 5000, 2}, DType::Float64, 15);
  expect_values(call1("sum", {deep}, dims({1})), ref_reduce(values(deep), {20, 5000, 2}, {1}, gsum),
                1e-12);
  // A float32 sum of many equal values stays accurate (no naive running sum).
  Tensor ones = Tensor::empty({1 << 24}, DType::Float32);
  std::fill_n(ones.data<float>(), 1 << 24, 0.1f);
  expect_values(call1("sum", {ones}), {static_cast<double>(0.1f) * (1 << 24)}, 3e-6);
}

// A bias gradient's sum over N, H and W of NCHW: the kept channels lie
// between reduced dims, each channel's runs spread over the whole input,
// and the kernel takes the runs in memory order. Also mean and max over the
// same dims, on one thread and on two with the same bits.
TEST(Sum, ChannelsBetweenReducedDimsAgainstReference) {
  const Dims shape{64, 32, 8, 8};
  const Tensor x = rand_tensor(shape, DType::Float32, 16);
  const auto v = values(x);
  std::vector<std::vector<unsigned char>> bits;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    ThreadPool::Scope scope(&pool);
    const Tensor s = call1("sum", {x}, dims({0, 2, 3}));
    expect_values(s, ref_reduce(v, shape, {0, 2, 3}, gsum), 1e-4);
    expect_values(call1("mean", {x}, dims({0, 2, 3})), ref_reduce(v, shape, {0, 2, 3}, gmean),
                  1e-5);
    expect_values(call1("max", {x}, dims({0, 2, 3})), ref_reduce(v, shape, {0, 2, 3}, gmax),
                  0);
    bits.push_back(bytes_of(s));
  }
  EXPECT_EQ(bits[0], bits[1]);
}

TEST(Sum, DTypes) {
  Tensor i = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Int32);
  Tensor si = call1("sum", {i}, dims({1}));
  EXPECT_EQ(si.dtype(), DType::Int64);
  expect_values(si, {6, 15});
  Tensor big = make({2e9, 2e9}, {2}, DType::Int32);
  expect_values(call1("sum", {big}), {4e9}, 0);  // no int32 overflow
  Tensor b = make({1, 0, 1, 1}, {4}, DType::Bool);
  expect_values(call1("sum", {b}), {3});
  Tensor u8 = make({200, 100}, {2}, DType::UInt8);
  expect_values(call1("sum", {u8}), {300});
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    Tensor h = make({0.5, 1.5, 2.25, 3.0, 1.0, 2.0}, {2, 3}, dt);
    Tensor s = call1("sum", {h}, dims({0}));
    EXPECT_EQ(s.dtype(), dt);
    expect_values(s, {3.5, 2.5, 4.25}, 1e-2);
  }
  // bf16 accumulates in float: 1024 ones sum exactly.
  Tensor ones = Tensor::empty({1024}, DType::BFloat16);
  for (int k = 0; k < 1024; ++k) ones.data<bf16>()[k] = bf16(1.0f);
  expect_values(call1("sum", {ones}), {1024});
  Tensor f = call1("sum", {i}, {{"dtype", DType::Float64}});
  EXPECT_EQ(f.dtype(), DType::Float64);
  expect_values(f, {21});
}

TEST(Sum, Errors) {
  Tensor x = rand_tensor({2, 3});
  expect_status(Status::InvalidArgument, [&] { call1("sum", {x}, dims({1, -1})); });
  expect_status(Status::OutOfRange, [&] { call1("sum", {x}, dims({2})); });
  expect_status(Status::DTypeMismatch, [&] { call1("sum", {x}, {{"dtype", DType::Bool}}); });
  expect_status(Status::InvalidArgument, [&] { call1("sum", {x}, {{"dim", std::string("0")}}); });
}

TEST(Sum, EmptyAndScalar) {
  expect_values(call1("sum", {Tensor::zeros({0, 3}, DType::Float32)}, dims({0})), {0, 0, 0});
  expect_values(call1("sum", {Tensor::scalar(2.5, DType::Float64)}), {2.5});
  expect_values(call1("sum", {Tensor::scalar(2.5, DType::Float64)}, dims({0})), {2.5});
}

TEST(Mean, ForwardDTypesAndErrors) {
  Dims shape{2, 3, 4};
  Tensor x = rand_tensor(shape, DType::Float64, 5);
  for (Ints d : {Ints{}, Ints{1}, Ints{0, 2}, Ints{2}})
    expect_values(call1("mean", {x}, dims(d)), ref_reduce(values(x), shape, d, gmean), 1e-12);
  expect_values(call1("mean", {noncontiguous(x)}, dims({2})),
                ref_reduce(values(x), shape, {2}, gmean), 1e-12);
  Tensor h = make({1, 2, 3, 4}, {4}, DType::BFloat16);
  expect_values(call1("mean", {h}), {2.5}, 1e-2);
  Tensor i = make({1, 2, 3, 4}, {2, 2}, DType::Int64);
  try {
    call1("mean", {i});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::DTypeMismatch);
    EXPECT_NE(std::string(e.what()).find("int64"), std::string::npos) << e.what();
  }
  Tensor mi = call1("mean", {i}, {{"dim", Ints{1}}, {"dtype", DType::Float32}});
  EXPECT_EQ(mi.dtype(), DType::Float32);
  expect_values(mi, {1.5, 3.5});
  expect_status(Status::DTypeMismatch, [&] { call1("mean", {x}, {{"dtype", DType::Int32}}); });
  EXPECT_TRUE(std::isnan(values(call1("mean", {Tensor::zeros({0}, DType::Float32)}))[0]));
}

TEST(MaxMin, ForwardAgainstReference) {
  Dims shape{3, 4, 5};
  Tensor x = rand_tensor(shape, DType::Float64, 9);
  auto v = values(x);
  for (Ints d : {Ints{}, Ints{2}, Ints{0}, Ints{1}, Ints{0, 2}}) {
    expect_values(call1("max", {x}, dims(d)), ref_reduce(v, shape, d, gmax), 0);
    expect_values(call1("min", {x}, dims(d)), ref_reduce(v, shape, d, gmin), 0);
  }
  expect_values(call1("max", {noncontiguous(x)}, dims({2})), ref_reduce(v, shape, {2}, gmax), 0);
  Tensor t = transposed(rand_tensor({3, 5}, DType::Float32, 4));
  expect_values(call1("min", {t}, dims({0})), ref_reduce(values(t), {5, 3}, {0}, gmin), 0);
  EXPECT_EQ(call1("max", {x}, dims({1}, true)).shape(), (Dims{3, 1, 5}));
}

TEST(MaxMin, DTypesNaNAndErrors) {
  Tensor i = make({3, -7, 5, 2}, {2, 2}, DType::Int32);
  Tensor mi = call1("max", {i}, dims({0}));
  EXPECT_EQ(mi.dtype(), DType::Int32);
  expect_values(mi, {5, 2});
  expect_values(call1("min", {i}), {-7});
  expect_values(call1("max", {make({0, 0, 1}, {3}, DType::Bool)}), {1});
  expect_values(call1("min", {make({-128, 127}, {2}, DType::Int8)}), {-128});
  expect_values(call1("max", {make({1.5, -2, 7.25}, {3}, DType::BFloat16)}), {7.25});
  expect_values(call1("min", {make({1.5, -2, 7.25}, {3}, DType::Float16)}), {-2});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor n = make({1, nan, 3, 4, 5, 6}, {2, 3});
  auto got = values(call1("max", {n}, dims({1})));
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(got[1], 6);
  EXPECT_TRUE(std::isnan(values(call1("min", {n}))[0]));
  expect_status(Status::InvalidArgument, [&] {
    call1("max", {Tensor::zeros({2, 0}, DType::Float32)}, dims({1}));
  });
  expect_status(Status::OutOfRange, [&] { call1("min", {n}, dims({3})); });
  expect_values(call1("max", {Tensor::zeros({0, 2}, DType::Float32)}, dims({1})), {});
}

TEST(MaxMin, GradientSplitsAmongTies) {
  Tensor x = make({1, 3, 3, 2, 0, 0}, {2, 3});
  x.impl()->requires_grad = true;
  Tensor m = call1("max", {x}, dims({1}));
  autograd::backward({m}, {make({1, 1}, {2})}, false);
  expect_values(x.grad(), {0, 0.5, 0.5, 1, 0, 0});
  Tensor y = make({1, 3, 3, 2, 0, 0}, {2, 3});
  y.impl()->requires_grad = true;
  Tensor mn = call1("min", {y});
  autograd::backward({mn}, {Tensor()}, false);
  expect_values(y.grad(), {0, 0, 0, 0, 0.5, 0.5});
}

TEST(MaxMin, Gradients) {
  check_gradients("max", {rand_tensor({2, 3, 4}, DType::Float64, 21)}, dims({0, 2}));
  check_gradients("max", {rand_tensor({3, 4}, DType::Float64, 22)}, dims({0}, true));
  check_gradients("min", {rand_tensor({3, 4}, DType::Float64, 23)});
  check_gradients("min", {noncontiguous(rand_tensor({3, 4}, DType::Float64, 24))}, dims({1}));
}

TEST(ArgMaxMin, ForwardTiesNaNAndLayouts) {
  Tensor x = make({1, 5, 5, 2, 7, 0, 7, 7, 1, 1, 1, 1}, {3, 4});
  Tensor a1 = call1("argmax", {x}, {{"dim", int64_t{1}}});
  EXPECT_EQ(a1.dtype(), DType::Int64);
  expect_values(a1, {1, 0, 0});  // first index on ties
  expect_values(call1("argmin", {x}, {{"dim", int64_t{1}}}), {0, 1, 0});
  expect_values(call1("argmax", {x}, {{"dim", int64_t{0}}}), {1, 0, 1, 1});
  expect_values(call1("argmin", {x}, {{"dim", int64_t{0}}}), {0, 1, 2, 2});
  expect_values(call1("argmax", {x}), {4});  // flattened
  expect_values(call1("argmin", {x}), {5});
  Tensor k = call1("argmax", {x}, {{"dim", int64_t{-1}}, {"keepdim", true}});
  EXPECT_EQ(k.shape(), (Dims{3, 1}));
  EXPECT_EQ(call1("argmax", {x}, {{"keepdim", true}}).shape(), (Dims{1, 1}));
  expect_values(call1("argmax", {noncontiguous(x)}, {{"dim", int64_t{1}}}), {1, 0, 0});
  expect_values(call1("argmax", {transposed(x)}, {{"dim", int64_t{1}}}), {1, 0, 1, 1});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor n = make({1, nan, 9, nan}, {4}, DType::Float32);
  expect_values(call1("argmax", {n}), {1});
  expect_values(call1("argmin", {n}), {1});
  expect_values(call1("argmax", {make({3, -1, 8, 8}, {4}, DType::Int16)}), {2});
  expect_values(call1("argmin", {make({0.5, -1, 8}, {3}, DType::BFloat16)}), {1});
}

TEST(ArgMaxMin, LongRowsAndColumnsAgainstReference) {
  const int64_t n = 200003;
  Tensor x = rand_tensor({n}, DType::Float32, 31);
  auto v = values(x);
  int64_t best = std::max_element(v.begin(), v.end()) - v.begin();
  expect_values(call1("argmax", {x}), {static_cast<double>(best)});
  Tensor c = rand_tensor({50, 300}, DType::Float64, 32);
  auto vc = values(c);
  std::vector<double> want;
  for (int64_t j = 0; j < 300; ++j) {
    int64_t at = 0;
    for (int64_t i = 1; i < 50; ++i)
      if (vc[i * 300 + j] < vc[at * 300 + j]) at = i;
    want.push_back(static_cast<double>(at));
  }
  expect_values(call1("argmin", {c}, {{"dim", int64_t{0}}}), want);
}

TEST(ArgMaxMin, Errors) {
  expect_status(Status::InvalidArgument,
                [&] { call1("argmax", {Tensor::zeros({0}, DType::Float32)}); });
  expect_status(Status::OutOfRange, [&] {
    call1("argmin", {rand_tensor({2, 2})}, {{"dim", int64_t{2}}});
  });
  expect_status(Status::InvalidArgument, [&] {
    call1("argmax", {rand_tensor({2, 2})}, {{"dim", 1.5}});
  });
}

TEST(VarStd, ForwardAgainstReference) {
  Dims shape{3, 4, 5};
  Tensor x = rand_tensor(shape, DType::Float64, 41);
  auto v = values(x);
  for (int64_t corr : {0, 1, 2})
    for (Ints d : {Ints{}, Ints{2}, Ints{0}, Ints{1}, Ints{0, 2}}) {
      Attrs a{{"dim", d}, {"correction", corr}};
      auto want = ref_reduce(v, shape, d, gvar(corr));
      expect_values(call1("var", {x}, a), want, 1e-12);
      for (double& w : want) w = std::sqrt(w);
      expect_values(call1("std", {x}, a), want, 1e-12);
    }
  expect_values(call1("var", {noncontiguous(x)}, dims({2})), ref_reduce(v, shape, {2}, gvar(1)),
                1e-12);
  EXPECT_EQ(call1("std", {x}, dims({1}, true)).shape(), (Dims{3, 1, 5}));
  // One element with correction 1 divides by zero: NaN, as in PyTorch.
  EXPECT_TRUE(std::isnan(values(call1("var", {make({3}, {1})}))[0]));
}

TEST(VarStd, StableForLargeOffsetsAndReducedFloats) {
  // float32 values 1e4 + small noise: a one-pass sum of squares would lose it all.
  Tensor x = rand_tensor({1000}, DType::Float64, 42, 1e4, 1e4 + 1.0);
  auto want = gvar(1)(values(x));
  expect_values(call1("var", {x.to(DType::Float32)}), {want}, 2e-3);
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    Tensor h = make({1, 2, 3, 4}, {4}, dt);
    EXPECT_EQ(call1("var", {h}).dtype(), dt);
    expect_values(call1("var", {h}), {5.0 / 3.0}, 1e-2);
    expect_values(call1("std", {h}, {{"correction", int64_t{0}}}), {std::sqrt(1.25)}, 1e-2);
  }
  expect_status(Status::DTypeMismatch, [&] { call1("var", {make({1, 2}, {2}, DType::Int32)}); });
  expect_status(Status::InvalidArgument, [&] { call1("std", {x}, {{"correction", 0.5}}); });
}

TEST(VarStd, Gradients) {
  check_gradients("var", {rand_tensor({3, 4}, DType::Float64, 43)}, dims({1}));
  check_gradients("var", {rand_tensor({2, 3, 2}, DType::Float64, 44)},
                  {{"dim", Ints{0, 2}}, {"correction", int64_t{0}}});
  check_gradients("std", {rand_tensor({3, 4}, DType::Float64, 45)}, dims({0}, true));
  check_gradients("std", {noncontiguous(rand_tensor({2, 5}, DType::Float64, 46))});
}

TEST(LogSumExp, ForwardStableAndDTypes) {
  Dims shape{3, 4, 5};
  Tensor x = rand_tensor(shape, DType::Float64, 51, -5, 5);
  auto v = values(x);
  for (Ints d : {Ints{}, Ints{2}, Ints{0}, Ints{1}, Ints{0, 2}})
    expect_values(call1("logsumexp", {x}, dims(d)), ref_reduce(v, shape, d, glse), 1e-12);
  expect_values(call1("logsumexp", {noncontiguous(x)}, dims({1})), ref_reduce(v, shape, {1}, glse),
                1e-12);
  // Large scores do not overflow: log(e^1000 + e^1000) = 1000 + log 2.
  expect_values(call1("logsumexp", {make({1000, 1000}, {2}, DType::Float32)}),
                {1000 + std::log(2.0)}, 1e-6);
  const double inf = std::numeric_limits<double>::infinity();
  auto all_minus_inf = values(call1("logsumexp", {make({-inf, -inf, 0, 0}, {2, 2})}, dims({1})));
  EXPECT_EQ(all_minus_inf[0], -inf);
  EXPECT_NEAR(all_minus_inf[1], std::log(2.0), 1e-12);
  EXPECT_EQ(values(call1("logsumexp", {make({inf, 1}, {2})}))[0], inf);
  Tensor i = call1("logsumexp", {make({0, 0}, {2}, DType::Int64)});
  EXPECT_EQ(i.dtype(), DType::Float32);
  expect_values(i, {std::log(2.0)}, 1e-6);
  Tensor h = call1("logsumexp", {make({1, 2}, {2}, DType::BFloat16)});
  EXPECT_EQ(h.dtype(), DType::BFloat16);
  expect_values(h, {2 + std::log1p(std::exp(-1.0))}, 1e-2);
  expect_status(Status::InvalidArgument, [&] { call1("logsumexp", {x}, dims({0, 0})); });
}

namespace {
// Gradient of sum(op(x) * w) with respect to x, for a fixed pseudo-random w.
std::vector<double> grad_values(const std::string& op, Tensor x, const Attrs& attrs) {
  x = x.clone();
  x.impl()->requires_grad = true;
  Tensor y = call1(op, {x}, attrs);
  autograd::backward({y}, {rand_tensor(y.shape(), y.dtype(), 99)}, false);
  return values(x.grad());
}
}  // namespace

TEST(LogSumExp, Gradients) {
  // float32 rows and strided slices agree with float64.
  Tensor x = rand_tensor({5, 70}, DType::Float64, 55, -4, 4);
  for (Ints d : {Ints{1}, Ints{0}}) {
    auto want = grad_values("logsumexp", x, dims(d));
    auto got = grad_values("logsumexp", x.to(DType::Float32), dims(d));
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  }
  check_gradients("logsumexp", {rand_tensor({3, 4}, DType::Float64, 52)}, dims({1}));
  check_gradients("logsumexp", {rand_tensor({2, 3, 2}, DType::Float64, 53)}, dims({0, 2}, true));
  check_gradients("logsumexp", {noncontiguous(rand_tensor({2, 3}, DType::Float64, 54))});
}

TEST(CumSum, ForwardAgainstReference) {
  Dims shape{3, 4, 5};
  Tensor x = rand_tensor(shape, DType::Float64, 61);
  auto v = values(x);
  for (int64_t dim : {0, 1, 2, -1})
    for (bool reverse : {false, true}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Dims st = contiguous_strides(shape);
      std::vector<double> want(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        int64_t c = (static_cast<int64_t>(i) / st[d]) % shape[d];
        double s = 0;
        for (int64_t k = 0; k < shape[d]; ++k)
          if (reverse ? k >= c : k <= c) s += v[i + (k - c) * st[d]];
        want[i] = s;
      }
      Tensor got = call1("cumsum", {x}, {{"dim", dim}, {"reverse", reverse}});
      EXPECT_EQ(got.shape(), shape);
      expect_values(got, want, 1e-12);
      expect_values(call1("cumsum", {noncontiguous(x)}, {{"dim", dim}, {"reverse", reverse}}), want,
                    1e-12);
    }
}

TEST(CumSum, DTypesAndErrors) {
  Tensor i = make({1, 2, 3, 4}, {4}, DType::Int8);
  Tensor ci = call1("cumsum", {i}, {{"dim", int64_t{0}}});
  EXPECT_EQ(ci.dtype(), DType::Int64);
  expect_values(ci, {1, 3, 6, 10});
  expect_values(call1("cumsum", {make({1, 0, 1}, {3}, DType::Bool)}, {{"dim", int64_t{0}}}),
                {1, 1, 2});
  Tensor f = call1("cumsum", {i}, {{"dim", int64_t{0}}, {"dtype", DType::Float32}});
  EXPECT_EQ(f.dtype(), DType::Float32);
  expect_values(f, {1, 3, 6, 10});
  Tensor h =
      call1("cumsum", {make({0.5, 0.25, 1, 2}, {2, 2}, DType::Float16)}, {{"dim", int64_t{0}}});
  EXPECT_EQ(h.dtype(), DType::Float16);
  expect_values(h, {0.5, 0.25, 1.5, 2.25}, 1e-3);
  expect_values(call1("cumsum", {Tensor::scalar(3, DType::Float32)}, {{"dim", int64_t{0}}}), {3});
  expect_status(Status::OutOfRange, [&] { call1("cumsum", {i}, {{"dim", int64_t{1}}}); });
  expect_status(Status::InvalidArgument, [&] { call1("cumsum", {i}); });
  expect_status(Status::DTypeMismatch, [&] {
    call1("cumsum", {i}, {{"dim", int64_t{0}}, {"dtype", DType::Bool}});
  });
}

TEST(CumSum, Gradients) {
  check_gradients("cumsum", {rand_tensor({3, 4}, DType::Float64, 62)}, {{"dim", int64_t{1}}});
  check_gradients("cumsum", {rand_tensor({3, 2, 2}, DType::Float64, 63)},
                  {{"dim", int64_t{0}}, {"reverse", true}});
}

TEST(SumMean, Gradients) {
  check_gradients("sum", {rand_tensor({2, 3, 2}, DType::Float64, 71)}, dims({1}, true));
  check_gradients("mean", {rand_tensor({2, 3, 2}, DType::Float64, 72)}, dims({0, 2}));
  check_gradients("mean", {noncontiguous(rand_tensor({3, 2}, DType::Float64, 73))});
}

TEST(Norm, EveryOrderMatchesReference) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const Dims shape{3, 4, 2};
  Tensor x = rand_tensor(shape, DType::Float64, 81, -2, 2);
  x.data<double>()[5] = 0;  // a zero for the count of nonzeros
  auto order = [](double p) {
    return [p](const Group& g) {
      double acc = p == -inf ? inf : 0;
      for (double v : g) {
        const double a = std::abs(v);
        if (p == inf) acc = std::max(acc, a);
        else if (p == -inf) acc = std::min(acc, a);
        else if (p == 0) acc += v != 0;
        else acc += std::pow(a, p);
      }
      return std::isinf(p) || p == 0 ? acc : std::pow(acc, 1 / p);
    };
  };
  for (double p : {2.0, 1.0, 3.0, 0.0, inf, -inf})
    for (const Ints& d : {Ints{}, Ints{1}, Ints{0, 2}}) {
      SCOPED_TRACE("p " + std::to_string(p) + ", " + std::to_string(d.size()) + " dims");
      Attrs a = d.empty() ? Attrs{{"p", p}} : Attrs{{"p", p}, {"dim", d}};
      expect_values(call1("norm", {x}, a), ref_reduce(values(x), shape, d, order(p)), 1e-12);
      expect_values(call1("norm", {noncontiguous(x)}, a),
                    ref_reduce(values(x), shape, d, order(p)), 1e-12);
    }
  Tensor x32 = x.to(DType::Float32);
  Tensor n32 = call1("norm", {x32}, {{"dim", Ints{-1}}, {"keepdim", true}});
  EXPECT_EQ(n32.dtype(), DType::Float32);
  EXPECT_EQ(n32.shape(), (Dims{3, 4, 1}));
  expect_values(n32, ref_reduce(values(x32), shape, {2}, order(2)), 1e-6);
  EXPECT_EQ(status_of([&] { call1("norm", {make({1, 2, 3}, {3}, DType::Int64)}); }), Status::DTypeMismatch);
}

TEST(Norm, NormalizeFloorsTheDivisorAtEps) {
  Tensor x = make({3, 4, 0, 0, 1e-14, 0}, {3, 2});
  // Rows: divided by 5; all zeros stays zeros; a tiny row is divided by eps.
  expect_values(call1("normalize", {x}), {0.6, 0.8, 0, 0, 0.01, 0}, 1e-12);
  expect_values(call1("normalize", {x}, {{"p", 1.0}, {"dim", Ints{0}}, {"eps", 1e-12}}),
                {3 / (3 + 1e-14), 1, 0, 0, 1e-14 / (3 + 1e-14), 0}, 1e-12);
  check_gradients("normalize", {rand_tensor({3, 4}, DType::Float64, 82)},
                  {{"dim", Ints{0, 1}}});
}
