// Fused scaled dot-product attention on contiguous (batch, rows, features)
// operands: softmax(q kᵀ · scale + mask) v without materializing the
// (rows x keys) score matrix. Keys are visited in blocks with an online
// softmax (a running maximum and sum per query row), so a block of queries,
// its scores and its accumulator stay in cache; the forward pass runs query
// blocks of every batch entry in parallel, the backward pass one batch entry
// per task (its key and value gradients are then written by one thread).
#pragma once

#include <cstdint>
#include <vector>

namespace samba::ops::attention {

// Where mask element (b, i, j) lives: batch_offset[b] + i * row_stride +
// j * col_stride (strides of a broadcast mask may be 0). `keep` (true where
// the key is attended) or `bias` (added to the scaled scores), or neither.
template <typename T>
struct Mask {
  const bool* keep = nullptr;
  const T* bias = nullptr;
  std::vector<int64_t> batch_offset;
  int64_t row_stride = 0, col_stride = 0;
};

struct Geometry {
  int64_t batch = 1;  // the flattened leading dims
  int64_t rows = 0;   // queries, L
  int64_t keys = 0;   // S
  int64_t dim = 0;    // features of q and k, E
  int64_t vdim = 0;   // features of v, Ev
  double scale = 1.0;
  bool causal = false;  // key j is attended by query i only when j <= i
};

// out (batch, rows, vdim) and lse (batch, rows): the log of each row's
// softmax denominator (in the scores' units), which the backward pass uses to
// recompute the probabilities. A row whose keys are all masked gets NaN
// outputs and lse = -inf, as the unfused softmax would; with no keys at all
// the outputs are 0 (an empty sum).
template <typename T>
void forward(const Geometry& g, const T* q, const T* k, const T* v, const Mask<T>& mask, T* out,
             T* lse);

// dq, dk, dv (overwritten) from the output gradient dout, the forward
// outputs out and lse, and dlse (the gradient of lse; may be null).
template <typename T>
void backward(const Geometry& g, const T* q, const T* k, const T* v, const Mask<T>& mask,
              const T* out, const T* lse, const T* dout, const T* dlse, T* dq, T* dk, T* dv);

}  // namespace samba::ops::attention
