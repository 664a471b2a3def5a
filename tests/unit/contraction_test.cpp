// The contraction ops (matmul, linear, addmm, bmm, matmul_nt, matmul_tn)
// against a naive batched triple loop in double, with transposed and
// non-contiguous operands, broadcast batch dims, zero-size dims, reduced and
// integer dtypes, gradients and shape/dtype errors.
#include <cmath>
#include <functional>
#include <limits>

#include "error_test_util.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

// Naive product of a (..., m, k) @ b (..., k, n) in double; batch dims
// broadcast right-aligned. Returns the values of the (batch..., m, n) result.
std::vector<double> naive_product(const Tensor& a, const Tensor& b, Dims* out_shape = nullptr) {
  const auto av = values(a), bv = values(b);
  const Dims& as = a.shape();
  const Dims& bs = b.shape();
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  EXPECT_EQ(bs[bs.size() - 2], k) << "test bug: inner sizes";
  const Dims ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t rank = std::max(ab.size(), bb.size());
  Dims batch(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t x = d + ab.size() >= rank ? ab[d + ab.size() - rank] : 1;
    const int64_t y = d + bb.size() >= rank ? bb[d + bb.size() - rank] : 1;
    batch[d] = x == 1 ? y : x;
  }
  // Flat batch index of an operand for the output batch multi-index.
  auto flat = [&](const Dims& own, const Dims& idx) {
    int64_t f = 0;
    for (size_t d = 0; d < own.size(); ++d) {
      const int64_t i = idx[d + rank - own.size()];
      f = f * own[d] + (own[d] == 1 ? 0 : i);
    }
    return f;
  };
  std::vector<double> out;
  Dims idx(rank, 0);
  for (int64_t t = 0; t < numel_of(batch); ++t) {
    const int64_t fa = flat(ab, idx), fb = flat(bb, idx);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += av[(fa * m + i) * k + p] * bv[(fb * k + p) * n + j];
        out.push_back(acc);
      }
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  if (out_shape) {
    *out_shape = batch;
    out_shape->push_back(m);
    out_shape->push_back(n);
  }
  return out;
}

// The same values stored with the last two dims swapped in memory (the layout
// a transpose view has): row stride 1, column stride = rows.
Tensor column_major(const Tensor& t) {
  Dims stored = t.shape();
  std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
  Tensor buf = Tensor::empty(stored, t.dtype());
  Dims st = buf.strides();
  std::swap(st[st.size() - 1], st[st.size() - 2]);
  Tensor view = buf.as_strided(t.shape(), st, 0);
  view.copy_from(t);
  EXPECT_FALSE(view.is_contiguous());
  return view;
}

// A tensor holding the transpose of the last two dims of t (a new contiguous tensor).
Tensor transposed_copy(const Tensor& t) {
  Dims sh = t.shape();
  std::swap(sh[sh.size() - 1], sh[sh.size() - 2]);
  Dims st = t.strides();
  std::swap(st[st.size() - 1], st[st.size() - 2]);
  return t.as_strided(sh, st, t.offset()).contiguous();
}

// A 1-D tensor with the same values at stride 2.
Tensor strided_vector(const Tensor& t) {
  Tensor buf = Tensor::zeros({2 * t.numel()}, t.dtype());
  Tensor view = buf.as_strided({t.numel()}, {2}, 0);
  view.copy_from(t);
  return view;
}

// A 2-D tensor with the same values and no unit stride (every other row and
// column of a larger buffer): no GEMM layout reads it in place.
Tensor sparse_2d(const Tensor& t) {
  const int64_t r = t.shape()[0], c = t.shape()[1];
  Tensor buf = Tensor::zeros({2 * r, 2 * c}, t.dtype());
  Tensor view = buf.as_strided({r, c}, {4 * c, 2}, 0);
  view.copy_from(t);
  return view;
}

Attrs ab(double alpha, double beta) { return {{"alpha", alpha}, {"beta", beta}}; }

}  // namespace

// ---- matmul ------------------------------------------------------------------------

TEST(Matmul, TwoDHandComputed) {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = make({7, 8, 9, 10, 11, 12}, {3, 2});
  Tensor c = call1("matmul", {a, b});
  EXPECT_EQ(c.shape(), (Dims{2, 2}));
  expect_values(c, {58, 64, 139, 154});
}

TEST(Matmul, OneDimensionalOperands) {
  Tensor v = make({1, 2, 3}, {3});
  Tensor w = make({4, 5, 6}, {3});
  Tensor dot = call1("matmul", {v, w});
  EXPECT_EQ(dot.shape(), Dims{});
  expect_values(dot, {32});

  Tensor m = make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor mv = call1("matmul", {m, v});  // (2, 3) @ (3) -> (2)
  EXPECT_EQ(mv.shape(), (Dims{2}));
  expect_values(mv, {14, 32});
  Tensor vm = call1("matmul", {make({1, -1}, {2}), m});  // (2) @ (2, 3) -> (3)
  EXPECT_EQ(vm.shape(), (Dims{3}));
  expect_values(vm, {-3, -3, -3});

  // 1-D against batched operands: the vector's dim is dropped, batch dims stay.
  Tensor batch = rand_tensor({4, 2, 3});
  Tensor bv = call1("matmul", {batch, v});
  EXPECT_EQ(bv.shape(), (Dims{4, 2}));
  expect_values(bv, naive_product(batch, make({1, 2, 3}, {3, 1})));
  Tensor b3 = rand_tensor({4, 3, 5}, DType::Float64, 9);
  Tensor vb = call1("matmul", {v, b3});
  EXPECT_EQ(vb.shape(), (Dims{4, 5}));
  expect_values(vb, naive_product(make({1, 2, 3}, {1, 3}), b3));
}

TEST(Matmul, BroadcastBatchDims) {
  Tensor a = rand_tensor({2, 1, 3, 4}, DType::Float64, 1);
  Tensor b = rand_tensor({5, 4, 2}, DType::Float64, 2);
  Dims want_shape;
  auto want = naive_product(a, b, &want_shape);
  Tensor c = call1("matmul", {a, b});
  EXPECT_EQ(c.shape(), (Dims{2, 5, 3, 2}));
  EXPECT_EQ(c.shape(), want_shape);
  expect_values(c, want, 1e-12);
  // A batched a against one 2-D b (folded into a single product) and the reverse.
  Tensor b2 = rand_tensor({4, 6}, DType::Float64, 3);
  expect_values(call1("matmul", {a, b2}), naive_product(a, b2), 1e-12);
  Tensor a2 = rand_tensor({3, 4}, DType::Float64, 4);
  Tensor bb = rand_tensor({2, 3, 4, 2}, DType::Float64, 5);
  expect_values(call1("matmul", {a2, bb}), naive_product(a2, bb), 1e-12);
}

TEST(Matmul, TransposedAndNonContiguousOperands) {
  Tensor a = rand_tensor({3, 5, 4}, DType::Float32, 1);
  Tensor b = rand_tensor({3, 4, 6}, DType::Float32, 2);
  const auto want = naive_product(a, b);
  expect_values(call1("matmul", {column_major(a), b}), want, 1e-5);
  expect_values(call1("matmul", {a, column_major(b)}), want, 1e-5);
  expect_values(call1("matmul", {column_major(a), column_major(b)}), want, 1e-5);
  expect_values(call1("matmul", {noncontiguous(a), noncontiguous(b)}), want, 1e-5);
  // The transpose op's view of the last two dims.
  Tensor bt = transposed_copy(b);
  expect_values(call1("matmul", {a, call1("transpose", {bt}, {{"dim0", -1}, {"dim1", -2}})}), want,
                1e-5);
  // A transpose view of a 2-D weight and a strided vector.
  Tensor w = rand_tensor({6, 4}, DType::Float32, 3);
  Tensor wt = w.as_strided({4, 6}, {1, 4}, 0);
  expect_values(call1("matmul", {a, wt}), naive_product(a, transposed_copy(w)), 1e-5);
  Tensor v = strided_vector(rand_tensor({4}, DType::Float32, 4));
  expect_values(call1("matmul", {a, v}),
                naive_product(a, v.contiguous().as_strided({4, 1}, {1, 1}, 0)), 1e-5);
  // Layouts with no unit stride are copied.
  Tensor a2 = rand_tensor({5, 4}, DType::Float32, 6);
  Tensor wt2 = transposed_copy(w);
  expect_values(call1("matmul", {sparse_2d(a2), sparse_2d(wt2)}), naive_product(a2, wt2), 1e-5);
  // A batch dim with stride 0 (expanded).
  Tensor e = rand_tensor({1, 5, 4}, DType::Float32, 5).as_strided({3, 5, 4}, {0, 4, 1}, 0);
  expect_values(call1("matmul", {e, b}), naive_product(e.contiguous(), b), 1e-5);
}

TEST(Matmul, LargeProductsAcrossThreads) {
  // Big enough to be tiled over the pool; batched with a shared right operand.
  Tensor a = rand_tensor({2, 70, 96}, DType::Float32, 1);
  Tensor b = rand_tensor({96, 130}, DType::Float32, 2);
  expect_values(call1("matmul", {a, b}), naive_product(a, b), 1e-4);
  expect_values(call1("matmul", {column_major(a), column_major(b)}), naive_product(a, b), 1e-4);
  Tensor b3 = rand_tensor({2, 96, 130}, DType::Float64, 3);
  Tensor a64 = a.to(DType::Float64);
  expect_values(call1("matmul", {a64, b3}), naive_product(a64, b3), 1e-12);
}

TEST(Matmul, ZeroSizeDims) {
  Tensor z = call1("matmul",
                   {Tensor::empty({2, 0}, DType::Float32), Tensor::empty({0, 3}, DType::Float32)});
  EXPECT_EQ(z.shape(), (Dims{2, 3}));
  expect_values(z, std::vector<double>(6, 0.0));  // an empty sum is 0
  EXPECT_EQ(
      call1("matmul", {Tensor::empty({0, 4}, DType::Float32), rand_tensor({4, 3}, DType::Float32)})
          .shape(),
      (Dims{0, 3}));
  EXPECT_EQ(call1("matmul", {rand_tensor({0, 2, 4}), rand_tensor({4, 3})}).shape(),
            (Dims{0, 2, 3}));
  EXPECT_EQ(call1("matmul", {rand_tensor({2, 4}), rand_tensor({4, 0})}).shape(), (Dims{2, 0}));
  expect_values(
      call1("matmul", {Tensor::empty({0}, DType::Float64), Tensor::empty({0}, DType::Float64)}),
      {0});
}

TEST(Matmul, ReducedFloatAndIntegerDtypes) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    Tensor a = rand_tensor({2, 3, 16}, dt, 1), b = rand_tensor({16, 5}, dt, 2);
    Tensor c = call1("matmul", {a, b});
    EXPECT_EQ(c.dtype(), dt);
    expect_values(c, naive_product(a, b), dt == DType::BFloat16 ? 1e-2 : 2e-3);
    expect_values(call1("matmul", {column_major(a), b}), naive_product(a, b),
                  dt == DType::BFloat16 ? 1e-2 : 2e-3);
  }
  for (DType dt : {DType::Int64, DType::Int32, DType::Int8}) {
    Tensor a = make({1, -2, 3, 4, 5, -6}, {2, 3}, dt), b = make({1, 2, 3, 4, 5, 6}, {3, 2}, dt);
    Tensor c = call1("matmul", {a, b});
    EXPECT_EQ(c.dtype(), dt);
    expect_values(c, {10, 12, -11, -8});
    expect_values(call1("matmul", {column_major(a), b}), {10, 12, -11, -8});
  }
  // Integer products wrap around like PyTorch's: 100 * 2 = 200 -> -56 in int8.
  expect_values(call1("matmul", {make({100}, {1, 1}, DType::Int8), make({2}, {1, 1}, DType::Int8)}),
                {-56});
}

TEST(Matmul, Errors) {
  expect_status(Status::ShapeMismatch,
                [] { call1("matmul", {rand_tensor({2, 3}), rand_tensor({4, 2})}); },
                {"matmul", "[2, 3]", "[4, 2]"});
  expect_status(Status::ShapeMismatch,
                [] { call1("matmul", {rand_tensor({2, 2, 3}), rand_tensor({3, 3, 2})}); },
                {"matmul", "[2, 2, 3]", "[3, 3, 2]"});
  expect_status(Status::ShapeMismatch,
                [] { call1("matmul", {Tensor::scalar(1, DType::Float64), rand_tensor({2})}); },
                {"matmul", "[]", "[2]"});
  expect_status(Status::DTypeMismatch,
                [] { call1("matmul", {rand_tensor({2, 2}), rand_tensor({2, 2}, DType::Float32)}); },
                {"matmul", "float64", "float32"});
  expect_status(Status::DTypeMismatch,
                [] {
                  call1("matmul",
                        {make({1, 0}, {1, 2}, DType::Bool), make({1, 1}, {2, 1}, DType::Bool)});
                },
                {"matmul", "bool"});
}

TEST(Matmul, Gradients) {
  check_gradients("matmul", {rand_tensor({2, 3}), rand_tensor({3, 4}, DType::Float64, 2)});
  check_gradients("matmul", {rand_tensor({3}), rand_tensor({3}, DType::Float64, 2)});
  check_gradients("matmul", {rand_tensor({2, 3}), rand_tensor({3}, DType::Float64, 2)});
  check_gradients("matmul", {rand_tensor({3}), rand_tensor({2, 3, 2}, DType::Float64, 2)});
  check_gradients("matmul", {rand_tensor({2, 2, 3}), rand_tensor({3}, DType::Float64, 2)});
  // Broadcast batch dims on both sides, and a batch against a shared 2-D operand.
  check_gradients("matmul", {rand_tensor({2, 1, 2, 3}), rand_tensor({2, 3, 2}, DType::Float64, 2)});
  check_gradients("matmul", {rand_tensor({2, 2, 3}), rand_tensor({3, 2}, DType::Float64, 2)});
  check_gradients("matmul", {rand_tensor({2, 3}), rand_tensor({2, 3, 2}, DType::Float64, 2)});
}

TEST(Matmul, GradientOfTransposedInputsThroughAutograd) {
  // Leaves read through a transposed layout still get gradients in their own layout.
  Tensor a = column_major(rand_tensor({3, 2}));
  Tensor b = rand_tensor({2, 4}, DType::Float64, 2);
  a.impl()->requires_grad = true;
  b.impl()->requires_grad = true;
  Tensor y = call1("sum", {call1("matmul", {a, b})});
  autograd::backward({y}, {Tensor()}, false);
  // d sum(a b) / d a[i][p] = sum_j b[p][j]; / d b[p][j] = sum_i a[i][p].
  auto bv = values(b), av = values(a);
  std::vector<double> ga, gb;
  for (int i = 0; i < 3; ++i)
    for (int p = 0; p < 2; ++p)
      ga.push_back(bv[p * 4] + bv[p * 4 + 1] + bv[p * 4 + 2] + bv[p * 4 + 3]);
  for (int p = 0; p < 2; ++p)
    for (int j = 0; j < 4; ++j) gb.push_back(av[p] + av[2 + p] + av[4 + p]);
  expect_values(a.grad(), ga, 1e-12);
  expect_values(b.grad(), gb, 1e-12);
}

// ---- matmul_nt, matmul_tn ----------------------------------------------------------------

TEST(TransposedProducts, ForwardAndGradients) {
  Tensor a = rand_tensor({2, 3, 4}, DType::Float64, 1), b = rand_tensor({5, 4}, DType::Float64, 2);
  Tensor nt = call1("matmul_nt", {a, b});
  EXPECT_EQ(nt.shape(), (Dims{2, 3, 5}));
  expect_values(nt, naive_product(a, transposed_copy(b)), 1e-12);
  Tensor c = rand_tensor({2, 4, 3}, DType::Float64, 3), d = rand_tensor({4, 5}, DType::Float64, 4);
  Tensor tn = call1("matmul_tn", {c, d});
  EXPECT_EQ(tn.shape(), (Dims{2, 3, 5}));
  expect_values(tn, naive_product(transposed_copy(c), d), 1e-12);
  // Operands that are themselves transposed layouts cancel out.
  expect_values(call1("matmul_nt", {a, column_major(b)}), values(nt), 1e-12);
  expect_values(call1("matmul_tn", {column_major(c), d}), values(tn), 1e-12);
  check_gradients("matmul_nt", {rand_tensor({2, 2, 3}), rand_tensor({4, 3}, DType::Float64, 2)});
  check_gradients("matmul_tn", {rand_tensor({3, 2}), rand_tensor({2, 3, 4}, DType::Float64, 2)});
  expect_status(Status::ShapeMismatch,
                [] { call1("matmul_nt", {rand_tensor({2, 3}), rand_tensor({4, 2})}); },
                {"matmul_nt", "[2, 3]", "[4, 2]"});
  expect_status(Status::ShapeMismatch,
                [] { call1("matmul_tn", {rand_tensor({3}), rand_tensor({3, 2})}); },
                {"matmul_tn", "[3]", "[3, 2]"});
}

// ---- linear ----------------------------------------------------------------------

TEST(Linear, MatchesNaiveWithAndWithoutBias) {
  Tensor x = rand_tensor({2, 3, 4}, DType::Float64, 1);
  Tensor w = rand_tensor({5, 4}, DType::Float64, 2);
  Tensor bias = make({1, 2, 3, 4, 5}, {5});
  auto prod = naive_product(x, transposed_copy(w));
  Tensor y0 = call1("linear", {x, w});
  EXPECT_EQ(y0.shape(), (Dims{2, 3, 5}));
  expect_values(y0, prod, 1e-12);
  auto with_bias = prod;
  for (size_t i = 0; i < with_bias.size(); ++i) with_bias[i] += static_cast<double>(i % 5 + 1);
  expect_values(call1("linear", {x, w, bias}), with_bias, 1e-12);
  // An explicitly absent bias is the same as none.
  expect_values(
      call(OpRegistry::global().get("linear"), std::vector<Tensor>{x, w, Tensor()}, {})[0], prod,
      1e-12);
  // 1-D input.
  Tensor x1 = make({1, 0, -1, 2}, {4});
  Tensor y1 = call1("linear", {x1, w, bias});
  EXPECT_EQ(y1.shape(), (Dims{5}));
  auto wv = values(w);
  std::vector<double> want1;
  for (int o = 0; o < 5; ++o)
    want1.push_back(wv[o * 4] - wv[o * 4 + 2] + 2 * wv[o * 4 + 3] + o + 1);
  expect_values(y1, want1, 1e-12);
}

TEST(Linear, StridedOperandsAndBigBatch) {
  Tensor x = rand_tensor({64, 96}, DType::Float32, 1);
  Tensor w = rand_tensor({300, 96}, DType::Float32, 2);
  Tensor bias = rand_tensor({300}, DType::Float32, 3);
  auto want = naive_product(x, transposed_copy(w));
  auto bv = values(bias);
  for (size_t i = 0; i < want.size(); ++i) want[i] += bv[i % 300];
  expect_values(call1("linear", {x, w, bias}), want, 1e-4);
  expect_values(call1("linear", {noncontiguous(x), column_major(w), strided_vector(bias)}), want,
                1e-4);
  expect_values(call1("linear", {column_major(x), noncontiguous(w), bias}), want, 1e-4);
}

TEST(Linear, ReducedFloatAndInteger) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    Tensor x = rand_tensor({3, 8}, dt, 1), w = rand_tensor({4, 8}, dt, 2),
           b = rand_tensor({4}, dt, 3);
    auto want = naive_product(x, transposed_copy(w));
    auto bv = values(b);
    for (size_t i = 0; i < want.size(); ++i) want[i] += bv[i % 4];
    Tensor y = call1("linear", {x, w, b});
    EXPECT_EQ(y.dtype(), dt);
    expect_values(y, want, dt == DType::BFloat16 ? 1e-2 : 2e-3);
  }
  Tensor xi = make({1, 2, 3, 4}, {2, 2}, DType::Int32),
         wi = make({1, 0, 0, 1, 1, 1}, {3, 2}, DType::Int32);
  expect_values(call1("linear", {xi, wi, make({10, 20, 30}, {3}, DType::Int32)}),
                {11, 22, 33, 13, 24, 37});
}

TEST(Linear, Gradients) {
  check_gradients("linear", {rand_tensor({2, 3}), rand_tensor({4, 3}, DType::Float64, 2),
                             rand_tensor({4}, DType::Float64, 3)});
  check_gradients("linear", {rand_tensor({2, 2, 3}), rand_tensor({2, 3}, DType::Float64, 2)});
  check_gradients("linear", {rand_tensor({3}), rand_tensor({2, 3}, DType::Float64, 2),
                             rand_tensor({2}, DType::Float64, 3)});
}

TEST(Linear, Errors) {
  expect_status(Status::ShapeMismatch,
                [] { call1("linear", {rand_tensor({2, 3}), rand_tensor({4, 5})}); },
                {"linear", "[2, 3]", "[4, 5]"});
  expect_status(Status::ShapeMismatch,
                [] { call1("linear", {rand_tensor({2, 3}), rand_tensor({3})}); },
                {"linear", "weight", "[3]", "[2, 3]"});
  expect_status(
      Status::ShapeMismatch,
      [] { call1("linear", {rand_tensor({2, 3}), rand_tensor({4, 3}), rand_tensor({3})}); },
      {"linear", "bias", "[4]", "[3]"});
  expect_status(Status::DTypeMismatch,
                [] { call1("linear", {rand_tensor({2, 3}, DType::Float32), rand_tensor({4, 3})}); },
                {"linear", "float32", "float64"});
}

// ---- addmm ----------------------------------------------------------------------

TEST(Addmm, BroadcastInputAlphaBeta) {
  Tensor a = rand_tensor({3, 4}, DType::Float64, 1), b = rand_tensor({4, 2}, DType::Float64, 2);
  const auto prod = naive_product(a, b);
  struct Form {
    Tensor input;
    std::function<double(int64_t, int64_t)> at;
  };
  Tensor full = rand_tensor({3, 2}, DType::Float64, 3);
  auto fv = values(full);
  std::vector<Form> forms{
      {make({10, 20}, {2}), [](int64_t, int64_t j) { return 10.0 * (j + 1); }},
      {make({10, 20}, {1, 2}), [](int64_t, int64_t j) { return 10.0 * (j + 1); }},
      {make({1, 2, 3}, {3, 1}), [](int64_t i, int64_t) { return i + 1.0; }},
      {make({7}, {}), [](int64_t, int64_t) { return 7.0; }},
      {full, [&](int64_t i, int64_t j) { return fv[i * 2 + j]; }},
      {column_major(full), [&](int64_t i, int64_t j) { return fv[i * 2 + j]; }},
  };
  for (const auto& f : forms)
    for (auto [alpha, beta] : {std::pair{1.0, 1.0}, {2.0, 1.0}, {1.0, 0.5}, {-1.0, 3.0}}) {
      SCOPED_TRACE(::testing::Message()
                   << dims_str(f.input.shape()) << " alpha=" << alpha << " beta=" << beta);
      std::vector<double> want;
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 2; ++j) want.push_back(beta * f.at(i, j) + alpha * prod[i * 2 + j]);
      Tensor out = call1("addmm", {f.input, a, b}, ab(alpha, beta));
      EXPECT_EQ(out.shape(), (Dims{3, 2}));
      expect_values(out, want, 1e-12);
    }
  // Transposed operands.
  expect_values(call1("addmm", {make({0}, {}), column_major(a), column_major(b)}), prod, 1e-12);
}

TEST(Addmm, BetaZeroIgnoresInput) {
  Tensor nan = make({std::numeric_limits<double>::quiet_NaN(), 1}, {2});
  Tensor a = make({1, 2, 3, 4}, {2, 2}), b = make({1, 0, 0, 1}, {2, 2});
  expect_values(call1("addmm", {nan, a, b}, ab(2.0, 0.0)), {2, 4, 6, 8});
}

TEST(Addmm, DtypesAndErrors) {
  Tensor ai = make({1, 2, 3, 4}, {2, 2}, DType::Int64),
         bi = make({1, 1, 1, 1}, {2, 2}, DType::Int64);
  expect_values(call1("addmm", {make({1, 2}, {2}, DType::Int64), ai, bi}, ab(2.0, 3.0)),
                {9, 12, 17, 20});
  Tensor ah = rand_tensor({3, 8}, DType::BFloat16, 1), bh = rand_tensor({8, 2}, DType::BFloat16, 2);
  Tensor ih = make({1, 2}, {2}, DType::BFloat16);
  auto want = naive_product(ah, bh);
  for (size_t i = 0; i < want.size(); ++i) want[i] += static_cast<double>(i % 2 + 1);
  expect_values(call1("addmm", {ih, ah, bh}), want, 1e-2);

  expect_status(
      Status::ShapeMismatch,
      [] { call1("addmm", {rand_tensor({3, 2}), rand_tensor({3, 4}), rand_tensor({5, 2})}); },
      {"addmm", "[3, 4]", "[5, 2]"});
  expect_status(
      Status::ShapeMismatch,
      [] { call1("addmm", {rand_tensor({3}), rand_tensor({3, 4}), rand_tensor({4, 2})}); },
      {"addmm", "input", "[3]", "[3, 2]"});
  expect_status(
      Status::ShapeMismatch,
      [] { call1("addmm", {rand_tensor({2}), rand_tensor({2, 3, 4}), rand_tensor({4, 2})}); },
      {"addmm", "[2, 3, 4]", "[4, 2]"});
  expect_status(Status::InvalidArgument,
                [&] { call1("addmm", {make({1, 2}, {2}, DType::Int64), ai, bi}, ab(0.5, 1.0)); },
                {"addmm", "alpha", "int64"});
  expect_status(Status::DTypeMismatch,
                [] {
                  call1("addmm", {rand_tensor({2}, DType::Float32), rand_tensor({2, 2}),
                                  rand_tensor({2, 2})});
                },
                {"addmm", "float32", "float64"});
}

TEST(Addmm, Gradients) {
  check_gradients("addmm",
                  {rand_tensor({2}), rand_tensor({3, 4}, DType::Float64, 2),
                   rand_tensor({4, 2}, DType::Float64, 3)},
                  ab(0.5, 2.0));
  check_gradients("addmm", {rand_tensor({3, 1}), rand_tensor({3, 2}, DType::Float64, 2),
                            rand_tensor({2, 2}, DType::Float64, 3)});
  check_gradients("addmm",
                  {rand_tensor({3, 2}), rand_tensor({3, 2}, DType::Float64, 2),
                   rand_tensor({2, 2}, DType::Float64, 3)},
                  ab(-1.0, 0.0));
}

// ---- bmm ------------------------------------------------------------------------

TEST(Bmm, MatchesNaiveWithStridedOperands) {
  Tensor a = rand_tensor({3, 4, 5}, DType::Float32, 1),
         b = rand_tensor({3, 5, 2}, DType::Float32, 2);
  const auto want = naive_product(a, b);
  Tensor c = call1("bmm", {a, b});
  EXPECT_EQ(c.shape(), (Dims{3, 4, 2}));
  expect_values(c, want, 1e-5);
  expect_values(call1("bmm", {column_major(a), noncontiguous(b)}), want, 1e-5);
  // A batch of 3 permuted to the middle: batch stride smaller than the row stride.
  Tensor base = rand_tensor({4, 3, 5}, DType::Float32, 3);
  Tensor perm = base.as_strided({3, 4, 5}, {5, 15, 1}, 0);
  expect_values(call1("bmm", {perm, b}), naive_product(perm.contiguous(), b), 1e-5);
  EXPECT_EQ(call1("bmm", {rand_tensor({0, 2, 3}), rand_tensor({0, 3, 4})}).shape(),
            (Dims{0, 2, 4}));
  expect_values(call1("bmm", {rand_tensor({2, 2, 0}), rand_tensor({2, 0, 1})}), {0, 0, 0, 0});
}

TEST(Bmm, ErrorsAndGradients) {
  expect_status(Status::ShapeMismatch,
                [] { call1("bmm", {rand_tensor({4, 5}), rand_tensor({3, 5, 2})}); },
                {"bmm", "3-D", "[4, 5]", "[3, 5, 2]"});
  expect_status(Status::ShapeMismatch,
                [] { call1("bmm", {rand_tensor({2, 4, 5}), rand_tensor({3, 5, 2})}); },
                {"bmm", "batch", "[2, 4, 5]", "[3, 5, 2]"});
  expect_status(Status::ShapeMismatch,
                [] { call1("bmm", {rand_tensor({3, 4, 5}), rand_tensor({3, 4, 2})}); },
                {"bmm", "[3, 4, 5]", "[3, 4, 2]"});
  check_gradients("bmm", {rand_tensor({2, 2, 3}), rand_tensor({2, 3, 2}, DType::Float64, 2)});
}

TEST(Contraction, SchemaMarksContractionAndStridedInputs) {
  for (const char* name : {"matmul", "linear", "addmm", "bmm", "matmul_nt", "matmul_tn"}) {
    const OpDef& op = OpRegistry::global().get(name);
    EXPECT_EQ(op.fusion, Fusion::Contraction) << name;
    EXPECT_TRUE(op.strided_inputs) << name;
    EXPECT_TRUE(op.grad) << name;
  }
}
