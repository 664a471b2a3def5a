// Losses (cross_entropy, nll_loss, mse_loss, l1_loss,
// binary_cross_entropy_with_logits) against naive double-precision loops
// that follow PyTorch's definitions term by term.
#include <functional>
#include <limits>

#include "error_test_util.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

using Ints = std::vector<int64_t>;

Tensor indices(const std::vector<double>& v, const Dims& shape, DType dt = DType::Int64) {
  return make(v, shape, dt);
}

// Reference cross entropy. x has shape (N, C, S) flattened (N = 1, S = 1 for
// a 1-D input); `target` holds N * S class indices, or N * C * S
// probabilities when `probs`. Returns per-row losses ('none') or the reduction.
struct RefCE {
  int64_t n, c, s;
  std::vector<double> x, target, weight;  // weight empty: ones
  bool probs = false;
  int64_t ignore = -100;
  double eps = 0;

  double w(int64_t k) const { return weight.empty() ? 1.0 : weight[k]; }
  double logp(int64_t i, int64_t j, int64_t k) const {
    double m = -std::numeric_limits<double>::infinity(), z = 0;
    for (int64_t q = 0; q < c; ++q) m = std::max(m, x[(i * c + q) * s + j]);
    for (int64_t q = 0; q < c; ++q) z += std::exp(x[(i * c + q) * s + j] - m);
    return x[(i * c + k) * s + j] - m - std::log(z);
  }
  std::vector<double> run(const std::string& reduction) const {
    std::vector<double> nll, smooth;
    double denom = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) {
        if (probs) {
          double l = 0;
          for (int64_t k = 0; k < c; ++k) {
            double q = target[(i * c + k) * s + j] * (1 - eps) + eps / c;
            l -= w(k) * q * logp(i, j, k);
          }
          nll.push_back(l);
          smooth.push_back(0);
          denom += 1;
          continue;
        }
        int64_t t = static_cast<int64_t>(target[i * s + j]);
        if (t == ignore) {
          nll.push_back(0);
          smooth.push_back(0);
          continue;
        }
        nll.push_back(-w(t) * logp(i, j, t));
        double sm = 0;
        for (int64_t k = 0; k < c; ++k) sm -= w(k) * logp(i, j, k);
        smooth.push_back(sm);
        denom += w(t);
      }
    // PyTorch: (1 - eps) * nll_loss(...) + eps / C * smoothing term, each reduced alike.
    const double a = probs ? 1.0 : 1 - eps, b = probs ? 0.0 : eps / c;
    std::vector<double> rows;
    double total = 0;
    for (size_t r = 0; r < nll.size(); ++r)
      rows.push_back(a * nll[r] + b * smooth[r]), total += rows.back();
    if (reduction == "none") return rows;
    if (reduction == "sum") return {total};
    return {total / denom};
  }
};

Attrs ce_attrs(const std::string& reduction, double eps = 0, int64_t ignore = -100) {
  return {{"reduction", reduction}, {"label_smoothing", eps}, {"ignore_index", ignore}};
}

}  // namespace

TEST(CrossEntropy, HandComputedValue) {
  // log(e + e^2 + e^3) - 3
  Tensor x = make({1, 2, 3}, {3});
  Tensor t = Tensor::empty({}, DType::Int64);
  *t.data<int64_t>() = 2;
  expect_values(call1("cross_entropy", {x, t}), {0.40760596444438}, 1e-12);
  Tensor x2 = make({1, 2, 3, 1, 2, 3}, {2, 3});
  expect_values(call1("cross_entropy", {x2, indices({2, 0}, {2})}, ce_attrs("none")),
                {0.40760596444438, 2.40760596444438}, 1e-12);
}

TEST(CrossEntropy, IndexTargetsAgainstReference) {
  RefCE ref{4, 5, 1, values(rand_tensor({4, 5}, DType::Float64, 1, -3, 3)), {1, 4, 0, 2}, {}};
  Tensor x = make(ref.x, {4, 5});
  Tensor t = indices(ref.target, {4});
  Tensor w = make({0.5, 1.0, 2.0, 0.25, 3.0}, {5});
  for (const char* red : {"mean", "sum", "none"})
    for (double eps : {0.0, 0.2})
      for (bool weighted : {false, true})
        for (int64_t ignore : {int64_t{-100}, int64_t{4}}) {
          RefCE r = ref;
          r.eps = eps;
          r.ignore = ignore;
          if (weighted) r.weight = values(w);
          auto want = r.run(red);
          Tensor got = weighted ? call1("cross_entropy", {x, t, w}, ce_attrs(red, eps, ignore))
                                : call1("cross_entropy", {x, t}, ce_attrs(red, eps, ignore));
          EXPECT_EQ(got.shape(), std::string(red) == "none" ? Dims{4} : Dims{});
          expect_values(got, want, 1e-12);
        }
}

TEST(CrossEntropy, SpatialProbabilityAndOneDimInputs) {
  // (N, C, d1, d2) with index targets of shape (N, d1, d2).
  RefCE sp{2,
           3,
           4,
           values(rand_tensor({2, 3, 2, 2}, DType::Float64, 2, -2, 2)),
           {0, 1, 2, 1, 2, 2, 0, 1},
           {}};
  sp.eps = 0.1;
  sp.weight = {1.0, 2.0, 0.5};
  Tensor xs = make(sp.x, {2, 3, 2, 2});
  Tensor ts = indices(sp.target, {2, 2, 2}, DType::Int32);
  Tensor ws = make(sp.weight, {3});
  Tensor none = call1("cross_entropy", {xs, ts, ws}, ce_attrs("none", 0.1));
  EXPECT_EQ(none.shape(), (Dims{2, 2, 2}));
  expect_values(none, sp.run("none"), 1e-12);
  expect_values(call1("cross_entropy", {xs, ts, ws}, ce_attrs("mean", 0.1)), sp.run("mean"), 1e-12);
  // Probabilities, with smoothing and weights, spatial.
  RefCE pr = sp;
  pr.probs = true;
  Tensor q = rand_tensor({2, 3, 2, 2}, DType::Float64, 3, 0, 1);
  pr.target = values(q);
  for (const char* red : {"mean", "sum", "none"})
    expect_values(call1("cross_entropy", {xs, q, ws}, ce_attrs(red, 0.1)), pr.run(red), 1e-12);
  // A 1-D input is one row of C scores.
  RefCE one{1, 4, 1, {0.5, -1, 2, 0}, {3}, {}};
  Tensor t0 = Tensor::empty({}, DType::Int64);
  *t0.data<int64_t>() = 3;
  Tensor o = call1("cross_entropy", {make(one.x, {4}), t0}, ce_attrs("none"));
  EXPECT_EQ(o.shape(), Dims{});
  expect_values(o, one.run("none"), 1e-12);
}

TEST(CrossEntropy, LargeScoresAreStableAndDTypes) {
  Tensor x = make({1000, 0, -1000, 1000}, {2, 2}, DType::Float32);
  expect_values(call1("cross_entropy", {x, indices({1, 0}, {2})}, ce_attrs("none")), {1000, 2000},
                1e-6);
  RefCE ref{3, 4, 1, values(rand_tensor({3, 4}, DType::Float64, 4)), {0, 3, 1}, {}};
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    Tensor got = call1("cross_entropy", {make(ref.x, {3, 4}, dt), indices(ref.target, {3})});
    EXPECT_EQ(got.dtype(), dt);
    expect_values(got, ref.run("mean"), dt == DType::Float32 ? 1e-6 : 2e-2);
  }
  Tensor nc = noncontiguous(make(ref.x, {3, 4}));
  expect_values(call1("cross_entropy", {nc, indices(ref.target, {3})}), ref.run("mean"), 1e-12);
  // All targets ignored: the mean divides zero by zero, as in PyTorch.
  EXPECT_TRUE(std::isnan(
      values(call1("cross_entropy", {make(ref.x, {3, 4}), indices({-100, -100, -100}, {3})}))[0]));
}

TEST(CrossEntropy, Gradients) {
  Tensor x = rand_tensor({3, 4}, DType::Float64, 5);
  Tensor t = indices({1, 3, 0}, {3});
  Tensor w = make({0.5, 1.5, 2.0, 1.0}, {4});
  check_gradients("cross_entropy", {x, t});
  check_gradients("cross_entropy", {x, t, w}, ce_attrs("mean", 0.3, 3), 1e-6, 1e-6, {2});
  check_gradients("cross_entropy", {x, t, w}, ce_attrs("none", 0.1), 1e-6, 1e-6, {2});
  check_gradients("cross_entropy", {x, t}, ce_attrs("sum", 0.2, 0));
  Tensor xs = rand_tensor({2, 3, 2}, DType::Float64, 6);
  check_gradients("cross_entropy", {xs, indices({2, 0, 1, 1}, {2, 2})}, ce_attrs("mean", 0.1));
  // Probability targets: gradients for the scores and the target.
  Tensor q = rand_tensor({2, 3, 2}, DType::Float64, 7, 0, 1);
  check_gradients("cross_entropy", {xs, q, make({1, 2, 3}, {3})}, ce_attrs("mean", 0.2), 1e-6, 1e-6,
                  {2});
  check_gradients("cross_entropy",
                  {rand_tensor({4}, DType::Float64, 8), rand_tensor({4}, DType::Float64, 9, 0, 1)},
                  ce_attrs("sum"));
  check_gradients("cross_entropy", {noncontiguous(x), t}, ce_attrs("none"));
}

TEST(CrossEntropy, MaskedScoresAndFloat32Gradients) {
  // A -inf score (a masked class) contributes nothing and gets no gradient.
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::Float64, DType::Float32}) {
    Tensor x = make({0, -inf, 1}, {1, 3}, dt);
    expect_values(call1("cross_entropy", {x, indices({2}, {1})}), {std::log1p(std::exp(1.0)) - 1},
                  1e-6);
    Tensor g = call1("cross_entropy_backward", {Tensor::scalar(1, dt), x, indices({2}, {1})});
    const double p0 = 1 / (1 + std::exp(1.0));
    expect_values(g, {p0, 0, -p0}, 1e-6);
  }
  // float32 (vectorized rows, and strided spatial rows) against float64.
  for (Dims shape : {Dims{6, 37}, Dims{2, 5, 3}}) {
    Tensor x = rand_tensor(shape, DType::Float64, 41, -5, 5);
    Tensor t =
        shape.size() == 2 ? indices({0, 36, 5, 7, 2, 1}, {6}) : indices({4, 0, 1, 2, 3, 3}, {2, 3});
    Tensor w = rand_tensor({shape[1]}, DType::Float64, 42, 0.5, 2);
    Tensor g = Tensor::scalar(1.5, DType::Float64);
    const Attrs a = ce_attrs("mean", 0.1);
    auto want = values(call("cross_entropy_backward", {g, x, t, w}, a)[0]);
    auto got = values(
        call("cross_entropy_backward", {g.to(DType::Float32), x.to(DType::Float32), t, w}, a)[0]);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
    Tensor q = rand_tensor(shape, DType::Float64, 43, 0, 1);
    want = values(call("cross_entropy_backward", {g, x, q, w}, a)[0]);
    got = values(call("cross_entropy_backward",
                      {g.to(DType::Float32), x.to(DType::Float32), q.to(DType::Float32), w}, a)[0]);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  }
}

TEST(CrossEntropy, Errors) {
  Tensor x = rand_tensor({2, 3});
  // The backward ops check their forward operands too (a fuzzed PEF gave one a
  // probability target smaller than the input, read past its end).
  expect_status(Status::ShapeMismatch, [&] {
    call1("cross_entropy_backward", {make({1}, {}), x, rand_tensor({2, 2})});
  });
  expect_status(Status::ShapeMismatch, [&] {
    call1("cross_entropy_backward", {make({1, 1, 1}, {3}), x, indices({0, 1}, {2})},
          {{"reduction", std::string("none")}});
  }, {"grad", "[3]", "[2]"});
  expect_status(Status::ShapeMismatch,
                [&] { call1("nll_loss_backward", {make({1}, {}), x, indices({0, 1, 2}, {3})}); });
  // No classes: refused by name, not a division by zero in the kernel.
  expect_status(Status::ShapeMismatch,
                [&] { call1("cross_entropy", {rand_tensor({2, 0}), indices({0, 0}, {2})}); },
                {"cross_entropy", "no classes"});
  expect_status(Status::ShapeMismatch,
                [&] { call1("nll_loss", {rand_tensor({2, 0}), indices({0, 0}, {2})}); },
                {"nll_loss", "no classes"});
  expect_status(Status::OutOfRange, [&] { call1("cross_entropy", {x, indices({0, 3}, {2})}); },
                {"target 3"});
  expect_status(Status::OutOfRange, [&] { call1("cross_entropy", {x, indices({-2, 0}, {2})}); },
                {"-2"});
  expect_status(Status::ShapeMismatch, [&] {
    call1("cross_entropy", {x, indices({0, 1, 2}, {3})});
  });
  expect_status(Status::ShapeMismatch, [&] { call1("cross_entropy", {x, rand_tensor({2, 4})}); });
  expect_status(Status::ShapeMismatch, [&] {
    call1("cross_entropy", {x, indices({0, 1}, {2}), make({1, 1}, {2})});
  });
  expect_status(Status::DTypeMismatch, [&] {
    call1("cross_entropy", {x, indices({0, 1}, {2}, DType::Bool)});
  });
  expect_status(Status::DTypeMismatch, [&] {
    call1("cross_entropy", {indices({0, 1}, {1, 2}), indices({0}, {1})});
  });
  expect_status(Status::InvalidArgument, [&] {
    call1("cross_entropy", {x, indices({0, 1}, {2})}, ce_attrs("avg"));
  });
  expect_status(Status::InvalidArgument, [&] {
    call1("cross_entropy", {x, indices({0, 1}, {2})}, ce_attrs("mean", 1.5));
  });
  expect_status(Status::ShapeMismatch, [&] {
    call1("cross_entropy", {Tensor::scalar(1, DType::Float32), indices({0}, {1})});
  });
}

TEST(NllLoss, AgainstReferenceAndGradients) {
  Tensor lp = rand_tensor({3, 4}, DType::Float64, 11, -3, 0);
  auto v = values(lp);
  std::vector<double> t{2, -100, 0}, w{0.5, 1, 2, 4};
  Tensor tt = indices(t, {3}), wt = make(w, {4});
  // none / sum / mean with weights; the ignored row adds nothing and weighs nothing.
  std::vector<double> rows{-w[2] * v[2], 0, -w[0] * v[8]};
  expect_values(call1("nll_loss", {lp, tt, wt}, {{"reduction", std::string("none")}}), rows, 1e-12);
  expect_values(call1("nll_loss", {lp, tt, wt}, {{"reduction", std::string("sum")}}),
                {rows[0] + rows[2]}, 1e-12);
  expect_values(call1("nll_loss", {lp, tt, wt}), {(rows[0] + rows[2]) / (w[2] + w[0])}, 1e-12);
  expect_values(call1("nll_loss", {lp, tt}), {-(v[2] + v[8]) / 2}, 1e-12);
  // Spatial input (N, C, d).
  Tensor sp = rand_tensor({2, 3, 2}, DType::Float64, 12);
  auto vs = values(sp);
  expect_values(call1("nll_loss", {sp, indices({1, 2, 0, 1}, {2, 2}, DType::Int32)},
                      {{"reduction", std::string("none")}}),
                {-vs[1 * 2 + 0], -vs[2 * 2 + 1], -vs[6 + 0], -vs[6 + 1 * 2 + 1]}, 1e-12);
  expect_values(call1("nll_loss", {lp.to(DType::BFloat16), tt}), {-(v[2] + v[8]) / 2}, 2e-2);
  expect_values(call1("nll_loss", {noncontiguous(lp), tt}), {-(v[2] + v[8]) / 2}, 1e-12);
  check_gradients("nll_loss", {lp, tt, wt}, {}, 1e-6, 1e-6, {2});
  check_gradients("nll_loss", {sp, indices({1, 2, 0, 1}, {2, 2})},
                  {{"reduction", std::string("none")}});
  expect_status(Status::OutOfRange, [&] { call1("nll_loss", {lp, indices({0, 4, 1}, {3})}); },
                {"4"});
  expect_status(Status::DTypeMismatch, [&] { call1("nll_loss", {lp, rand_tensor({3, 4})}); });
  expect_status(Status::ShapeMismatch, [&] { call1("nll_loss", {lp, indices({0, 1}, {2})}); });
}

TEST(MseL1, AgainstReferenceWithBroadcasting) {
  Tensor x = rand_tensor({2, 3}, DType::Float64, 21);
  Tensor t = rand_tensor({3}, DType::Float64, 22);
  auto vx = values(x), vt = values(t);
  std::vector<double> sq, ab;
  for (int i = 0; i < 6; ++i) {
    double d = vx[i] - vt[i % 3];
    sq.push_back(d * d);
    ab.push_back(std::abs(d));
  }
  auto total = [](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += e;
    return s;
  };
  expect_values(call1("mse_loss", {x, t}, {{"reduction", std::string("none")}}), sq, 1e-12);
  expect_values(call1("mse_loss", {x, t}, {{"reduction", std::string("sum")}}), {total(sq)}, 1e-12);
  expect_values(call1("mse_loss", {x, t}), {total(sq) / 6}, 1e-12);
  expect_values(call1("l1_loss", {x, t}, {{"reduction", std::string("none")}}), ab, 1e-12);
  expect_values(call1("l1_loss", {x, t}), {total(ab) / 6}, 1e-12);
  expect_values(call1("l1_loss", {noncontiguous(x), t}, {{"reduction", std::string("sum")}}),
                {total(ab)}, 1e-12);
  // Same-shape fast path, long enough for several pieces, and reduced floats.
  Tensor a = rand_tensor({20000}, DType::Float32, 23), b = rand_tensor({20000}, DType::Float32, 24);
  auto va = values(a), vb = values(b);
  double s = 0;
  for (size_t i = 0; i < va.size(); ++i) s += (va[i] - vb[i]) * (va[i] - vb[i]);
  expect_values(call1("mse_loss", {a, b}), {s / 20000}, 1e-5);
  Tensor h = call1("mse_loss", {x.to(DType::BFloat16), t.to(DType::BFloat16)});
  EXPECT_EQ(h.dtype(), DType::BFloat16);
  expect_values(h, {total(sq) / 6}, 3e-2);
  EXPECT_EQ(call1("mse_loss", {x.to(DType::Float32), t}).dtype(), DType::Float64);
}

TEST(MseL1, GradientsAndErrors) {
  Tensor x = rand_tensor({2, 3}, DType::Float64, 25), t = rand_tensor({3}, DType::Float64, 26);
  for (const char* red : {"mean", "sum", "none"}) {
    check_gradients("mse_loss", {x, t}, {{"reduction", std::string(red)}});
    check_gradients("l1_loss", {x, t}, {{"reduction", std::string(red)}});
  }
  check_gradients("l1_loss", {rand_tensor({2, 1}, DType::Float64, 27), x});
  expect_status(Status::DTypeMismatch, [&] {
    call1("mse_loss", {make({1, 2}, {2}, DType::Int32), make({1, 2}, {2}, DType::Int32)});
  });
  expect_status(Status::ShapeMismatch, [&] { call1("l1_loss", {x, rand_tensor({2})}); });
  expect_status(Status::InvalidArgument, [&] {
    call1("mse_loss", {x, t}, {{"reduction", std::string("Mean")}});
  });
}

TEST(BceWithLogits, AgainstReference) {
  Tensor x = rand_tensor({2, 3}, DType::Float64, 31, -4, 4);
  Tensor t = rand_tensor({2, 3}, DType::Float64, 32, 0, 1);
  Tensor w = make({0.5, 2}, {2, 1});
  Tensor pw = make({1, 3, 0.5}, {3});
  auto vx = values(x), vt = values(t);
  auto ref = [&](bool weighted, bool pos) {
    std::vector<double> out;
    for (int i = 0; i < 6; ++i) {
      double sig = 1 / (1 + std::exp(-vx[i]));
      double p = pos ? values(pw)[i % 3] : 1.0, wi = weighted ? values(w)[i / 3] : 1.0;
      out.push_back(-wi * (p * vt[i] * std::log(sig) + (1 - vt[i]) * std::log(1 - sig)));
    }
    return out;
  };
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += e;
    return s / static_cast<double>(v.size());
  };
  const Attrs none{{"reduction", std::string("none")}};
  expect_values(call1("binary_cross_entropy_with_logits", {x, t}, none), ref(false, false), 1e-12);
  expect_values(call1("binary_cross_entropy_with_logits", {x, t, w, pw}, none), ref(true, true),
                1e-12);
  expect_values(call1("binary_cross_entropy_with_logits", {x, t, Tensor(), pw}),
                {mean(ref(false, true))}, 1e-12);
  expect_values(
      call1("binary_cross_entropy_with_logits", {x, t, w}, {{"reduction", std::string("sum")}}),
      {mean(ref(true, false)) * 6}, 1e-12);
  expect_values(call1("binary_cross_entropy_with_logits", {noncontiguous(x), t}, none),
                ref(false, false), 1e-12);
  // Large logits stay finite: x = 100, t = 0 costs 100; x = -100, t = 1 costs 100.
  expect_values(
      call1("binary_cross_entropy_with_logits",
            {make({100, -100}, {2}, DType::Float32), make({0, 1}, {2}, DType::Float32)}, none),
      {100, 100}, 1e-6);
  Tensor h =
      call1("binary_cross_entropy_with_logits", {x.to(DType::Float16), t.to(DType::Float16)});
  EXPECT_EQ(h.dtype(), DType::Float16);
  expect_values(h, {mean(ref(false, false))}, 2e-2);
}

TEST(BceWithLogits, GradientsAndErrors) {
  Tensor x = rand_tensor({2, 3}, DType::Float64, 33, -3, 3);
  Tensor t = rand_tensor({2, 3}, DType::Float64, 34, 0, 1);
  Tensor w = rand_tensor({2, 1}, DType::Float64, 35, 0.5, 2);
  Tensor pw = rand_tensor({3}, DType::Float64, 36, 0.5, 2);
  for (const char* red : {"mean", "sum", "none"})
    check_gradients("binary_cross_entropy_with_logits", {x, t, w, pw},
                    {{"reduction", std::string(red)}});
  check_gradients("binary_cross_entropy_with_logits", {x, t});
  expect_status(Status::ShapeMismatch, [&] {
    call1("binary_cross_entropy_with_logits", {x, rand_tensor({3})});
  });
  expect_status(Status::ShapeMismatch, [&] {
    call1("binary_cross_entropy_with_logits", {x, t, rand_tensor({2, 2})});
  });
  expect_status(Status::DTypeMismatch, [&] {
    call1("binary_cross_entropy_with_logits", {x, make({0, 1, 1, 0, 0, 1}, {2, 3}, DType::Int64)});
  });
}
