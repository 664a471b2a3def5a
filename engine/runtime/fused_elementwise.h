// A fused elementwise kernel run as one pass over its output. The compiler
// groups a chain of elementwise ops into one kernel; run op by op, every
// intermediate would be a whole tensor written to memory and read back, and
// every op its own parallel loop. Where the chain allows, the runtime plans
// at load a single parallel loop over tiles of ew::kBlock elements: per tile
// the ops run in order on small buffers that stay in L1, through each op's
// float32 block function (the compute its standalone kernel runs), and only
// the tensors someone else reads are stored.
//
// A chain is fused when, after leading steps of another shape (which run
// on their own first), it has at least two steps and every step is a
// single-output op with a block function for its attributes (none bound to
// argins), producing float32 of one common shape; and each input is an
// earlier step's result, a float32 tensor of that shape and contiguous, a
// single value, maybe broadcast (any dtype, converted as the standalone
// kernels convert it), or a contiguous float32 vector along the last dim (a
// bias). Anything else runs op by op, as before.
//
// A kernel may also start with a producer (a contraction such as linear,
// matmul or conv2d: any op that is not elementwise) whose float32 output the
// chain reads. Its kernel then runs the chain as an epilogue on each block
// of its output right after computing it, while the block is in cache
// (output_tail.h); a producer or path that cannot is followed by the tiled
// pass over its whole output. The producer writes straight into the
// chain's final result when nothing else reads its output, so that output
// is never stored; the chain reads the block back and overwrites it.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "engine/runtime/program.h"

namespace samba::runtime {

// Whether the an bytes at a and the bn bytes at b share any byte.
inline bool bytes_meet(const void* a, uint64_t an, const void* b, uint64_t bn) {
  const auto* pa = static_cast<const char*>(a);
  const auto* pb = static_cast<const char*>(b);
  return pa < pb + bn && pb < pa + an;
}

class FusedElementwise {
 public:
  // Up to this many distinct tensors a fused pass reads or stores, and
  // tile buffers it keeps live at once (chains needing more run op by op).
  static constexpr size_t kMaxTensors = 16;
  static constexpr int32_t kMaxTiles = 8;

  // The fused pass of the kernel whose ops are `steps`, or null when the
  // chain does not qualify. `kept[t]` says whether tensor t's bytes must
  // hold its values after the kernel (state, a graph input or output, or
  // read by some kernel of the program, directly or through a view).
  static std::unique_ptr<const FusedElementwise> plan(const Program& program,
                                                      const std::vector<OpStep>& steps,
                                                      const std::vector<bool>& kept);

  // Runs the chain on the context's device tensors. Returns false, having
  // written nothing, when this run's buffers overlap in a way a tiled pass
  // would read after writing (the caller then runs the ops one by one).
  bool run(const std::vector<Tensor>& tensors) const;

  // A kernel led by a producer (steps[0]): run() is not used; the whole
  // kernel runs through this, `produce(out, tail)` running the producer with
  // its output in `out` and the chain as its tail. Returns false, having run
  // nothing, when no placement of the producer's output is safe for this
  // run's buffers (the caller then runs the ops one by one).
  using Produce = std::function<void(const Tensor& out, ops::OutputTail* tail)>;
  bool run(const std::vector<Tensor>& tensors, const Produce& produce) const;
  bool has_producer() const { return produced_ >= 0; }
  // Relu where the chain is a lone relu of the product, written in the
  // product's bytes, which the producer may apply in its registers
  // (OutputTail::in_registers); None otherwise.
  ops::Activation in_registers() const { return in_registers_; }

  // The steps before this one run on their own first (results of another
  // shape, such as the scalar a backward chain starts from); the fused pass
  // runs the rest.
  size_t first_step() const { return first_step_; }
  // Tensors the chain computes that are never stored: their values exist
  // only in tiles.
  const std::vector<int32_t>& unstored() const { return unstored_; }
  // The tensors the chain loads or stores in memory, each once, with the
  // bytes it touches of each (one element of a single value). An unstored
  // product is not among them (its bytes are the result's); the producer's
  // own inputs are not either. kernel_bytes_moved() (program.h) adds them.
  struct MemoryTouched {
    int32_t tensor;
    uint64_t nbytes;
  };
  std::vector<MemoryTouched> memory_touched() const;

 private:
  enum class Source : uint8_t { Full, Scalar, Row, Tile };
  struct Operand {
    Source source;
    int32_t index;  // into tensors_ (Full, Scalar, Row) or the tile buffers (Tile)
  };
  struct Step {
    Float32Block block;
    std::vector<Operand> in;
    int32_t tile = 0;     // the tile buffer the result goes to
    int32_t stored = -1;  // index into tensors_ when the result is stored
  };
  struct Memory {
    int32_t tensor;
    uint64_t nbytes;
    DType dtype;
    Source source;  // how steps read it (Full for a stored result)
    bool written;
  };

  struct TailContext;
  static void run_tail(const void* ctx, float* c, int64_t rows, int64_t cols, int64_t ldc);

  void run_tiles(int64_t begin, int64_t end, char* const* base, bool stream) const;
  bool overlaps_badly(char* const* base) const;
  // With the producer writing at base[produced_]: nothing it reads is
  // written before it is done reading, and no operand of the chain before
  // the tail reads it.
  bool producer_overlaps(const std::vector<Tensor>& tensors, char* const* base) const;

  std::vector<Step> steps_;
  std::vector<Memory> tensors_;
  std::vector<int32_t> unstored_;
  size_t first_step_ = 0;
  // With a producer: the tensors_ entry of its output as the chain reads it,
  // the tensor its bytes go to when it is not stored (the chain's result;
  // else -1), and the tensors it reads.
  int32_t produced_ = -1;
  int32_t produced_into_ = -1;
  std::vector<int32_t> producer_reads_;
  // Relu where the chain is the one relu of the product written in place
  // (OutputTail::in_registers), else None.
  ops::Activation in_registers_ = ops::Activation::None;
  int64_t numel_ = 0;
  int64_t row_ = 1;  // the output's last dim: what a row operand repeats over
  int64_t grain_ = 0;
  bool stream_ = false;
};

}  // namespace samba::runtime
