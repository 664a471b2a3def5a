#include "engine/kernels/gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <unsupported/Eigen/SpecialFunctions>
#include <vector>

#include "engine/core/dispatch.h"
#include "engine/core/parallel.h"
#include "engine/core/scratch.h"
#include "engine/kernels/sgemm_kernels.h"

namespace samba::ops {

std::span<const EpilogueActivation> epilogue_activations() {
  static constexpr EpilogueActivation kAll[] = {
      {Activation::None, "none", "", ""},
      {Activation::Relu, "relu", "relu", ""},
      {Activation::Tanh, "tanh", "tanh", ""},
      {Activation::Sigmoid, "sigmoid", "sigmoid", ""},
      {Activation::GeluErf, "gelu_erf", "gelu", "none"},
      {Activation::GeluTanh, "gelu_tanh", "gelu", "tanh"},
  };
  return kAll;
}

std::string epilogue_activation_names() {
  std::vector<std::string_view> names;
  for (const EpilogueActivation& e : epilogue_activations()) names.push_back(e.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string_view activation_name(Activation a) {
  for (const EpilogueActivation& e : epilogue_activations())
    if (e.act == a) return e.name;
  return "?";
}

std::optional<Activation> activation_from_name(std::string_view name) {
  for (const EpilogueActivation& e : epilogue_activations())
    if (e.name == name) return e.act;
  if (name == "gelu") return Activation::GeluErf;  // PyTorch's default approximation
  return std::nullopt;
}

namespace {
std::atomic<GemmKernel> g_kernel{GemmKernel::Auto};
}  // namespace

void set_gemm_kernel(GemmKernel k) { g_kernel.store(k, std::memory_order_relaxed); }
GemmKernel gemm_kernel() { return g_kernel.load(std::memory_order_relaxed); }

namespace detail {

const SgemmKernels& sgemm_kernels_for(IsaLevel level) {
  static const SgemmKernels generic{};
#if defined(SAMBA_ISA_AVX512_BF16_BUILT)
  if (level >= IsaLevel::Avx512Bf16) return sgemm_kernels_avx512_bf16();
#endif
#if defined(SAMBA_ISA_AVX512_BUILT)
  if (level >= IsaLevel::Avx512) return sgemm_kernels_avx512();
#endif
#if defined(SAMBA_ISA_AVX2_BUILT)
  if (level >= IsaLevel::Avx2) return sgemm_kernels_avx2();
#endif
  return generic;
}

const SgemmKernels& sgemm_kernels() {
  static const SgemmKernels& active = sgemm_kernels_for(active_isa());
  return active;
}

namespace {
constexpr std::align_val_t kPanelAlign{64};
// The thread's packing buffers are a cache kept between calls (scratch.h).
struct AlignedDelete {
  void operator()(float* p) const {
    ::operator delete(p, kPanelAlign);
    note_cached_blocks(-1);
  }
};
}  // namespace

float* gemm_scratch(int which, size_t floats) {
  // Tasks never nest inside a tile, so a thread uses them for one tile at a time.
  thread_local std::unique_ptr<float[], AlignedDelete> buf[3];
  thread_local size_t size[3] = {0, 0, 0};
  floats = std::max<size_t>(floats, 16);
  if (size[which] < floats) {
    // The old buffer stays until the new one exists: a failed growth keeps it.
    void* p = ::operator new(floats * sizeof(float), kPanelAlign, std::nothrow);
    SAMBA_CHECK(p, Status::OutOfMemory, "GEMM: cannot allocate {} bytes of packing buffer",
                floats * sizeof(float));
    note_cached_blocks(1);
    buf[which].reset(static_cast<float*>(p));
    size[which] = floats;
  }
  return buf[which].get();
}

}  // namespace detail

namespace {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
template <typename M>
using ConstMap = Eigen::Map<const M, Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename T>
using RowMap = Eigen::Map<RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// Below this many flops a product runs on the calling thread; above it each
// task gets at least this much (about 5 us on one core: a task handed to a
// waiting worker costs well under a microsecond).
constexpr double kMinTaskFlops = 0.5e6;
// Tile rows are rounded to this so tiles split no register block (the packed
// kernels' are 6 rows, Eigen's float blocks 24); columns to the active packed
// kernel's block width (16 or 32; 16 covers Eigen's 4).
constexpr int64_t kTileRowAlign = 24;
// Outputs of at most this many rows are split along N only.
constexpr int64_t kShortRows = 32;
int64_t tile_col_align() { return std::max<int64_t>(16, detail::sgemm_kernels().col_block); }

// The kernel that computes a float tile of `rows` x `cols`.
enum class TileKernel { PrepackedRows, Transposed, Direct, Dot, Packed, Eigen };
// Whether the level's kernel for few rows against a B packed at load takes
// the tile (when B is packed: g.b_packed).
bool takes_prepacked_rows(const GemmArgs<float>& g, int64_t rows, int64_t cols) {
  const detail::SgemmKernels& kern = detail::sgemm_kernels();
  return kern.prepacked_rows_tile && kern.prefer_prepacked_rows(g, rows, cols);
}
// An output narrower than the packed kernel's panel (a classifier head's 10
// columns) at any number of rows, as x @ Wᵀ: the packed kernel does not
// take it, and the dot kernel's register blocks read x and W where they lie
// (256 x 512 -> 10 took 2.5x longer in Eigen's kernel).
bool narrow_dot(const GemmArgs<float>& g, int64_t cols) {
  return cols < detail::sgemm_kernels().col_block && !g.a.trans && g.b.trans && g.k >= 8;
}
TileKernel tile_kernel(const GemmArgs<float>& g, int64_t rows, int64_t cols) {
  if (g.k <= 0 || gemm_kernel() != GemmKernel::Auto) return TileKernel::Eigen;
  const detail::SgemmKernels& kern = detail::sgemm_kernels();
  if (g.b_packed && takes_prepacked_rows(g, rows, cols)) return TileKernel::PrepackedRows;
  if (kern.transposed_tile && kern.prefer_transposed(g, rows, cols)) return TileKernel::Transposed;
  if (kern.direct_tile && kern.prefer_direct(g, rows, cols)) return TileKernel::Direct;
  if (kern.dot_tile && (kern.prefer_dot(g, rows) || narrow_dot(g, cols))) return TileKernel::Dot;
  if (kern.packed_tile && kern.prefer_packed(rows, cols, g.k)) return TileKernel::Packed;
  return TileKernel::Eigen;
}

// Rows [r0, r0 + rows) x cols [c0, c0 + cols) of one product, then the epilogue.
template <typename T>
void gemm_tile(const GemmArgs<T>& g, const T* a, const T* b, T* c, int64_t r0, int64_t rows,
               int64_t c0, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  if constexpr (std::is_same_v<T, float>) {
    const detail::SgemmKernels& kern = detail::sgemm_kernels();
    switch (tile_kernel(g, rows, cols)) {
      case TileKernel::PrepackedRows:
        return kern.prepacked_rows_tile(g, a, b, c, r0, rows, c0, cols);
      case TileKernel::Transposed:
        return kern.transposed_tile(g, a, b, c, r0, rows, c0, cols);
      case TileKernel::Direct:
        return kern.direct_tile(g, a, b, c, r0, rows, c0, cols);
      case TileKernel::Dot:
        kern.dot_tile(g, a, b, c, r0, rows, c0, cols);
        return finish_block(g, c + r0 * g.ldc + c0, rows, cols, g.bias ? g.bias + c0 : nullptr);
      case TileKernel::Packed:
        return kern.packed_tile(g, a, b, c, r0, rows, c0, cols);
      case TileKernel::Eigen:
        break;
    }
  }
  T* ct = c + r0 * g.ldc + c0;
  RowMap<T> cm(ct, rows, cols, Eigen::OuterStride<>(g.ldc));
  if (g.k == 0) {
    if (g.beta == T(0))
      cm.setZero();
    else if (g.beta != T(1))
      cm *= g.beta;
  } else {
    auto product = [&](const auto& am, const auto& bm) {
      if (g.beta == T(0)) {
        cm.noalias() = g.alpha * am * bm;
      } else {
        if (g.beta != T(1)) cm *= g.beta;
        cm.noalias() += g.alpha * am * bm;
      }
    };
    // A transposed operand is the same memory read as a column-major matrix.
    const Eigen::OuterStride<> sa(g.a.ld), sb(g.b.ld);
    const T* at = g.a.trans ? a + r0 : a + r0 * g.a.ld;
    const T* bt = g.b.trans ? b + c0 * g.b.ld : b + c0;
    if (!g.a.trans && !g.b.trans)
      product(ConstMap<RowMajor<T>>(at, rows, g.k, sa), ConstMap<RowMajor<T>>(bt, g.k, cols, sb));
    else if (!g.a.trans)
      product(ConstMap<RowMajor<T>>(at, rows, g.k, sa), ConstMap<ColMajor<T>>(bt, g.k, cols, sb));
    else if (!g.b.trans)
      product(ConstMap<ColMajor<T>>(at, rows, g.k, sa), ConstMap<RowMajor<T>>(bt, g.k, cols, sb));
    else
      product(ConstMap<ColMajor<T>>(at, rows, g.k, sa), ConstMap<ColMajor<T>>(bt, g.k, cols, sb));
  }
  finish_block(g, ct, rows, cols, g.bias ? g.bias + c0 : nullptr);
}

// The same for a bf16 product: the level's bf16 kernel, or blocks widened
// for Eigen (the generic level, or Eigen forced).
template <typename TC>
void gemm_tile(const Bf16GemmArgs<TC>& g, const uint16_t* a, const uint16_t* b, TC* c, int64_t r0,
               int64_t rows, int64_t c0, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  const detail::SgemmKernels& kern = detail::sgemm_kernels();
  detail::Bf16TileFn<TC> tile;
  if constexpr (std::is_same_v<TC, float>)
    tile = kern.bf16_tile_f32;
  else
    tile = kern.bf16_tile_bf16;
  if (tile && g.k > 0 && gemm_kernel() == GemmKernel::Auto)
    return tile(g, a, b, c, r0, rows, c0, cols);
  detail::bf16_tile_widened(g, a, b, c, r0, rows, c0, cols);
}

// How a batch of products is cut into tasks: each product into a grid of
// tm x tn tiles of (at most) bm x bn. Tasks are few and big: K is never split
// and, when the work allows, there are just enough tiles to keep every thread
// busy with little imbalance.
struct TilePlan {
  int64_t tm = 1, tn = 1, bm = 0, bn = 0;
  int64_t tasks = 1;
};

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// `panels`: a short output whose tiles read B packed at load (the kernel
// for few rows), which need not be cut into wide tiles (below).
// `whole_rows`: tiles span every column (a product that finishes rows for
// GemmArgs::rows), cut along M only, in multiples of `row_align`.
TilePlan plan_tiles(int64_t batch, int64_t m, int64_t n, int64_t k, int threads,
                    bool panels = false, bool whole_rows = false, int64_t row_align = kTileRowAlign) {
  TilePlan p;
  p.bm = m, p.bn = n, p.tasks = batch;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                       static_cast<double>(std::max<int64_t>(k, 1));
  if (threads <= 1 || flops * static_cast<double>(batch) < 2 * kMinTaskFlops) return p;
  if (panels && batch == 1 && m <= kShortRows) {
    // Nothing is packed or transposed per task, so tasks as narrow as one
    // register panel cost no more than wide ones, and the more there are,
    // the more of the product a worker that wakes late still takes (as many
    // as 4 per thread, down to a quarter of the usual least work per task).
    const int64_t align = tile_col_align();
    const int64_t most = std::min<int64_t>(
        4 * threads, std::max<int64_t>(1, static_cast<int64_t>(4 * flops / kMinTaskFlops)));
    p.bn = std::min(n, round_up((n + most - 1) / most, align));
    p.tn = (n + p.bn - 1) / p.bn;
    p.tasks = p.tn;
    return p;
  }
  // Tiles per product: the fewest that spread batch * tiles tasks evenly
  // (>= 90% of the threads' time busy), without making a tile too small.
  const int64_t max_tiles = std::max<int64_t>(1, static_cast<int64_t>(flops / kMinTaskFlops));
  int64_t tiles = 1;
  for (int64_t t = 1; t <= std::min<int64_t>(max_tiles, 4 * threads); ++t) {
    const int64_t tasks = batch * t;
    const int64_t rounds = (tasks + threads - 1) / threads;
    tiles = t;
    if (static_cast<double>(tasks) / static_cast<double>(rounds * threads) >= 0.9) break;
  }
  if (whole_rows) {
    const int64_t tm = std::max<int64_t>(1, std::min(tiles, m / row_align));
    p.bm = std::min(m, round_up((m + tm - 1) / tm, row_align));
    p.tm = (m + p.bm - 1) / p.bm;
    p.tasks = batch * p.tm;
    return p;
  }
  // A short output (a linear at small batch) is cut into as many column
  // panels, at least 64 wide, as the work allows: its tasks share only the
  // few rows of A (each transposes them: 16 x 256 x 784 in 32-wide panels
  // took 14% more time than in 128-wide ones), and they let a worker that
  // wakes late (tens of microseconds on a busy machine, as long as the
  // whole product) still take part instead of leaving it all to the caller.
  const bool short_output = batch == 1 && m <= kShortRows;
  if (short_output) tiles = std::min<int64_t>(max_tiles, 4 * threads);
  // Every task packs all of the operand it does not split, so split the
  // output along its longer side: panels along N (each task streams all of
  // A against its own slice of B) when it is at least as wide as tall, else
  // rows, so that the tasks of a tall output (the LM head's weight gradient,
  // 50257 x 768, or its input gradient, 1024 x 768 over 50257) share the
  // smaller B instead of each packing all of A. Then split the other side.
  int64_t tn = 1;
  if (m <= n) {
    for (int64_t d = tiles; d >= 1; --d)
      if (tiles % d == 0 && n / d >= 64) {
        tn = d;
        break;
      }
  }
  int64_t tm = short_output && tn > 1 ? 1 : tiles / tn;
  if (m / tm < 8) tm = std::max<int64_t>(1, m / 8);
  p.bn = std::min(n, round_up((n + tn - 1) / tn, tile_col_align()));
  p.bm = std::min(m, round_up((m + tm - 1) / tm, kTileRowAlign));
  p.tn = (n + p.bn - 1) / p.bn;
  p.tm = (m + p.bm - 1) / p.bm;
  p.tasks = batch * p.tm * p.tn;
  return p;
}

// Whether the tiles of a product of few rows all take the kernel for B
// packed at load (plan_tiles' `panels`).
bool short_output_reads_packed_b(const GemmArgs<float>& g) {
  return g.m <= kShortRows && takes_prepacked_rows(g, g.m, std::min(g.n, tile_col_align()));
}

template <class Args>
void run_batched(const Args& g, int64_t batch, const int64_t* a_off, const int64_t* b_off,
                 const int64_t* c_off) {
  if (batch <= 0 || g.m <= 0 || g.n <= 0) return;
  bool panels = false, whole_rows = false;
  int64_t row_align = kTileRowAlign;
  if constexpr (std::is_same_v<Args, GemmArgs<float>>) {
    panels = g.b_packed && g.k > 0 && gemm_kernel() == GemmKernel::Auto &&
             short_output_reads_packed_b(g);
    SAMBA_CHECK(!g.rows || batch == 1, Status::Internal, "GEMM: finished rows need a single product");
    whole_rows = g.rows != nullptr;
    // Tasks of equal rows (256 make two of 128; at 24, 144 and 112): at
    // most one register block per tile is cut short.
    if (whole_rows) row_align = 8;
  }
  const TilePlan p =
      plan_tiles(batch, g.m, g.n, g.k, current_pool().threads(), panels, whole_rows, row_align);
  auto task = [&](int64_t t) {
    const int64_t per = p.tm * p.tn;
    const int64_t i = t / per, tile = t % per;
    const int64_t r0 = (tile / p.tn) * p.bm, c0 = (tile % p.tn) * p.bn;
    const int64_t rows = std::min(p.bm, g.m - r0), cols = std::min(p.bn, g.n - c0);
    gemm_tile(g, g.a.data + (a_off ? a_off[i] : 0), g.b.data + (b_off ? b_off[i] : 0),
              g.c + (c_off ? c_off[i] : 0), r0, rows, c0, cols);
    // The kernel for B packed at load finishes rows itself, run by run.
    if constexpr (std::is_same_v<Args, GemmArgs<float>>)
      if (g.rows && rows > 0 && tile_kernel(g, rows, cols) != TileKernel::PrepackedRows)
        (*g.rows)(r0, rows);
  };
  if (p.tasks == 1) return task(0);
  // Grain: the tasks a chunk takes, so a batch of small products is grouped.
  const double task_flops = 2.0 * static_cast<double>(p.bm) * static_cast<double>(p.bn) *
                            static_cast<double>(std::max<int64_t>(g.k, 1));
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(kMinTaskFlops / task_flops));
  parallel_for(p.tasks, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) task(t);
  });
}

}  // namespace

bool gemm_packs_b(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b) {
  const detail::SgemmKernels& kern = detail::sgemm_kernels();
  if (m <= 0 || n <= 0 || k <= 0 || !kern.prepack_b) return false;
  GemmArgs<float> g;
  g.m = m, g.n = n, g.k = k;
  g.a = {nullptr, trans_a ? m : k, trans_a};
  g.b = {nullptr, trans_b ? k : n, trans_b};
  if (short_output_reads_packed_b(g)) return true;
  // Tiles of one plan have at most two heights and two widths (the last
  // row and column of tiles may be shorter).
  const TilePlan p = plan_tiles(1, m, n, k, current_pool().threads());
  for (const int64_t rows : {p.bm, m - (p.tm - 1) * p.bm})
    for (const int64_t cols : {p.bn, n - (p.tn - 1) * p.bn})
      if (tile_kernel(g, rows, cols) == TileKernel::Packed || takes_prepacked_rows(g, rows, cols))
        return true;
  return false;
}

namespace {

template <typename T, typename F>
void rows_apply(T* c, int64_t rows, int64_t cols, int64_t ldc, const T* bias, F f) {
  using Row = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;
  using ConstRow = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>;
  for (int64_t i = 0; i < rows; ++i) {
    Row r(c + i * ldc, cols);
    if (bias)
      r = f(r + ConstRow(bias, cols));
    else
      r = f(r);
  }
}

}  // namespace

template <typename T>
void apply_epilogue(T* c, int64_t rows, int64_t cols, int64_t ldc, const T* bias, Activation act) {
  if (!bias && act == Activation::None) return;
  // sqrt(2 / pi) and 1 / sqrt(2)
  constexpr T kGeluTanhScale = T(0.7978845608028654);
  constexpr T kInvSqrt2 = T(0.7071067811865476);
  switch (act) {
    case Activation::None:
      return rows_apply(c, rows, cols, ldc, bias, [](const auto& x) { return x; });
    case Activation::Relu:
      return rows_apply(c, rows, cols, ldc, bias, [](const auto& x) { return x.max(T(0)); });
    case Activation::Tanh:
      return rows_apply(c, rows, cols, ldc, bias, [](const auto& x) { return x.tanh(); });
    case Activation::Sigmoid:
      return rows_apply(c, rows, cols, ldc, bias, [](const auto& x) { return x.logistic(); });
    case Activation::GeluTanh:
      return rows_apply(c, rows, cols, ldc, bias, [&](const auto& x) {
        return T(0.5) * x * (T(1) + (kGeluTanhScale * (x + T(0.044715) * x.cube())).tanh());
      });
    case Activation::GeluErf:
      return rows_apply(c, rows, cols, ldc, bias,
                        [&](const auto& x) { return T(0.5) * x * (T(1) + (x * kInvSqrt2).erf()); });
  }
}

template <typename T>
void gemm(const GemmArgs<T>& g) {
  run_batched(g, 1, nullptr, nullptr, nullptr);
}

template <typename T>
void gemm_batched(const GemmArgs<T>& g, int64_t batch, const int64_t* a_off, const int64_t* b_off,
                  const int64_t* c_off) {
  run_batched(g, batch, a_off, b_off, c_off);
}

template <typename TC>
void gemm(const Bf16GemmArgs<TC>& g) {
  run_batched(g, 1, nullptr, nullptr, nullptr);
}

template <typename TC>
void gemm_batched(const Bf16GemmArgs<TC>& g, int64_t batch, const int64_t* a_off,
                  const int64_t* b_off, const int64_t* c_off) {
  run_batched(g, batch, a_off, b_off, c_off);
}

template void gemm<float>(const GemmArgs<float>&);
template void gemm<double>(const GemmArgs<double>&);
template void gemm_batched<float>(const GemmArgs<float>&, int64_t, const int64_t*, const int64_t*,
                                  const int64_t*);
template void gemm_batched<double>(const GemmArgs<double>&, int64_t, const int64_t*, const int64_t*,
                                   const int64_t*);
template void gemm<float>(const Bf16GemmArgs<float>&);
template void gemm<uint16_t>(const Bf16GemmArgs<uint16_t>&);
template void gemm_batched<float>(const Bf16GemmArgs<float>&, int64_t, const int64_t*,
                                  const int64_t*, const int64_t*);
template void gemm_batched<uint16_t>(const Bf16GemmArgs<uint16_t>&, int64_t, const int64_t*,
                                     const int64_t*, const int64_t*);
template void apply_epilogue<float>(float*, int64_t, int64_t, int64_t, const float*, Activation);
template void apply_epilogue<double>(double*, int64_t, int64_t, int64_t, const double*, Activation);

// ---- tensor level ------------------------------------------------------------

std::optional<MatrixLayout> matrix_layout(int64_t rows, int64_t cols, int64_t row_stride,
                                          int64_t col_stride) {
  // The stride of a size-1 dim is never used, so it does not constrain the layout.
  if ((cols <= 1 || col_stride == 1) && (rows <= 1 || row_stride >= cols))
    return MatrixLayout{rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride, false};
  if ((rows <= 1 || row_stride == 1) && (cols <= 1 || col_stride >= rows))
    return MatrixLayout{cols <= 1 ? std::max<int64_t>(rows, 1) : col_stride, true};
  return std::nullopt;
}

namespace {

// An operand's last two dims as GEMM input, plus its batch strides broadcast
// to the output's batch dims.
struct PreparedOperand {
  Tensor t;  // the tensor read (a contiguous copy when its layout needed one)
  MatrixLayout layout;
  Dims batch_strides;
};

PreparedOperand prepare(const Tensor& x, bool want_trans, const Dims& batch) {
  PreparedOperand p;
  p.t = x;
  const int64_t r = x.dim();
  auto layout = [&] {
    return matrix_layout(p.t.shape()[r - 2], p.t.shape()[r - 1], p.t.strides()[r - 2],
                         p.t.strides()[r - 1]);
  };
  std::optional<MatrixLayout> lay = layout();
  if (!lay) {
    p.t = x.contiguous();
    lay = layout();
  }
  p.layout = *lay;
  p.layout.trans = p.layout.trans != want_trans;  // (Xᵀ)ᵀ = X
  Dims shape(p.t.shape().begin(), p.t.shape().end() - 2),
      strides(p.t.strides().begin(), p.t.strides().end() - 2);
  p.batch_strides = broadcast_strides(shape, strides, batch);
  return p;
}

// True when the batch dims and the rows of a non-transposed operand are one
// evenly strided run of rows, so the batch can be folded into M.
bool rows_fold(const PreparedOperand& a, const Dims& batch, int64_t m) {
  if (a.layout.trans) return false;
  int64_t expected = a.layout.ld * m;
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    if (batch[d] == 1) continue;
    if (a.batch_strides[d] != expected) return false;
    expected *= batch[d];
  }
  return true;
}

// Element offsets of every batch entry, walking the batch dims in order.
std::vector<int64_t> batch_offsets(const Dims& batch, const Dims& strides, int64_t nb) {
  std::vector<int64_t> off(nb);
  Dims idx(batch.size(), 0);
  int64_t o = 0;
  for (int64_t i = 0; i < nb; ++i) {
    off[i] = o;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      o += strides[d];
      if (++idx[d] < batch[d]) break;
      o -= strides[d] * batch[d];
      idx[d] = 0;
    }
  }
  return off;
}

// A tensor element as the GEMM reads it: bf16 as its bits.
template <typename T>
using GemmElem = std::conditional_t<std::is_same_v<T, bf16>, uint16_t, T>;
template <typename T>
GemmElem<T>* gemm_data(const Tensor& t) {
  return reinterpret_cast<GemmElem<T>*>(t.data<T>());
}

// Operands of TIn, C (and bias) of TOut: the same float type, or bf16
// operands with a bf16 or float32 C (Bf16GemmArgs).
template <typename TIn, typename TOut>
void float_product(const Tensor& out, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                   const ProductEpilogue& ep) {
  using Args = std::conditional_t<std::is_same_v<TIn, bf16>, Bf16GemmArgs<GemmElem<TOut>>,
                                  GemmArgs<TIn>>;
  const int64_t r = out.dim();
  const int64_t m = out.shape()[r - 2], n = out.shape()[r - 1];
  const int64_t k = trans_a ? a.shape()[a.dim() - 2] : a.shape()[a.dim() - 1];
  const Dims batch(out.shape().begin(), out.shape().end() - 2);
  const int64_t nb = numel_of(batch);
  PreparedOperand pa = prepare(a, trans_a, batch), pb = prepare(b, trans_b, batch);
  Tensor bias = ep.bias.defined() ? ep.bias.contiguous() : Tensor();
  SAMBA_CHECK(!bias.defined() || (bias.dtype() == out.dtype() && bias.numel() == n),
              Status::Internal, "GEMM bias of shape {} does not match {} output columns",
              dims_str(bias.shape()), n);

  Args g;
  g.m = m, g.n = n, g.k = k;
  g.a = {gemm_data<TIn>(pa.t), pa.layout.ld, pa.layout.trans};
  g.b = {gemm_data<TIn>(pb.t), pb.layout.ld, pb.layout.trans};
  g.c = gemm_data<TOut>(out);
  g.ldc = n;
  g.alpha = static_cast<decltype(g.alpha)>(ep.alpha);
  g.beta = static_cast<decltype(g.beta)>(ep.beta);
  g.bias = bias.defined() ? gemm_data<TOut>(bias) : nullptr;
  g.act = ep.act;
  if constexpr (std::is_same_v<TIn, float> && std::is_same_v<TOut, float>) {
    if (ep.tail) {
      // A tail that is a relu is the epilogue's own relu (the same max(0, x)
      // on each block while it is in cache), without the tail's passes.
      if (ep.tail->in_registers == Activation::Relu && g.act == Activation::None)
        g.act = Activation::Relu;
      else
        g.tail = ep.tail;
      ep.tail->applied = true;
    }
  }
  const bool b_shared = std::all_of(pb.batch_strides.begin(), pb.batch_strides.end(),
                                    [](int64_t s) { return s == 0; });
  if constexpr (std::is_same_v<Args, GemmArgs<float>>) {
    const PackedOperand* pk = ep.packed_b;
    if (pk && b_shared && pk->source == g.b.data && pk->k == k && pk->n == n &&
        pk->layout.ld == g.b.ld && pk->layout.trans == g.b.trans)
      g.b_packed = pk->data;
  }
  if (nb == 1 || (b_shared && rows_fold(pa, batch, m))) {
    g.m = nb * m;  // (batch..., m) rows of A against one B: a single product
    if constexpr (std::is_same_v<Args, GemmArgs<float>>) {
      // Tiles of whole rows let each task finish its rows; every task then
      // reads all of B, which costs nothing extra only when B is packed
      // already (a task packing B would pack all of it). A short output
      // keeps its column panels: its rows ran 1.7 times slower
      // (ResFFN b16 step 0.104 against 0.062 ms, the row-wise kernels in
      // the tasks taking 3.5 times as long on 2 threads as on one).
      if (ep.rows && g.b_packed && g.m > kShortRows && ep.rows->rows == g.m && ep.rows->len == n) {
        g.rows = ep.rows;
        ep.rows->applied = true;
      }
    }
    return gemm(g);
  }
  std::vector<int64_t> ao = batch_offsets(batch, pa.batch_strides, nb);
  std::vector<int64_t> bo = batch_offsets(batch, pb.batch_strides, nb);
  std::vector<int64_t> co(nb);
  for (int64_t i = 0; i < nb; ++i) co[i] = i * m * n;
  gemm_batched(g, nb, ao.data(), bo.data(), co.data());
}

// Integer products wrap like PyTorch's; the sum is carried in int64.
template <typename T>
void integer_product(const Tensor& out, const Tensor& a, bool trans_a, const Tensor& b,
                     bool trans_b, const ProductEpilogue& ep) {
  const int64_t r = out.dim();
  const int64_t m = out.shape()[r - 2], n = out.shape()[r - 1];
  const int64_t k = trans_a ? a.shape()[a.dim() - 2] : a.shape()[a.dim() - 1];
  const Dims batch(out.shape().begin(), out.shape().end() - 2);
  const int64_t nb = numel_of(batch);
  auto batch_part = [&](const Tensor& x) {
    return broadcast_strides(Dims(x.shape().begin(), x.shape().end() - 2),
                             Dims(x.strides().begin(), x.strides().end() - 2), batch);
  };
  const std::vector<int64_t> ao = batch_offsets(batch, batch_part(a), nb);
  const std::vector<int64_t> bo = batch_offsets(batch, batch_part(b), nb);
  // Element strides of op(a) (m x k) and op(b) (k x n).
  const int64_t ar = a.strides()[a.dim() - 2], ac = a.strides()[a.dim() - 1];
  const int64_t br = b.strides()[b.dim() - 2], bc = b.strides()[b.dim() - 1];
  const int64_t sai = trans_a ? ac : ar, sap = trans_a ? ar : ac;
  const int64_t sbp = trans_b ? bc : br, sbj = trans_b ? br : bc;
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* pc = out.data<T>();
  Tensor bias = ep.bias.defined() ? ep.bias.contiguous() : Tensor();
  const T* pbias = bias.defined() ? bias.data<T>() : nullptr;
  const auto alpha = static_cast<int64_t>(ep.alpha), beta = static_cast<int64_t>(ep.beta);
  const int64_t grain = std::max<int64_t>(1, kMinGrain / std::max<int64_t>(1, n * k));
  parallel_for(nb * m, grain, [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> acc(n);
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t bi = row / m, i = row % m;
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t p = 0; p < k; ++p) {
        const int64_t av = static_cast<int64_t>(pa[ao[bi] + i * sai + p * sap]);
        const T* brow = pb + bo[bi] + p * sbp;
        for (int64_t j = 0; j < n; ++j) acc[j] += av * static_cast<int64_t>(brow[j * sbj]);
      }
      T* crow = pc + row * n;
      for (int64_t j = 0; j < n; ++j) {
        int64_t v = alpha * acc[j];
        if (beta != 0) v += beta * static_cast<int64_t>(crow[j]);
        if (pbias) v += static_cast<int64_t>(pbias[j]);
        crow[j] = static_cast<T>(v);
      }
    }
  });
}

}  // namespace

void batched_product(const Tensor& out, const Tensor& a, bool trans_a, const Tensor& b,
                     bool trans_b, const ProductEpilogue& ep) {
  const DType dt = out.dtype();
  if (out.numel() == 0) return;
  const bool bf16_sums = dt == DType::Float32 && a.dtype() == DType::BFloat16 &&
                         b.dtype() == DType::BFloat16;
  SAMBA_CHECK(out.is_contiguous() && a.dim() >= 2 && b.dim() >= 2 && out.dim() >= 2 &&
                  ((a.dtype() == dt && b.dtype() == dt) || bf16_sums),
              Status::Internal, "batched_product: bad operands {} {} {} {} -> {} {}",
              dtype_name(a.dtype()), dims_str(a.shape()), dtype_name(b.dtype()),
              dims_str(b.shape()), dtype_name(dt), dims_str(out.shape()));
  if (bf16_sums) return float_product<bf16, float>(out, a, trans_a, b, trans_b, ep);
  switch (dt) {
    case DType::Float32:
      return float_product<float, float>(out, a, trans_a, b, trans_b, ep);
    case DType::Float64:
      return float_product<double, double>(out, a, trans_a, b, trans_b, ep);
    case DType::BFloat16:
      return float_product<bf16, bf16>(out, a, trans_a, b, trans_b, ep);
    case DType::Float16: {
      // fp32 accumulation: compute in float and round once at the end.
      Tensor out32 =
          ep.beta != 0.0 ? out.to(DType::Float32) : Tensor::empty(out.shape(), DType::Float32);
      ProductEpilogue ep32 = ep;
      ep32.tail = nullptr;  // its blocks are not the output's
      if (ep.bias.defined()) ep32.bias = ep.bias.to(DType::Float32);
      float_product<float, float>(out32, a.to(DType::Float32), trans_a, b.to(DType::Float32),
                                  trans_b, ep32);
      out.copy_from(out32);
      return;
    }
    case DType::Bool:
      fail(Status::DTypeMismatch, "matrix products do not support dtype bool");
    default:
      SAMBA_CHECK(ep.act == Activation::None, Status::DTypeMismatch,
                  "activation '{}' needs a floating dtype, got {}", activation_name(ep.act),
                  dtype_name(dt));
      SAMBA_DISPATCH_INTEGRAL(dt, "matrix product",
                              [&] { integer_product<scalar_t>(out, a, trans_a, b, trans_b, ep); });
  }
}

}  // namespace samba::ops
