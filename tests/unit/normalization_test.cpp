// layer_norm, rms_norm, group_norm and batch_norm against naive double
// references, their gradients, the running-statistics update, and
// determinism across thread counts.
#include <limits>

#include "engine/core/parallel.h"
#include "error_test_util.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

using Ints = std::vector<int64_t>;
using Vec = std::vector<double>;

// Normalizes rows x len with the mean and biased variance of each row.
Vec layer_norm_ref(const Vec& x, int64_t len, const Vec& w, const Vec& b, double eps) {
  Vec y(x.size());
  for (size_t r = 0; r * len < x.size(); ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < len; ++j) mean += x[r * len + j];
    mean /= len;
    for (int64_t j = 0; j < len; ++j) var += (x[r * len + j] - mean) * (x[r * len + j] - mean);
    var /= len;
    for (int64_t j = 0; j < len; ++j)
      y[r * len + j] = (x[r * len + j] - mean) / std::sqrt(var + eps) * (w.empty() ? 1 : w[j]) +
                       (b.empty() ? 0 : b[j]);
  }
  return y;
}

Vec rms_norm_ref(const Vec& x, int64_t len, const Vec& w, double eps) {
  Vec y(x.size());
  for (size_t r = 0; r * len < x.size(); ++r) {
    double ms = 0;
    for (int64_t j = 0; j < len; ++j) ms += x[r * len + j] * x[r * len + j];
    ms /= len;
    for (int64_t j = 0; j < len; ++j)
      y[r * len + j] = x[r * len + j] / std::sqrt(ms + eps) * (w.empty() ? 1 : w[j]);
  }
  return y;
}

// x (n, c, s): mean/var per (sample, group) for group_norm or per channel
// (over samples and s) for batch_norm.
Vec group_norm_ref(const Vec& x, int64_t n, int64_t c, int64_t s, int64_t groups, const Vec& w,
                   const Vec& b, double eps) {
  Vec y(x.size());
  const int64_t cg = c / groups;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      double mean = 0, var = 0;
      for (int64_t ch = g * cg; ch < (g + 1) * cg; ++ch)
        for (int64_t k = 0; k < s; ++k) mean += x[(i * c + ch) * s + k];
      mean /= cg * s;
      for (int64_t ch = g * cg; ch < (g + 1) * cg; ++ch)
        for (int64_t k = 0; k < s; ++k) var += std::pow(x[(i * c + ch) * s + k] - mean, 2);
      var /= cg * s;
      for (int64_t ch = g * cg; ch < (g + 1) * cg; ++ch)
        for (int64_t k = 0; k < s; ++k) {
          const int64_t at = (i * c + ch) * s + k;
          y[at] = (x[at] - mean) / std::sqrt(var + eps) * (w.empty() ? 1 : w[ch]) +
                  (b.empty() ? 0 : b[ch]);
        }
    }
  return y;
}

struct ChannelStatsRef {
  Vec mean, biased_var;
};

ChannelStatsRef channel_stats_ref(const Vec& x, int64_t n, int64_t c, int64_t s) {
  ChannelStatsRef st{Vec(c, 0.0), Vec(c, 0.0)};
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < s; ++k) st.mean[ch] += x[(i * c + ch) * s + k];
    st.mean[ch] /= n * s;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < s; ++k)
        st.biased_var[ch] += std::pow(x[(i * c + ch) * s + k] - st.mean[ch], 2);
    st.biased_var[ch] /= n * s;
  }
  return st;
}

Vec batch_norm_ref(const Vec& x, int64_t n, int64_t c, int64_t s, const Vec& mean, const Vec& var,
                   const Vec& w, const Vec& b, double eps) {
  Vec y(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t k = 0; k < s; ++k) {
        const int64_t at = (i * c + ch) * s + k;
        y[at] = (x[at] - mean[ch]) / std::sqrt(var[ch] + eps) * (w.empty() ? 1 : w[ch]) +
                (b.empty() ? 0 : b[ch]);
      }
  return y;
}

// A 1-D tensor read with stride 2 (op_test_util's noncontiguous keeps 1-D contiguous).
Tensor strided1d(const Tensor& t) {
  Tensor buf = Tensor::zeros({2 * t.numel()}, t.dtype());
  Tensor view = buf.as_strided({t.numel()}, {2}, 0);
  view.copy_from(t);
  EXPECT_FALSE(view.is_contiguous());
  return view;
}

Attrs ln_attrs(Ints shape, double eps = 1e-5) {
  return {{"normalized_shape", shape}, {"eps", eps}};
}

}  // namespace

// ---- layer_norm ------------------------------------------------------------------

TEST(LayerNorm, HandComputed) {
  // mean 2.5, biased variance 1.25.
  Tensor y = call1("layer_norm", {make({1, 2, 3, 4}, {4})}, ln_attrs({4}, 0.0));
  const double sd = std::sqrt(1.25);
  expect_values(y, {-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd}, 1e-14);
  Tensor yw = call1("layer_norm",
                    {make({1, 2, 3, 4}, {4}), make({1, 2, 1, 2}, {4}), make({0, 0, 10, 10}, {4})},
                    ln_attrs({4}, 0.0));
  expect_values(yw, {-1.5 / sd, -1.0 / sd, 10 + 0.5 / sd, 10 + 3.0 / sd}, 1e-14);
}

TEST(LayerNorm, MatchesReference) {
  Tensor x = rand_tensor({3, 2, 5}, DType::Float64, 1, -3, 3);
  Tensor w = rand_tensor({2, 5}, DType::Float64, 2), b = rand_tensor({2, 5}, DType::Float64, 3);
  expect_values(call1("layer_norm", {x, w, b}, ln_attrs({2, 5})),
                layer_norm_ref(values(x), 10, values(w), values(b), 1e-5), 1e-12);
  // Weight and bias broadcast over the leading dims; no weight, no bias.
  expect_values(call1("layer_norm", {x}, ln_attrs({5}, 1e-3)),
                layer_norm_ref(values(x), 5, {}, {}, 1e-3), 1e-12);
  Tensor w5 = rand_tensor({5}, DType::Float64, 4);
  expect_values(call1("layer_norm", {x, w5}, ln_attrs({5})),
                layer_norm_ref(values(x), 5, values(w5), {}, 1e-5), 1e-12);
  expect_values(call1("layer_norm", {x, Tensor(), w5}, ln_attrs({5})),
                layer_norm_ref(values(x), 5, {}, values(w5), 1e-5), 1e-12);
}

TEST(LayerNorm, LongRowsWithLargeMeanStayAccurateInFloat32) {
  // Rows of 1500 (three statistic blocks) around 1000 with unit spread: a
  // sum-of-squares variance would lose most digits in float32.
  Tensor x = rand_tensor({4, 1500}, DType::Float64, 5, 999, 1001);
  Tensor x32 = x.to(DType::Float32);
  auto want = layer_norm_ref(values(x32), 1500, {}, {}, 1e-5);
  expect_values(call1("layer_norm", {x32}, ln_attrs({1500})), want, 2e-4);
  expect_values(call1("layer_norm", {x}, ln_attrs({1500})),
                layer_norm_ref(values(x), 1500, {}, {}, 1e-5), 1e-10);
}

TEST(LayerNorm, DtypesAndNonContiguous) {
  Tensor x = rand_tensor({4, 6}, DType::Float64, 6, -2, 2);
  Tensor w = rand_tensor({6}, DType::Float64, 7), b = rand_tensor({6}, DType::Float64, 8);
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    Tensor xd = x.to(dt), wd = w.to(dt), bd = b.to(dt);
    Tensor y = call1("layer_norm", {xd, wd, bd}, ln_attrs({6}));
    EXPECT_EQ(y.dtype(), dt);
    expect_values(y, layer_norm_ref(values(xd), 6, values(wd), values(bd), 1e-5),
                  dt == DType::Float32 ? 1e-5 : 3e-2);
  }
  expect_values(call1("layer_norm", {noncontiguous(x), strided1d(w), b}, ln_attrs({6})),
                layer_norm_ref(values(x), 6, values(w), values(b), 1e-5), 1e-12);
  EXPECT_EQ(call1("layer_norm", {Tensor::zeros({0, 6}, DType::Float32)}, ln_attrs({6})).shape(),
            (Dims{0, 6}));
}

TEST(LayerNorm, Gradients) {
  Tensor x = rand_tensor({3, 4}, DType::Float64, 11, -2, 2);
  check_gradients("layer_norm",
                  {x, rand_tensor({4}, DType::Float64, 12), rand_tensor({4}, DType::Float64, 13)},
                  ln_attrs({4}), 1e-6, 1e-6);
  check_gradients("layer_norm", {x}, ln_attrs({4}, 1e-3));
  check_gradients(
      "layer_norm",
      {rand_tensor({2, 2, 3}, DType::Float64, 14), rand_tensor({2, 3}, DType::Float64, 15)},
      ln_attrs({2, 3}));
  check_gradients("layer_norm", {noncontiguous(x), Tensor(), rand_tensor({4}, DType::Float64, 16)},
                  ln_attrs({4}));
}

TEST(LayerNorm, Errors) {
  Tensor x = rand_tensor({2, 3}, DType::Float32);
  EXPECT_EQ(status_of([&] { call1("layer_norm", {x}, ln_attrs({2})); }), Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("layer_norm", {x}, ln_attrs({1, 2, 3}));
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("layer_norm", {x, rand_tensor({2})}, ln_attrs({3}));
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] { call1("layer_norm", {x}, ln_attrs({})); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { call1("layer_norm", {x}); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("layer_norm", {make({1, 2}, {2}, DType::Int64)}, ln_attrs({2}));
            }),
            Status::DTypeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("layer_norm", {x, make({1, 2, 3}, {3}, DType::Int32)}, ln_attrs({3}));
            }),
            Status::DTypeMismatch);
  try {
    call1("layer_norm", {x, rand_tensor({2})}, ln_attrs({3}));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight"), std::string::npos) << e.what();
  }
}

// ---- rms_norm ----------------------------------------------------------------------

TEST(RmsNorm, MatchesReferenceAndDefaultEps) {
  Tensor x = rand_tensor({3, 5}, DType::Float64, 21, -2, 2);
  Tensor w = rand_tensor({5}, DType::Float64, 22);
  Attrs a{{"normalized_shape", Ints{5}}, {"eps", 1e-4}};
  expect_values(call1("rms_norm", {x, w}, a), rms_norm_ref(values(x), 5, values(w), 1e-4), 1e-12);
  expect_values(call1("rms_norm", {x}, a), rms_norm_ref(values(x), 5, {}, 1e-4), 1e-12);
  // Hand-computed: [3, 4] has mean square 12.5.
  expect_values(
      call1("rms_norm", {make({3, 4}, {2})}, {{"normalized_shape", Ints{2}}, {"eps", 0.0}}),
      {3 / std::sqrt(12.5), 4 / std::sqrt(12.5)}, 1e-14);
  // Tiny values make eps visible: the default is finfo(dtype).eps.
  Tensor tiny = make({1e-4, -2e-4, 3e-4, 1e-4}, {2, 2}, DType::Float32);
  expect_values(call1("rms_norm", {tiny}, {{"normalized_shape", Ints{2}}}),
                rms_norm_ref(values(tiny), 2, {}, std::numeric_limits<float>::epsilon()), 1e-5);
  Tensor tiny64 = make({1e-9, 2e-9}, {2});
  expect_values(call1("rms_norm", {tiny64}, {{"normalized_shape", Ints{2}}}),
                rms_norm_ref(values(tiny64), 2, {}, std::numeric_limits<double>::epsilon()), 1e-12);
  Tensor hb = make({0.1, -0.05}, {2}, DType::BFloat16);
  expect_values(call1("rms_norm", {hb}, {{"normalized_shape", Ints{2}}}),
                rms_norm_ref(values(hb), 2, {}, 0x1.0p-7), 2e-2);
}

TEST(RmsNorm, DtypesNonContiguousGradients) {
  Tensor x = rand_tensor({4, 6}, DType::Float64, 23, -2, 2);
  Tensor w = rand_tensor({6}, DType::Float64, 24);
  Attrs a{{"normalized_shape", Ints{6}}, {"eps", 1e-5}};
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    Tensor y = call1("rms_norm", {x.to(dt), w.to(dt)}, a);
    EXPECT_EQ(y.dtype(), dt);
    expect_values(y, rms_norm_ref(values(x.to(dt)), 6, values(w.to(dt)), 1e-5),
                  dt == DType::Float32 ? 1e-5 : 3e-2);
  }
  expect_values(call1("rms_norm", {noncontiguous(x), strided1d(w)}, a),
                rms_norm_ref(values(x), 6, values(w), 1e-5), 1e-12);
  check_gradients("rms_norm",
                  {rand_tensor({3, 4}, DType::Float64, 25), rand_tensor({4}, DType::Float64, 26)},
                  {{"normalized_shape", Ints{4}}, {"eps", 1e-3}});
  check_gradients("rms_norm", {rand_tensor({2, 2, 3}, DType::Float64, 27)},
                  {{"normalized_shape", Ints{2, 3}}});
  check_gradients("rms_norm", {noncontiguous(rand_tensor({2, 4}, DType::Float64, 28))},
                  {{"normalized_shape", Ints{4}}});
}

TEST(RmsNorm, Errors) {
  Tensor x = rand_tensor({2, 3}, DType::Float32);
  EXPECT_EQ(status_of([&] {
              call1("rms_norm", {x}, {{"normalized_shape", Ints{2}}});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("rms_norm", {x, rand_tensor({4})}, {{"normalized_shape", Ints{3}}});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("rms_norm", {make({1}, {1}, DType::Bool)}, {{"normalized_shape", Ints{1}}});
            }),
            Status::DTypeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("rms_norm", {x}, {{"normalized_shape", Ints{3}}, {"eps", "big"}});
            }),
            Status::InvalidArgument);
}

// ---- group_norm --------------------------------------------------------------------

TEST(GroupNorm, MatchesReference) {
  Tensor x = rand_tensor({2, 6, 3, 2}, DType::Float64, 31, -3, 3);
  Tensor w = rand_tensor({6}, DType::Float64, 32), b = rand_tensor({6}, DType::Float64, 33);
  for (int64_t groups : {1, 2, 3, 6}) {
    Attrs a{{"num_groups", groups}};
    expect_values(call1("group_norm", {x, w, b}, a),
                  group_norm_ref(values(x), 2, 6, 6, groups, values(w), values(b), 1e-5), 1e-12);
    expect_values(call1("group_norm", {x}, a),
                  group_norm_ref(values(x), 2, 6, 6, groups, {}, {}, 1e-5), 1e-12);
  }
  // (N, C) input: no spatial dims.
  Tensor x2 = rand_tensor({3, 4}, DType::Float64, 34);
  expect_values(call1("group_norm", {x2}, {{"num_groups", 2}, {"eps", 0.1}}),
                group_norm_ref(values(x2), 3, 4, 1, 2, {}, {}, 0.1), 1e-12);
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    Tensor xd = x.to(dt), wd = w.to(dt);
    expect_values(call1("group_norm", {xd, wd}, {{"num_groups", 3}}),
                  group_norm_ref(values(xd), 2, 6, 6, 3, values(wd), {}, 1e-5),
                  dt == DType::Float32 ? 1e-5 : 3e-2);
  }
  expect_values(call1("group_norm", {noncontiguous(x), w, strided1d(b)}, {{"num_groups", 2}}),
                group_norm_ref(values(x), 2, 6, 6, 2, values(w), values(b), 1e-5), 1e-12);
}

TEST(GroupNorm, GradientsAndErrors) {
  Tensor x = rand_tensor({2, 4, 3}, DType::Float64, 35, -2, 2);
  check_gradients("group_norm",
                  {x, rand_tensor({4}, DType::Float64, 36), rand_tensor({4}, DType::Float64, 37)},
                  {{"num_groups", 2}});
  check_gradients("group_norm", {x}, {{"num_groups", 4}, {"eps", 1e-3}});
  check_gradients("group_norm",
                  {noncontiguous(rand_tensor({2, 2, 2}, DType::Float64, 38)),
                   rand_tensor({2}, DType::Float64, 39)},
                  {{"num_groups", 1}});
  EXPECT_EQ(status_of([&] {
              call1("group_norm", {x}, {{"num_groups", 3}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("group_norm", {x}, {{"num_groups", 0}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { call1("group_norm", {x}); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("group_norm", {rand_tensor({4})}, {{"num_groups", 2}});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("group_norm", {x, rand_tensor({3})}, {{"num_groups", 2}});
            }),
            Status::ShapeMismatch);
}

// ---- batch_norm --------------------------------------------------------------------

TEST(BatchNorm, TrainingMatchesReferenceForShortAndLongRuns) {
  // S = 4 and S = 1 take the column path, S = 40 the per-run path.
  for (Dims shape : {Dims{3, 2, 4}, Dims{5, 3}, Dims{3, 2, 5, 8}}) {
    SCOPED_TRACE(dims_str(shape));
    const int64_t n = shape[0], c = shape[1], s = numel_of(shape) / (n * c);
    Tensor x = rand_tensor(shape, DType::Float64, 41, -2, 3);
    Tensor w = rand_tensor({c}, DType::Float64, 42), b = rand_tensor({c}, DType::Float64, 43);
    auto st = channel_stats_ref(values(x), n, c, s);
    expect_values(
        call1("batch_norm", {x, w, b}),
        batch_norm_ref(values(x), n, c, s, st.mean, st.biased_var, values(w), values(b), 1e-5),
        1e-12);
    expect_values(call1("batch_norm", {x}, {{"eps", 0.5}}),
                  batch_norm_ref(values(x), n, c, s, st.mean, st.biased_var, {}, {}, 0.5), 1e-12);
    Tensor x32 = x.to(DType::Float32);
    auto st32 = channel_stats_ref(values(x32), n, c, s);
    expect_values(call1("batch_norm", {x32, w, b}),
                  batch_norm_ref(values(x32), n, c, s, st32.mean, st32.biased_var, values(w),
                                 values(b), 1e-5),
                  1e-5);
  }
}

TEST(BatchNorm, RunningStatsUpdateInPlace) {
  const int64_t n = 4, c = 3, s = 5;
  Tensor x = rand_tensor({n, c, s}, DType::Float64, 44, 1, 4);
  Tensor rm = make({0.5, -1, 2}, {3}), rv = make({1, 2, 0.5}, {3});
  auto st = channel_stats_ref(values(x), n, c, s);
  Tensor y = call1("batch_norm", {x, Tensor(), Tensor(), rm, rv}, {{"momentum", 0.2}});
  Vec want_m, want_v;
  const Vec m0{0.5, -1, 2}, v0{1, 2, 0.5};
  for (int64_t ch = 0; ch < c; ++ch) {
    want_m.push_back(0.8 * m0[ch] + 0.2 * st.mean[ch]);
    want_v.push_back(0.8 * v0[ch] + 0.2 * st.biased_var[ch] * (n * s) / (n * s - 1.0));
  }
  expect_values(rm, want_m, 1e-12);
  expect_values(rv, want_v, 1e-12);
  // Training normalizes with the batch statistics, not the running ones.
  expect_values(y, batch_norm_ref(values(x), n, c, s, st.mean, st.biased_var, {}, {}, 1e-5), 1e-12);

  // Strided float32 running statistics of a float64 input are updated where they are.
  Tensor rm32 = strided1d(make({0, 0, 0}, {3}, DType::Float32));
  Tensor rv32 = strided1d(make({1, 1, 1}, {3}, DType::Float32));
  call1("batch_norm", {x, Tensor(), Tensor(), rm32, rv32});
  Vec want_m32, want_v32;
  for (int64_t ch = 0; ch < c; ++ch) {
    want_m32.push_back(0.1 * st.mean[ch]);
    want_v32.push_back(0.9 + 0.1 * st.biased_var[ch] * (n * s) / (n * s - 1.0));
  }
  expect_values(rm32, want_m32, 1e-6);
  expect_values(rv32, want_v32, 1e-6);

  // Evaluation leaves them alone.
  Tensor before_m = rm.clone(), before_v = rv.clone();
  call1("batch_norm", {x, Tensor(), Tensor(), rm, rv}, {{"training", false}});
  expect_values(rm, values(before_m), 0);
  expect_values(rv, values(before_v), 0);
}

TEST(BatchNorm, CountsBatchesAndAveragesCumulatively) {
  const int64_t n = 4, c = 3, s = 2;
  Tensor x = rand_tensor({n, c, s}, DType::Float64, 51, -1, 3);
  auto st = channel_stats_ref(values(x), n, c, s);
  const Vec m0{0.5, -1, 2}, v0{1, 2, 0.5};
  // momentum=None in torch: after two batches the third weighs 1/3.
  Tensor rm = make(m0, {3}), rv = make(v0, {3}), count = make({2}, {}, DType::Int64);
  call1("batch_norm", {x, Tensor(), Tensor(), rm, rv, count},
        {{"cumulative_average", true}, {"momentum", 0.9}});
  EXPECT_EQ(count.item_int(), 3);
  Vec want_m, want_v;
  for (int64_t ch = 0; ch < c; ++ch) {
    want_m.push_back(m0[ch] * 2 / 3 + st.mean[ch] / 3);
    want_v.push_back(v0[ch] * 2 / 3 + st.biased_var[ch] * (n * s) / (n * s - 1.0) / 3);
  }
  expect_values(rm, want_m, 1e-12);
  expect_values(rv, want_v, 1e-12);
  // With a momentum the counter only counts.
  const Tensor before = rm.clone();
  call1("batch_norm", {x, Tensor(), Tensor(), rm, rv, count}, {{"momentum", 0.0}});
  EXPECT_EQ(count.item_int(), 4);
  expect_values(rm, values(before), 0);
  // Evaluation counts nothing.
  call1("batch_norm", {x, Tensor(), Tensor(), rm, rv, count}, {{"training", false}});
  EXPECT_EQ(count.item_int(), 4);
  const std::string float_count = message_of([&] {
    call1("batch_norm", {x, Tensor(), Tensor(), rm, rv, make({1.5}, {}, DType::Float32)});
  });
  EXPECT_NE(float_count.find("num_batches_tracked must be one integer"), std::string::npos)
      << float_count;
  EXPECT_EQ(status_of([&] {
              call1("batch_norm", {x, Tensor(), Tensor(), Tensor(), Tensor(), count});
            }),
            Status::InvalidArgument);
}

TEST(BatchNorm, EvaluationUsesRunningStats) {
  Tensor x = rand_tensor({3, 2, 4}, DType::Float64, 45);
  Tensor w = make({2, -1}, {2}), b = make({0.5, 1}, {2});
  Tensor rm = make({0.1, -0.2}, {2}), rv = make({0.5, 2}, {2});
  expect_values(call1("batch_norm", {x, w, b, rm, rv}, {{"training", false}, {"eps", 1e-3}}),
                batch_norm_ref(values(x), 3, 2, 4, {0.1, -0.2}, {0.5, 2}, {2, -1}, {0.5, 1}, 1e-3),
                1e-12);
  Tensor xh = x.to(DType::BFloat16);
  expect_values(call1("batch_norm", {xh, w, b, rm, rv}, {{"training", false}}),
                batch_norm_ref(values(xh), 3, 2, 4, {0.1, -0.2}, {0.5, 2}, {2, -1}, {0.5, 1}, 1e-5),
                3e-2);
  expect_values(call1("batch_norm", {noncontiguous(x), w, b, rm, rv}, {{"training", false}}),
                batch_norm_ref(values(x), 3, 2, 4, {0.1, -0.2}, {0.5, 2}, {2, -1}, {0.5, 1}, 1e-5),
                1e-12);
}

TEST(BatchNorm, Gradients) {
  for (Dims shape : {Dims{3, 2, 2}, Dims{4, 3}}) {
    const int64_t c = shape[1];
    Tensor x = rand_tensor(shape, DType::Float64, 46, -2, 2);
    Tensor w = rand_tensor({c}, DType::Float64, 47), b = rand_tensor({c}, DType::Float64, 48);
    Tensor rm = rand_tensor({c}, DType::Float64, 49),
           rv = rand_tensor({c}, DType::Float64, 50, 0.5, 2);
    check_gradients("batch_norm", {x, w, b, rm.clone(), rv.clone()}, {}, 1e-6, 1e-6, {3, 4});
    check_gradients("batch_norm", {x}, {{"eps", 1e-3}});
    check_gradients("batch_norm", {x, w, b, rm, rv}, {{"training", false}}, 1e-6, 1e-6, {3, 4});
  }
  check_gradients("batch_norm", {noncontiguous(rand_tensor({2, 3, 2}, DType::Float64, 51)),
                                 rand_tensor({3}, DType::Float64, 52)});
}

TEST(BatchNorm, Errors) {
  Tensor x = rand_tensor({2, 3}, DType::Float32);
  Tensor r3 = rand_tensor({3}, DType::Float32);
  EXPECT_EQ(status_of([&] {
              call1("batch_norm", {x}, {{"training", false}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("batch_norm", {x, Tensor(), Tensor(), r3});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("batch_norm", {rand_tensor({1, 3})});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { call1("batch_norm", {rand_tensor({3})}); }), Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] { call1("batch_norm", {x, rand_tensor({2})}); }), Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("batch_norm", {x, Tensor(), Tensor(), r3, rand_tensor({4})});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("batch_norm", {make({1, 2, 3, 4}, {2, 2}, DType::Int32)});
            }),
            Status::DTypeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("batch_norm", {x}, {{"momentum", "x"}});
            }),
            Status::InvalidArgument);
  // One value per channel is fine in evaluation.
  EXPECT_EQ(status_of([&] {
              call1("batch_norm", {rand_tensor({1, 3}), Tensor(), Tensor(), r3, r3},
                    {{"training", false}});
            }),
            Status::Ok);
}

// ---- determinism -------------------------------------------------------------------

TEST(Normalization, SameBitsForOneAndTwoThreads) {
  // Big enough that the reductions split into several chunks.
  Tensor x = rand_tensor({4096, 64}, DType::Float32, 61);
  Tensor g = rand_tensor({4096, 64}, DType::Float32, 62);
  Tensor w = rand_tensor({64}, DType::Float32, 63);
  Tensor xb = rand_tensor({64, 16, 40}, DType::Float32, 64),
         gb = rand_tensor({64, 16, 40}, DType::Float32, 65);
  auto run = [&] {
    std::vector<Vec> out;
    for (const Tensor& t : call("layer_norm_backward", {g, x, w}, ln_attrs({64})))
      out.push_back(values(t));
    for (const Tensor& t :
         call("rms_norm_backward", {g, x, w}, {{"normalized_shape", Ints{64}}, {"eps", 1e-6}}))
      out.push_back(values(t));
    for (const Tensor& t : call("batch_norm_backward", {g, x})) out.push_back(values(t));
    for (const Tensor& t : call("batch_norm_backward", {gb, xb})) out.push_back(values(t));
    out.push_back(values(call1("batch_norm", {x})));
    out.push_back(values(call1("batch_norm", {xb})));
    return out;
  };
  auto two = [&] {
    ThreadPool p2(2);
    ThreadPool::Scope s(&p2);
    return run();
  }();
  ThreadPool p1(1);
  ThreadPool::Scope s(&p1);
  auto one = run();
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], two[i]) << "output " << i;
}

TEST(Normalization, BackwardOpsMatchEachOther) {
  // layer_norm over the whole sample equals group_norm with one group.
  Tensor x = rand_tensor({3, 4, 5}, DType::Float64, 71),
         g = rand_tensor({3, 4, 5}, DType::Float64, 72);
  auto ln = call("layer_norm_backward", {g, x}, ln_attrs({4, 5}));
  auto gn = call("group_norm_backward", {g, x}, {{"num_groups", 1}});
  expect_values(gn[0], values(ln[0]), 1e-12);
  // Batch norm of (N, C) in training equals layer norm of the transpose.
  Tensor xt = rand_tensor({6, 3}, DType::Float64, 73);
  Tensor tr = xt.as_strided({3, 6}, {1, 3}, 0);
  auto bn = values(call1("batch_norm", {xt}));
  auto lnt = values(call1("layer_norm", {tr}, ln_attrs({6})));
  for (int i = 0; i < 6; ++i)
    for (int ch = 0; ch < 3; ++ch) EXPECT_NEAR(bn[i * 3 + ch], lnt[ch * 6 + i], 1e-12);
}
