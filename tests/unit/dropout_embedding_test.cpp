// dropout (Philox mask: statistics, reproducibility, thread independence)
// and embedding (gather, scatter-add backward, padding_idx, index errors).
#include "engine/core/parallel.h"
#include "engine/rng/philox.h"
#include "error_test_util.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

using Vec = std::vector<double>;

Attrs drop(double p, int64_t seed = 0, int64_t offset = 0) {
  return {{"p", p}, {"seed", seed}, {"offset", offset}};
}

// The mask computed element by element from the Philox primitive and the
// word layout documented in engine/rng/philox.h (element e: word (e / 8) % 4
// of block (e / 32) * 8 + e % 8), independently of the vectorized generator.
std::vector<bool> reference_mask(int64_t n, double p, uint64_t seed, uint64_t offset) {
  const rng::Philox g{seed, offset};
  std::vector<bool> keep(n);
  for (int64_t e = 0; e < n; ++e) {
    const uint32_t word = g.block(static_cast<uint64_t>(e / 32 * 8 + e % 8))[(e / 8) % 4];
    keep[e] = static_cast<double>(word >> 8) * 0x1.0p-24 >= p;
  }
  return keep;
}

}  // namespace

// ---- dropout -------------------------------------------------------------------------

TEST(Dropout, MaskMatchesPhiloxAndScalesKeptValues) {
  const int64_t n = 1003;  // not a multiple of four
  Tensor x = rand_tensor({n}, DType::Float64, 1, 0.5, 2);
  auto xv = values(x);
  for (double p : {0.1, 0.5, 0.9}) {
    auto keep = reference_mask(n, p, 42, 7);
    auto y = values(call1("dropout", {x}, drop(p, 42, 7)));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(y[i], keep[i] ? xv[i] * (1 / (1 - p)) : 0.0) << "p " << p << " element " << i;
  }
}

TEST(Dropout, FractionOfZerosIsNearP) {
  Tensor x = Tensor::empty({100000}, DType::Float32);
  std::fill(x.data<float>(), x.data<float>() + x.numel(), 1.0f);
  for (double p : {0.1, 0.3, 0.75}) {
    auto y = values(call1("dropout", {x}, drop(p, 5)));
    int64_t zeros = 0;
    for (double v : y) {
      if (v == 0)
        ++zeros;
      else
        EXPECT_FLOAT_EQ(v, 1 / (1 - p));
    }
    // Binomial standard deviation is below 0.0014 here; allow ~7 of them.
    EXPECT_NEAR(static_cast<double>(zeros) / 100000, p, 0.01) << "p " << p;
  }
}

TEST(Dropout, SameForOneAndTwoThreadsAndSeedsDiffer) {
  Tensor x = rand_tensor({100001}, DType::Float32, 2);
  auto run = [&](int threads, int64_t seed, int64_t offset) {
    ThreadPool pool(threads);
    ThreadPool::Scope s(&pool);
    return values(call1("dropout", {x}, drop(0.5, seed, offset)));
  };
  auto one = run(1, 11, 0);
  EXPECT_EQ(one, run(2, 11, 0));
  EXPECT_EQ(one, run(1, 11, 0)) << "same seed, same mask";
  auto differ = [](const Vec& a, const Vec& b) {
    int64_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += (a[i] == 0) != (b[i] == 0);
    return n;
  };
  // Independent masks disagree on about half the elements.
  EXPECT_GT(differ(one, run(2, 12, 0)), 40000) << "another seed";
  EXPECT_GT(differ(one, run(2, 11, 1)), 40000) << "another offset";
}

TEST(Dropout, IdentityZerosAndDtypes) {
  Tensor x = rand_tensor({3, 4}, DType::Float32, 3);
  expect_values(call1("dropout", {x}, {{"p", 0.0}}), values(x), 0);
  expect_values(call1("dropout", {x}, {{"p", 0.7}, {"training", false}}), values(x), 0);
  expect_values(call1("dropout", {x}, {{"p", 1.0}}), Vec(12, 0.0), 0);
  // Default p is 0.5.
  EXPECT_EQ(values(call1("dropout", {x})), values(call1("dropout", {x}, drop(0.5))));
  for (DType dt : {DType::BFloat16, DType::Float16, DType::Float64}) {
    Tensor xd = rand_tensor({64}, dt, 4, 1, 2);
    Tensor y = call1("dropout", {xd}, drop(0.25, 9));
    EXPECT_EQ(y.dtype(), dt);
    auto keep = reference_mask(64, 0.25, 9, 0);
    auto xv = values(xd), yv = values(y);
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(yv[i], keep[i] ? xv[i] / 0.75 : 0.0, 1e-2) << i;
  }
}

TEST(Dropout, NonContiguousUsesLogicalIndex) {
  Tensor x = rand_tensor({6, 5}, DType::Float64, 5);
  expect_values(call1("dropout", {noncontiguous(x)}, drop(0.5, 3)),
                values(call1("dropout", {x}, drop(0.5, 3))), 0);
}

TEST(Dropout, GradientAppliesTheSameMask) {
  check_gradients("dropout", {rand_tensor({4, 5}, DType::Float64, 6)}, drop(0.4, 8, 2));
  check_gradients("dropout", {rand_tensor({6}, DType::Float64, 7)},
                  {{"p", 0.3}, {"training", false}});
  Tensor x = rand_tensor({50}, DType::Float64, 8, 1, 2);
  x.impl()->requires_grad = true;
  Tensor y = call1("dropout", {x}, drop(0.5, 21, 4));
  Tensor ones = make(Vec(50, 1.0), {50});
  autograd::backward({y}, {ones}, false);
  auto keep = reference_mask(50, 0.5, 21, 4);
  auto g = values(x.grad());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(g[i], keep[i] ? 2.0 : 0.0) << i;
}

TEST(Dropout, Errors) {
  Tensor x = rand_tensor({4}, DType::Float32);
  EXPECT_EQ(status_of([&] { call1("dropout", {x}, {{"p", 1.5}}); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { call1("dropout", {x}, {{"p", -0.1}}); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("dropout", {x}, {{"p", std::nan("")}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("dropout", {make({1, 2}, {2}, DType::Int32)});
            }),
            Status::DTypeMismatch);
  EXPECT_NE(message_of([&] {
              call1("dropout", {x}, {{"p", 1.5}});
            }).find("op 'dropout': attribute 'p' must be in [0, 1], got 1.5"),
            std::string::npos);
}

// ---- embedding -------------------------------------------------------------------------

TEST(Embedding, GathersRowsForEveryIndexDtype) {
  Tensor w = make({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});
  for (DType dt : {DType::Int64, DType::Int32, DType::Int16, DType::Int8, DType::UInt8}) {
    Tensor idx = make({0, 3, 3, 1}, {2, 2}, dt);
    Tensor y = call1("embedding", {w, idx});
    EXPECT_EQ(y.shape(), (Dims{2, 2, 2}));
    expect_values(y, {0, 1, 30, 31, 30, 31, 10, 11}, 0);
  }
  // A 0-dim index gives one row; an empty index tensor gives no rows.
  Tensor one = call1("embedding", {w, make({2}, {}, DType::Int64)});
  EXPECT_EQ(one.shape(), (Dims{2}));
  expect_values(one, {20, 21}, 0);
  EXPECT_EQ(call1("embedding", {w, Tensor::zeros({0, 3}, DType::Int64)}).shape(), (Dims{0, 3, 2}));
}

TEST(Embedding, TableDtypesAndNonContiguous) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16, DType::Int64, DType::UInt8}) {
    Tensor w = make({1, 2, 3, 4, 5, 6}, {3, 2}, dt);
    Tensor y = call1("embedding", {w, make({2, 0}, {2}, DType::Int32)});
    EXPECT_EQ(y.dtype(), dt);
    expect_values(y, {5, 6, 1, 2}, 0);
  }
  Tensor w = rand_tensor({5, 3}, DType::Float64, 10);
  Tensor idx = make({4, 0, 2, 2, 1, 3}, {2, 3}, DType::Int64);
  auto want = values(call1("embedding", {w, idx}));
  expect_values(call1("embedding", {noncontiguous(w), noncontiguous(idx)}), want, 0);
  auto wv = values(w);
  const Vec iv{4, 0, 2, 2, 1, 3};
  for (size_t i = 0; i < 6; ++i)
    for (size_t j = 0; j < 3; ++j)
      EXPECT_EQ(want[i * 3 + j], wv[static_cast<size_t>(iv[i]) * 3 + j]);
}

TEST(Embedding, Gradients) {
  // Repeated indices accumulate; unused rows get zero.
  check_gradients("embedding", {rand_tensor({5, 3}, DType::Float64, 11),
                                make({1, 4, 1, 1, 0, 4}, {3, 2}, DType::Int64)});
  check_gradients("embedding", {noncontiguous(rand_tensor({4, 2}, DType::Float64, 12)),
                                make({3, 3}, {2}, DType::Int8)});
}

TEST(Embedding, BackwardScatterAddsAndSkipsPadding) {
  const int64_t rows = 6, dim = 3;
  Tensor idx = make({5, 1, 5, 2, 1, 5, 0, 2}, {2, 4}, DType::Int32);
  Tensor g = rand_tensor({2, 4, dim}, DType::Float64, 13);
  auto gv = values(g);
  const std::vector<int64_t> iv{5, 1, 5, 2, 1, 5, 0, 2};
  for (int64_t pad : {int64_t{-1}, int64_t{2}, -rows}) {  // none, row 2, row 0 given as -6
    Vec want(rows * dim, 0.0);
    const int64_t pad_row = pad == -1 ? -1 : (pad < 0 ? pad + rows : pad);
    for (size_t i = 0; i < iv.size(); ++i)
      for (int64_t j = 0; j < dim; ++j)
        if (iv[i] != pad_row) want[iv[i] * dim + j] += gv[i * dim + j];
    Attrs a{{"num_weights", rows}};
    if (pad != -1) a.set("padding_idx", pad);
    Tensor d = call1("embedding_backward", {g, idx}, a);
    EXPECT_EQ(d.shape(), (Dims{rows, dim}));
    expect_values(d, want, 1e-14);
  }
  // Through autograd: the padding row of the table gets no gradient.
  Tensor w = rand_tensor({rows, dim}, DType::Float32, 14);
  w.impl()->requires_grad = true;
  Tensor y = call1("embedding", {w, idx}, {{"padding_idx", 5}});
  autograd::backward({y}, {g.to(DType::Float32)}, false);
  auto wg = values(w.grad());
  for (int64_t j = 0; j < dim; ++j) EXPECT_EQ(wg[5 * dim + j], 0.0);
  EXPECT_NEAR(wg[0], gv[6 * dim], 1e-6);
  // bf16 gradients accumulate in float32.
  Tensor dh = call1("embedding_backward", {g.to(DType::BFloat16), idx}, {{"num_weights", rows}});
  EXPECT_EQ(dh.dtype(), DType::BFloat16);
  expect_values(dh,
                values(call1("embedding_backward", {g.to(DType::BFloat16).to(DType::Float64), idx},
                             {{"num_weights", rows}})),
                1e-2);
}

TEST(Embedding, BackwardSameForOneAndTwoThreads) {
  const int64_t n = 20000, rows = 50, dim = 16;
  std::vector<double> iv(n);
  for (int64_t i = 0; i < n; ++i) iv[i] = static_cast<double>((i * 7919) % rows);
  Tensor idx = make(iv, {n}, DType::Int64);
  Tensor g = rand_tensor({n, dim}, DType::Float32, 15);
  auto run = [&](int threads) {
    ThreadPool pool(threads);
    ThreadPool::Scope s(&pool);
    return values(call1("embedding_backward", {g, idx}, {{"num_weights", rows}}));
  };
  auto one = run(1);
  EXPECT_EQ(one, run(2));
  Vec want(rows * dim, 0.0);
  auto gv = values(g);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < dim; ++j)
      want[static_cast<int64_t>(iv[i]) * dim + j] += gv[i * dim + j];
  for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(one[k], want[k], 1e-3) << k;
}

TEST(Embedding, Errors) {
  Tensor w = rand_tensor({4, 2}, DType::Float32);
  EXPECT_EQ(status_of([&] {
              call1("embedding", {w, make({0, 4}, {2}, DType::Int64)});
            }),
            Status::OutOfRange);
  EXPECT_EQ(status_of([&] {
              call1("embedding", {w, make({-1}, {1}, DType::Int32)});
            }),
            Status::OutOfRange);
  const std::string msg = message_of([&] {
    call1("embedding", {w, make({1, 7}, {2}, DType::Int64)});
  });
  EXPECT_NE(msg.find("index 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 rows"), std::string::npos) << msg;
  EXPECT_EQ(status_of([&] {
              call1("embedding", {w, make({1}, {1}, DType::Bool)});
            }),
            Status::DTypeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("embedding", {w, make({1}, {1}, DType::Float32)});
            }),
            Status::DTypeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("embedding", {rand_tensor({4}), make({1}, {1}, DType::Int64)});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("embedding", {w, make({1}, {1}, DType::Int64)}, {{"padding_idx", 4}});
            }),
            Status::OutOfRange);
  EXPECT_EQ(status_of([&] {
              call1("embedding", {w, make({1}, {1}, DType::Int64)}, {{"padding_idx", -5}});
            }),
            Status::OutOfRange);
  Tensor idx = make({1, 2}, {2}, DType::Int64);
  EXPECT_EQ(status_of([&] {
              call1("embedding_backward", {rand_tensor({3, 2}), idx}, {{"num_weights", 4}});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("embedding_backward", {rand_tensor({2, 2}), idx}, {{"num_weights", 2}});
            }),
            Status::OutOfRange);
  EXPECT_EQ(status_of([&] {
              call1("embedding_backward", {rand_tensor({2, 2}), idx});
            }),
            Status::InvalidArgument);
}
