#include "engine/runtime/fused_elementwise.h"

#include <algorithm>
#include <cstring>

#include "engine/core/parallel.h"
#include "engine/kernels/elementwise_loops.h"

namespace samba::runtime {
namespace {

namespace ew = ops::ew;
using ew::kBlock;

bool contiguous(const pef::TensorDesc& t) {
  return t.role != pef::TensorRole::Alias || t.strides == contiguous_strides(t.shape);
}

// One value, possibly broadcast to a shape (a gradient of a mean expanded
// over its input): every element reads the same bytes.
bool single_value(const pef::TensorDesc& t) {
  return numel_of(t.shape) == 1 ||
         (t.role == pef::TensorRole::Alias &&
          std::all_of(t.strides.begin(), t.strides.end(), [](int64_t s) { return s == 0; }));
}

// The n elements of a row operand (a vector of `row` values repeated along
// the output) starting at flat output index `at`: in place when they do not
// wrap around the row's end, else gathered into `buf`.
const float* row_elements(const float* row_base, int64_t row, int64_t at, int64_t n, float* buf) {
  int64_t c = at % row;
  if (c + n <= row) return row_base + c;
  for (int64_t i = 0; i < n;) {
    const int64_t len = std::min(row - c, n - i);
    std::memcpy(buf + i, row_base + c, static_cast<size_t>(len) * sizeof(float));
    i += len;
    c = 0;
  }
  return buf;
}

}  // namespace

std::unique_ptr<const FusedElementwise> FusedElementwise::plan(const Program& program,
                                                               const std::vector<OpStep>& steps,
                                                               const std::vector<bool>& kept) {
  const auto& tensors = program.desc().tensors;
  if (steps.size() < 2) return nullptr;
  const bool led = steps.front().op->fusion != Fusion::Elementwise;  // by a producer
  for (size_t i = led ? 1 : 0; i < steps.size(); ++i)
    if (steps[i].outputs.size() != 1 || steps[i].inputs.empty() || steps[i].inputs.size() > 3)
      return nullptr;
  const pef::TensorDesc& result = tensors[static_cast<size_t>(steps.back().outputs[0])];
  auto fused = std::unique_ptr<FusedElementwise>(new FusedElementwise());
  FusedElementwise& f = *fused;
  int32_t produced = -1;  // the producer's output tensor
  if (led) {
    // Its output must be what the chain's tiles are: float32 of the
    // result's shape, its own bytes.
    if (steps.front().outputs.size() != 1) return nullptr;
    produced = steps.front().outputs[0];
    const auto& pd = tensors[static_cast<size_t>(produced)];
    if (pd.role == pef::TensorRole::Alias || pd.dtype != DType::Float32 || pd.shape != result.shape)
      return nullptr;
    f.first_step_ = 1;
  } else {
    // Leading steps of another shape (the scalar a backward chain starts
    // from) run on their own first; their results are read from memory.
    while (f.first_step_ < steps.size() &&
           tensors[static_cast<size_t>(steps[f.first_step_].outputs[0])].shape != result.shape)
      ++f.first_step_;
    if (steps.size() - f.first_step_ < 2) return nullptr;
  }
  f.numel_ = numel_of(result.shape);
  f.row_ = result.shape.empty() ? 1 : std::max<int64_t>(result.shape.back(), 1);
  if (f.numel_ == 0) return nullptr;

  std::vector<int32_t> result_of(tensors.size(), -1);  // per tensor: the step that computes it
  std::vector<int32_t> last_use(steps.size(),
                                -1);  // per fused step: the last one reading its result
  auto memory_index = [&](int32_t t, bool written, Source source) -> int32_t {
    for (size_t i = 0; i < f.tensors_.size(); ++i)
      if (f.tensors_[i].tensor == t) {
        f.tensors_[i].written |= written;
        return static_cast<int32_t>(i);
      }
    const auto& td = tensors[static_cast<size_t>(t)];
    const int64_t n = source == Source::Scalar ? 1 : numel_of(td.shape);
    f.tensors_.push_back(
        {t, static_cast<uint64_t>(n) * element_size(td.dtype), td.dtype, source, written});
    return static_cast<int32_t>(f.tensors_.size() - 1);
  };
  for (size_t i = f.first_step_; i < steps.size(); ++i) {
    const OpStep& s = steps[i];
    const auto j = static_cast<int32_t>(i - f.first_step_);  // among the fused steps
    if (!s.op->float32_block || !s.bound.empty() || s.rng_offset_attr >= 0 || s.training_attr >= 0)
      return nullptr;
    Step step;
    step.block = s.op->float32_block(s.attrs);
    if (!step.block) return nullptr;
    const int32_t out = s.outputs[0];
    const auto& od = tensors[static_cast<size_t>(out)];
    if (od.role == pef::TensorRole::Alias || od.dtype != DType::Float32 ||
        od.shape != result.shape || result_of[static_cast<size_t>(out)] >= 0 || out == produced)
      return nullptr;
    for (int32_t t : s.inputs) {
      if (t < 0) return nullptr;
      if (result_of[static_cast<size_t>(t)] >= 0) {
        const int32_t producer = result_of[static_cast<size_t>(t)];
        last_use[static_cast<size_t>(producer)] = j;
        step.in.push_back({Source::Tile, producer});  // the tile is assigned below
        continue;
      }
      // A view of a result of this chain would have to be read back from
      // memory; so would a view of the product, which may not be written.
      if (result_of[static_cast<size_t>(program.root(t))] >= 0 ||
          (t != produced && program.root(t) == produced))
        return nullptr;
      const auto& td = tensors[static_cast<size_t>(t)];
      const int64_t n = numel_of(td.shape);
      if (single_value(td)) {
        step.in.push_back({Source::Scalar, memory_index(t, false, Source::Scalar)});
      } else if (td.dtype != DType::Float32 || !contiguous(td)) {
        return nullptr;
      } else if (td.shape == result.shape) {
        step.in.push_back({Source::Full, memory_index(t, false, Source::Full)});
      } else if (n == f.row_ && td.shape.back() == f.row_) {
        step.in.push_back({Source::Row, memory_index(t, false, Source::Row)});
      } else {
        return nullptr;
      }
    }
    result_of[static_cast<size_t>(out)] = j;
    if (kept[static_cast<size_t>(program.root(out))] || i + 1 == steps.size())
      step.stored = memory_index(out, true, Source::Full);
    else
      f.unstored_.push_back(out);
    f.steps_.push_back(std::move(step));
  }
  if (f.tensors_.size() > kMaxTensors) return nullptr;
  if (led) {
    for (size_t i = 0; i < f.tensors_.size(); ++i)
      if (f.tensors_[i].tensor == produced && f.tensors_[i].source == Source::Full)
        f.produced_ = static_cast<int32_t>(i);
    if (f.produced_ < 0) return nullptr;  // the chain does not read it as a whole
    if (!kept[static_cast<size_t>(produced)]) {
      f.produced_into_ = steps.back().outputs[0];
      f.unstored_.push_back(produced);
    }
    for (int32_t t : steps.front().inputs)
      if (t >= 0) f.producer_reads_.push_back(program.root(t));
    // A lone relu of the product, into the product's own bytes: the
    // producer's kernel may apply it to its registers as it stores.
    const Step& only = f.steps_.front();
    if (f.steps_.size() == 1 && steps[f.first_step_].op->name == "relu" && f.produced_into_ >= 0 &&
        only.in.size() == 1 && only.in[0].source == Source::Full && only.in[0].index == f.produced_)
      f.in_registers_ = ops::Activation::Relu;
  }

  // Tile buffers, reused once the value they hold has no later reader. A
  // step's result never shares a buffer with its inputs (they are read
  // while it is written).
  std::vector<int32_t> holder;  // per tile: the step whose result it holds, -1 when free
  for (size_t i = 0; i < f.steps_.size(); ++i) {
    Step& step = f.steps_[i];
    for (Operand& o : step.in)
      if (o.source == Source::Tile) o.index = f.steps_[static_cast<size_t>(o.index)].tile;
    int32_t tile = -1;
    for (size_t b = 0; b < holder.size() && tile < 0; ++b)
      if (holder[b] < 0 || last_use[static_cast<size_t>(holder[b])] < static_cast<int32_t>(i))
        tile = static_cast<int32_t>(b);
    if (tile < 0) {
      tile = static_cast<int32_t>(holder.size());
      holder.push_back(-1);
    }
    if (tile >= kMaxTiles) return nullptr;
    holder[static_cast<size_t>(tile)] = static_cast<int32_t>(i);
    step.tile = tile;
  }

  int64_t cost = 0;
  for (const Memory& m : f.tensors_) f.stream_ |= m.written && m.nbytes >= ew::kStreamBytes;
  for (const Step& s : f.steps_) cost += 4 * static_cast<int64_t>(s.in.size());
  f.grain_ = ew::grain_for(cost);
  return fused;
}

std::vector<FusedElementwise::MemoryTouched> FusedElementwise::memory_touched() const {
  std::vector<MemoryTouched> touched;
  for (size_t i = 0; i < tensors_.size(); ++i)
    // An unstored product is the result's bytes, counted with the result.
    if (static_cast<int32_t>(i) != produced_ || produced_into_ < 0)
      touched.push_back({tensors_[i].tensor, tensors_[i].nbytes});
  return touched;
}

bool FusedElementwise::overlaps_badly(char* const* base) const {
  for (size_t w = 0; w < tensors_.size(); ++w) {
    if (!tensors_[w].written) continue;
    const char* wlo = base[w];
    const char* whi = wlo + tensors_[w].nbytes;
    for (size_t r = 0; r < tensors_.size(); ++r) {
      if (r == w) continue;
      const char* rlo = base[r];
      const char* rhi = rlo + tensors_[r].nbytes;
      if (!bytes_meet(wlo, tensors_[w].nbytes, rlo, tensors_[r].nbytes)) continue;
      // The same bytes, element for element (a tensor reusing a dead
      // input's memory): each tile reads them before it writes them, as
      // the ops run one by one would.
      const bool same =
          rlo == wlo && rhi == whi && tensors_[r].source == Source::Full && !tensors_[r].written;
      if (!same) return true;
    }
  }
  return false;
}

bool FusedElementwise::run(const std::vector<Tensor>& tensors) const {
  std::array<char*, kMaxTensors> base{};
  for (size_t i = 0; i < tensors_.size(); ++i)
    base[i] = static_cast<char*>(tensors[static_cast<size_t>(tensors_[i].tensor)].raw_data());
  if (overlaps_badly(base.data())) return false;
  parallel_for(numel_, grain_, [&](int64_t b, int64_t e) { run_tiles(b, e, base.data(), stream_); });
  return true;
}

bool FusedElementwise::producer_overlaps(const std::vector<Tensor>& tensors,
                                         char* const* base) const {
  for (int32_t t : producer_reads_) {
    const Tensor& r = tensors[static_cast<size_t>(t)];
    const auto* lo = static_cast<const char*>(r.raw_data());
    const uint64_t n = r.nbytes();
    for (size_t w = 0; w < tensors_.size(); ++w)
      if ((tensors_[w].written || static_cast<int32_t>(w) == produced_) &&
          bytes_meet(base[w], tensors_[w].nbytes, lo, n))
        return true;
  }
  // The producer writes a block before the tail reads the chain's operands
  // there: only the chain's result may share its bytes, element for element.
  const auto p = static_cast<size_t>(produced_);
  const auto result = static_cast<size_t>(steps_.back().stored);
  for (size_t r = 0; r < tensors_.size(); ++r) {
    if (r == p || !bytes_meet(base[p], tensors_[p].nbytes, base[r], tensors_[r].nbytes)) continue;
    if (r != result || base[r] != base[p] || tensors_[r].nbytes != tensors_[p].nbytes) return true;
  }
  return false;
}

struct FusedElementwise::TailContext {
  const FusedElementwise* fused;
  char* const* base;
  const float* origin;  // the producer's output, flat index 0
};

void FusedElementwise::run_tail(const void* ctx, float* c, int64_t rows, int64_t cols, int64_t ldc) {
  const auto& t = *static_cast<const TailContext*>(ctx);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t at = c + r * ldc - t.origin;
    t.fused->run_tiles(at, at + cols, t.base, false);
  }
}

bool FusedElementwise::run(const std::vector<Tensor>& tensors, const Produce& produce) const {
  std::array<char*, kMaxTensors> base{};
  for (size_t i = 0; i < tensors_.size(); ++i)
    base[i] = static_cast<char*>(tensors[static_cast<size_t>(tensors_[i].tensor)].raw_data());
  const auto p = static_cast<size_t>(produced_);
  const Tensor* out = &tensors[static_cast<size_t>(tensors_[p].tensor)];
  auto unsafe = [&] { return overlaps_badly(base.data()) || producer_overlaps(tensors, base.data()); };
  if (produced_into_ >= 0) {
    // Into the result's bytes when this run's buffers allow, else its own.
    char* own = base[p];
    out = &tensors[static_cast<size_t>(produced_into_)];
    base[p] = static_cast<char*>(out->raw_data());
    if (unsafe()) {
      base[p] = own;
      out = &tensors[static_cast<size_t>(tensors_[p].tensor)];
    }
  }
  if (unsafe()) return false;
  const TailContext ctx{this, base.data(), reinterpret_cast<const float*>(base[p])};
  ops::OutputTail tail;
  tail.fn = &run_tail;
  tail.ctx = &ctx;
  if (base[p] == base[steps_.back().stored]) tail.in_registers = in_registers_;
  produce(*out, &tail);
  if (!tail.applied)
    parallel_for(numel_, grain_, [&](int64_t b, int64_t e) { run_tiles(b, e, base.data(), stream_); });
  return true;
}

void FusedElementwise::run_tiles(int64_t begin, int64_t end, char* const* base, bool stream) const {
  alignas(64) float tiles[kMaxTiles][kBlock];
  alignas(64) float spread[3][kBlock];  // a step's single values and wrapped rows
  std::array<float, kMaxTensors> value{};
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].source == Source::Scalar)
      ew::load_block<float>(tensors_[i].dtype, base[i], 0, 1, &value[i]);
  std::array<const float*, 3> in{};
  for (int64_t at = begin; at < end; at += kBlock) {
    const int64_t n = std::min(kBlock, end - at);
    for (const Step& s : steps_) {
      for (size_t k = 0; k < s.in.size(); ++k) {
        const Operand& o = s.in[k];
        const auto memory = [&] { return reinterpret_cast<const float*>(base[o.index]); };
        switch (o.source) {
          case Source::Full:
            in[k] = memory() + at;
            break;
          case Source::Tile:
            in[k] = tiles[o.index];
            break;
          case Source::Row:
            in[k] = row_elements(memory(), row_, at, n, spread[k]);
            break;
          case Source::Scalar:
            std::fill_n(spread[k], n, value[static_cast<size_t>(o.index)]);
            in[k] = spread[k];
            break;
        }
      }
      float* out = tiles[s.tile];
      s.block(n, out, in.data());
      if (s.stored < 0) continue;
      const Memory& m = tensors_[static_cast<size_t>(s.stored)];
      char* dst = base[s.stored] + at * static_cast<int64_t>(sizeof(float));
      const size_t bytes = static_cast<size_t>(n) * sizeof(float);
      if (stream && m.nbytes >= ew::kStreamBytes)
        ew::stream_copy(dst, reinterpret_cast<const char*>(out), bytes);
      else
        std::memcpy(dst, out, bytes);
    }
  }
  if (stream) ew::stream_fence();
}

}  // namespace samba::runtime
