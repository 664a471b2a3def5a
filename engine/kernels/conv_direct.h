// Direct fp32 convolution for unit stride and dilation, one group: the
// small-channel, small-image shapes (the digits net's 8 x 8 images) where
// im2col copies rows of a few floats and costs as much as the GEMM.
//
// Each image is copied once into a per-thread buffer in one of two layouts,
// so that every tap of consecutive output pixels reads consecutive floats:
// zero-padded planes whose rows are `pitch` = W + 2 pad floats apart, the
// output pixels counted in the same pitch (a vector of them spans rows, the
// pitch's extra columns computed and dropped); or, where those columns would
// waste a large part of the lanes (8 x 8 images), one copy of the padded
// plane per kernel column j with rows cut to the output width at column j,
// so the output pixels are numbered as they are stored. A register block of
// `vectors` vectors of output pixels by `channels` output channels
// accumulates over the input channels and taps, weights broadcast from a
// copy laid out for the block; the bias is added as the block is stored.
// Images of few pixels and many output channels (the digits net's second
// layer: 64 pixels, 32 channels) use channel-lanes blocks instead: a run of
// output pixels (within a row in the padded planes) by the block's channels, the
// weights loaded as vectors and each input broadcast, staged pixel-major
// and transposed to the output planes; the plan's cost picks between them.
// Those blocks skip the taps that fall on the padding (on 8 x 8 images with
// padding 1, a sixth of a 3 x 3 kernel's products): a block runs only the
// kernel rows that reach the input, and a block within one output row
// leaves its first or last pixel out of a kernel column's products there.
// The input gradient is such a convolution (of the output gradient); the
// weight gradient reads the column copies, where each weight element's
// inputs are one contiguous run of output pixels.
//
// The kernels of engine/kernels/x86/conv_direct_*.cpp are compiled per ISA
// level like the GEMM's (sgemm_kernels.h); the generic level has none and
// keeps im2col.
#pragma once

#include <cstdint>

#include "engine/core/isa.h"
#include "engine/kernels/conv_geometry.h"
#include "engine/kernels/conv_winograd.h"
#include "engine/kernels/output_tail.h"

namespace samba::ops {

// out = conv2d(x, weight) + bias (bias may be null) with the direct kernel,
// when the level in use has one and the geometry suits it (running `tail`,
// when given, on each image's run of output channels as it is stored); false (nothing
// written) otherwise, or when the layout asked for does not suit it.
// The input layouts of the kernel (above); tests force one to reach both.
// ChannelLanes is the channel-lanes blocks (above), in the cheaper layout.
// Winograd is the Winograd F(2x2, 3x3) kernel (conv_winograd.h), for 3 x 3
// kernels where the level has it; Cheapest picks it by the same estimate.
enum class DirectLayout { Cheapest, PaddedPlanes, ColumnCopies, ChannelLanes, Winograd };

bool conv2d_direct_forward(const ConvGeometry& g, const float* x, const float* weight,
                           const float* bias, float* out,
                           DirectLayout layout = DirectLayout::Cheapest,
                           OutputTail* tail = nullptr);

// out = max_pool2d(y, kernel 2 x 2, stride 2) for y = conv2d(x, weight) +
// bias, or relu of that where `relu`: (N, O, out_h / 2, out_w / 2), a
// trailing odd output row or column in no window, each window's value
// picked as max_pool2d picks it. The channel-lanes blocks pool their staged
// rows before they transpose them; the other blocks store an image's planes
// to a per-thread buffer, which is pooled while it is in cache. False
// (nothing written) when the direct kernel does not apply (as above).
bool conv2d_direct_pool_forward(const ConvGeometry& g, const float* x, const float* weight,
                                const float* bias, bool relu, float* out,
                                DirectLayout layout = DirectLayout::Cheapest);

// grad_input = the adjoint of conv2d in x applied to grad, as the direct
// convolution of grad with the flipped, transposed weight (stride 1 only);
// false (nothing written) when the direct kernel does not apply.
// grad_weight = the adjoint of conv2d in the weight applied to grad, for
// input x, with the direct kernel's layout (overwrites); false (nothing
// written) when it does not apply.
bool conv2d_direct_weight_grad(const ConvGeometry& g, const float* grad, const float* x,
                               float* grad_weight);

bool conv2d_direct_input_grad(const ConvGeometry& g, const float* grad, const float* weight,
                              float* grad_input, DirectLayout layout = DirectLayout::Cheapest);

namespace detail {

// A register block: `vectors` vectors of output pixels by `channels` output
// channels; or, with channel_lanes, `vectors` single output pixels by
// `channels` output channels in channels / lanes vectors. The latter keeps
// the weights in vectors and broadcasts the inputs, which suits images with
// few pixels and many channels: its blocks are stored pixel-major to the
// staged buffer and transposed to the output's channel planes.
struct DirectConvBlock {
  int vectors;
  int channels;
  bool channel_lanes = false;
};

// One image's direct convolution, for the output channel blocks
// [block_begin, block_end). Output pixel (oh, ow) is numbered q = oh * pitch
// + ow, and its tap (i, j) on input channel c is input[c * channel_step + i *
// pitch + j * column_step + q]; at least block.vectors * lanes + kernel_w
// floats past the last channel are readable.
struct DirectConvImage {
  const float* input;
  int64_t in_channels, channel_step, column_step, pitch;
  int64_t kernel_h, kernel_w;
  // Blocks of block.channels output channels, each (in_channels, kernel_h,
  // kernel_w, block.channels); channels past out_channels hold zeros.
  const float* weight;
  const float* bias;  // out_channels values, or null
  bool relu = false;  // the output is relu(conv + bias) (OutputTail::in_registers)
  // Channel-lanes blocks only: out holds the output planes' 2x2 max pooling,
  // stride 2, (out_channels, out_h / 2, out_w / 2), instead of the planes.
  bool pool = false;
  float* out;  // (out_channels, out_h, out_w)
  int64_t out_channels, out_h, out_w;
  int64_t block_begin, block_end;
  // Where pitch > out_w, room for the blocks' outputs before they are
  // stored: (block_end - block_begin) * block.channels planes of out_h *
  // pitch floats, each rounded up to whole register blocks (block.vectors *
  // lanes). Unused (may be null) where pitch == out_w.
  float* staged;
  // Channel-lanes blocks only: the input's size before padding and the
  // padding, so that the taps falling on the padding are not multiplied.
  int64_t in_h, in_w, pad_h, pad_w;
};

// The weight gradient over a run of images copied in the column-copies
// layout: dw[o][r] += the sum over the images and their output pixels q of
// grad[o][q] * input[row_offsets[r] + q], r = (c, i, j) a weight element of
// input channel c and tap (i, j). Output pixels go in the vector lanes, the
// lanes summed once per run.
struct DirectWeightGradRun {
  const float* input;  // `images` copies, image_step floats apart
  int64_t images, image_step;
  const int64_t* row_offsets;  // `rows` offsets in a copy
  int64_t rows;
  const float* grad;  // (images, out_channels, pixels)
  int64_t out_channels, pixels;
  float* dw;  // (out_channels, rows)
};

struct ConvDirectKernels {
  IsaLevel level = IsaLevel::Generic;
  int64_t lanes = 0;  // output pixels per vector
  // The register blocks the level has (instantiated kernels).
  const DirectConvBlock* blocks = nullptr;
  int block_count = 0;
  // Runs image `a` with blocks[block].
  void (*image)(const DirectConvImage& a, int block) = nullptr;
  // Copies `rows` rows of `len` floats, src and dst rows `*_pitch` apart.
  void (*copy_rows)(const float* src, int64_t src_pitch, float* dst, int64_t dst_pitch,
                    int64_t rows, int64_t len) = nullptr;
  void (*weight_grad)(const DirectWeightGradRun& a) = nullptr;
  // Runs image `a` through the Winograd F(2x2, 3x3) kernel (conv_winograd.h);
  // false (nothing written) when the image holds an infinity or a NaN. Null
  // where the level has none.
  bool (*winograd_image)(const WinogradImage& a) = nullptr;
};

// The table of the level in use, or null where it has no direct kernel.
const ConvDirectKernels* conv_direct_kernels();

// Defined by the per-level files (only where built).
const ConvDirectKernels& conv_direct_kernels_avx2();
const ConvDirectKernels& conv_direct_kernels_avx512();

}  // namespace detail
}  // namespace samba::ops
