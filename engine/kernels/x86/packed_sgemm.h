// The packed fp32 GEMM kernel, written once for any vector width and
// included by each level's kernel file (sgemm_avx2.cpp, sgemm_avx512.cpp),
// which compiles it with that level's flags. Operands are packed into
// cache-sized panels and a kMr x kNr register-blocked micro-kernel (two
// vectors wide) computes C, applying the epilogue to each block right after
// its last update (while it is in L1).
//
// Everything here is in an unnamed namespace and uses only intrinsics and
// plain loops: a level's file must not instantiate a library template (Eigen,
// fmt, the standard containers) that a baseline file also instantiates, as
// the linker keeps one copy of such a function and might keep the one with
// instructions the CPU lacks. Packing buffers and the general epilogue come
// from the baseline GEMM layer through plain calls.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "engine/kernels/sgemm_kernels.h"

namespace samba::ops::detail {
namespace {

// Rows of the register block: with two vectors per row, 12 accumulators.
// At 8 lanes that leaves registers for two B vectors and one broadcast A
// value; at 16 lanes (32 registers) the same block already has enough FMAs
// in flight to cover their latency.
constexpr int64_t kMr = 6;

// Cache blocks of the level: a kc x kNr panel of B (at most kKc deep) stays
// in L1 while the kMc x kc block of A streams from L2; the kc x kNc block of
// B lives in L3. The depth is split into equal blocks so no block is a short
// remainder (each depth block costs a pass over C).
template <class Vec>
struct PackedSgemm {
  using V = typename Vec::V;
  static constexpr int64_t kNr = 2 * Vec::kLanes;

  static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

  // In-register transpose of an 8 x 8 block: on return r[q] holds what was
  // column q (element i of r[q] = old r[i][q]).
  static void transpose8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
  }

  // Copies `count` (<= 8) source vectors src[v] + 0 .. kc, each contiguous
  // along the depth, into dst[p * stride + v] (depth-major), through 8 x 8
  // transposes. Each transposed vector is stored whole, in increasing p:
  // lanes from `count` on are zeros, and where the stride is below 8 they
  // run into the next depth step's slots, which its own store then rewrites;
  // the last store runs up to 8 - stride floats past the panel (the packing
  // buffers have room for it). Masked stores, which kept to `count` lanes,
  // are slow on AMD's cores, and the A panels (stride 6) went through them.
  static void pack_transposed(const float* const* src, int64_t count, int64_t kc, float* dst,
                              int64_t stride) {
    int64_t p = 0;
    for (; p + 8 <= kc; p += 8) {
      __m256 r[8];
      for (int64_t v = 0; v < 8; ++v)
        r[v] = v < count ? _mm256_loadu_ps(src[v] + p) : _mm256_setzero_ps();
      transpose8(r);
      for (int q = 0; q < 8; ++q) _mm256_storeu_ps(dst + (p + q) * stride, r[q]);
    }
    for (; p < kc; ++p)
      for (int64_t v = 0; v < count; ++v) dst[p * stride + v] = src[v][p];
  }

  // kMr contiguous floats from src to dst (the AVX-512 file is built without
  // the auto-vectorizer, so the copy is spelled out).
  static void copy_row(const float* src, float* dst) {
    int64_t r = 0;
    for (; r + 4 <= kMr; r += 4) _mm_storeu_ps(dst + r, _mm_loadu_ps(src + r));
    for (; r < kMr; ++r) dst[r] = src[r];
  }

  // Rows [i0, i0 + mc) x depth [p0, p0 + kc) of op(A) as kMr-row panels, each
  // stored depth-major ([p][r]) and zero-padded to kMr rows.
  static void pack_a(const GemmOperand<float>& op, const float* a, int64_t i0, int64_t mc,
                     int64_t p0, int64_t kc, float* dst) {
    for (int64_t ir = 0; ir < mc; ir += kMr) {
      const int64_t mr = min64(kMr, mc - ir);
      float* d = dst + ir * kc;
      if (!op.trans) {
        const float* rows[kMr];
        for (int64_t r = 0; r < mr; ++r) rows[r] = a + (i0 + ir + r) * op.ld + p0;
        pack_transposed(rows, mr, kc, d, kMr);
      } else if (mr < kMr) {
        for (int64_t p = 0; p < kc; ++p) {
          const float* src = a + (p0 + p) * op.ld + i0 + ir;
          for (int64_t r = 0; r < mr; ++r) d[p * kMr + r] = src[r];
        }
      }
      for (int64_t r = mr; r < kMr; ++r)
        for (int64_t p = 0; p < kc; ++p) d[p * kMr + r] = 0.0f;
    }
    if (!op.trans) return;
    // Op(A) stored transposed (the weight gradient's xᵀ, the LM head's
    // dLogitsᵀ): each depth step is a run of mc contiguous floats of one
    // stored row, which the full panels take kMr at a time. Row by row, so
    // the reads are sequential: panel by panel, each depth step would touch
    // a new cache line and, for the LM head's 50257-float rows, a new page.
    const int64_t full = mc / kMr * kMr;
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = a + (p0 + p) * op.ld + i0;
      for (int64_t ir = 0; ir < full; ir += kMr) copy_row(src + ir, dst + ir * kc + p * kMr);
    }
  }

  // Depth [p0, p0 + kc) x columns [j0, j0 + nc) of op(B) as kNr-column
  // panels, each stored depth-major ([p][j]) and zero-padded to kNr columns.
  static void pack_b(const GemmOperand<float>& op, const float* b, int64_t p0, int64_t kc,
                     int64_t j0, int64_t nc, float* dst) {
    for (int64_t jr = 0; jr < nc; jr += kNr) {
      const int64_t nr = min64(kNr, nc - jr);
      float* d = dst + jr * kc;
      if (!op.trans) {
        for (int64_t p = 0; p < kc; ++p) {
          const float* src = b + (p0 + p) * op.ld + j0 + jr;
          float* row = d + p * kNr;
          if (nr == kNr) {
            for (int64_t j = 0; j < kNr; j += 8) _mm256_store_ps(row + j, _mm256_loadu_ps(src + j));
          } else {
            for (int64_t j = 0; j < nr; ++j) row[j] = src[j];
            for (int64_t j = nr; j < kNr; ++j) row[j] = 0.0f;
          }
        }
      } else {
        // Columns of op(B) are contiguous rows of the stored matrix: transpose
        // them in 8 x 8 blocks.
        for (int64_t jh = 0; jh < nr; jh += 8) {
          const float* cols[8];
          const int64_t count = min64(8, nr - jh);
          for (int64_t j = 0; j < count; ++j) cols[j] = b + (j0 + jr + jh + j) * op.ld + p0;
          pack_transposed(cols, count, kc, d + jh, kNr);
        }
        for (int64_t j = nr; j < kNr; ++j)
          for (int64_t p = 0; p < kc; ++p) d[p * kNr + j] = 0.0f;
      }
    }
  }

  // How the micro-kernel combines its sum with C: on the first depth block
  // C = alpha * sum + beta * C (C unread when beta is 0), later ones add.
  struct Store {
    float alpha;
    float beta;
    bool first;
  };

  // The same for one element (edge blocks, staged through memory).
  static float combine1(float acc, float c, const Store& s) {
    const float v = s.alpha * acc;
    return !s.first ? v + c : s.beta == 0.0f ? v : v + s.beta * c;
  }

  static V combine(V acc, const float* c, const Store& s) {
    const V v = s.alpha == 1.0f ? acc : Vec::mul(acc, Vec::set1(s.alpha));
    if (!s.first) return Vec::add(v, Vec::loadu(c));
    if (s.beta == 0.0f) return v;
    return Vec::fmadd(Vec::set1(s.beta), Vec::loadu(c), v);
  }

  // C[mr x nr] (op) = A panel (kc x kMr) * B panel (kc x kNr). The loops over
  // the block are fully unrolled, so the accumulators live in registers.
  static void micro_kernel(int64_t kc, const float* __restrict pa, const float* __restrict pb,
                           float* c, int64_t ldc, int64_t mr, int64_t nr, const Store& s) {
    // C is touched only after the depth loop: start fetching its rows now.
    for (int64_t r = 0; r < mr; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kNr - 1), _MM_HINT_T0);
    }
    V acc[kMr][2];
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = Vec::zero();
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; ++p) {
      const V b0 = Vec::load(pb), b1 = Vec::load(pb + Vec::kLanes);
#pragma GCC unroll 6
      for (int r = 0; r < kMr; ++r) {
        const V av = Vec::broadcast(pa + r);
        acc[r][0] = Vec::fmadd(av, b0, acc[r][0]);
        acc[r][1] = Vec::fmadd(av, b1, acc[r][1]);
      }
      pa += kMr;
      pb += kNr;
    }
    store_block<kMr>(acc, c, ldc, mr, nr, s);
  }

  // The accumulators of an Mr x kNr register block into C by the Store rule:
  // whole rows when the block is whole (mr == Mr, nr == kNr), else its mr x nr
  // corner through a staging block. Always inlined, and its loops unrolled,
  // so the accumulators stay registers: a loop over them with a variable
  // index keeps them on the stack, stored at every step of the depth loop.
  template <int64_t Mr>
  [[gnu::always_inline]] static void store_block(V (&acc)[Mr][2], float* c, int64_t ldc,
                                                 int64_t mr, int64_t nr, const Store& s) {
    if (mr == Mr && nr == kNr) {
#pragma GCC unroll 8
      for (int64_t r = 0; r < Mr; ++r) {
        float* out = c + r * ldc;
        Vec::storeu(out, combine(acc[r][0], out, s));
        Vec::storeu(out + Vec::kLanes, combine(acc[r][1], out + Vec::kLanes, s));
      }
      return;
    }
    alignas(64) float tmp[Mr * kNr];
#pragma GCC unroll 8
    for (int64_t r = 0; r < Mr; ++r) {
      Vec::storeu(tmp + r * kNr, acc[r][0]);
      Vec::storeu(tmp + r * kNr + Vec::kLanes, acc[r][1]);
    }
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t j = 0; j < nr; ++j)
        c[r * ldc + j] = combine1(tmp[r * kNr + j], c[r * ldc + j], s);
  }

  // The epilogue of one finished block. Bias alone and bias + relu (the
  // common ones) run here in vector registers; the other activations go to
  // the GEMM layer's general epilogue.
  static void epilogue(const GemmArgs<float>& g, float* c, int64_t rows, int64_t cols,
                       const float* bias) {
    bias_act(c, rows, cols, g.ldc, bias, g.act);
    if (g.tail) (*g.tail)(c, rows, cols, g.ldc);
  }
  static void bias_act(float* c, int64_t rows, int64_t cols, int64_t ldc, const float* bias,
                       Activation act) {
    if (act != Activation::None && act != Activation::Relu)
      return apply_epilogue(c, rows, cols, ldc, bias, act);
    if (!bias && act == Activation::None) return;
    const __m256 zero = _mm256_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
      float* row = c + r * ldc;
      int64_t j = 0;
      for (; j + 8 <= cols; j += 8) {
        __m256 v = _mm256_loadu_ps(row + j);
        if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + j));
        if (act == Activation::Relu)
          v = _mm256_max_ps(zero, v);  // a NaN in v comes out (the second operand)
        _mm256_storeu_ps(row + j, v);
      }
      for (; j < cols; ++j) {
        float v = row[j] + (bias ? bias[j] : 0.0f);
        // NaN stays NaN, as in the general epilogue.
        if (act == Activation::Relu) v = v < 0.0f ? 0.0f : v;
        row[j] = v;
      }
    }
  }

  // The depth of the blocks a product of depth k is cut into: equal
  // blocks, rounded up to whole 8 x 8 pack transposes.
  template <int64_t kKc>
  static int64_t depth_block(int64_t k) {
    const int64_t depth_blocks = (k + kKc - 1) / kKc;
    return min64(k, ((k + depth_blocks - 1) / depth_blocks + 7) / 8 * 8);
  }

  // Floats of all of op(B) (k x n) packed by prepack_b.
  static size_t prepacked_b_floats(int64_t k, int64_t n) {
    return static_cast<size_t>(k * ((n + kNr - 1) / kNr * kNr));
  }

  // All of op(B) in the layout the tile's pack_b gives each block, so a tile
  // reads its block where it lies: depth block pc (of depth_block(k)) at
  // pc * round_up(n, kNr), and in it the panel of columns from j (a multiple
  // of kNr) at j * kc. dst is 64-byte aligned, prepacked_b_floats long.
  template <int64_t kKc>
  static void prepack_b(const GemmOperand<float>& op, int64_t k, int64_t n, float* dst) {
    const int64_t kc_max = depth_block<kKc>(k), n_pad = (n + kNr - 1) / kNr * kNr;
    for (int64_t pc = 0; pc < k; pc += kc_max)
      pack_b(op, op.data, pc, min64(kc_max, k - pc), 0, n, dst + pc * n_pad);
  }

  template <int64_t kKc, int64_t kMc, int64_t kNc>
  static void tile(const GemmArgs<float>& g, const float* a, const float* b, float* c, int64_t r0,
                   int64_t rows, int64_t c0, int64_t cols) {
    const int64_t k = g.k;
    const int64_t nc_max = min64(kNc, (cols + kNr - 1) / kNr * kNr);
    const int64_t mc_max = min64(kMc, (rows + kMr - 1) / kMr * kMr);
    const int64_t kc_max = depth_block<kKc>(k);
    // B packed at load (prepack_b) holds every block; tiles start on a
    // panel boundary (the GEMM layer cuts them at multiples of kNr).
    const float* prepacked = c0 % kNr == 0 ? g.b_packed : nullptr;
    const int64_t n_pad = (g.n + kNr - 1) / kNr * kNr;
    // The A panels' last transposed store runs 8 - kMr floats past them.
    float* pa = gemm_scratch(0, static_cast<size_t>(mc_max * kc_max + 8));
    float* pb = prepacked ? nullptr : gemm_scratch(1, static_cast<size_t>(nc_max * kc_max));
    for (int64_t jc = 0; jc < cols; jc += kNc) {
      const int64_t nc = min64(kNc, cols - jc);
      for (int64_t pc = 0; pc < k; pc += kc_max) {
        const int64_t kc = min64(kc_max, k - pc);
        const bool last = pc + kc == k;
        const Store s{g.alpha, g.beta, pc == 0};
        const float* bp = prepacked ? prepacked + pc * n_pad + (c0 + jc) * kc : pb;
        if (!prepacked) pack_b(g.b, b, pc, kc, c0 + jc, nc, pb);
        for (int64_t ic = 0; ic < rows; ic += kMc) {
          const int64_t mc = min64(kMc, rows - ic);
          pack_a(g.a, a, r0 + ic, mc, pc, kc, pa);
          for (int64_t jr = 0; jr < nc; jr += kNr) {
            const int64_t nr = min64(kNr, nc - jr);
            const int64_t col = c0 + jc + jr;
            for (int64_t ir = 0; ir < mc; ir += kMr) {
              const int64_t mr = min64(kMr, mc - ir);
              float* ct = c + (r0 + ic + ir) * g.ldc + col;
              micro_kernel(kc, pa + ir * kc, bp + jr * kc, ct, g.ldc, mr, nr, s);
              // The block is final and still in L1: finish it now.
              if (last) epilogue(g, ct, mr, nr, g.bias ? g.bias + col : nullptr);
            }
          }
        }
      }
    }
  }

  static bool prefer(int64_t rows, int64_t cols, int64_t k) {
    return rows >= kMr && cols >= kNr && k >= 8;
  }

  // ---- The direct kernel: small products, nothing packed ----------------
  //
  // When op(A) and op(B) are both stored row-major and the product is small,
  // packing costs as much as the arithmetic (an ONNX MatMul of 8 x 32 by
  // 32 x 32 spent 70% of its instructions packing). The direct kernel reads
  // the operands where they lie: each depth step's kNr-wide vectors are a
  // stretch of one row of B, and A's elements are broadcast from memory. The
  // B panel (k x kNr floats, rows ldb apart) is read again for every kMr rows
  // of C, so it must stay in L1: at most 32 KiB (prefer_direct).

  // kNr columns of B as two vectors; an edge panel's `nr` (< kNr) columns
  // through masked loads, so nothing past the row is read.
  // The deepest B panel the direct kernel keeps in L1 (32 KiB).
  static constexpr int64_t kDirectDepth = 8192 / kNr;

  template <bool Edge>
  static void load_panel_row(const float* row, int64_t nr, V& b0, V& b1) {
    if constexpr (Edge) {
      const int64_t n0 = min64(nr, Vec::kLanes);
      b0 = Vec::loadu_n(row, n0);
      b1 = Vec::loadu_n(row + Vec::kLanes, nr - n0);
    } else {
      b0 = Vec::loadu(row);
      b1 = Vec::loadu(row + Vec::kLanes);
    }
  }

  // C[Mr x nr] = alpha * A[Mr x k] B[k x nr] + beta * C, a at the block's
  // first row, b at its first column, c at its top-left element. Edge: nr <
  // kNr columns are stored; Masked: and read (B in place, where a transposed
  // panel is zero-padded to kNr and read whole: masked loads in the depth
  // loop made a 16 x 10 x 256 product 6x slower than 16 x 32 x 256).
  template <int64_t Mr, bool Masked, bool Edge>
  static void direct_block(const GemmArgs<float>& g, const float* a, const float* b, int64_t ldb,
                           float* c, int64_t nr, int64_t kc, const Store& s) {
    V acc[Mr][2];
#pragma GCC unroll 6
    for (int64_t r = 0; r < Mr; ++r) acc[r][0] = acc[r][1] = Vec::zero();
    const int64_t lda = g.a.ld;
#pragma GCC unroll 2
    for (int64_t p = 0; p < kc; ++p) {
      V b0, b1;
      load_panel_row<Masked>(b + p * ldb, nr, b0, b1);
#pragma GCC unroll 6
      for (int64_t r = 0; r < Mr; ++r) {
        const V av = Vec::broadcast(a + r * lda + p);
        acc[r][0] = Vec::fmadd(av, b0, acc[r][0]);
        acc[r][1] = Vec::fmadd(av, b1, acc[r][1]);
      }
    }
    store_block<Mr>(acc, c, g.ldc, Mr, Edge ? nr : kNr, s);
  }

  // Every row of the tile against one panel of columns: register blocks of
  // kMr rows, then one block of the remaining rows.
  template <bool Masked, bool Edge>
  static void direct_panel(const GemmArgs<float>& g, const float* a, const float* b, int64_t ldb,
                           float* c, int64_t rows, int64_t nr, int64_t kc, const Store& s) {
    int64_t i = 0;
    for (; i + kMr <= rows; i += kMr)
      direct_block<kMr, Masked, Edge>(g, a + i * g.a.ld, b, ldb, c + i * g.ldc, nr, kc, s);
    const float* ar = a + i * g.a.ld;
    float* cr = c + i * g.ldc;
    static_assert(kMr == 6, "the remainder blocks below are 1 to 5 rows");
    switch (rows - i) {
      case 5: return direct_block<5, Masked, Edge>(g, ar, b, ldb, cr, nr, kc, s);
      case 4: return direct_block<4, Masked, Edge>(g, ar, b, ldb, cr, nr, kc, s);
      case 3: return direct_block<3, Masked, Edge>(g, ar, b, ldb, cr, nr, kc, s);
      case 2: return direct_block<2, Masked, Edge>(g, ar, b, ldb, cr, nr, kc, s);
      case 1: return direct_block<1, Masked, Edge>(g, ar, b, ldb, cr, nr, kc, s);
      default: return;
    }
  }

  static void direct_tile(const GemmArgs<float>& g, const float* a, const float* b, float* c,
                          int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
    const float* at = a + r0 * g.a.ld;
    float* ct = c + r0 * g.ldc + c0;
    // op(B) stored transposed (a linear's weight, n x k): its columns are
    // rows of the stored matrix, so each panel is transposed into an
    // L1-sized buffer (zero-padded to kNr columns), kDirectDepth deep at
    // most, in equal blocks, the later ones adding to C; A is read in place.
    const int64_t blocks = g.b.trans ? (g.k + kDirectDepth - 1) / kDirectDepth : 1;
    const int64_t depth = (g.k + blocks - 1) / blocks;
    float* panel = g.b.trans ? gemm_scratch(1, static_cast<size_t>(depth * kNr)) : nullptr;
    for (int64_t jr = 0; jr < cols; jr += kNr) {
      const int64_t nr = min64(kNr, cols - jr);
      float* cp = ct + jr;
      for (int64_t p0 = 0; p0 < g.k; p0 += depth) {
        const int64_t kc = min64(depth, g.k - p0);
        const float* bp = b + c0 + jr;
        int64_t ldb = g.b.ld;
        if (panel) {
          pack_b(g.b, b, p0, kc, c0 + jr, nr, panel);
          bp = panel;
          ldb = kNr;
        }
        const Store s{g.alpha, g.beta, p0 == 0};
        if (nr == kNr)
          direct_panel<false, false>(g, at + p0, bp, ldb, cp, rows, nr, kc, s);
        else if (panel)
          direct_panel<false, true>(g, at + p0, bp, ldb, cp, rows, nr, kc, s);
        else
          direct_panel<true, true>(g, at + p0, bp, ldb, cp, rows, nr, kc, s);
      }
      // The panel's block of C is final and still in L1.
      epilogue(g, cp, rows, nr, g.bias ? g.bias + c0 + jr : nullptr);
    }
  }

  // ---- x @ Wᵀ at small batch, as (W xᵀ)ᵀ ----------------------------------
  //
  // With B stored transposed (a linear's weight, n x k) and few rows of A,
  // the direct kernel above transposes all of the weight on every call, a
  // quarter of its time at 16 x 256 x 784. Computed as Cᵀ = B Aᵀ instead,
  // the weight is the left operand, read in place (each element broadcast
  // once), and only the few rows of A are transposed, into panels of kNr
  // rows of C; each register block is written back transposed.

  // C[0..nr) x [0..Mr) (+)= alpha * A panel (kc x kNr, [p][row]) against Mr
  // rows of B (w, rows ldw apart, at the block's depth).
  template <int64_t Mr>
  static void transposed_block(const float* w, int64_t ldw, const float* panel, int64_t kc,
                               float* c, int64_t ldc, int64_t nr, const Store& s) {
    V acc[Mr][2];
#pragma GCC unroll 6
    for (int64_t r = 0; r < Mr; ++r) acc[r][0] = acc[r][1] = Vec::zero();
#pragma GCC unroll 2
    for (int64_t p = 0; p < kc; ++p) {
      const V b0 = Vec::load(panel + p * kNr), b1 = Vec::load(panel + p * kNr + Vec::kLanes);
#pragma GCC unroll 6
      for (int64_t r = 0; r < Mr; ++r) {
        const V wv = Vec::broadcast(w + r * ldw + p);
        acc[r][0] = Vec::fmadd(wv, b0, acc[r][0]);
        acc[r][1] = Vec::fmadd(wv, b1, acc[r][1]);
      }
    }
    if constexpr (Vec::kLanes == 8 && Mr == kMr) {
      // A full block: each half transposed in registers, then 6 floats per
      // row of C instead of 96 scalar stores (a tenth of the block's time).
      if (nr == kNr) {
        __m256 t0[8] = {acc[0][0], acc[1][0], acc[2][0], acc[3][0],
                        acc[4][0], acc[5][0], _mm256_setzero_ps(), _mm256_setzero_ps()};
        __m256 t1[8] = {acc[0][1], acc[1][1], acc[2][1], acc[3][1],
                        acc[4][1], acc[5][1], _mm256_setzero_ps(), _mm256_setzero_ps()};
        transpose8(t0);
        transpose8(t1);
#pragma GCC unroll 8
        for (int q = 0; q < 8; ++q) {
          store_row6(t0[q], c + q * ldc, s);
          store_row6(t1[q], c + (8 + q) * ldc, s);
        }
        return;
      }
    }
    // Unrolled, so that the accumulators stay registers: a loop over them
    // with a variable index keeps them on the stack, stored at every step
    // of the depth loop.
    alignas(64) float tmp[Mr * kNr];
#pragma GCC unroll 6
    for (int64_t r = 0; r < Mr; ++r) {
      Vec::storeu(tmp + r * kNr, acc[r][0]);
      Vec::storeu(tmp + r * kNr + Vec::kLanes, acc[r][1]);
    }
    for (int64_t j = 0; j < nr; ++j) {
      float* out = c + j * ldc;
      for (int64_t r = 0; r < Mr; ++r) out[r] = combine1(tmp[r * kNr + j], out[r], s);
    }
  }

  // Row q of an 8 x 8 transposed half-block into C: 6 floats, as 4 + 2.
  static void store_row6(__m256 row, float* out, const Store& s) {
    __m128 lo = _mm256_castps256_ps128(row), hi = _mm256_extractf128_ps(row, 1);
    if (s.alpha != 1.0f) {
      const __m128 alpha = _mm_set1_ps(s.alpha);
      lo = _mm_mul_ps(lo, alpha);
      hi = _mm_mul_ps(hi, alpha);
    }
    if (!s.first || s.beta != 0.0f) {
      // Later depth blocks add to C; the first scales it by beta.
      const __m128 f = _mm_set1_ps(s.first ? s.beta : 1.0f);
      const __m128 hi_old = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(out + 4)));
      lo = _mm_add_ps(lo, _mm_mul_ps(f, _mm_loadu_ps(out)));
      hi = _mm_add_ps(hi, _mm_mul_ps(f, hi_old));
    }
    _mm_storeu_ps(out, lo);
    _mm_store_sd(reinterpret_cast<double*>(out + 4), _mm_castps_pd(hi));
  }

  static void transposed_tile(const GemmArgs<float>& g, const float* a, const float* b, float* c,
                              int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
    const int64_t blocks = (g.k + kDirectDepth - 1) / kDirectDepth;
    const int64_t depth = (g.k + blocks - 1) / blocks;
    float* panel = gemm_scratch(1, static_cast<size_t>(depth * kNr));
    const GemmOperand<float> a_cols{a, g.a.ld, true};  // rows of A as columns of Aᵀ
    const int64_t ldw = g.b.ld;
    for (int64_t ir = 0; ir < rows; ir += kNr) {
      const int64_t nr = min64(kNr, rows - ir);
      float* ct = c + (r0 + ir) * g.ldc + c0;
      for (int64_t p0 = 0; p0 < g.k; p0 += depth) {
        const int64_t kc = min64(depth, g.k - p0);
        pack_b(a_cols, a, p0, kc, r0 + ir, nr, panel);
        const Store s{g.alpha, g.beta, p0 == 0};
        const float* w = b + c0 * ldw + p0;
        int64_t j = 0;
        for (; j + kMr <= cols; j += kMr)
          transposed_block<kMr>(w + j * ldw, ldw, panel, kc, ct + j, g.ldc, nr, s);
        const float* wr = w + j * ldw;
        switch (cols - j) {
          case 5: transposed_block<5>(wr, ldw, panel, kc, ct + j, g.ldc, nr, s); break;
          case 4: transposed_block<4>(wr, ldw, panel, kc, ct + j, g.ldc, nr, s); break;
          case 3: transposed_block<3>(wr, ldw, panel, kc, ct + j, g.ldc, nr, s); break;
          case 2: transposed_block<2>(wr, ldw, panel, kc, ct + j, g.ldc, nr, s); break;
          case 1: transposed_block<1>(wr, ldw, panel, kc, ct + j, g.ldc, nr, s); break;
          default: break;
        }
      }
      epilogue(g, ct, nr, cols, g.bias ? g.bias + c0 : nullptr);
    }
  }

  // Whether the direct kernel takes a tile: its B panel must stay in L1 (32
  // KiB; a transposed B is cut into panels that do, at any depth) and the
  // tile's rows of A in L2 (256 KiB), as A is read again for every panel.
  // Within those bounds, with B stored row-major, it beat the packed kernel
  // at every shape measured from 4 rows on, from 8 x 32 x 32 (2.9x) and
  // 4 x 256 x 256 (2.7x) to 512 x 128 x 128 (1.1x); at AVX-512 a 32 KiB
  // panel (depth 256) took 16 x 256 x 256 from 26.7 to 18.1 us against a
  // 16 KiB one. Below 4 rows its few accumulators wait on each other's FMAs
  // (1 x 256 x 256 at AVX2: 4.3 us against Eigen's 2.4). With B stored
  // transposed it pays for its panel transposes only from 8 rows (below, the
  // dot kernel, which reads each weight row once, wins: 2.7 against 8.3 us
  // at 1 x 256 x 256), up to 32 (above, the packed kernel is as fast or
  // faster) and from one panel's width (a classifier's 16 x 10 x 256: 1.3 us
  // in the dot kernel against 3.7 at AVX2 and 4.9 at AVX-512, most of the
  // panel being padding). Deeper than one panel, at 16 x 256 x 784 (a
  // linear's first layer at batch 16, on one core), it took 75 us against
  // the dot kernel's 125 and the packed one's 88, at either level. Measured
  // with `linear_bench --benchmark_filter=SmallGemm` at both levels
  // (docs/PERFORMANCE.md).
  // Whether transposed_tile takes a tile: x @ Wᵀ with up to 32 rows, at
  // most a quarter of its panels' columns padding (12 to 16 or 24 to 32
  // rows at 16 per panel), and a block of columns. At 16 rows it beat the
  // direct kernel (which transposes the weight) at every shape measured:
  // 16 x 256 x 784 61 against 75 us on one core, 16 x 256 x 256 20.4 against
  // 22.6, and the dot kernel at 16 x 10 x 256 (1.0 against 1.3); at 8 rows,
  // half its panel padding, it lost (19.5 against 15.2 at 8 x 256 x 256).
  static bool prefer_transposed(const GemmArgs<float>& g, int64_t rows, int64_t cols) {
    const int64_t padded = (rows + kNr - 1) / kNr * kNr;
    return !g.a.trans && g.b.trans && rows <= 32 && 4 * rows >= 3 * padded && cols >= kMr &&
           g.k >= 8;
  }

  static bool prefer_direct(const GemmArgs<float>& g, int64_t rows, int64_t cols) {
    if (g.a.trans || rows < 4 || rows * g.k > 65536) return false;
    if (!g.b.trans) return g.k <= kDirectDepth;
    return rows >= 8 && rows <= 32 && cols >= kNr;
  }
};

}  // namespace
}  // namespace samba::ops::detail
