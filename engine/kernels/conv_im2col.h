// The three products of a 2-D convolution, as im2col + GEMM (Eigen, one
// thread per task; tasks spread with samba::parallel_for); as direct loops for
// depthwise convolutions (conv_depthwise.h); and, for float32 at unit stride
// where the ISA level has one, all three by the direct kernel
// (conv_direct.h). Tensors are contiguous and shaped by the geometry;
// float32 and float64 are computed natively, bfloat16/float16 through float32
// copies.
#pragma once

#include "engine/kernels/conv_geometry.h"
#include "engine/kernels/output_tail.h"

namespace samba::ops {

// out = conv2d(x, weight) (+ bias per output channel when defined).
// `tail`, when given, is run on the output blocks where the path taken
// allows (output_tail.h).
void conv2d_forward(const ConvGeometry& g, const Tensor& x, const Tensor& weight,
                    const Tensor& bias, const Tensor& out, OutputTail* tail = nullptr);

// grad_input = the adjoint of conv2d in x applied to grad (overwrites).
// This is also conv_transpose2d's forward.
void conv2d_input_grad(const ConvGeometry& g, const Tensor& grad, const Tensor& weight,
                       const Tensor& grad_input);

// grad_weight = the adjoint of conv2d in weight applied to grad, for input x (overwrites).
void conv2d_weight_grad(const ConvGeometry& g, const Tensor& grad, const Tensor& x,
                        const Tensor& grad_weight);

// out[n, c, ...] += bias[c] for an (N, C, ...) or (C, ...) tensor with `batch` images.
void add_channel_bias(const Tensor& out, const Tensor& bias, int64_t batch);

}  // namespace samba::ops
