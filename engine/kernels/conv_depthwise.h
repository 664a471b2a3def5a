// Direct kernels for depthwise convolution (one input channel per group).
// There im2col + GEMM degenerates into tiny products dominated by overhead;
// sliding each kernel tap over whole output rows vectorizes instead.
#pragma once

#include "engine/kernels/conv_geometry.h"

namespace samba::ops {

inline bool is_depthwise(const ConvGeometry& g) { return g.groups > 1 && g.in_per_group() == 1; }

// The same three products as conv_im2col.h, on contiguous buffers of T
// (float or double), for geometries where is_depthwise holds. Outputs are
// overwritten.
template <typename T>
void depthwise_forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* out);
template <typename T>
void depthwise_input_grad(const ConvGeometry& g, const T* grad, const T* w, T* dx);
template <typename T>
void depthwise_weight_grad(const ConvGeometry& g, const T* grad, const T* x, T* dw);

}  // namespace samba::ops
