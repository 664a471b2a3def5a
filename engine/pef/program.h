// The program a PEF holds, as plain C++ data: what the compiler produces,
// what the PEF writer serializes, what the reader gives back after verifying
// every field, and what the runtime builds its executable Program from. The
// PEF file format (engine/pef/pef.fbs) mirrors this struct one to one.
//
// Indices: tensors, kernels, sections, argins, blobs and materializers refer
// to each other by their position in the vectors below (int32_t, -1 = none).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/shape.h"
#include "engine/ops/registry.h"  // Fusion, Attrs
#include "engine/rng/materializer_desc.h"

namespace samba::pef {

// Format version of the file. A reader accepts any minor of its own major and
// refuses a newer major ("file has format 2.0, this runtime supports 1.x").
inline constexpr uint32_t kFormatMajor = 1;
inline constexpr uint32_t kFormatMinor = 1;  // 1.1: data_parallel

// Where a device tensor lives on the emulated RDU. Values are stored in PEFs.
enum class MemType : uint8_t { DDR = 0, HBM = 1, HOST = 2 };
inline constexpr int kNumMemTypes = 3;

// What a tensor is to the program. Values are stored in PEFs.
enum class TensorRole : uint8_t {
  Input = 0,           // bound by sn_name at run(); persistent (kept between runs)
  Output = 1,          // a model output, read back by run(); persistent
  Parameter = 2,       // a weight: persistent, trained by the optimizers
  Buffer = 3,          // persistent state that is not trained (running statistics)
  Gradient = 4,        // a parameter's gradient: persistent
  OptimizerState = 5,  // momentum, exp_avg, ...: persistent
  OutputGrad = 6,      // the gradient fed to an output by BCKWD: persistent
  Constant = 7,        // read-only data from a blob
  Intermediate = 8,    // scratch: its bytes are reused by other intermediates
  Alias = 9,           // a view of another tensor (alias_of); owns no bytes
};
inline constexpr int kNumTensorRoles = 10;

// What an argin is for (SambaSession.get_dropout_*_argin_names).
enum class ArginKind : uint8_t { Hyperparam = 0, DropoutRate = 1, DropoutSeed = 2 };
inline constexpr int kNumArginKinds = 3;

// Section types of SambaFlow's schedule. Values are stored in PEFs.
enum class SectionType : uint8_t { FWD = 0, BCKWD = 1, GRADNORM = 2, OPT = 3, ZEROGRAD = 4, REDUCE = 5 };
inline constexpr int kNumSectionTypes = 6;

// How the compiler laid sections out: "section" (each separately) or
// "spatial" (forward, backward and update as one unit).
enum class Mapping : uint8_t { Section = 0, Spatial = 1 };
inline constexpr int kNumMappings = 2;

// Device memory has two areas per memory type. The state area holds what a
// model keeps between runs and shares between concurrent runs (weights,
// gradients, optimizer state, buffers, constants, output gradients); the
// activation area holds what each run works on (inputs, outputs,
// intermediates), and every concurrent run of a session has its own copy.
// A tensor's role says which area its arena_offset is in (an Alias is in its
// base's).
bool in_activation_area(TensorRole r);

struct TensorDesc {
  std::string name;  // sn_name; unique in the program
  DType dtype = DType::Float32;
  Dims shape;
  TensorRole role = TensorRole::Intermediate;

  // Storage. Every tensor but an Alias owns nbytes = numel * element_size
  // contiguous bytes at arena_offset of its area of memory type `mem`.
  // Tensors with the same non-empty region share one allocation (same mem,
  // offset and size).
  MemType mem = MemType::DDR;
  uint64_t arena_offset = 0;
  uint64_t nbytes = 0;
  std::string region;

  // An Alias is the view (strides and offset in elements of its own dtype)
  // of tensor alias_of's bytes, which must not be an Alias itself. It owns
  // nothing: its mem is its base's, arena_offset and nbytes are 0, region is
  // empty and it has no blob or materializer. Other tensors leave strides
  // empty (or contiguous) and view_offset 0.
  int32_t alias_of = -1;
  Dims strides;
  int64_t view_offset = 0;

  int32_t blob = -1;          // initial contents (Constant; embedded weights)
  int32_t materializer = -1;  // how to fill a lazy Parameter/Buffer/OptimizerState
  int32_t grad = -1;          // Parameter: its Gradient tensor; OutputGrad target: see GraphDesc
  int32_t batch_dim = -1;     // Input/Output: the dim split into micro-batches
  bool requires_grad = false;
  std::string owner;  // OptimizerState: the parameter it belongs to; Gradient: its parameter

  bool operator==(const TensorDesc&) const = default;
};

// An argin an attribute takes its value from at run time.
struct ArginBinding {
  std::string attr;
  int32_t argin = -1;

  bool operator==(const ArginBinding&) const = default;
};

// One registry op invocation inside a kernel. inputs/outputs are tensor
// indices; an absent optional input is -1. Attributes are stored resolved
// (every attribute of the op's schema), so a PEF does not depend on the
// defaults of the runtime that reads it.
struct OpCall {
  std::string op;
  Attrs attrs;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<ArginBinding> bindings;

  bool operator==(const OpCall&) const = default;
};

// A kernel: one node of a section's flow graph. A fused kernel runs several
// ops; at o0 every kernel has exactly one. `fusion` is its first op's class:
// a fused kernel is an elementwise chain, or a producer (linear, matmul,
// conv2d, layer_norm, softmax, log_softmax) followed by a chain over its
// output. reads/writes list
// every tensor the kernel's ops read or write, inputs updated in place
// included.
struct KernelDesc {
  std::string name;
  Fusion fusion = Fusion::Opaque;
  std::vector<OpCall> ops;
  std::vector<int32_t> reads;
  std::vector<int32_t> writes;
  double flops = 0;  // estimate, for the .pef.log and profiles
  double bytes = 0;  // loaded + stored in one run as planned (runtime::kernel_bytes_moved)

  bool operator==(const KernelDesc&) const = default;
};

struct SectionDesc {
  int32_t id = 0;  // unique in the program
  std::string name;
  SectionType type = SectionType::FWD;
  int32_t graph = 0;             // index into ProgramDesc::graphs
  std::vector<int32_t> kernels;  // in an order that is valid to run sequentially
  std::vector<int32_t> reads;    // tensors read from outside the section
  std::vector<int32_t> writes;   // tensors written that live beyond the section
  bool micro_batched = false;    // runs once per micro-batch

  bool operator==(const SectionDesc&) const = default;
};

struct CallDesc {
  int32_t id = 0;  // call id (run_from_call_id / run_until_call_id)
  int32_t section = 0;  // index into ProgramDesc::sections

  bool operator==(const CallDesc&) const = default;
};

struct ArginDesc {
  std::string name;
  ArginKind kind = ArginKind::Hyperparam;
  AttrValue default_value;  // int64_t or double

  bool operator==(const ArginDesc&) const = default;
};

// Raw bytes; stored zstd-compressed with an XXH64 checksum of these bytes.
struct BlobDesc {
  std::vector<uint8_t> data;

  bool operator==(const BlobDesc&) const = default;
};

// A built-in materializer (engine/rng/materializer_desc.h), stored in PEFs.
using MaterializerDesc = rng::MaterializerDesc;

struct MemoryPlanDesc {
  uint64_t arena_bytes[kNumMemTypes] = {0, 0, 0};       // state area per memory type
  uint64_t activation_bytes[kNumMemTypes] = {0, 0, 0};  // activation area per memory type
  uint64_t peak_bytes = 0;         // sum of both areas over the memory types (one run)
  uint64_t lower_bound_bytes = 0;  // persistent bytes + the largest live set of intermediates

  bool operator==(const MemoryPlanDesc&) const = default;
};

// A REDUCE bucket: Gradient tensors laid out back to back in the state area
// of memory type `mem` (the first at arena_offset, each next one right after
// the one before, nbytes in all), all of `dtype` (float32 or float64), so
// the bucket is one all-reduce.
struct ReduceBucketDesc {
  std::vector<int32_t> gradients;  // in memory order
  MemType mem = MemType::DDR;
  DType dtype = DType::Float32;
  uint64_t arena_offset = 0;
  uint64_t nbytes = 0;

  bool operator==(const ReduceBucketDesc&) const = default;
};

// A data-parallel program (--data-parallel -ws N): the replicas it is for
// and its REDUCE buckets, in the order they are all-reduced (the reverse of
// the order backward produces the gradients). world_size 0: not data
// parallel (no buckets, no REDUCE section).
struct DataParallelDesc {
  int32_t world_size = 0;
  uint64_t bucket_bytes = 0;  // the size buckets were cut at
  std::vector<ReduceBucketDesc> buckets;

  bool operator==(const DataParallelDesc&) const = default;
};

// One traced graph (a model with its optimizers). A PEF from compile() has
// one; compile_multigraph() writes one per added graph, in order.
struct GraphDesc {
  std::string name;
  std::vector<int32_t> inputs;   // Input tensors, in the order the model takes them
  std::vector<int32_t> outputs;  // tensors the model returns, in order
  // Per output: its gradient tensor (OutputGrad), or -1 when the output gets
  // none (not a loss, or an inference compile).
  std::vector<int32_t> output_grads;
  std::vector<int32_t> parameters;
  std::vector<int32_t> sections;
  int64_t batch_size = 0;        // 0: not given
  int64_t micro_batch_size = 0;  // 0: same as batch_size
  Mapping mapping = Mapping::Section;
  bool inference = false;
  bool grad_accumulation = false;
  // The traced forward graph, one line per op in trace order
  // ("linear(x: float32[64,784], gemm1.weight: float32[1024,784], ...) ->
  // float32[64,1024]"); a re-trace must reproduce it line for line.
  std::vector<std::string> signature;

  bool operator==(const GraphDesc&) const = default;
};

struct ProgramDesc {
  std::string name;
  std::string compiler_version;  // samba_version() of the compiler
  uint32_t format_major = kFormatMajor;
  uint32_t format_minor = kFormatMinor;
  int32_t opt_level = 1;
  std::vector<TensorDesc> tensors;
  std::vector<KernelDesc> kernels;
  std::vector<SectionDesc> sections;
  std::vector<CallDesc> schedule;
  std::vector<ArginDesc> argins;
  std::vector<BlobDesc> blobs;
  std::vector<MaterializerDesc> materializers;
  std::vector<GraphDesc> graphs;
  MemoryPlanDesc memory;
  std::vector<std::pair<std::string, std::string>> metadata;  // pef_metadata
  DataParallelDesc data_parallel;

  bool operator==(const ProgramDesc&) const = default;
};

std::string_view mem_type_name(MemType m);         // "DDR", "HBM", "HOST"
std::string_view tensor_role_name(TensorRole r);   // "input", "parameter", ...
std::string_view section_type_name(SectionType t); // "FWD", "BCKWD", ...
std::string_view argin_kind_name(ArginKind k);
std::string_view mapping_name(Mapping m);          // "section", "spatial"
// Parses a section type name, case-insensitively ("fwd", "Bckwd"); throws
// NotFound listing the known names otherwise.
SectionType section_type_from_name(std::string_view name);

}  // namespace samba::pef
