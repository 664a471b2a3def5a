// Max pooling over 2x2 windows with stride 2, no padding and no dilation: the
// pooling of nearly every convolutional network, on float32. The general
// kernel in engine/ops/pooling.cpp sweeps each tap along an output row; on
// small images (8x8: output rows of 4) its per-row work costs more than the
// comparisons. Here a window row pair is one pass of vector maxima, and the
// backward writes the whole input gradient in one pass (the windows do not
// overlap, so each input element gets at most one gradient).
#pragma once

#include <cstdint>

namespace samba::ops {

// Where the 2x2 kernel applies: planes of in_h x in_w pooled to out_h x out_w
// with 2 * out_h <= in_h and 2 * out_w <= in_w (a trailing odd row or column
// belongs to no window, as PyTorch's floor rule gives).
struct Pool2x2Shape {
  int64_t planes, in_h, in_w, out_h, out_w;
};

// out = the maximum of each window; a NaN in the window gives NaN.
void max_pool_2x2_forward(const Pool2x2Shape& s, const float* x, float* out);

// The same on this thread alone: for kernels that pool a few planes of
// their output while they are in cache.
void max_pool_2x2_planes(const Pool2x2Shape& s, const float* x, float* out);

// dx = grad at each window's first maximum in window order (row by row), or
// at its last NaN when it holds NaN, as max_pool2d_backward's general kernel;
// zero elsewhere, including rows and columns no window covers.
void max_pool_2x2_backward(const Pool2x2Shape& s, const float* grad, const float* x, float* dx);

}  // namespace samba::ops
