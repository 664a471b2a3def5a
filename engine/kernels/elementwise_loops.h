// The execution engine of the elementwise op families.
//
// Every elementwise kernel is written once as a *compute function* over short
// arrays, one compute type per operand: compute(n, out, in0, in1, ...). The
// runner here walks the output in blocks of at most kBlock elements and hands
// each block to the compute function. An operand whose dtype already is its
// compute type and whose elements are adjacent is passed in place; any other
// (another dtype, a stride, a broadcast) is first converted into a small
// stack buffer. So:
//   - one compute function serves every dtype combination and layout;
//   - the contiguous float32 case runs straight on the tensors' memory, where
//     plain loops and Eigen array expressions vectorize;
//   - bf16/fp16 are widened to float a block at a time (fp32 compute) with
//     Eigen's vectorized casts, and narrowed back the same way;
//   - only the small per-dtype conversions are instantiated per source dtype,
//     not the compute functions.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "engine/core/dispatch.h"
#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/core/strided.h"
#include "engine/core/tensor.h"

namespace samba::ops::ew {

// Elements per block: buffers for up to four operands of 8 bytes stay in L1.
inline constexpr int64_t kBlock = 256;

// Outputs at least this large are written with streaming (non-temporal)
// stores: with their inputs they overflow a typical L3 anyway, and streaming
// saves the read of each destination line that an ordinary store triggers
// (a quarter of a binary op's memory traffic).
inline constexpr size_t kStreamBytes = size_t{16} << 20;

// A type carried as a value, for generic lambdas: f(Tag<float>{}).
template <typename T>
struct Tag {
  using type = T;
};

// Elements per parallel task for a loop costing about `cost` cycles per
// element (kMinGrain is calibrated for one cycle).
inline int64_t grain_for(int64_t cost) { return std::max<int64_t>(2048, kMinGrain / cost); }

// ---- element conversion ----------------------------------------------------------

template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

// dst[i] = src[i] converted, for n adjacent elements.
template <typename To, typename From>
inline void convert_n(const From* src, To* dst, int64_t n) {
  if constexpr (std::is_same_v<To, From>) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(To));
  } else if constexpr ((kIsHalf<From> && std::is_same_v<To, float>) ||
                       (std::is_same_v<From, float> && kIsHalf<To>)) {
    // Eigen vectorizes these (F16C for fp16, integer shifts for bf16, both
    // rounding to nearest even).
    using Src = Eigen::Array<From, Eigen::Dynamic, 1>;
    using Dst = Eigen::Array<To, Eigen::Dynamic, 1>;
    Eigen::Map<Dst>(dst, n) = Eigen::Map<const Src>(src, n).template cast<To>();
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = convert_value<To>(src[i]);
  }
}

// Reads n elements of dtype `src` at `p` (element stride `stride`; 0 repeats
// one value) into `buf` as A.
template <typename A>
void load_block(DType src, const char* p, int64_t stride, int64_t n, A* buf) {
  SAMBA_DISPATCH_ALL(src, "elementwise", [&] {
    const auto* s = reinterpret_cast<const scalar_t*>(p);
    if (stride == 0) {
      std::fill_n(buf, n, convert_value<A>(*s));
    } else if (stride == 1) {
      convert_n(s, buf, n);
    } else {
      for (int64_t i = 0; i < n; ++i) buf[i] = convert_value<A>(s[i * stride]);
    }
  });
}

// Copies `bytes` from `src` to `dst` with non-temporal stores where aligned.
inline void stream_copy(char* dst, const char* src, size_t bytes) {
#if defined(__AVX__)
  size_t head = (32 - (reinterpret_cast<uintptr_t>(dst) & 31)) & 31;
  head = std::min(head, bytes);
  std::memcpy(dst, src, head);
  dst += head, src += head, bytes -= head;
  for (; bytes >= 32; dst += 32, src += 32, bytes -= 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
#endif
  std::memcpy(dst, src, bytes);
}

// Makes streaming stores visible before the task that issued them ends.
inline void stream_fence() {
#if defined(__AVX__)
  _mm_sfence();
#endif
}

// Writes n values of `buf` to the contiguous output `p` of dtype `dst`.
template <typename R>
void store_block(DType dst, char* p, int64_t n, const R* buf, bool stream) {
  if (dst == dtype_of<R>()) {
    const size_t bytes = static_cast<size_t>(n) * sizeof(R);
    if (stream)
      stream_copy(p, reinterpret_cast<const char*>(buf), bytes);
    else
      std::memcpy(p, buf, bytes);
    return;
  }
  SAMBA_DISPATCH_ALL(dst, "elementwise",
                     [&] { convert_n(buf, reinterpret_cast<scalar_t*>(p), n); });
}

// ---- the runner -------------------------------------------------------------------

namespace detail {

inline constexpr size_t kMaxInputs = 3;
inline constexpr int64_t kSlotBytes = kBlock * 8;

// Called for each run of adjacent output elements: p holds the operands'
// first elements ([0] the output), s their element strides (the output's is 1).
using RunFn = void (*)(void* ctx, char* const* p, const int64_t* s, int64_t len);

// Splits `out` into runs over the thread pool, in chunks of at least `grain`
// elements. Not a template, so the threading code is compiled once, not per op.
inline void for_each_run(const Tensor& out, const Tensor* ins, size_t n_in, int64_t grain,
                         bool stream, RunFn fn, void* ctx) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const size_t nops = n_in + 1;
  std::array<char*, kMaxInputs + 1> base{};
  std::array<int64_t, kMaxInputs + 1> esize{};
  base[0] = static_cast<char*>(out.raw_data());
  esize[0] = static_cast<int64_t>(element_size(out.dtype()));
  // Linear: every input is either laid out like the output or a single value.
  // Row-wise: besides those, some input is a contiguous vector along the
  // output's last dim (a bias), read again for every row. Both cases need no
  // stride plan, whose dim vectors cost more than a small op's arithmetic.
  bool linear = true, rowwise = true;
  const int64_t row = out.dim() == 0 ? 1 : out.shape().back();
  std::array<int64_t, kMaxInputs + 1> lin{};
  std::array<bool, kMaxInputs + 1> per_row{};
  lin[0] = 1;
  for (size_t k = 0; k < n_in; ++k) {
    const Tensor& t = ins[k];
    base[k + 1] = static_cast<char*>(t.raw_data());
    esize[k + 1] = static_cast<int64_t>(element_size(t.dtype()));
    if (t.numel() == 1) {
      lin[k + 1] = 0;
    } else if (t.shape() == out.shape() && t.is_contiguous()) {
      lin[k + 1] = 1;
    } else if (t.numel() == row && t.dim() >= 1 && t.shape().back() == row && t.is_contiguous()) {
      lin[k + 1] = 1;
      per_row[k + 1] = true;
      linear = false;
    } else {
      linear = rowwise = false;
    }
  }

  if (linear) {
    parallel_for(n, grain, [&](int64_t b, int64_t e) {
      std::array<char*, kMaxInputs + 1> p{};
      for (size_t k = 0; k < nops; ++k) p[k] = base[k] + b * lin[k] * esize[k];
      fn(ctx, p.data(), lin.data(), e - b);
      if (stream) stream_fence();
    });
    return;
  }
  if (rowwise) {
    parallel_for(n / row, std::max<int64_t>(1, grain / row), [&](int64_t r0, int64_t r1) {
      std::array<char*, kMaxInputs + 1> p{};
      for (int64_t r = r0; r < r1; ++r) {
        for (size_t k = 0; k < nops; ++k) p[k] = base[k] + (per_row[k] ? 0 : r * row * lin[k] * esize[k]);
        fn(ctx, p.data(), lin.data(), row);
      }
      if (stream) stream_fence();
    });
    return;
  }

  std::vector<Dims> strides{contiguous_strides(out.shape())};
  for (size_t k = 0; k < n_in; ++k)
    strides.push_back(broadcast_strides(ins[k].shape(), ins[k].strides(), out.shape()));
  const StridedPlan plan({out.shape(), std::move(strides)});
  const Dims& shape = plan.shape();
  const int64_t rank = plan.rank();
  std::array<const int64_t*, kMaxInputs + 1> st{};
  std::array<int64_t, kMaxInputs + 1> inner{};
  for (size_t k = 0; k < nops; ++k) {
    st[k] = plan.strides(static_cast<int>(k)).data();
    inner[k] = st[k][rank - 1];
  }
  // Each task takes a range of flat output indices and walks it row by row
  // (a row is a run along the merged innermost dimension).
  parallel_for(n, grain, [&](int64_t b, int64_t e) {
    std::array<int64_t, kMaxRank> coord{};
    int64_t rem = b;
    for (int64_t d = rank - 1; d >= 0; --d) coord[d] = rem % shape[d], rem /= shape[d];
    std::array<char*, kMaxInputs + 1> p{};
    for (int64_t cur = b; cur < e;) {
      for (size_t k = 0; k < nops; ++k) {
        int64_t off = 0;
        for (int64_t d = 0; d < rank; ++d) off += coord[d] * st[k][d];
        p[k] = base[k] + off * esize[k];
      }
      const int64_t len = std::min(shape[rank - 1] - coord[rank - 1], e - cur);
      fn(ctx, p.data(), inner.data(), len);
      cur += len;
      coord[rank - 1] = 0;
      for (int64_t d = rank - 2; d >= 0; --d) {
        if (++coord[d] < shape[d]) break;
        coord[d] = 0;
      }
    }
    if (stream) stream_fence();
  });
}

template <size_t N>
struct Operands {  // [0] is the output, [1..N] the inputs
  std::array<DType, N + 1> dtype;
  std::array<int64_t, N + 1> esize;
};

// Input K of the current block as an array of A: in place when possible,
// else converted into its scratch slot.
template <size_t K, typename A, size_t N>
const A* operand(const Operands<N>& ops, char* const* p, const int64_t* s, int64_t m,
                 unsigned char* scratch) {
  if (ops.dtype[K + 1] == dtype_of<A>() && s[K + 1] == 1)
    return reinterpret_cast<const A*>(p[K + 1]);
  A* buf = reinterpret_cast<A*>(scratch + K * kSlotBytes);
  load_block<A>(ops.dtype[K + 1], p[K + 1], s[K + 1], m, buf);
  return buf;
}

// Runs `compute` over one run of `len` elements, a block at a time.
template <typename R, typename... As, typename F, size_t... I>
void run_blocks(std::index_sequence<I...>, const Operands<sizeof...(As)>& ops, char* const* p0,
                const int64_t* s, int64_t len, bool stream, F& compute) {
  constexpr size_t N = sizeof...(As);
  static_assert(sizeof(R) <= 8 && ((sizeof(As) <= 8) && ...));
  alignas(64) unsigned char scratch[(N + 1) * kSlotBytes];
  R* rbuf = reinterpret_cast<R*>(scratch + N * kSlotBytes);
  const bool out_in_place = !stream && ops.dtype[0] == dtype_of<R>();
  std::array<char*, N + 1> p;
  std::copy_n(p0, N + 1, p.begin());
  for (int64_t off = 0; off < len; off += kBlock) {
    const int64_t m = std::min(kBlock, len - off);
    R* o = out_in_place ? reinterpret_cast<R*>(p[0]) : rbuf;
    compute(m, o, operand<I, As>(ops, p.data(), s, m, scratch)...);
    if (!out_in_place) store_block<R>(ops.dtype[0], p[0], m, rbuf, stream);
    for (size_t k = 0; k <= N; ++k) p[k] += m * s[k] * ops.esize[k];
  }
}

}  // namespace detail

// Computes `out` (contiguous, any dtype) from `ins` (any dtypes, strides and
// shapes broadcastable to out's): out = compute(ins...) block by block, where
// compute(int64_t n, R* out, const As*... in) sees input k converted to As[k]
// and writes R values that are converted to out's dtype. Work is split over
// the thread pool in chunks of at least `grain` elements.
template <typename R, typename... As, typename F>
void for_each_block(const Tensor& out, const std::array<Tensor, sizeof...(As)>& ins, int64_t grain,
                    F&& compute) {
  constexpr size_t N = sizeof...(As);
  static_assert(N <= detail::kMaxInputs);
  struct Context {
    detail::Operands<N> ops;
    bool stream;
    std::remove_reference_t<F>* compute;
  } ctx;
  ctx.ops.dtype[0] = out.dtype();
  ctx.ops.esize[0] = static_cast<int64_t>(element_size(out.dtype()));
  for (size_t k = 0; k < N; ++k) {
    ctx.ops.dtype[k + 1] = ins[k].dtype();
    ctx.ops.esize[k + 1] = static_cast<int64_t>(element_size(ins[k].dtype()));
  }
  ctx.stream = out.nbytes() >= kStreamBytes;
  ctx.compute = &compute;
  detail::RunFn fn = [](void* c, char* const* p, const int64_t* s, int64_t len) {
    auto* x = static_cast<Context*>(c);
    detail::run_blocks<R, As...>(std::index_sequence_for<As...>{}, x->ops, p, s, len, x->stream,
                                 *x->compute);
  };
  detail::for_each_run(out, ins.data(), N, grain, ctx.stream, fn, &ctx);
}

// ---- compute types ----------------------------------------------------------------

// Calls f(Tag<A>{}) with A the type arithmetic on dtype `dt` is carried out
// in (float for bf16/fp16), restricted to the families the op supports so
// nothing meaningless is instantiated. Other dtypes fail with DTypeMismatch.
template <bool kFloat, bool kInt, bool kBool, typename F>
decltype(auto) dispatch_compute(DType dt, std::string_view what, F&& f) {
  switch (dt) {
    case DType::Float32:
    case DType::BFloat16:
    case DType::Float16:
      if constexpr (kFloat) return f(Tag<float>{});
      break;
    case DType::Float64:
      if constexpr (kFloat) return f(Tag<double>{});
      break;
    case DType::Int64:
      if constexpr (kInt) return f(Tag<int64_t>{});
      break;
    case DType::Int32:
      if constexpr (kInt) return f(Tag<int32_t>{});
      break;
    case DType::Int16:
      if constexpr (kInt) return f(Tag<int16_t>{});
      break;
    case DType::Int8:
      if constexpr (kInt) return f(Tag<int8_t>{});
      break;
    case DType::UInt8:
      if constexpr (kInt) return f(Tag<uint8_t>{});
      break;
    case DType::Bool:
      if constexpr (kBool) return f(Tag<bool>{});
      break;
  }
  fail(Status::DTypeMismatch, "{}: dtype {} is not supported (expected {})", what, dtype_name(dt),
       kFloat && kInt && kBool ? "any dtype"
       : kFloat && kInt        ? "a floating point or integer dtype"
       : kFloat                ? "a floating point dtype"
       : kBool                 ? "an integer or bool dtype"
                               : "an integer dtype");
}

template <typename F>
decltype(auto) dispatch_float(DType dt, std::string_view what, F&& f) {
  return dispatch_compute<true, false, false>(dt, what, std::forward<F>(f));
}
template <typename F>
decltype(auto) dispatch_numeric(DType dt, std::string_view what, F&& f) {
  return dispatch_compute<true, true, false>(dt, what, std::forward<F>(f));
}
template <typename F>
decltype(auto) dispatch_all(DType dt, std::string_view what, F&& f) {
  return dispatch_compute<true, true, true>(dt, what, std::forward<F>(f));
}
template <typename F>
decltype(auto) dispatch_integral(DType dt, std::string_view what, F&& f) {
  return dispatch_compute<false, true, true>(dt, what, std::forward<F>(f));
}

// ---- integer arithmetic that wraps like PyTorch's (and is not UB) ------------------

template <typename T>
using WrapInt = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

template <typename T>
inline constexpr bool kWrapping = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
inline T wrap_add(T a, T b) {
  if constexpr (kWrapping<T>)
    return static_cast<T>(static_cast<WrapInt<T>>(a) + static_cast<WrapInt<T>>(b));
  else
    return a + b;
}
template <typename T>
inline T wrap_sub(T a, T b) {
  if constexpr (kWrapping<T>)
    return static_cast<T>(static_cast<WrapInt<T>>(a) - static_cast<WrapInt<T>>(b));
  else
    return a - b;
}
template <typename T>
inline T wrap_mul(T a, T b) {
  if constexpr (kWrapping<T>)
    return static_cast<T>(static_cast<WrapInt<T>>(a) * static_cast<WrapInt<T>>(b));
  else
    return a * b;
}
template <typename T>
inline T wrap_neg(T a) {
  return wrap_sub(T{0}, a);
}

// ---- Eigen views of a block ---------------------------------------------------------

template <typename A>
inline auto vec(A* p, int64_t n) {
  return Eigen::Map<Eigen::Array<A, Eigen::Dynamic, 1>>(p, n);
}
template <typename A>
inline auto vec(const A* p, int64_t n) {
  return Eigen::Map<const Eigen::Array<A, Eigen::Dynamic, 1>>(p, n);
}

}  // namespace samba::ops::ew
