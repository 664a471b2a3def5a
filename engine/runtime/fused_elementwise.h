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
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "engine/runtime/program.h"

namespace samba::runtime {

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

  // The steps before this one run on their own first (results of another
  // shape, such as the scalar a backward chain starts from); the fused pass
  // runs the rest.
  size_t first_step() const { return first_step_; }
  // Tensors the chain computes that are never stored: their values exist
  // only in tiles.
  const std::vector<int32_t>& unstored() const { return unstored_; }
  // Bytes one run reads and writes in memory (each tensor once).
  double bytes_moved() const { return bytes_moved_; }

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

  void run_tiles(int64_t begin, int64_t end, char* const* base) const;
  bool overlaps_badly(char* const* base) const;

  std::vector<Step> steps_;
  std::vector<Memory> tensors_;
  std::vector<int32_t> unstored_;
  size_t first_step_ = 0;
  int64_t numel_ = 0;
  int64_t row_ = 1;  // the output's last dim: what a row operand repeats over
  int64_t grain_ = 0;
  bool stream_ = false;
  double bytes_moved_ = 0;
};

}  // namespace samba::runtime
