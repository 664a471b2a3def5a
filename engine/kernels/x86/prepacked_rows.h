// Rows of A against a B packed at load (a linear's weight in an inference
// PEF), included by a level's kernel file after packed_sgemm.h and compiled
// with its flags (the same rules hold: intrinsics and plain loops only).
//
// With B already in kNr-wide panels, nothing needs packing on a call: a
// block of up to Mr rows keeps its sums in registers over the whole depth
// (every depth block of the panel in turn), broadcasts A straight from its
// rows and writes C once. The packed kernel would pack A, all of it in
// every tile of a product split along N, and add each depth block's sums
// to C; at 16 rows its 6-row blocks would also leave a third of the last
// block empty. The sums come in another order than the packed kernel's (one
// chain of FMAs over the whole depth, not one per depth block added up), so
// results may differ from it in the last bits.
#pragma once

#include <cstdint>

#include "engine/kernels/x86/packed_sgemm.h"

namespace samba::ops::detail {
namespace {

template <class Vec, int64_t kKc>
struct PrepackedRows {
  using P = PackedSgemm<Vec>;
  using V = typename Vec::V;
  static constexpr int64_t kNr = P::kNr;
  // Rows of the register block: 2 * Mr accumulators, two B vectors and a
  // broadcast A value. At 16 lanes (32 registers) 8 rows hold 16 FMAs per
  // depth step, enough in flight to cover their latency, and cut 16 rows
  // into two equal blocks; at 8 lanes (16 registers) 6 is the most that fits.
  static constexpr int64_t kMr = Vec::kLanes == 16 ? 8 : 6;

  // The panel the tile reads next, fetched into L2 while the blocks of the
  // current one run, a slice per block: the first block to read a panel
  // otherwise waits on L3 for every line of it, as the hardware prefetcher
  // runs only a few lines ahead of a stream read at the FMA rate.
  struct NextPanel {
    int64_t col = -1;    // the panel's first column; -1: none
    int64_t blocks = 1;  // blocks the current panel is read by
    int64_t block = 0;   // the block running now
  };

  // C[Mr x nr] = alpha * A[Mr x k] * (panel of B from column `col`) + beta * C,
  // a at the block's first row, c at its top-left element; the block's
  // slice of the `next` panel fetched on the way.
  template <int64_t Mr>
  static void block(const GemmArgs<float>& g, const float* a, float* c, int64_t col, int64_t nr,
                    const NextPanel& next) {
    V acc[Mr][2];
#pragma GCC unroll 8
    for (int64_t r = 0; r < Mr; ++r) acc[r][0] = acc[r][1] = Vec::zero();
    const int64_t k = g.k, lda = g.a.ld, kc_max = P::template depth_block<kKc>(k);
    const int64_t n_pad = (g.n + kNr - 1) / kNr * kNr;
    constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(float));
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = P::min64(kc_max, k - pc);
      const float* pb = g.b_packed + pc * n_pad + col * kc;
      const float* ap = a + pc;
      // This block's slice of the next panel's part at this depth block
      // (kc * kNr floats, contiguous): one line every `every` depth steps.
      const float* fetch = nullptr;
      int64_t lines = 0, every = kc + 1;
      if (next.col >= 0) {
        const int64_t total = kc * kNr / kLine;
        const int64_t first = total * next.block / next.blocks;
        lines = total * (next.block + 1) / next.blocks - first;
        fetch = g.b_packed + pc * n_pad + next.col * kc + first * kLine;
        if (lines > 0) every = kc / lines > 0 ? kc / lines : 1;
      }
      int64_t countdown = every;
#pragma GCC unroll 2
      for (int64_t p = 0; p < kc; ++p) {
        if (--countdown == 0 && lines > 0) {
          __builtin_prefetch(fetch, 0, 2);
          fetch += kLine;
          --lines;
          countdown = every;
        }
        const V b0 = Vec::load(pb + p * kNr), b1 = Vec::load(pb + p * kNr + Vec::kLanes);
#pragma GCC unroll 8
        for (int64_t r = 0; r < Mr; ++r) {
          const V av = Vec::broadcast(ap + r * lda + p);
          acc[r][0] = Vec::fmadd(av, b0, acc[r][0]);
          acc[r][1] = Vec::fmadd(av, b1, acc[r][1]);
        }
      }
      for (; lines > 0; --lines, fetch += kLine) __builtin_prefetch(fetch, 0, 2);
    }
    P::template store_block<Mr>(acc, c, g.ldc, Mr, nr, {g.alpha, g.beta, true});
  }

  // Every row of the tile against one panel: blocks of kMr rows, then one
  // block of the rest; the blocks fetch panel `next_col` (-1: none).
  static void panel(const GemmArgs<float>& g, const float* a, float* c, int64_t rows, int64_t col,
                    int64_t nr, int64_t next_col) {
    NextPanel next{next_col, (rows + kMr - 1) / kMr, 0};
    int64_t i = 0;
    for (; i + kMr <= rows; i += kMr, ++next.block)
      block<kMr>(g, a + i * g.a.ld, c + i * g.ldc, col, nr, next);
    const float* ar = a + i * g.a.ld;
    float* cr = c + i * g.ldc;
    static_assert(kMr <= 8, "the remainder blocks below are 1 to 7 rows");
    switch (rows - i) {
      case 7: return block<7>(g, ar, cr, col, nr, next);
      case 6: return block<6>(g, ar, cr, col, nr, next);
      case 5: return block<5>(g, ar, cr, col, nr, next);
      case 4: return block<4>(g, ar, cr, col, nr, next);
      case 3: return block<3>(g, ar, cr, col, nr, next);
      case 2: return block<2>(g, ar, cr, col, nr, next);
      case 1: return block<1>(g, ar, cr, col, nr, next);
      default: return;
    }
  }

  // A's rows go through in runs of at most kRunBytes, so that a run stays in
  // L2 while every panel of the tile passes against it (each panel in L2
  // while the run's blocks read it); with all the tile's rows at once, A
  // came from memory again for every panel. At 2 threads (AVX512_BF16 Xeon,
  // `kernel_peers_bench`, runs of 256 KiB, 512 KiB and 1 MiB alternately five
  // times, medians), 1024 x 2048 -> 2048 ran at 279, 300 and 318 GFLOP/s; the
  // ResFFN benchmark's other linears within 4% of each other.
  static constexpr int64_t kRunBytes = int64_t{1} << 20;

  // The GEMM layer cuts tiles at multiples of kNr columns, where the
  // packed panels start; a tile that does not start on one packs B itself.
  static void tile(const GemmArgs<float>& g, const float* a, const float* b, float* c, int64_t r0,
                   int64_t rows, int64_t c0, int64_t cols) {
    if (c0 % kNr != 0) return P::template tile<kKc, 144, 2048>(g, a, b, c, r0, rows, c0, cols);
    const int64_t run_rows = kRunBytes / static_cast<int64_t>(sizeof(float)) / g.k / kMr * kMr;
    const int64_t run = P::min64(rows, run_rows > kMr ? run_rows : kMr);
    for (int64_t i0 = 0; i0 < rows; i0 += run) {
      const int64_t n_rows = P::min64(run, rows - i0);
      const float* at = a + (r0 + i0) * g.a.ld;
      for (int64_t jr = 0; jr < cols; jr += kNr) {
        const int64_t nr = P::min64(kNr, cols - jr);
        float* cp = c + (r0 + i0) * g.ldc + c0 + jr;
        // The next panel of this run, or the tile's first for the next run.
        const int64_t next = jr + kNr < cols ? c0 + jr + kNr : i0 + run < rows ? c0 : -1;
        panel(g, at, cp, n_rows, c0 + jr, nr, next);
        // The panel's block of C is final and still in cache.
        P::epilogue(g, cp, n_rows, nr, g.bias ? g.bias + c0 + jr : nullptr);
      }
      // Whole rows (the GEMM layer cuts such tiles when g.rows is set): the
      // run's rows are final, and the last panels' part of them in cache.
      if (g.rows) (*g.rows)(r0 + i0, n_rows);
    }
  }

  // A row-major A, from one full panel of columns, at any number of rows.
  // Up to 32 rows it beat, on one core at AVX-512 (Zen 4), the kernels that
  // read the weight in place: 16 x 256 x 784 55.1 against 58.5 us (at the
  // FMA peak), 24 x 256 x 256 27.2 against 38.4, 4 x 256 x 256 4.6 against
  // 8.5, 1 x 256 x 784 7.7 against 9.3; with B stored (k, n), 3 x 256 x 256
  // 3.5 against 14.3, and equal (0.97x to 1.05x) at 1 x 256 x 256, 4 x 256 x
  // 256, 8 x 32 x 32 and 32 x 128 x 128. Beyond, against the packed kernel
  // on the ResFFN benchmark's linears (2 threads, AVX512_BF16 Xeon, the two
  // alternately six times, medians): 256 x 784 -> 1024 327 against 311
  // GFLOP/s, 256 x 1024 -> 1024 321 against 298, 1024 x 2048 -> 2048 317
  // against 302, 1024 x 784 -> 2048 319 against 316.
  static bool prefer(const GemmArgs<float>& g, int64_t rows, int64_t cols) {
    return !g.a.trans && rows >= 1 && cols >= kNr && g.k >= 8;
  }
};

}  // namespace
}  // namespace samba::ops::detail
