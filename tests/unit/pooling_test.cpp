// max_pool2d (with and without indices), avg_pool2d, adaptive_avg_pool2d and their
// backward ops against direct pooling loops written here in double, plus gradient
// checks and errors.
#include <cmath>
#include <limits>

#include "error_test_util.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

using Ints = std::vector<int64_t>;

struct Pool {
  int64_t kh = 2, kw = 2, sh = 2, sw = 2, ph = 0, pw = 0, dh = 1, dw = 1;
  bool ceil = false;
  bool include_pad = true;
  int64_t divisor = 0;  // divisor_override, 0: none

  Attrs max_attrs() const {
    return {{"kernel_size", Ints{kh, kw}},
            {"stride", Ints{sh, sw}},
            {"padding", Ints{ph, pw}},
            {"dilation", Ints{dh, dw}},
            {"ceil_mode", ceil}};
  }
  Attrs avg_attrs() const {
    Attrs a{{"kernel_size", Ints{kh, kw}},
            {"stride", Ints{sh, sw}},
            {"padding", Ints{ph, pw}},
            {"ceil_mode", ceil},
            {"count_include_pad", include_pad}};
    if (divisor != 0) a.set("divisor_override", divisor);
    return a;
  }
};

// PyTorch's documented output size of a pooling window along one dim.
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

// Calls f(plane, oh, ow, out_index) for every output of a (N, C, H, W) pooling.
struct Planes {
  int64_t planes, H, W, Ho, Wo;
};

Planes planes_of(const Dims& x, int64_t Ho, int64_t Wo) {
  return {x[0] * x[1], x[2], x[3], Ho, Wo};
}

// Max pooling; `argmax` gets each output's first maximal input index (-1: none).
std::vector<double> ref_max_pool(const Tensor& x, const Pool& p, Dims* shape,
                                 std::vector<int64_t>* argmax) {
  const Dims& s = x.shape();
  const Planes q = planes_of(s, out_size(s[2], p.kh, p.sh, p.ph, p.dh, p.ceil),
                             out_size(s[3], p.kw, p.sw, p.pw, p.dw, p.ceil));
  *shape = {s[0], s[1], q.Ho, q.Wo};
  auto xv = values(x);
  std::vector<double> out;
  argmax->clear();
  for (int64_t pl = 0; pl < q.planes; ++pl)
    for (int64_t oh = 0; oh < q.Ho; ++oh)
      for (int64_t ow = 0; ow < q.Wo; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t at = -1;
        for (int64_t i = 0; i < p.kh; ++i)
          for (int64_t j = 0; j < p.kw; ++j) {
            const int64_t ih = oh * p.sh - p.ph + i * p.dh, iw = ow * p.sw - p.pw + j * p.dw;
            if (ih < 0 || ih >= q.H || iw < 0 || iw >= q.W) continue;
            const int64_t idx = (pl * q.H + ih) * q.W + iw;
            if (at < 0 || xv[idx] > best) best = xv[idx], at = idx;
          }
        out.push_back(best);
        argmax->push_back(at);
      }
  return out;
}

// Average pooling; `weights` gets, per output, the (input index, weight) terms.
std::vector<double> ref_avg_pool(const Tensor& x, const Pool& p, Dims* shape,
                                 std::vector<std::vector<std::pair<int64_t, double>>>* terms) {
  const Dims& s = x.shape();
  const Planes q = planes_of(s, out_size(s[2], p.kh, p.sh, p.ph, 1, p.ceil),
                             out_size(s[3], p.kw, p.sw, p.pw, 1, p.ceil));
  *shape = {s[0], s[1], q.Ho, q.Wo};
  auto xv = values(x);
  std::vector<double> out;
  terms->clear();
  for (int64_t pl = 0; pl < q.planes; ++pl)
    for (int64_t oh = 0; oh < q.Ho; ++oh)
      for (int64_t ow = 0; ow < q.Wo; ++ow) {
        std::vector<int64_t> inside;
        int64_t in_padded = 0;
        for (int64_t i = 0; i < p.kh; ++i)
          for (int64_t j = 0; j < p.kw; ++j) {
            const int64_t ih = oh * p.sh - p.ph + i, iw = ow * p.sw - p.pw + j;
            if (ih >= -p.ph && ih < q.H + p.ph && iw >= -p.pw && iw < q.W + p.pw) ++in_padded;
            if (ih >= 0 && ih < q.H && iw >= 0 && iw < q.W)
              inside.push_back((pl * q.H + ih) * q.W + iw);
          }
        const double div = p.divisor != 0  ? p.divisor
                           : p.include_pad ? in_padded
                                           : static_cast<double>(inside.size());
        double sum = 0;
        std::vector<std::pair<int64_t, double>> t;
        for (int64_t idx : inside) sum += xv[idx], t.push_back({idx, 1.0 / div});
        out.push_back(inside.empty() ? 0.0 : sum / div);
        terms->push_back(t);
      }
  return out;
}

std::vector<double> ref_adaptive(const Tensor& x, int64_t Ho, int64_t Wo,
                                 std::vector<std::vector<std::pair<int64_t, double>>>* terms) {
  const Dims& s = x.shape();
  const Planes q = planes_of(s, Ho, Wo);
  auto xv = values(x);
  std::vector<double> out;
  terms->clear();
  auto lo = [](int64_t o, int64_t in, int64_t n) {
    return static_cast<int64_t>(std::floor(double(o) * in / n));
  };
  auto hi = [](int64_t o, int64_t in, int64_t n) {
    return static_cast<int64_t>(std::ceil(double(o + 1) * in / n));
  };
  for (int64_t pl = 0; pl < q.planes; ++pl)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        double sum = 0;
        std::vector<std::pair<int64_t, double>> t;
        const int64_t h0 = lo(oh, q.H, Ho), h1 = hi(oh, q.H, Ho), w0 = lo(ow, q.W, Wo),
                      w1 = hi(ow, q.W, Wo);
        const double n = static_cast<double>((h1 - h0) * (w1 - w0));
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w)
            sum += xv[(pl * q.H + h) * q.W + w], t.push_back({(pl * q.H + h) * q.W + w, 1 / n});
        out.push_back(sum / n);
        terms->push_back(t);
      }
  return out;
}

// The input gradient of a pooling given its terms and an output gradient.
std::vector<double> spread(const std::vector<std::vector<std::pair<int64_t, double>>>& terms,
                           const Tensor& g, int64_t n_in) {
  std::vector<double> dx(n_in, 0.0);
  auto gv = values(g);
  for (size_t o = 0; o < terms.size(); ++o)
    for (auto [idx, wgt] : terms[o]) dx[idx] += wgt * gv[o];
  return dx;
}

std::vector<double> iota(int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = i + 1;
  return v;
}

}  // namespace

// ---- max_pool2d ------------------------------------------------------------------

TEST(MaxPool2d, HandComputed) {
  Tensor x = make(iota(16), {1, 1, 4, 4});
  expect_values(call1("max_pool2d", {x}, {{"kernel_size", Ints{2}}}), {6, 8, 14, 16});
  Tensor o = call1("max_pool2d", {x},
                   {{"kernel_size", Ints{3}}, {"stride", Ints{2}}, {"ceil_mode", true}});
  EXPECT_EQ(o.shape(), (Dims{1, 1, 2, 2}));
  expect_values(o, {11, 12, 15, 16});
}

TEST(MaxPool2d, MatchesDirectPooling) {
  const std::vector<std::pair<Dims, Pool>> cases = {
      {{2, 3, 6, 6}, {}},
      {{1, 2, 7, 5}, {.kh = 3, .kw = 2, .sh = 2, .sw = 1, .ph = 1, .pw = 1}},
      {{2, 2, 9, 8}, {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 0, .dh = 2, .dw = 2}},
      {{1, 3, 5, 7}, {.kh = 2, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .ceil = true}},
      {{2, 1, 6, 6},
       {.kh = 3, .kw = 3, .sh = 3, .sw = 2, .ph = 0, .pw = 1, .dh = 1, .dw = 2, .ceil = true}},
      {{1, 64, 20, 20}, {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1}},  // many planes
  };
  uint32_t seed = 1;
  for (const auto& [shape, p] : cases) {
    SCOPED_TRACE(dims_str(shape));
    for (DType dt : {DType::Float64, DType::Float32, DType::BFloat16, DType::Int32, DType::Int8}) {
      Tensor x = is_floating(dt) ? rand_tensor(shape, dt, seed)
                                 : rand_tensor(shape, DType::Float64, seed, -100, 100).to(dt);
      Dims want_shape;
      std::vector<int64_t> argmax;
      auto want = ref_max_pool(x, p, &want_shape, &argmax);
      Tensor out = call1("max_pool2d", {x}, p.max_attrs());
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_EQ(out.shape(), want_shape);
      expect_values(out, want, 0);  // a max is exact in every dtype
      // The same values with indices, which count within each (n, c) plane.
      auto both = call("max_pool2d_with_indices", {x}, p.max_attrs());
      expect_values(both[0], want, 0);
      ASSERT_EQ(both[1].dtype(), DType::Int64);
      EXPECT_EQ(both[1].shape(), want_shape);
      const int64_t plane = shape[2] * shape[3], per_plane = want_shape[2] * want_shape[3];
      std::vector<double> in_plane;
      for (size_t o = 0; o < argmax.size(); ++o)
        in_plane.push_back(static_cast<double>(argmax[o] - (o / per_plane) * plane));
      expect_values(both[1], in_plane, 0);
    }
    ++seed;
  }
}

TEST(MaxPool2d, BackwardRoutesToTheFirstMaximum) {
  // All-equal windows: PyTorch sends the gradient to the first element.
  Tensor x = make(std::vector<double>(16, 1.0), {1, 1, 4, 4});
  Tensor g = make({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor dx = call1("max_pool2d_backward", {g, x}, {{"kernel_size", Ints{3}}, {"stride", Ints{1}}});
  expect_values(dx, {1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // Against the reference argmax on random values, with padding and dilation.
  Pool p{.kh = 3, .kw = 2, .sh = 2, .sw = 1, .ph = 1, .pw = 1, .dh = 2, .dw = 1, .ceil = true};
  Tensor xr = rand_tensor({2, 2, 7, 6}, DType::Float64, 9);
  Dims shape;
  std::vector<int64_t> argmax;
  ref_max_pool(xr, p, &shape, &argmax);
  Tensor gr = rand_tensor(shape, DType::Float64, 10);
  std::vector<double> want(xr.numel(), 0.0);
  auto gv = values(gr);
  for (size_t o = 0; o < argmax.size(); ++o)
    if (argmax[o] >= 0) want[argmax[o]] += gv[o];
  expect_values(call1("max_pool2d_backward", {gr, xr}, p.max_attrs()), want, 1e-14);
}

TEST(MaxPool2d, NanPropagates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = make({1, nan, 3, 4, 5, 6, 7, 8}, {1, 2, 4});
  expect_values(call1("max_pool2d", {x}, {{"kernel_size", Ints{2}}}), {nan, 8});
}

// float32 2x2 windows with stride 2 take a kernel of their own; float64 takes
// the general one. On values drawn from a few, with ties, signed zeros,
// infinities and NaN, both must pick the same element: the same value, sign
// of zero included, forward, and the same gradient routing backward. The
// widths reach every path of the 2x2 kernel: 8 and 4 windows at a time and
// the scalar tail, odd widths and heights (a row or column in no window), and
// planes 8 wide, two output rows at a time, with an odd output row left over.
TEST(MaxPool2d, TwoByTwoKernelPicksWhatTheGeneralKernelPicks) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> pool = {-1.0, 0.0, -0.0, 1.0, 1.0, nan, inf, -inf, 2.0};
  const std::vector<Dims> shapes = {{3, 5, 8, 8}, {2, 2, 9, 21}, {1, 3, 17, 33}, {2, 1, 4, 16},
                                    {1, 1, 2, 2}, {1, 2, 3, 3},  {1, 1, 2, 40}, {4, 2, 6, 10},
                                    {2, 3, 7, 8}, {1, 2, 2, 8},  {1, 1, 11, 8}, {2, 1, 8, 9}};
  uint32_t state = 12345;
  auto draw = [&] {
    state = state * 1664525u + 1013904223u;
    return pool[(state >> 8) % pool.size()];
  };
  const Attrs attrs{{"kernel_size", Ints{2}}};
  for (const Dims& shape : shapes) {
    SCOPED_TRACE(dims_str(shape));
    std::vector<double> xv(static_cast<size_t>(numel_of(shape)));
    for (double& v : xv) v = draw();
    Tensor x64 = make(xv, shape), x32 = x64.to(DType::Float32);
    Tensor want = call1("max_pool2d", {x64}, attrs), got = call1("max_pool2d", {x32}, attrs);
    ASSERT_EQ(got.shape(), want.shape());
    const auto w = values(want), g = values(got);
    for (size_t i = 0; i < w.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(std::isnan(g[i]), std::isnan(w[i]));
      if (!std::isnan(w[i])) {
        EXPECT_EQ(g[i], w[i]);
        EXPECT_EQ(std::signbit(g[i]), std::signbit(w[i]));
      }
    }
    // Distinct gradients show where each window's gradient went.
    Tensor g64 = rand_tensor(want.shape(), DType::Float64, 3).to(DType::Float32).to(DType::Float64);
    expect_values(call1("max_pool2d_backward", {g64.to(DType::Float32), x32}, attrs),
                  values(call1("max_pool2d_backward", {g64, x64}, attrs)), 0);
  }
}

TEST(MaxPool2d, UnbatchedAndNonContiguous) {
  Tensor x = rand_tensor({3, 5, 6});
  Pool p{.kh = 2, .kw = 3, .sh = 1, .sw = 2, .ph = 1, .pw = 1};
  Dims shape;
  std::vector<int64_t> argmax;
  auto want =
      ref_max_pool(call1("reshape", {x}, {{"shape", Ints{1, 3, 5, 6}}}), p, &shape, &argmax);
  Tensor out = call1("max_pool2d", {noncontiguous(x)}, p.max_attrs());
  EXPECT_EQ(out.shape(), (Dims{3, shape[2], shape[3]}));
  expect_values(out, want, 0);
}

TEST(MaxPool2d, Gradients) {
  check_gradients("max_pool2d", {rand_tensor({1, 2, 4, 4})}, {{"kernel_size", Ints{2}}});
  check_gradients(
      "max_pool2d", {rand_tensor({2, 2, 5, 5})},
      Pool{.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .ceil = true}.max_attrs());
  check_gradients("max_pool2d", {noncontiguous(rand_tensor({2, 5, 4}))},
                  Pool{.kh = 2, .kw = 2, .sh = 1, .sw = 1, .dh = 2, .dw = 1}.max_attrs());
}

TEST(MaxPool2d, Errors) {
  Tensor x = rand_tensor({1, 2, 4, 4}, DType::Float32);
  // The op with indices checks its attributes and input as max_pool2d does.
  for (const std::string op : {"max_pool2d", "max_pool2d_with_indices"}) {
    SCOPED_TRACE(op);
    expect_status(Status::InvalidArgument, [&] { call(op, {x}); }, {op, "kernel_size"});
    expect_status(Status::InvalidArgument,
                  [&] {
                    call(op, {x}, {{"kernel_size", Ints{0, 2}}});
                  },
                  {op, "kernel_size", "[0, 2]"});
    expect_status(Status::InvalidArgument,
                  [&] {
                    call(op, {x}, {{"kernel_size", Ints{2}}, {"stride", Ints{-1}}});
                  },
                  {op, "stride"});
    expect_status(Status::InvalidArgument,
                  [&] {
                    call(op, {x}, {{"kernel_size", Ints{2}}, {"dilation", Ints{0}}});
                  },
                  {op, "dilation"});
    expect_status(Status::InvalidArgument,
                  [&] {
                    call(op, {x}, {{"kernel_size", Ints{2}}, {"padding", Ints{2}}});
                  },
                  {op, "padding", "half"});
    expect_status(Status::ShapeMismatch,
                  [&] {
                    call(op, {x}, {{"kernel_size", Ints{5}}});
                  },
                  {op, "output size", "[1, 2, 4, 4]", "kernel_size [5, 5]"});
    expect_status(
        Status::ShapeMismatch,
        [&] {
          call(op, {rand_tensor({4, 4}, DType::Float32)}, {{"kernel_size", Ints{2}}});
        },
        {op, "[4, 4]"});
    expect_status(Status::DTypeMismatch,
                  [&] {
                    call(op, {x.to(DType::Bool)}, {{"kernel_size", Ints{2}}});
                  },
                  {op, "bool"});
  }
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("max_pool2d_backward", {rand_tensor({1, 2, 3, 2}, DType::Float32), x},
                        {{"kernel_size", Ints{2}}});
                },
                {"max_pool2d_backward", "grad", "[1, 2, 3, 2]", "[1, 2, 2, 2]"});
}

// ---- max_pool2d_with_indices ---------------------------------------------------------

// (values, indices) of max_pool2d_with_indices over a (1, 1, H, W) input.
std::vector<Tensor> pool_with_indices(std::vector<double> v, int64_t h, int64_t w,
                                      const Attrs& attrs) {
  return call("max_pool2d_with_indices", {make(std::move(v), {1, 1, h, w})}, attrs);
}

TEST(MaxPool2dWithIndices, HandComputed) {
  // Ties: every window is all ones, so each index is the window's first tap.
  auto ties = pool_with_indices(std::vector<double>(16, 1.0), 4, 4,
                                {{"kernel_size", Ints{3}}, {"stride", Ints{1}}});
  expect_values(ties[1], {0, 1, 4, 5});
  // Padding: indices are of the unpadded input, and padding never wins, even
  // over negative values.
  const Attrs padded{{"kernel_size", Ints{3}}, {"stride", Ints{2}}, {"padding", Ints{1}}};
  auto pos = pool_with_indices(iota(16), 4, 4, padded);
  expect_values(pos[0], {6, 8, 14, 16});
  expect_values(pos[1], {5, 7, 13, 15});
  std::vector<double> negative = iota(16);
  for (double& v : negative) v = -v;
  auto neg = pool_with_indices(negative, 4, 4, padded);
  expect_values(neg[0], {-1, -2, -5, -6});
  expect_values(neg[1], {0, 1, 4, 5});
  // ceil_mode: the last windows hang over the input's edge.
  auto ceil = pool_with_indices(
      iota(16), 4, 4, {{"kernel_size", Ints{3}}, {"stride", Ints{2}}, {"ceil_mode", true}});
  expect_values(ceil[0], {11, 12, 15, 16});
  expect_values(ceil[1], {10, 11, 14, 15});
  // Dilation 2: window (i, j) holds rows i, i + 2 and columns j, j + 2.
  auto dilated = pool_with_indices(
      iota(25), 5, 5, {{"kernel_size", Ints{2}}, {"stride", Ints{1}}, {"dilation", Ints{2}}});
  expect_values(dilated[0], {13, 14, 15, 18, 19, 20, 23, 24, 25});
  expect_values(dilated[1], {12, 13, 14, 17, 18, 19, 22, 23, 24});
}

TEST(MaxPool2dWithIndices, NanAndInfinityAsPyTorch) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // PyTorch's CPU kernel takes every NaN it meets, so the last NaN of a window wins.
  auto r = pool_with_indices({nan, 1, 3, 4, nan, 2, 7, 8}, 2, 4, {{"kernel_size", Ints{2}}});
  expect_values(r[0], {nan, 8});
  expect_values(r[1], {4, 7});
  // A window of -inf alone reports its first element.
  auto low = pool_with_indices({-inf, -inf, -inf, -inf}, 2, 2, {{"kernel_size", Ints{2}}});
  expect_values(low[0], {-inf});
  expect_values(low[1], {0});
}

TEST(MaxPool2dWithIndices, GradientGoesThroughTheValues) {
  Pool p{.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .ceil = true};
  check_gradients("max_pool2d_with_indices", {rand_tensor({2, 2, 5, 5})}, p.max_attrs());
  check_gradients("max_pool2d_with_indices", {noncontiguous(rand_tensor({2, 5, 4}))},
                  Pool{.kh = 2, .kw = 2, .sh = 1, .sw = 1, .dh = 2, .dw = 1}.max_attrs());
}

// ---- avg_pool2d ------------------------------------------------------------------

TEST(AvgPool2d, HandComputed) {
  expect_values(call1("avg_pool2d", {make(iota(16), {1, 1, 4, 4})}, {{"kernel_size", Ints{2}}}),
                {3.5, 5.5, 11.5, 13.5});
  Tensor x = make({1, 2, 3, 4}, {1, 1, 2, 2});
  Attrs a{{"kernel_size", Ints{2}}, {"padding", Ints{1}}};
  expect_values(call1("avg_pool2d", {x}, a), {0.25, 0.5, 0.75, 1});
  a.set("count_include_pad", false);
  expect_values(call1("avg_pool2d", {x}, a), {1, 2, 3, 4});
  a.set("divisor_override", int64_t{2});
  expect_values(call1("avg_pool2d", {x}, a), {0.5, 1, 1.5, 2});
}

TEST(AvgPool2d, MatchesDirectPoolingForwardAndBackward) {
  const std::vector<std::pair<Dims, Pool>> cases = {
      {{2, 3, 6, 6}, {}},
      {{1, 2, 7, 5}, {.kh = 3, .kw = 2, .sh = 2, .sw = 1, .ph = 1, .pw = 1}},
      {{1, 2, 7, 5}, {.kh = 3, .kw = 2, .sh = 2, .sw = 1, .ph = 1, .pw = 1, .include_pad = false}},
      {{2, 2, 5, 7}, {.kh = 2, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .ceil = true}},
      {{2, 2, 5, 7},
       {.kh = 2, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .ceil = true, .include_pad = false}},
      {{1, 3, 5, 5},
       {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .ceil = true, .divisor = 5}},
      {{1, 64, 16, 16}, {.kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1}},
  };
  uint32_t seed = 20;
  for (const auto& [shape, p] : cases) {
    SCOPED_TRACE(dims_str(shape));
    Tensor x = rand_tensor(shape, DType::Float64, seed);
    Dims out_shape;
    std::vector<std::vector<std::pair<int64_t, double>>> terms;
    auto want = ref_avg_pool(x, p, &out_shape, &terms);
    Tensor out = call1("avg_pool2d", {x}, p.avg_attrs());
    EXPECT_EQ(out.shape(), out_shape);
    expect_values(out, want, 1e-12);
    expect_values(call1("avg_pool2d", {x.to(DType::Float32)}, p.avg_attrs()), want, 1e-5);
    expect_values(call1("avg_pool2d", {x.to(DType::Float16)}, p.avg_attrs()), want, 5e-3);
    Tensor g = rand_tensor(out_shape, DType::Float64, seed + 1);
    Attrs ab = p.avg_attrs();
    ab.set("input_size", shape);
    expect_values(call1("avg_pool2d_backward", {g}, ab), spread(terms, g, x.numel()), 1e-12);
    ++seed;
  }
}

TEST(AvgPool2d, UnbatchedAndNonContiguous) {
  Tensor x = rand_tensor({2, 5, 6});
  Pool p{.kh = 3, .kw = 2, .sh = 1, .sw = 2, .ph = 1, .pw = 1, .include_pad = false};
  Dims shape;
  std::vector<std::vector<std::pair<int64_t, double>>> terms;
  auto want = ref_avg_pool(call1("reshape", {x}, {{"shape", Ints{1, 2, 5, 6}}}), p, &shape, &terms);
  Tensor out = call1("avg_pool2d", {noncontiguous(x)}, p.avg_attrs());
  EXPECT_EQ(out.shape(), (Dims{2, shape[2], shape[3]}));
  expect_values(out, want, 1e-12);
}

TEST(AvgPool2d, Gradients) {
  check_gradients("avg_pool2d", {rand_tensor({1, 2, 4, 4})}, {{"kernel_size", Ints{2}}});
  check_gradients(
      "avg_pool2d", {rand_tensor({2, 2, 5, 5})},
      Pool{.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .ceil = true, .include_pad = false}
          .avg_attrs());
  check_gradients(
      "avg_pool2d", {noncontiguous(rand_tensor({2, 4, 5}))},
      Pool{.kh = 2, .kw = 3, .sh = 1, .sw = 2, .ph = 1, .pw = 1, .divisor = 3}.avg_attrs());
  Attrs ab = Pool{.kh = 2, .kw = 2, .sh = 1, .sw = 1, .ph = 1, .pw = 1}.avg_attrs();
  ab.set("input_size", Ints{1, 2, 3, 3});
  check_gradients("avg_pool2d_backward", {rand_tensor({1, 2, 4, 4})}, ab);
}

TEST(AvgPool2d, Errors) {
  Tensor x = rand_tensor({1, 2, 4, 4}, DType::Float32);
  expect_status(Status::DTypeMismatch,
                [&] {
                  call1("avg_pool2d", {x.to(DType::Int64)}, {{"kernel_size", Ints{2}}});
                },
                {"avg_pool2d", "int64"});
  expect_status(
      Status::InvalidArgument,
      [&] {
        call1("avg_pool2d", {x}, {{"kernel_size", Ints{2}}, {"divisor_override", int64_t{0}}});
      },
      {"avg_pool2d", "divisor_override"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("avg_pool2d", {x}, {{"kernel_size", Ints{3}}, {"padding", Ints{0, 2}}});
                },
                {"avg_pool2d", "padding", "[0, 2]"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("avg_pool2d", {x}, {{"kernel_size", Ints{2, 6}}});
                },
                {"avg_pool2d", "output size", "[1, 2, 4, 4]"});
  expect_status(Status::NotFound,
                [&] {
                  call1("avg_pool2d", {x}, {{"kernel_size", Ints{2}}, {"dilation", Ints{2}}});
                },
                {"avg_pool2d", "dilation"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("avg_pool2d_backward", {rand_tensor({1, 2, 3, 3}, DType::Float32)},
                        {{"kernel_size", Ints{2}}, {"input_size", Ints{1, 2, 4, 4}}});
                },
                {"avg_pool2d_backward", "grad", "[1, 2, 3, 3]", "[1, 2, 2, 2]"});
}

// ---- adaptive_avg_pool2d -------------------------------------------------------------

TEST(AdaptiveAvgPool2d, HandComputed) {
  Tensor x = make(iota(9), {1, 1, 3, 3});
  expect_values(call1("adaptive_avg_pool2d", {x}, {{"output_size", Ints{2, 2}}}), {3, 4, 6, 7});
  expect_values(call1("adaptive_avg_pool2d", {x}, {{"output_size", Ints{1}}}), {5});
}

TEST(AdaptiveAvgPool2d, MatchesDirectPoolingForwardAndBackward) {
  const std::vector<std::pair<Dims, Ints>> cases = {{{2, 3, 5, 7}, {3, 4}},
                                                    {{1, 2, 4, 4}, {4, 4}},
                                                    {{1, 2, 3, 5}, {5, 2}},
                                                    {{2, 2, 7, 7}, {1, 1}},
                                                    {{1, 64, 14, 14}, {5, 5}}};
  uint32_t seed = 40;
  for (const auto& [shape, size] : cases) {
    SCOPED_TRACE(dims_str(shape));
    Tensor x = rand_tensor(shape, DType::Float64, seed);
    std::vector<std::vector<std::pair<int64_t, double>>> terms;
    auto want = ref_adaptive(x, size[0], size[1], &terms);
    Tensor out = call1("adaptive_avg_pool2d", {x}, {{"output_size", size}});
    EXPECT_EQ(out.shape(), (Dims{shape[0], shape[1], size[0], size[1]}));
    expect_values(out, want, 1e-12);
    expect_values(call1("adaptive_avg_pool2d", {x.to(DType::Float32)}, {{"output_size", size}}),
                  want, 1e-5);
    expect_values(call1("adaptive_avg_pool2d", {x.to(DType::BFloat16)}, {{"output_size", size}}),
                  want, 2e-2);
    Tensor g = rand_tensor(out.shape(), DType::Float64, seed + 1);
    expect_values(call1("adaptive_avg_pool2d_backward", {g}, {{"input_size", shape}}),
                  spread(terms, g, x.numel()), 1e-12);
    ++seed;
  }
}

TEST(AdaptiveAvgPool2d, UnbatchedNonContiguousAndGradients) {
  Tensor x = rand_tensor({2, 5, 4});
  std::vector<std::vector<std::pair<int64_t, double>>> terms;
  auto want = ref_adaptive(call1("reshape", {x}, {{"shape", Ints{1, 2, 5, 4}}}), 3, 3, &terms);
  Tensor out = call1("adaptive_avg_pool2d", {noncontiguous(x)}, {{"output_size", Ints{3}}});
  EXPECT_EQ(out.shape(), (Dims{2, 3, 3}));
  expect_values(out, want, 1e-12);
  check_gradients("adaptive_avg_pool2d", {rand_tensor({2, 2, 5, 4})},
                  {{"output_size", Ints{3, 2}}});
  check_gradients("adaptive_avg_pool2d", {noncontiguous(rand_tensor({2, 3, 4}))},
                  {{"output_size", Ints{4, 3}}});
  check_gradients("adaptive_avg_pool2d_backward", {rand_tensor({1, 2, 2, 3})},
                  {{"input_size", Ints{1, 2, 5, 4}}});
}

TEST(AdaptiveAvgPool2d, Errors) {
  Tensor x = rand_tensor({1, 2, 4, 4}, DType::Float32);
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("adaptive_avg_pool2d", {x}, {{"output_size", Ints{0, 2}}});
                },
                {"adaptive_avg_pool2d", "output_size", "[0, 2]"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("adaptive_avg_pool2d", {x}, {{"output_size", Ints{1, 2, 3}}});
                },
                {"adaptive_avg_pool2d", "output_size"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("adaptive_avg_pool2d", {rand_tensor({1, 0, 4, 4}, DType::Float32)},
                        {{"output_size", Ints{2}}});
                },
                {"adaptive_avg_pool2d", "[1, 0, 4, 4]"});
  expect_status(Status::DTypeMismatch,
                [&] {
                  call1("adaptive_avg_pool2d", {x.to(DType::Int32)}, {{"output_size", Ints{2}}});
                },
                {"adaptive_avg_pool2d", "int32"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("adaptive_avg_pool2d_backward", {rand_tensor({2, 2, 2}, DType::Float32)},
                        {{"input_size", Ints{1, 2, 4, 4}}});
                },
                {"adaptive_avg_pool2d_backward", "rank"});
}
