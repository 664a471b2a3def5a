#include "engine/kernels/conv_direct.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "engine/core/parallel.h"
#include "engine/core/scratch.h"
#include "engine/kernels/max_pool_2x2.h"

namespace samba::ops {

namespace detail {

const ConvDirectKernels* conv_direct_kernels() {
  static const ConvDirectKernels* const active = []() -> const ConvDirectKernels* {
    [[maybe_unused]] const IsaLevel level = active_isa();
#if defined(SAMBA_ISA_AVX512_BUILT)
    if (level >= IsaLevel::Avx512) return &conv_direct_kernels_avx512();
#endif
#if defined(SAMBA_ISA_AVX2_BUILT)
    if (level >= IsaLevel::Avx2) return &conv_direct_kernels_avx2();
#endif
    return nullptr;
  }();
  return active;
}

}  // namespace detail

namespace {

using detail::ConvDirectKernels;
using detail::DirectConvBlock;
using detail::DirectConvImage;

// About 10 us of work on one core: the least worth a task.
constexpr int64_t kTaskFlops = int64_t{1} << 18;
// The padded image stays in L2 while every output channel block reads it.
constexpr int64_t kMaxPaddedFloats = int64_t{1} << 16;
// So do the staged output blocks of a task.
constexpr int64_t kMaxStagedFloats = int64_t{1} << 16;
// A channel-lanes channel block of an image, staged pixel-major, stays in L1.
constexpr int64_t kMaxLanesStage = int64_t{1} << 13;
// The images of a weight-gradient run, copied, with their gradients.
constexpr int64_t kMaxRunFloats = int64_t{1} << 16;
// Beyond this many multiply-adds per output pixel the packed GEMM's longer
// inner products win over the direct kernel's short tap loops.
constexpr int64_t kMaxReduction = 1152;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A direct convolution with unit stride: `batch` images of `in_channels`
// planes padded by (pad_h, pad_w) into `out_channels` planes; the input
// copied as padded planes or, with `column_copies`, as one copy of the
// padded plane per kernel column cut to the output width (conv_direct.h).
struct DirectProblem {
  int64_t batch = 0, in_channels = 0, in_h = 0, in_w = 0, pad_h = 0, pad_w = 0;
  int64_t kernel_h = 0, kernel_w = 0, out_channels = 0, out_h = 0, out_w = 0;
  bool column_copies = false;

  bool operator==(const DirectProblem&) const = default;
  int64_t padded_h() const { return in_h + 2 * pad_h; }
  // Floats between rows of the copy, and between output rows as numbered.
  int64_t pitch() const { return column_copies ? out_w : in_w + 2 * pad_w; }
  int64_t column_step() const { return column_copies ? padded_h() * out_w : 1; }
  int64_t channel_step() const { return padded_h() * pitch() * (column_copies ? kernel_w : 1); }
  int64_t image_floats() const { return in_channels * channel_step(); }
  int64_t taps() const { return kernel_h * kernel_w; }
};

// A layout and register block, with its estimated cycles per image.
struct DirectPlan {
  DirectProblem p;
  int block = 0;
  double cycles = 0;
};

// Cycles to copy `rows` rows of `len` floats, `lanes` a vector.
double row_cycles(int64_t rows, int64_t len, int64_t lanes) {
  return static_cast<double>(rows * (1 + ceil_div(len, lanes)));
}

// The (output pixel, kernel position) products that channel-lanes blocks of
// `block_pixels` pixels compute over the image, padded ones included where
// the kernel computes them: as the kernel (lanes_image in
// x86/conv_direct_kernel.h) runs a block only at the kernel rows that reach
// the input for its output rows, and, for a block within one output row,
// leaves out a first or last pixel whose tap falls on the padding columns.
int64_t lanes_products(const DirectProblem& p, int64_t block_pixels) {
  const int64_t pixels = p.out_h * p.out_w;
  const int64_t rows = p.column_copies ? 1 : p.out_h, run = p.column_copies ? pixels : p.out_w;
  int64_t products = 0;
  for (int64_t q0 = 0; q0 < run; q0 += block_pixels) {
    const int64_t q = std::min(q0, run - block_pixels);
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t oh0 = p.column_copies ? q / p.out_w : row;
      const int64_t oh1 = p.column_copies ? (q + block_pixels - 1) / p.out_w : row;
      const int64_t kernel_rows = std::min(p.kernel_h, p.in_h + p.pad_h - oh0) -
                                  std::max<int64_t>(0, p.pad_h - oh1);
      if (kernel_rows <= 0) continue;
      const int64_t col = oh0 != oh1 ? -1 : p.column_copies ? q - oh0 * p.out_w : q;
      int64_t row_products = 0;
      for (int64_t j = 0; j < p.kernel_w; ++j) {
        const int64_t first = col < 0 ? 0 : p.pad_w - j - col;
        const int64_t last = col < 0 ? 0 : col + block_pixels + j - p.pad_w - p.in_w;
        if (first < block_pixels - last)
          row_products += block_pixels - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
      }
      products += kernel_rows * row_products;
    }
  }
  return products;
}

// The register block with the fewest vector FMAs for the image, padding of
// the last pixel vectors and channel block included, and loads per FMA as
// the tie-break; plus the copies in and out of the layout. Channel-lanes
// blocks (conv_direct.h) only where `channel_lanes`, and then only those.
DirectPlan plan_for(const ConvDirectKernels& k, const DirectProblem& p, bool channel_lanes) {
  DirectPlan plan{p, -1, 0};
  const int64_t pixels = p.out_h * p.out_w;
  const int64_t vectors = ceil_div(p.out_h * p.pitch(), k.lanes);
  for (int i = 0; i < k.block_count; ++i) {
    const DirectConvBlock b = k.blocks[i];
    if (b.channel_lanes != channel_lanes) continue;
    double fmas = 0, loads_per_fma = 0;
    if (b.channel_lanes) {
      // Blocks of a run of pixels: the whole image in the column copies, a
      // row in the padded planes (whose pitch has extra columns), the last
      // block moved back over the others; the staged block stays in L1.
      const int64_t run = p.column_copies ? pixels : p.out_w;
      if (run < b.vectors || pixels * b.channels > kMaxLanesStage) continue;
      const int64_t channel_vectors = b.channels / k.lanes;
      fmas = static_cast<double>(lanes_products(p, b.vectors) *
                                 ceil_div(p.out_channels, b.channels) * channel_vectors *
                                 p.in_channels);
      // The broadcast inputs fold into the FMAs: the weight vectors count.
      loads_per_fma = static_cast<double>(b.vectors + channel_vectors) /
                      static_cast<double>(b.vectors * channel_vectors);
    } else {
      fmas = static_cast<double>(ceil_div(vectors, b.vectors) * b.vectors *
                                 ceil_div(p.out_channels, b.channels) * b.channels *
                                 p.in_channels * p.taps());
      // Plus the broadcast weight each FMA loads.
      loads_per_fma =
          1.0 + static_cast<double>(b.vectors + b.channels) / (b.vectors * b.channels);
    }
    const double cycles = fmas * (1.0 + 0.1 * loads_per_fma);
    if (plan.block < 0 || cycles < plan.cycles) {
      plan.block = i;
      plan.cycles = cycles;
    }
  }
  if (plan.block < 0) return plan;
  plan.cycles += static_cast<double>(p.image_floats() / k.lanes);  // zeroing the copy
  if (p.column_copies)
    plan.cycles += row_cycles(p.in_channels * p.kernel_w * p.padded_h(), p.out_w, k.lanes);
  else
    plan.cycles += row_cycles(p.in_channels * p.in_h, p.in_w, k.lanes);
  if (channel_lanes)  // the transposition, a few shuffles per vector
    plan.cycles += 3.0 * static_cast<double>(p.out_channels * ceil_div(pixels, k.lanes));
  else if (!p.column_copies)
    plan.cycles += row_cycles(p.out_channels * p.out_h, p.out_w, k.lanes);  // staged rows
  return plan;
}

bool suits_direct(const DirectProblem& p) {
  return p.image_floats() <= kMaxPaddedFloats && p.in_channels * p.taps() <= kMaxReduction;
}

// The cheapest layout and block kind that suits the kernel, of those
// `layout` allows.
std::optional<DirectPlan> choose_plan(const ConvDirectKernels& k, DirectProblem p,
                                      DirectLayout layout) {
  std::optional<DirectPlan> best;
  for (int kind = 0; kind < 4; ++kind) {
    const bool copies = kind % 2 == 1, lanes = kind >= 2;
    const DirectLayout named = lanes     ? DirectLayout::ChannelLanes
                               : copies ? DirectLayout::ColumnCopies
                                        : DirectLayout::PaddedPlanes;
    p.column_copies = copies;
    if (!suits_direct(p) || (layout != DirectLayout::Cheapest && layout != named)) continue;
    const DirectPlan plan = plan_for(k, p, lanes);
    if (plan.block >= 0 && (!best || plan.cycles < best->cycles)) best = plan;
  }
  return best;
}

// The weight in the kernel's layout: blocks of `block` output channels, each
// (in_channels, kernel_h, kernel_w, block), zeros past out_channels, into
// the frame's slot 0. weight_at(o, c, i, j) reads the convolution's weight.
template <typename WeightAt>
const float* pack_weight(ScratchFrame& frame, const DirectProblem& p, int64_t block,
                         WeightAt weight_at) {
  const int64_t blocks = ceil_div(p.out_channels, block);
  const auto floats = static_cast<size_t>(blocks * p.in_channels * p.taps() * block);
  float* packed = frame.get<float>(0, floats);
  std::fill_n(packed, floats, 0.0f);
  float* dst = packed;
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t c = 0; c < p.in_channels; ++c)
      for (int64_t i = 0; i < p.kernel_h; ++i)
        for (int64_t j = 0; j < p.kernel_w; ++j, dst += block)
          for (int64_t o = 0; o < block && blk * block + o < p.out_channels; ++o)
            dst[o] = weight_at(blk * block + o, c, i, j);
  return packed;
}

// Where the thread last copied an image (copy_image), its layout and slack:
// the padding zeros there are still in place.
struct ZeroedCopy {
  const float* dst = nullptr;
  DirectProblem p;
  int64_t slack = 0;
};
thread_local ZeroedCopy zeroed;

// Per-thread buffers (0: the padded image, 1: the staged output, 2: an
// image's output planes before pooling), kept for
// the thread's next image; a task never waits on other tasks, so a buffer
// is never shared.
float* scratch(int which, int64_t floats) {
  thread_local std::vector<float> buf[3];
  std::vector<float>& b = buf[which];
  if (static_cast<int64_t>(b.size()) < floats) {
    b.resize(static_cast<size_t>(floats));
    zeroed = {};
  }
  return b.data();
}

// dst = x in the problem's layout, then `slack` zeros the kernel may read
// past the last channel. The copies only ever write the layout's data
// positions, so the zeros of the padding (as much of the copy as its data
// on 8 x 8 images) are written only when the thread's last copy was not to
// the same place in the same layout.
void copy_image(const ConvDirectKernels& k, const DirectProblem& p, const float* x, float* dst,
                int64_t slack) {
  if (zeroed.dst != dst || !(zeroed.p == p) || zeroed.slack != slack) {
    std::fill_n(dst, p.image_floats() + slack, 0.0f);
    zeroed = {dst, p, slack};
  }
  const int64_t pitch = p.pitch();
  for (int64_t c = 0; c < p.in_channels; ++c) {
    const float* plane = x + c * p.in_h * p.in_w;
    float* d = dst + c * p.channel_step() + p.pad_h * pitch;
    if (!p.column_copies) {
      k.copy_rows(plane, p.in_w, d + p.pad_w, pitch, p.in_h, p.in_w);
      continue;
    }
    // Copy j holds padded columns [j, j + out_w): input columns ow + j - pad_w.
    for (int64_t j = 0; j < p.kernel_w; ++j, d += p.column_step()) {
      const int64_t lo = std::max<int64_t>(0, p.pad_w - j);
      const int64_t hi = std::min(p.out_w, p.in_w + p.pad_w - j);
      if (lo < hi) k.copy_rows(plane + lo + j - p.pad_w, p.in_w, d + lo, pitch, p.in_h, hi - lo);
    }
  }
}

// Tasks: (image, run of output channel blocks); the channel blocks of an
// image are split only when there are too few images for every thread or
// their staged outputs would not fit in L2. The output is relu'd where
// `relu`, and 2x2 max-pooled where `pool` (conv2d_direct_pool_forward).
void run_direct(const ConvDirectKernels& k, const DirectPlan& plan, const float* weight,
                const float* x, const float* bias, float* out, const OutputTail* tail,
                bool relu, bool pool) {
  const DirectProblem& p = plan.p;
  const DirectConvBlock b = k.blocks[plan.block];
  const int64_t blocks = ceil_div(p.out_channels, b.channels);
  const int64_t chunk = b.vectors * k.lanes;
  const int64_t pixels = p.out_h * p.out_w;
  const int64_t staged_block = b.channel_lanes || p.column_copies
                                   ? 0
                                   : ceil_div(p.out_h * p.pitch(), chunk) * chunk * b.channels;
  // Channel-lanes blocks share one staged block.
  const int64_t lanes_stage = b.channel_lanes ? pixels * b.channels : 0;
  const int64_t want = 4 * static_cast<int64_t>(current_pool().threads());
  const int64_t fit = ceil_div(blocks * staged_block, kMaxStagedFloats);
  const int64_t splits = std::clamp<int64_t>(std::max(ceil_div(want, p.batch), fit), 1, blocks);
  const int64_t per_split = ceil_div(blocks, splits);
  const int64_t slack = chunk + p.kernel_w;
  const int64_t padded = p.image_floats() + slack;
  const int64_t task_flops =
      2 * p.in_channels * p.taps() * p.out_h * p.out_w * per_split * b.channels;
  const int64_t grain = std::max<int64_t>(1, kTaskFlops / std::max<int64_t>(task_flops, 1));
  const int64_t plane = p.out_h * p.out_w, pooled = p.out_h / 2 * (p.out_w / 2);
  // Blocks that cannot pool as they store leave an image's planes here.
  const bool pool_after = pool && !b.channel_lanes;
  parallel_for(p.batch * splits, grain, [&](int64_t t0, int64_t t1) {
    float* padded_input = scratch(0, padded);
    float* staged = scratch(1, std::max(per_split * staged_block, lanes_stage));
    float* planes = pool_after ? scratch(2, p.out_channels * plane) : nullptr;
    int64_t padded_image = -1;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / splits, split = t % splits;
      if (n != padded_image) {
        copy_image(k, p, x + n * p.in_channels * p.in_h * p.in_w, padded_input, slack);
        padded_image = n;
      }
      DirectConvImage a{};
      a.input = padded_input;
      a.in_channels = p.in_channels;
      a.channel_step = p.channel_step();
      a.column_step = p.column_step();
      a.pitch = p.pitch();
      a.kernel_h = p.kernel_h;
      a.kernel_w = p.kernel_w;
      a.weight = weight;
      a.bias = bias;
      a.relu = relu;
      a.pool = pool && b.channel_lanes;
      a.out = planes ? planes : out + n * p.out_channels * (pool ? pooled : plane);
      a.out_channels = p.out_channels;
      a.out_h = p.out_h;
      a.out_w = p.out_w;
      a.block_begin = split * per_split;
      a.block_end = std::min(blocks, a.block_begin + per_split);
      a.staged = staged;
      a.in_h = p.in_h;
      a.in_w = p.in_w;
      a.pad_h = p.pad_h;
      a.pad_w = p.pad_w;
      if (a.block_begin >= a.block_end) continue;
      k.image(a, plan.block);
      // The channels just stored are contiguous and still in L2.
      const int64_t c0 = a.block_begin * b.channels;
      const int64_t c1 = std::min(p.out_channels, a.block_end * b.channels);
      if (planes)
        max_pool_2x2_planes({c1 - c0, p.out_h, p.out_w, p.out_h / 2, p.out_w / 2},
                            planes + c0 * plane,
                            out + (n * p.out_channels + c0) * pooled);
      if (tail && !relu) (*tail)(a.out + c0 * plane, 1, (c1 - c0) * plane, (c1 - c0) * plane);
    }
  });
}

bool unit_stride(const ConvGeometry& g) {
  return g.groups == 1 && g.p.stride.h == 1 && g.p.stride.w == 1 && g.p.dilation.h == 1 &&
         g.p.dilation.w == 1;
}

// The problem as the Winograd kernel takes it, where `layout` lets it run
// and it costs less than the direct kernel's cheapest plan (or is forced).
std::optional<detail::WinogradProblem> winograd_problem(const ConvDirectKernels& k,
                                                        const DirectProblem& p,
                                                        DirectLayout layout) {
  if ((layout != DirectLayout::Cheapest && layout != DirectLayout::Winograd) || p.kernel_h != 3 ||
      p.kernel_w != 3)
    return std::nullopt;
  const detail::WinogradProblem w{p.batch, p.in_channels, p.in_h,        p.in_w,
                                  p.pad_h, p.pad_w,       p.out_channels};
  const double cycles = detail::winograd_cycles(k, w);
  if (cycles < 0) return std::nullopt;
  if (layout == DirectLayout::Cheapest) {
    const std::optional<DirectPlan> direct = choose_plan(k, p, layout);
    if (direct && direct->cycles <= cycles) return std::nullopt;
  }
  return w;
}

DirectProblem forward_problem(const ConvGeometry& g) {
  return {g.batch,    g.in_channels, g.in_h,         g.in_w,  g.p.padding.h, g.p.padding.w,
          g.kernel_h, g.kernel_w,    g.out_channels, g.out_h, g.out_w};
}

}  // namespace

namespace {

// conv2d's forward with the direct kernel: the level's kernels, the plan and
// the weight packed for its blocks (in the frame's buffer); nothing where the
// kernel does not apply.
struct ForwardPlan {
  const ConvDirectKernels* k;
  DirectPlan plan;
  const float* packed;
};

std::optional<ForwardPlan> forward_plan(ScratchFrame& frame, const ConvGeometry& g,
                                        const float* weight, DirectLayout layout) {
  const ConvDirectKernels* k = detail::conv_direct_kernels();
  if (!k || !unit_stride(g) || layout == DirectLayout::Winograd) return std::nullopt;
  const std::optional<DirectPlan> plan = choose_plan(*k, forward_problem(g), layout);
  if (!plan) return std::nullopt;
  return ForwardPlan{k, *plan,
                     pack_weight(frame, plan->p, k->blocks[plan->block].channels,
                                 [&](int64_t o, int64_t c, int64_t i, int64_t j) {
                                   return weight[((o * g.in_channels + c) * g.kernel_h + i) *
                                                     g.kernel_w +
                                                 j];
                                 })};
}

}  // namespace

// conv2d's forward with the Winograd kernel, where winograd_problem picks it.
bool forward_winograd(const ConvGeometry& g, const float* x, const float* weight, const float* bias,
                      bool relu, bool pool, float* out, const OutputTail* tail,
                      DirectLayout layout) {
  const ConvDirectKernels* k = detail::conv_direct_kernels();
  if (!k || !unit_stride(g)) return false;
  const std::optional<detail::WinogradProblem> w = winograd_problem(*k, forward_problem(g), layout);
  return w && detail::run_winograd(*k, *w, x, weight, false, bias, relu, pool, out, tail);
}

bool conv2d_direct_forward(const ConvGeometry& g, const float* x, const float* weight,
                           const float* bias, float* out, DirectLayout layout,
                           OutputTail* tail) {
  // A tail that is a relu runs in the kernel's registers as it stores.
  const bool relu = tail && tail->in_registers == Activation::Relu;
  if (forward_winograd(g, x, weight, bias, relu, false, out, relu ? nullptr : tail, layout)) {
    if (tail) tail->applied = true;
    return true;
  }
  ScratchFrame frame;
  const std::optional<ForwardPlan> f = forward_plan(frame, g, weight, layout);
  if (!f) return false;
  if (tail) tail->applied = true;
  run_direct(*f->k, f->plan, f->packed, x, bias, out, tail, relu, false);
  return true;
}

bool conv2d_direct_pool_forward(const ConvGeometry& g, const float* x, const float* weight,
                                const float* bias, bool relu, float* out, DirectLayout layout) {
  if (g.out_h < 2 || g.out_w < 2) return false;
  if (forward_winograd(g, x, weight, bias, relu, true, out, nullptr, layout)) return true;
  ScratchFrame frame;
  const std::optional<ForwardPlan> f = forward_plan(frame, g, weight, layout);
  if (!f) return false;
  run_direct(*f->k, f->plan, f->packed, x, bias, out, nullptr, relu, true);
  return true;
}

bool conv2d_direct_weight_grad(const ConvGeometry& g, const float* grad, const float* x,
                               float* grad_weight) {
  const ConvDirectKernels* k = detail::conv_direct_kernels();
  if (!k || !unit_stride(g)) return false;
  DirectProblem p = forward_problem(g);
  p.column_copies = true;  // every weight row is then one contiguous run of output pixels
  if (!suits_direct(p)) return false;
  const int64_t rows = p.in_channels * p.taps(), pixels = p.out_h * p.out_w;
  ScratchFrame frame;
  int64_t* row_offsets = frame.get<int64_t>(0, static_cast<size_t>(rows));
  for (int64_t c = 0, r = 0; c < p.in_channels; ++c)
    for (int64_t i = 0; i < p.kernel_h; ++i)
      for (int64_t j = 0; j < p.kernel_w; ++j)
        row_offsets[r++] = c * p.channel_step() + i * p.pitch() + j * p.column_step();
  // Images go through in runs whose copies and gradients stay in L2; parts
  // of the batch accumulate into their own sums, added in a fixed order so
  // results do not depend on scheduling.
  const int64_t image_floats = p.image_floats(), grad_floats = p.out_channels * pixels;
  const int64_t run = std::clamp<int64_t>(kMaxRunFloats / (image_floats + grad_floats), 1, 64);
  const int64_t weight_floats = p.out_channels * rows;
  const int64_t flops = 2 * weight_floats * pixels * p.batch;
  const int64_t parts = std::clamp<int64_t>(std::min(flops / kTaskFlops, p.batch), 1,
                                            2 * static_cast<int64_t>(current_pool().threads()));
  // Each part's sums start at zero (the kernel adds to dw).
  float* partial = frame.get<float>(1, static_cast<size_t>((parts - 1) * weight_floats));
  std::fill_n(partial, (parts - 1) * weight_floats, 0.0f);
  std::fill_n(grad_weight, weight_floats, 0.0f);
  parallel_for(parts, 1, [&](int64_t b, int64_t e) {
    for (int64_t part = b; part < e; ++part) {
      float* dw = part == 0 ? grad_weight : partial + (part - 1) * weight_floats;
      const int64_t n_begin = p.batch * part / parts, n_end = p.batch * (part + 1) / parts;
      float* copies = scratch(0, run * image_floats);
      for (int64_t n0 = n_begin; n0 < n_end; n0 += run) {
        const int64_t images = std::min(run, n_end - n0);
        for (int64_t n = 0; n < images; ++n)
          copy_image(*k, p, x + (n0 + n) * p.in_channels * p.in_h * p.in_w,
                     copies + n * image_floats, 0);
        detail::DirectWeightGradRun a{};
        a.input = copies;
        a.images = images;
        a.image_step = image_floats;
        a.row_offsets = row_offsets;
        a.rows = rows;
        a.grad = grad + n0 * grad_floats;
        a.out_channels = p.out_channels;
        a.pixels = pixels;
        a.dw = dw;
        k->weight_grad(a);
      }
    }
  });
  for (int64_t part = 1; part < parts; ++part) {
    const float* src = partial + (part - 1) * weight_floats;
    for (int64_t i = 0; i < weight_floats; ++i) grad_weight[i] += src[i];
  }
  return true;
}

bool conv2d_direct_input_grad(const ConvGeometry& g, const float* grad, const float* weight,
                              float* grad_input, DirectLayout layout) {
  const ConvDirectKernels* k = detail::conv_direct_kernels();
  if (!k || !unit_stride(g)) return false;
  // The input gradient is the convolution of the output gradient, padded by
  // kernel - 1 - padding, with the weight flipped and its channels swapped;
  // a padding as wide as the kernel makes it a cropping, which the kernel does
  // not do.
  const int64_t pad_h = g.kernel_h - 1 - g.p.padding.h, pad_w = g.kernel_w - 1 - g.p.padding.w;
  if (pad_h < 0 || pad_w < 0) return false;
  DirectProblem p{g.batch,    g.out_channels, g.out_h,       g.out_w, pad_h, pad_w,
                  g.kernel_h, g.kernel_w,     g.in_channels, g.in_h,  g.in_w};
  const std::optional<detail::WinogradProblem> w = winograd_problem(*k, p, layout);
  if (w &&
      detail::run_winograd(*k, *w, grad, weight, true, nullptr, false, false, grad_input, nullptr))
    return true;
  if (layout == DirectLayout::Winograd) return false;
  const std::optional<DirectPlan> plan = choose_plan(*k, p, layout);
  if (!plan) return false;
  const int64_t kh = g.kernel_h, kw = g.kernel_w;
  ScratchFrame frame;
  const float* packed = pack_weight(
      frame, p, k->blocks[plan->block].channels, [&](int64_t c, int64_t o, int64_t i, int64_t j) {
        return weight[((o * g.in_channels + c) * kh + (kh - 1 - i)) * kw + (kw - 1 - j)];
      });
  run_direct(*k, *plan, packed, grad, nullptr, grad_input, nullptr, false, false);
  return true;
}

}  // namespace samba::ops
