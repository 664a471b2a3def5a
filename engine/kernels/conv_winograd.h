// Winograd F(2x2, 3x3) fp32 convolution for 3 x 3 kernels at unit stride and
// dilation, one group: the direct kernel's small images with many channels
// (the digits net's second layer: 16 -> 32 channels on 8 x 8 images), where
// it multiplies 2.25 times fewer products than any direct method.
//
// The output is cut into 2 x 2 tiles. Each tile's 4 x 4 input patch d and
// each 3 x 3 filter g are transformed once (V = Bᵀ d B, U = G g Gᵀ), the
// 16 positions of a tile are 16 independent products over the input
// channels (M[pos] = Σ_c U[pos][k][c] V[pos][c][tile], a GEMM per position)
// and Aᵀ M A gives the tile's four outputs. With the points 0, 1, -1 the
// transforms only add and subtract (and halve, for the weights), so the
// result differs from the direct sum by a few units of rounding, within
// the tolerances the convolution is tested to.
//
// Layout: each image is copied channels-last and zero-padded (so a patch is
// 16 loads of channel vectors); V and M are position-major, tile by tile,
// channels in the vector lanes, so the GEMM broadcasts a V value against
// vectors of U (the direct kernel's channel-lanes blocks, with the 16
// positions as 16 small products). The four outputs of a tile are staged
// pixel-major and transposed to the output planes with the bias and relu, or
// 2x2 max-pooled first, each tile being one pooling window (conv_direct.h's
// conv2d_direct_pool_forward).
//
// Used by conv_direct.cpp, which picks it where its estimated cycles are
// below those of the direct kernel's best plan; like the direct kernel, it
// is compiled per ISA level (x86/conv_winograd_kernel.h), only where the
// level's table has it.
#pragma once

#include <cstdint>

namespace samba::ops {

struct OutputTail;

namespace detail {

struct ConvDirectKernels;

// One image through the transforms and products (x86/conv_winograd_kernel.h).
struct WinogradImage {
  const float* x;  // the image, (in_channels, in_h, in_w)
  int64_t in_channels, in_h, in_w, pad_h, pad_w;
  // The channels-last copy: rows x cols pixels of cp floats (in_channels
  // rounded up to whole vectors), zeros around the image.
  float* padded;
  int64_t rows, cols, cp;
  int64_t tiles_h, tiles_w;
  // U: 16 positions of (in_channels, kp) floats, kp = out_channels rounded
  // up to whole vectors (zeros past out_channels).
  const float* u;
  int64_t kp;
  // V (16 x block_tiles x cp) and M (16 x block_tiles x kp): one block of
  // tiles at a time.
  float* v;
  float* m;
  int64_t block_tiles;
  float* stage;       // out_h * out_w pixels of kp floats
  const float* bias;  // out_channels values, or null
  bool relu = false;
  // out is the 2x2 max pooling, stride 2, of the output planes
  // (out_channels, out_h / 2, out_w / 2) instead of the planes.
  bool pool = false;
  float* out;  // (out_channels, out_h, out_w)
  int64_t out_channels, out_h, out_w;
};

// A convolution the Winograd kernel may run: `batch` images, the output
// out_h = in_h + 2 pad_h - 2 by out_w = in_w + 2 pad_w - 2.
struct WinogradProblem {
  int64_t batch, in_channels, in_h, in_w, pad_h, pad_w, out_channels;
  int64_t out_h() const { return in_h + 2 * pad_h - 2; }
  int64_t out_w() const { return in_w + 2 * pad_w - 2; }
};

// Estimated cycles per image (in the direct plan's units: one per vector
// FMA), or a negative value where the level has no Winograd kernel or the
// problem does not suit it (an image whose copies would not stay in L2, an
// output of no pixels, fewer images than the pool's threads).
double winograd_cycles(const ConvDirectKernels& k, const WinogradProblem& p);

// out = conv2d(x, w) + bias with the Winograd kernel, for a problem
// winograd_cycles accepted; false (nothing written) when the weight holds
// an infinity or a NaN, which the transforms would spread. An image that
// holds one is summed tap by tap instead, so non-finite values reach the
// outputs conv2d's definition gives them, as in the direct kernel. The weight is conv2d's
// (out_channels, in_channels, 3, 3); with `adjoint`, the problem is the input gradient's
// convolution of the output gradient, and the weight is read transposed
// (its channels swapped) and flipped: w is then (in_channels,
// out_channels, 3, 3) in the problem's names. relu, pool: as in
// WinogradImage; `tail` (not with relu or pool), when given, runs on each
// image's output planes as they are stored.
bool run_winograd(const ConvDirectKernels& k, const WinogradProblem& p, const float* x,
                  const float* w, bool adjoint, const float* bias, bool relu, bool pool, float* out,
                  const OutputTail* tail);

}  // namespace detail
}  // namespace samba::ops
