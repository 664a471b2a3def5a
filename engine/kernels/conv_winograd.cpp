#include "engine/kernels/conv_winograd.h"

#include <algorithm>
#include <cmath>

#include "engine/core/parallel.h"
#include "engine/core/scratch.h"
#include "engine/kernels/conv_direct.h"
#include "engine/kernels/max_pool_2x2.h"
#include "engine/kernels/output_tail.h"

namespace samba::ops::detail {

namespace {

// The channels-last copy, V and M of a block, and the staged outputs of an
// image stay in L2 (half of it, with room for U and the output planes).
constexpr int64_t kMaxPaddedFloats = int64_t{1} << 15;
constexpr int64_t kMaxBlockFloats = int64_t{1} << 15;
constexpr int64_t kMaxStageFloats = int64_t{1} << 15;

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// The sizes of one image's buffers for a problem.
struct WinogradSizes {
  int64_t cp, kp, tiles_h, tiles_w, rows, cols, block_tiles;
  int64_t tiles() const { return tiles_h * tiles_w; }
  int64_t padded_floats() const { return rows * cols * cp; }
};

WinogradSizes sizes(const ConvDirectKernels& k, const WinogradProblem& p) {
  WinogradSizes s{};
  s.cp = round_up(p.in_channels, k.lanes);
  s.kp = round_up(p.out_channels, k.lanes);
  s.tiles_h = (p.out_h() + 1) / 2;
  s.tiles_w = (p.out_w() + 1) / 2;
  // A tile at (ty, tx) reads padded rows 2 ty .. 2 ty + 3.
  s.rows = 2 * s.tiles_h + 2;
  s.cols = 2 * s.tiles_w + 2;
  s.block_tiles = std::clamp<int64_t>(kMaxBlockFloats / (16 * (s.cp + s.kp)), 1, s.tiles());
  return s;
}

// One image summed tap by tap in float, as conv2d is defined, for images
// the transforms would not compute faithfully (an infinity or a NaN): the
// output of the kernel's layout, `planes` (out_channels planes) the room for
// it before pooling.
void image_by_taps(const WinogradProblem& p, const float* x, const float* w, bool adjoint,
                   const float* bias, bool relu, bool pool, float* planes, float* out) {
  const int64_t c_in = p.in_channels, c_out = p.out_channels, oh_n = p.out_h(), ow_n = p.out_w();
  float* y = pool ? planes : out;
  for (int64_t o = 0; o < c_out; ++o)
    for (int64_t oh = 0; oh < oh_n; ++oh)
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        float sum = 0.0f;
        for (int64_t c = 0; c < c_in; ++c)
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 3; ++j) {
              const int64_t ih = oh - p.pad_h + i, iw = ow - p.pad_w + j;
              if (ih < 0 || ih >= p.in_h || iw < 0 || iw >= p.in_w) continue;
              const float wt = adjoint ? w[((c * c_out + o) * 3 + (2 - i)) * 3 + (2 - j)]
                                       : w[((o * c_in + c) * 3 + i) * 3 + j];
              sum += x[(c * p.in_h + ih) * p.in_w + iw] * wt;
            }
        const float v = sum + (bias ? bias[o] : 0.0f);
        y[(o * oh_n + oh) * ow_n + ow] = relu && v < 0.0f ? 0.0f : v;
      }
  if (pool) max_pool_2x2_planes({c_out, oh_n, ow_n, oh_n / 2, ow_n / 2}, planes, out);
}

}  // namespace

double winograd_cycles(const ConvDirectKernels& k, const WinogradProblem& p) {
  if (!k.winograd_image || p.out_h() < 1 || p.out_w() < 1 || p.in_channels < 1 ||
      p.out_channels < 1)
    return -1;
  // One task per image: fewer images than threads leave cores idle, where
  // the direct kernel splits an image's channels.
  if (p.batch < static_cast<int64_t>(current_pool().threads())) return -1;
  const WinogradSizes s = sizes(k, p);
  if (s.padded_floats() > kMaxPaddedFloats || p.out_h() * p.out_w() * s.kp > kMaxStageFloats)
    return -1;
  const double tiles = static_cast<double>(s.tiles());
  const double in_vectors = static_cast<double>(s.cp / k.lanes);
  const double out_vectors = static_cast<double>(s.kp / k.lanes);
  // The products: 16 per tile, input channel and vector of output channels,
  // with a U vector loaded per 4 FMAs and a V value per 3 (the main block).
  const double fmas = 16.0 * tiles * static_cast<double>(p.in_channels) * out_vectors;
  double cycles = fmas * (1.0 + 0.1 * 7.0 / 12.0);
  // The transforms, two vector adds a cycle: 32 adds and 32 loads and
  // stores per input vector of a tile, 24 and 20 per output vector; the
  // copy in and the transposition out as the direct kernel counts them.
  cycles += tiles * (32.0 * in_vectors + 22.0 * out_vectors);
  cycles += static_cast<double>(s.padded_floats() / k.lanes);
  cycles += 2.0 * static_cast<double>(p.in_channels * p.in_h) *
            static_cast<double>((p.in_w + k.lanes - 1) / k.lanes);
  cycles += 3.0 * static_cast<double>(p.out_channels) *
            static_cast<double>((p.out_h() * p.out_w() + k.lanes - 1) / k.lanes);
  return cycles;
}

bool run_winograd(const ConvDirectKernels& k, const WinogradProblem& p, const float* x,
                  const float* w, bool adjoint, const float* bias, bool relu, bool pool, float* out,
                  const OutputTail* tail) {
  const WinogradSizes s = sizes(k, p);
  const int64_t c_in = p.in_channels, c_out = p.out_channels;
  // The weight transform turns an infinity into NaN (∞ - ∞) at positions
  // whose outputs never read it: such weights are left to the direct kernel.
  if (!std::all_of(w, w + 9 * c_in * c_out, [](float v) { return std::isfinite(v); })) return false;
  // U = G g Gᵀ for every (output, input) channel pair, in double and
  // rounded once; G's rows are (1 0 0), (½ ½ ½), (½ -½ ½), (0 0 1).
  ScratchFrame frame;
  float* u = frame.get<float>(0, static_cast<size_t>(16 * c_in * s.kp));
  std::fill_n(u, 16 * c_in * s.kp, 0.0f);
  for (int64_t o = 0; o < c_out; ++o)
    for (int64_t c = 0; c < c_in; ++c) {
      double g[3][3];
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 3; ++j)
          g[i][j] = adjoint ? w[((c * c_out + o) * 3 + (2 - i)) * 3 + (2 - j)]
                            : w[((o * c_in + c) * 3 + i) * 3 + j];
      double gg[4][3];
      for (int64_t j = 0; j < 3; ++j) {
        gg[0][j] = g[0][j];
        gg[1][j] = 0.5 * (g[0][j] + g[1][j] + g[2][j]);
        gg[2][j] = 0.5 * (g[0][j] - g[1][j] + g[2][j]);
        gg[3][j] = g[2][j];
      }
      for (int64_t i = 0; i < 4; ++i) {
        const double row[4] = {gg[i][0], 0.5 * (gg[i][0] + gg[i][1] + gg[i][2]),
                               0.5 * (gg[i][0] - gg[i][1] + gg[i][2]), gg[i][2]};
        for (int64_t j = 0; j < 4; ++j)
          u[((i * 4 + j) * c_in + c) * s.kp + o] = static_cast<float>(row[j]);
      }
    }

  const int64_t plane = p.out_h() * p.out_w();
  const int64_t out_image = c_out * (pool ? p.out_h() / 2 * (p.out_w() / 2) : plane);
  const int64_t in_image = c_in * p.in_h * p.in_w;
  parallel_for(p.batch, 1, [&](int64_t n0, int64_t n1) {
    ScratchFrame task;
    WinogradImage a{};
    a.padded = task.get<float>(0, static_cast<size_t>(s.padded_floats()));
    a.v = task.get<float>(1, static_cast<size_t>(16 * s.block_tiles * s.cp));
    a.m = task.get<float>(2, static_cast<size_t>(16 * s.block_tiles * s.kp));
    a.stage = task.get<float>(3, static_cast<size_t>(plane * s.kp));
    a.in_channels = c_in;
    a.in_h = p.in_h;
    a.in_w = p.in_w;
    a.pad_h = p.pad_h;
    a.pad_w = p.pad_w;
    a.rows = s.rows;
    a.cols = s.cols;
    a.cp = s.cp;
    a.tiles_h = s.tiles_h;
    a.tiles_w = s.tiles_w;
    a.u = u;
    a.kp = s.kp;
    a.block_tiles = s.block_tiles;
    a.bias = bias;
    a.relu = relu;
    a.pool = pool;
    a.out_channels = c_out;
    a.out_h = p.out_h();
    a.out_w = p.out_w();
    for (int64_t n = n0; n < n1; ++n) {
      a.x = x + n * in_image;
      a.out = out + n * out_image;
      if (!k.winograd_image(a)) image_by_taps(p, a.x, w, adjoint, bias, relu, pool, a.stage, a.out);
      if (tail) (*tail)(a.out, 1, out_image, out_image);
    }
  });
  return true;
}

}  // namespace samba::ops::detail
