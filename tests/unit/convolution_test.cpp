// conv2d, conv_transpose2d and their backward ops against a direct
// convolution written here in double, plus gradient checks and errors.
#include "engine/core/parallel.h"
#include "error_test_util.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

using Ints = std::vector<int64_t>;

struct Conv {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  Attrs attrs() const {
    return {{"stride", Ints{sh, sw}},
            {"padding", Ints{ph, pw}},
            {"dilation", Ints{dh, dw}},
            {"groups", groups}};
  }
};

Dims conv_out_shape(const Dims& xs, const Dims& ws, const Conv& c) {
  return {xs[0], ws[0], (xs[2] + 2 * c.ph - c.dh * (ws[2] - 1) - 1) / c.sh + 1,
          (xs[3] + 2 * c.pw - c.dw * (ws[3] - 1) - 1) / c.sw + 1};
}

// Calls f(x_index, w_index, out_index) for every product term of the direct
// convolution of x (N, C, H, W) with w (O, C/groups, kH, kW) into out.
template <typename F>
void for_each_tap(const Dims& xs, const Dims& ws, const Dims& os, const Conv& c, F f) {
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t O = ws[0], Cg = ws[1], kH = ws[2], kW = ws[3], Og = O / c.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < os[2]; ++oh)
        for (int64_t ow = 0; ow < os[3]; ++ow)
          for (int64_t cl = 0; cl < Cg; ++cl)
            for (int64_t i = 0; i < kH; ++i)
              for (int64_t j = 0; j < kW; ++j) {
                const int64_t ih = oh * c.sh - c.ph + i * c.dh, iw = ow * c.sw - c.pw + j * c.dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t ci = (o / Og) * Cg + cl;
                f(((n * C + ci) * H + ih) * W + iw, ((o * Cg + cl) * kH + i) * kW + j,
                  ((n * O + o) * os[2] + oh) * os[3] + ow);
              }
}

std::vector<double> ref_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv& c) {
  const Dims os = conv_out_shape(x.shape(), w.shape(), c);
  std::vector<double> out(numel_of(os), 0.0), xv = values(x), wv = values(w);
  for_each_tap(x.shape(), w.shape(), os, c,
               [&](int64_t xi, int64_t wi, int64_t oi) { out[oi] += xv[xi] * wv[wi]; });
  if (b.defined()) {
    auto bv = values(b);
    const int64_t plane = os[2] * os[3];
    for (size_t i = 0; i < out.size(); ++i) out[i] += bv[(i / plane) % os[1]];
  }
  return out;
}

// conv_transpose2d of x (N, Cin, H, W) with w (Cin, Cout/groups, kH, kW): every
// product term of the matching conv2d, with input and output exchanged.
std::vector<double> ref_conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b,
                                         const Conv& c, int64_t oph, int64_t opw, Dims* shape) {
  const Dims& xs = x.shape();
  const Dims& ws = w.shape();
  Dims ys{xs[0], ws[1] * c.groups, (xs[2] - 1) * c.sh - 2 * c.ph + c.dh * (ws[2] - 1) + oph + 1,
          (xs[3] - 1) * c.sw - 2 * c.pw + c.dw * (ws[3] - 1) + opw + 1};
  *shape = ys;
  std::vector<double> y(numel_of(ys), 0.0), xv = values(x), wv = values(w);
  for_each_tap(ys, ws, xs, c,
               [&](int64_t yi, int64_t wi, int64_t xi) { y[yi] += xv[xi] * wv[wi]; });
  if (b.defined()) {
    auto bv = values(b);
    const int64_t plane = ys[2] * ys[3];
    for (size_t i = 0; i < y.size(); ++i) y[i] += bv[(i / plane) % ys[1]];
  }
  return y;
}

struct Case {
  Dims x, w;
  Conv c;
  bool bias = true;
};

std::vector<Case> forward_cases() {
  return {
      {{1, 1, 5, 5}, {1, 1, 3, 3}, {}},
      {{2, 3, 6, 5}, {4, 3, 3, 2}, {.sh = 2, .sw = 1, .ph = 1, .pw = 2}},
      {{2, 4, 7, 7}, {6, 2, 3, 3}, {.ph = 1, .pw = 1, .dh = 2, .dw = 1, .groups = 2}},
      {{1, 4, 6, 6}, {4, 1, 3, 3}, {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .groups = 4}},  // depthwise
      {{2, 4, 6, 6}, {8, 1, 3, 3}, {.ph = 1, .pw = 1, .groups = 4}, false},  // depthwise x2
      {{2, 6, 5, 4}, {3, 6, 1, 1}, {}},                                      // pointwise
      {{2, 4, 5, 4}, {6, 2, 1, 1}, {.groups = 2}, false},                    // grouped pointwise
      {{1, 2, 9, 8}, {3, 2, 1, 1}, {.sh = 2, .sw = 3}},                      // strided 1x1
      {{1, 3, 4, 4}, {2, 3, 4, 4}, {}},                                      // kernel == input
      {{2, 2, 3, 3}, {2, 2, 2, 2}, {.sh = 3, .sw = 3, .ph = 1, .pw = 1, .dh = 2, .dw = 2}},
  };
}

Tensor bias_for(const Case& k, DType dt, uint32_t seed) {
  return k.bias ? rand_tensor({k.w[0]}, dt, seed) : Tensor();
}

}  // namespace

TEST(Conv2d, HandComputed) {
  Tensor x = make({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor w = make({1, 0, 0, -1}, {1, 1, 2, 2});
  expect_values(call1("conv2d", {x, w, make({0.5}, {1})}), {-3.5, -3.5, -3.5, -3.5});
  Tensor x2 = make({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor out = call1("conv2d", {x2, make({1, 1, 1, 1}, {1, 1, 2, 2})}, {{"padding", Ints{1}}});
  EXPECT_EQ(out.shape(), (Dims{1, 1, 3, 3}));
  expect_values(out, {1, 3, 2, 4, 10, 6, 3, 7, 4});
}

TEST(Conv2d, MatchesDirectConvolution) {
  uint32_t seed = 1;
  for (const Case& k : forward_cases()) {
    SCOPED_TRACE(::testing::Message() << "x " << dims_str(k.x) << " w " << dims_str(k.w));
    for (DType dt : {DType::Float64, DType::Float32}) {
      Tensor x = rand_tensor(k.x, dt, seed), w = rand_tensor(k.w, dt, seed + 1);
      Tensor b = bias_for(k, dt, seed + 2);
      Tensor out = call1("conv2d", {x, w, b}, k.c.attrs());
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_EQ(out.shape(), conv_out_shape(k.x, k.w, k.c));
      expect_values(out, ref_conv2d(x, w, b, k.c), dt == DType::Float64 ? 1e-12 : 1e-5);
    }
    seed += 3;
  }
}

namespace {

// conv2d (with the case's bias when `with_bias`) and both of its backward
// ops against direct sums over every tap, in float64; the weight gradient
// and the biased forward also in float32.
void expect_direct_sums(const Case& k, uint32_t seed, bool with_bias) {
  SCOPED_TRACE(::testing::Message() << "x " << dims_str(k.x) << " w " << dims_str(k.w));
  Tensor x = rand_tensor(k.x, DType::Float64, seed), w = rand_tensor(k.w, DType::Float64, seed + 1);
  const Dims os = conv_out_shape(k.x, k.w, k.c);
  Tensor g = rand_tensor(os, DType::Float64, seed + 2);
  Tensor b = with_bias ? bias_for(k, DType::Float64, seed + 3) : Tensor();
  std::vector<double> dx(numel_of(k.x), 0.0), dw(numel_of(k.w), 0.0);
  auto xv = values(x), wv = values(w), gv = values(g);
  for_each_tap(k.x, k.w, os, k.c, [&](int64_t xi, int64_t wi, int64_t oi) {
    dx[xi] += gv[oi] * wv[wi];
    dw[wi] += gv[oi] * xv[xi];
  });
  Attrs a = k.c.attrs();
  expect_values(call1("conv2d", {x, w, b}, a), ref_conv2d(x, w, b, k.c), 1e-11);
  if (b.defined())
    expect_values(call1("conv2d", {x.to(DType::Float32), w.to(DType::Float32), b.to(DType::Float32)}, a),
                  ref_conv2d(x, w, b, k.c), 1e-4);
  Attrs ai = a;
  ai.set("input_size", k.x);
  expect_values(call1("conv2d_backward_input", {g, w}, ai), dx, 1e-11);
  Attrs aw = a;
  aw.set("weight_size", k.w);
  expect_values(call1("conv2d_backward_weight", {g, x}, aw), dw, 1e-11);
  expect_values(call1("conv2d_backward_weight", {g.to(DType::Float32), x.to(DType::Float32)}, aw), dw, 1e-4);
}

}  // namespace

TEST(Conv2d, BackwardOpsMatchDirectAdjoints) {
  // Sizes large enough that the kernels tile pixels, block channels and
  // split the weight gradient into partial sums.
  const std::vector<Case> cases = {
      {{2, 8, 20, 18}, {16, 8, 3, 3}, {.ph = 1, .pw = 1}},
      {{1, 16, 24, 24},
       {8, 4, 3, 3},
       {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .dh = 2, .dw = 2, .groups = 4}},
      {{1, 12, 30, 30}, {12, 1, 5, 5}, {.ph = 2, .pw = 2, .groups = 12}},
      {{2, 6, 9, 8},
       {12, 1, 3, 3},
       {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .dh = 2, .dw = 1, .groups = 6}},
      {{2, 32, 16, 16}, {24, 32, 1, 1}, {}},
  };
  uint32_t seed = 50;
  for (const Case& k : cases) {
    expect_direct_sums(k, seed, false);
    seed += 3;
  }
}

TEST(Conv2d, ManySmallImagesGoSeveralToAProduct) {
  // Batches of small images (the digits net's 8 x 8) run several images per
  // product; leftover runs, groups, strides and bias included, on 1 and 2
  // threads.
  const std::vector<Case> cases = {
      {{40, 3, 8, 8}, {6, 3, 3, 3}, {.ph = 1, .pw = 1}, true},
      {{37, 4, 7, 6}, {6, 2, 3, 3}, {.sh = 2, .sw = 1, .ph = 1, .pw = 0, .groups = 2}, true},
      {{64, 16, 4, 4}, {32, 16, 3, 3}, {.ph = 1, .pw = 1}, false},
  };
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    ThreadPool::Scope scope(&pool);
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    uint32_t seed = 80;
    for (const Case& k : cases) {
      expect_direct_sums(k, seed, k.bias);
      seed += 4;
    }
  }
}

TEST(Conv2d, UnbatchedAndScalarAttrs) {
  Tensor x = rand_tensor({3, 6, 5}), w = rand_tensor({4, 3, 3, 3}, DType::Float64, 2);
  Tensor b = rand_tensor({4}, DType::Float64, 3);
  Attrs a{{"stride", Ints{2}}, {"padding", Ints{1}}};
  Tensor out = call1("conv2d", {x, w, b}, a);
  EXPECT_EQ(out.shape(), (Dims{4, 3, 3}));
  Tensor x4 = call1("reshape", {x}, {{"shape", Ints{1, 3, 6, 5}}});
  expect_values(out, ref_conv2d(x4, w, b, {.sh = 2, .sw = 2, .ph = 1, .pw = 1}), 1e-12);
}

TEST(Conv2d, EmptyBatch) {
  Tensor x = Tensor::zeros({0, 2, 4, 4}, DType::Float32);
  Tensor w = rand_tensor({3, 2, 3, 3}, DType::Float32);
  Tensor out = call1("conv2d", {x, w});
  EXPECT_EQ(out.shape(), (Dims{0, 3, 2, 2}));
  Tensor dw = call1("conv2d_backward_weight", {out, x}, {{"weight_size", w.shape()}});
  expect_values(dw, std::vector<double>(w.numel(), 0.0));
  Tensor dx = call1("conv2d_backward_input", {out, w}, {{"input_size", x.shape()}});
  EXPECT_EQ(dx.shape(), x.shape());
}

TEST(Conv2d, NonContiguousInputs) {
  Tensor x = rand_tensor({2, 2, 5, 4}), w = rand_tensor({3, 2, 2, 3}, DType::Float64, 2);
  Tensor b = rand_tensor({3}, DType::Float64, 3);
  Conv c{.sh = 1, .sw = 2, .ph = 1, .pw = 0};
  auto want = ref_conv2d(x, w, b, c);
  expect_values(call1("conv2d", {noncontiguous(x), noncontiguous(w), b}, c.attrs()), want, 1e-12);
  // A channel slice of a wider tensor (strided in C).
  Tensor wide = rand_tensor({2, 4, 5, 4}, DType::Float64, 7);
  Tensor sliced = wide.as_strided({2, 2, 5, 4}, {80, 40, 4, 1}, 0);
  ASSERT_FALSE(sliced.is_contiguous());
  expect_values(call1("conv2d", {sliced, w, b}, c.attrs()),
                ref_conv2d(sliced.contiguous(), w, b, c), 1e-12);
}

TEST(Conv2d, ReducedPrecision) {
  Tensor x = rand_tensor({2, 4, 6, 6}), w = rand_tensor({4, 2, 3, 3}, DType::Float64, 2);
  Tensor b = rand_tensor({4}, DType::Float64, 3);
  Conv c{.ph = 1, .pw = 1, .groups = 2};
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    Tensor xr = x.to(dt), wr = w.to(dt), br = b.to(dt);
    Tensor out = call1("conv2d", {xr, wr, br}, c.attrs());
    EXPECT_EQ(out.dtype(), dt);
    // Reference on the rounded inputs; the result is rounded once more.
    expect_values(out, ref_conv2d(xr, wr, br, c), dt == DType::BFloat16 ? 2e-2 : 2e-3);
  }
}

TEST(Conv2d, Gradients) {
  check_gradients("conv2d",
                  {rand_tensor({1, 2, 4, 4}), rand_tensor({2, 2, 3, 3}, DType::Float64, 2),
                   rand_tensor({2}, DType::Float64, 3)});
  check_gradients("conv2d",
                  {rand_tensor({2, 2, 5, 5}), rand_tensor({3, 2, 2, 3}, DType::Float64, 2),
                   rand_tensor({3}, DType::Float64, 3)},
                  Conv{.sh = 2, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 2}.attrs());
  check_gradients("conv2d",
                  {rand_tensor({2, 2, 4, 4}), rand_tensor({4, 1, 2, 2}, DType::Float64, 2)},
                  Conv{.ph = 1, .pw = 1, .groups = 2}.attrs());  // depthwise
  check_gradients("conv2d", {rand_tensor({2, 4, 4}), rand_tensor({2, 2, 1, 1}, DType::Float64, 2),
                             rand_tensor({2}, DType::Float64, 3)});  // unbatched pointwise
  check_gradients(
      "conv2d",
      {noncontiguous(rand_tensor({1, 2, 4, 5})), rand_tensor({2, 2, 3, 3}, DType::Float64, 2)},
      Conv{.sh = 2, .sw = 2, .ph = 1, .pw = 1}.attrs());
}

TEST(Conv2d, BackwardOpsAreDifferentiable) {
  Attrs ai = Conv{.sh = 2, .sw = 1, .ph = 1, .pw = 0}.attrs();
  ai.set("input_size", Ints{1, 2, 5, 4});
  check_gradients("conv2d_backward_input",
                  {rand_tensor({1, 2, 3, 2}), rand_tensor({2, 2, 3, 3}, DType::Float64, 2)}, ai);
  Attrs aw = Conv{.ph = 1, .pw = 1, .groups = 2}.attrs();
  aw.set("weight_size", Ints{2, 1, 2, 2});
  check_gradients("conv2d_backward_weight",
                  {rand_tensor({1, 2, 5, 5}), rand_tensor({1, 2, 4, 4}, DType::Float64, 2)}, aw);
}

TEST(Conv2d, Errors) {
  Tensor x = rand_tensor({1, 3, 5, 5}, DType::Float32),
         w = rand_tensor({4, 3, 3, 3}, DType::Float32);
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("conv2d", {x, rand_tensor({4, 2, 3, 3}, DType::Float32)});
                },
                {"conv2d", "channels", "[1, 3, 5, 5]", "[4, 2, 3, 3]"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("conv2d",
                        {rand_tensor({1, 4, 5, 5}, DType::Float32),
                         rand_tensor({3, 2, 3, 3}, DType::Float32)},
                        {{"groups", 2}});
                },
                {"conv2d", "groups", "[3, 2, 3, 3]"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("conv2d", {x, rand_tensor({4, 3, 6, 3}, DType::Float32)});
                },
                {"conv2d", "kernel", "padded input", "[1, 3, 5, 5]"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("conv2d", {x, w}, {{"dilation", Ints{3}}});
                },
                {"conv2d", "dilation", "[3, 3]"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("conv2d", {x, w}, {{"stride", Ints{0, 1}}});
                },
                {"conv2d", "stride", "[0, 1]"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("conv2d", {x, w}, {{"dilation", Ints{1, -1}}});
                },
                {"conv2d", "dilation"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("conv2d", {x, w}, {{"padding", Ints{-1}}});
                },
                {"conv2d", "padding"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("conv2d", {x, w}, {{"stride", Ints{1, 1, 1}}});
                },
                {"conv2d", "stride", "1 or 2"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("conv2d", {x, w}, {{"groups", 0}});
                },
                {"conv2d", "groups"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("conv2d", {x, w, rand_tensor({3}, DType::Float32)});
                },
                {"conv2d", "bias", "[4]"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("conv2d", {rand_tensor({3, 5}, DType::Float32), w});
                },
                {"conv2d", "x", "[3, 5]"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("conv2d", {x, rand_tensor({4, 3, 3}, DType::Float32)});
                },
                {"conv2d", "weight", "4 dims"});
  expect_status(Status::DTypeMismatch,
                [&] {
                  call1("conv2d", {x, w.to(DType::Float64)});
                },
                {"conv2d", "float64", "float32"});
  expect_status(Status::DTypeMismatch,
                [&] {
                  call1("conv2d", {x.to(DType::Int32), w.to(DType::Int32)});
                },
                {"conv2d", "int32"});
  Attrs ai{{"input_size", Ints{1, 3, 6, 5}}};
  expect_status(
      Status::ShapeMismatch,
      [&] {
        call1("conv2d_backward_input", {rand_tensor({1, 4, 3, 3}, DType::Float32), w}, ai);
      },
      {"conv2d_backward_input", "grad", "[1, 4, 3, 3]", "[1, 4, 4, 3]"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("conv2d_backward_input", {x, w});
                },
                {"conv2d_backward_input", "input_size"});
}

// Attribute values and sizes a PEF may carry at any magnitude: refused by
// range before the geometry multiplies them (UBSan saw the overflow).
TEST(Conv2d, GeometryOutOfInt32RangeIsRefused) {
  Tensor x = rand_tensor({1, 3, 5, 5}, DType::Float32),
         w = rand_tensor({4, 3, 3, 3}, DType::Float32);
  constexpr int64_t kHuge = int64_t{1} << 62;
  expect_status(Status::OutOfRange,
                [&] {
                  call1("conv2d", {x, w}, {{"padding", Ints{kHuge}}});
                },
                {"conv2d", "padding", "2147483647"});
  expect_status(Status::OutOfRange,
                [&] {
                  call1("conv2d", {x, w}, {{"dilation", Ints{1, kHuge}}});
                },
                {"conv2d", "dilation"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("conv2d", {x, w}, {{"groups", kHuge}});
                },
                {"conv2d", "groups", "2147483647"});
  expect_status(Status::OutOfRange,
                [&] {
                  call1("conv2d_backward_weight", {rand_tensor({1, 4, 3, 3}, DType::Float32), x},
                        {{"weight_size", Ints{4, 3, kHuge, 3}}});
                },
                {"conv2d_backward_weight", "weight", "2147483647"});
  expect_status(Status::OutOfRange,
                [&] {
                  call1("max_pool2d", {x}, {{"kernel_size", Ints{2}}, {"dilation", Ints{kHuge}}});
                },
                {"max_pool2d", "dilation"});
}

TEST(ConvTranspose2d, HandComputed) {
  Tensor x = make({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor w = make({1, 1, 1, 1}, {1, 1, 2, 2});
  expect_values(call1("conv_transpose2d", {x, w}), {1, 3, 2, 4, 10, 6, 3, 7, 4});
  Tensor up = call1("conv_transpose2d", {x, w, make({1}, {1})}, {{"stride", Ints{2}}});
  EXPECT_EQ(up.shape(), (Dims{1, 1, 4, 4}));
  expect_values(up, {2, 2, 3, 3, 2, 2, 3, 3, 4, 4, 5, 5, 4, 4, 5, 5});
}

TEST(ConvTranspose2d, MatchesDirectConvolution) {
  struct TCase {
    Dims x, w;
    Conv c;
    int64_t oph = 0, opw = 0;
  };
  const std::vector<TCase> cases = {
      {{1, 2, 3, 3}, {2, 3, 3, 3}, {}},
      {{2, 4, 4, 3}, {4, 3, 3, 2}, {.sh = 2, .sw = 3, .ph = 1, .pw = 0, .groups = 2}, 1, 2},
      {{2, 3, 3, 4}, {3, 2, 2, 3}, {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .dh = 2, .dw = 1}, 1, 0},
      {{1, 4, 5, 5}, {4, 1, 3, 3}, {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .groups = 4}},  // depthwise
      {{2, 6, 4, 4}, {6, 4, 1, 1}, {}},                                                 // pointwise
      {{2, 8, 12, 12}, {8, 6, 4, 4}, {.sh = 2, .sw = 2, .ph = 1, .pw = 1}},             // larger
  };
  uint32_t seed = 7;
  for (const auto& k : cases) {
    SCOPED_TRACE(::testing::Message() << "x " << dims_str(k.x) << " w " << dims_str(k.w));
    for (DType dt : {DType::Float64, DType::Float32}) {
      Tensor x = rand_tensor(k.x, dt, seed), w = rand_tensor(k.w, dt, seed + 1);
      Tensor b = rand_tensor({k.w[1] * k.c.groups}, dt, seed + 2);
      Attrs a = k.c.attrs();
      a.set("output_padding", Ints{k.oph, k.opw});
      Dims shape;
      auto want = ref_conv_transpose2d(x, w, b, k.c, k.oph, k.opw, &shape);
      Tensor y = call1("conv_transpose2d", {x, w, b}, a);
      EXPECT_EQ(y.shape(), shape);
      expect_values(y, want, dt == DType::Float64 ? 1e-12 : 1e-5);
    }
    seed += 3;
  }
}

TEST(ConvTranspose2d, UnbatchedNonContiguousAndReducedPrecision) {
  Tensor x = rand_tensor({2, 3, 4}), w = rand_tensor({2, 3, 3, 3}, DType::Float64, 2);
  Tensor b = rand_tensor({3}, DType::Float64, 3);
  Conv c{.sh = 2, .sw = 2, .ph = 1, .pw = 1};
  Dims shape;
  auto want = ref_conv_transpose2d(call1("reshape", {x}, {{"shape", Ints{1, 2, 3, 4}}}), w, b, c, 0,
                                   0, &shape);
  Tensor y = call1("conv_transpose2d", {noncontiguous(x), noncontiguous(w), b}, c.attrs());
  EXPECT_EQ(y.shape(), (Dims{3, 5, 7}));
  expect_values(y, want, 1e-12);
  Tensor xh = x.to(DType::BFloat16), wh = w.to(DType::BFloat16), bh = b.to(DType::BFloat16);
  Tensor yh = call1("conv_transpose2d", {xh, wh, bh}, c.attrs());
  EXPECT_EQ(yh.dtype(), DType::BFloat16);
  expect_values(yh,
                ref_conv_transpose2d(call1("reshape", {xh}, {{"shape", Ints{1, 2, 3, 4}}}), wh, bh,
                                     c, 0, 0, &shape),
                3e-2);
}

TEST(ConvTranspose2d, Gradients) {
  check_gradients("conv_transpose2d",
                  {rand_tensor({1, 2, 3, 3}), rand_tensor({2, 2, 2, 2}, DType::Float64, 2),
                   rand_tensor({2}, DType::Float64, 3)},
                  {{"stride", Ints{2}}, {"padding", Ints{1}}, {"output_padding", Ints{1, 0}}});
  check_gradients("conv_transpose2d",
                  {rand_tensor({2, 2, 3, 2}), rand_tensor({2, 1, 2, 3}, DType::Float64, 2),
                   rand_tensor({2}, DType::Float64, 3)},
                  {{"groups", 2}, {"dilation", Ints{2, 1}}});
  check_gradients(
      "conv_transpose2d",
      {noncontiguous(rand_tensor({2, 3, 3})), rand_tensor({2, 2, 3, 3}, DType::Float64, 2)},
      {{"stride", Ints{2}}});
}

TEST(ConvTranspose2d, Errors) {
  Tensor x = rand_tensor({1, 2, 3, 3}, DType::Float32),
         w = rand_tensor({2, 3, 3, 3}, DType::Float32);
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("conv_transpose2d", {x, rand_tensor({3, 3, 3, 3}, DType::Float32)});
                },
                {"conv_transpose2d", "channels", "[1, 2, 3, 3]", "[3, 3, 3, 3]"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("conv_transpose2d", {x, w}, {{"output_padding", Ints{1}}});
                },
                {"conv_transpose2d", "output_padding", "stride"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("conv_transpose2d", {x, w}, {{"padding", Ints{3}}});
                },
                {"conv_transpose2d", "output size"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("conv_transpose2d", {x, w}, {{"groups", 4}});
                },
                {"conv_transpose2d", "groups"});
  expect_status(Status::ShapeMismatch,
                [&] {
                  call1("conv_transpose2d", {x, w, rand_tensor({2}, DType::Float32)});
                },
                {"conv_transpose2d", "bias", "[3]"});
  expect_status(Status::InvalidArgument,
                [&] {
                  call1("conv_transpose2d", {x, w}, {{"stride", Ints{0}}});
                },
                {"conv_transpose2d", "stride"});
}

TEST(Conv2d, AutogradThroughAChain) {
  // conv2d -> conv_transpose2d -> sum: the gradients reach every leaf.
  Tensor x = rand_tensor({1, 2, 4, 4}), w1 = rand_tensor({3, 2, 3, 3}, DType::Float64, 2);
  Tensor w2 = rand_tensor({3, 2, 3, 3}, DType::Float64, 3);
  for (Tensor* t : {&x, &w1, &w2}) t->impl()->requires_grad = true;
  Tensor h = call1("conv2d", {x, w1}, {{"padding", Ints{1}}});
  Tensor y = call1("sum", {call1("conv_transpose2d", {h, w2}, {{"padding", Ints{1}}})});
  autograd::backward({y}, {Tensor()}, false);
  for (Tensor* t : {&x, &w1, &w2}) {
    ASSERT_TRUE(t->grad().defined());
    EXPECT_EQ(t->grad().shape(), t->shape());
  }
}

// conv2d_max_pool2d, the compiler's fusion of a conv net layer for
// inference: bit for bit max_pool2d(relu(conv2d)) (or without the relu),
// through the direct kernel (float32, stride 1) and through the ops it
// stands for (float64, stride 2, unbatched); its gradients recompute the
// unpooled values.
TEST(Conv2dMaxPool2d, IsTheConvolutionReluAndTwoByTwoPoolingItStandsFor) {
  const Attrs pool{{"kernel_size", Ints{2, 2}}};
  uint32_t seed = 60;
  for (DType dt : {DType::Float32, DType::Float64})
    for (const Attrs& conv : {Conv{.ph = 1, .pw = 1}.attrs(), Conv{.sh = 2, .sw = 2}.attrs()})
      for (const Dims& xs : {Dims{3, 4, 9, 8}, Dims{4, 7, 6}})
        for (bool relu : {false, true}) {
          SCOPED_TRACE(fmt::format("{} x {} relu {}", dtype_name(dt), dims_str(xs), relu));
          Tensor x = rand_tensor(xs, dt, seed), w = rand_tensor({6, 4, 3, 3}, dt, seed + 1);
          Tensor b = rand_tensor({6}, dt, seed + 2);
          seed += 3;
          Tensor y = call1("conv2d", {x, w, b}, conv);
          if (relu) y = call1("relu", {y});
          Attrs fused = conv;
          fused.set("activation", std::string(relu ? "relu" : "none"));
          const Tensor got = call1("conv2d_max_pool2d", {x, w, b}, fused);
          const Tensor want = call1("max_pool2d", {y}, pool);
          ASSERT_EQ(got.shape(), want.shape());
          EXPECT_EQ(bytes_of(got), bytes_of(want));
        }
  Attrs a = Conv{.ph = 1, .pw = 1}.attrs();
  a.set("activation", std::string("relu"));
  check_gradients("conv2d_max_pool2d",
                  {rand_tensor({2, 2, 4, 5}), rand_tensor({3, 2, 3, 3}, DType::Float64, 2),
                   rand_tensor({3}, DType::Float64, 3)},
                  a);
}

TEST(Conv2dMaxPool2d, Errors) {
  Tensor x = rand_tensor({1, 3, 5, 5}, DType::Float32),
         w = rand_tensor({4, 3, 3, 3}, DType::Float32);
  expect_status(Status::ShapeMismatch,
                [&] { call1("conv2d_max_pool2d", {x, w}, {{"stride", Ints{3, 3}}}); },
                {"conv2d_max_pool2d", "1x1", "2x2"});
  expect_status(Status::InvalidArgument,
                [&] { call1("conv2d_max_pool2d", {x, w}, {{"activation", std::string("gelu")}}); },
                {"conv2d_max_pool2d", "gelu", "none or relu"});
}
