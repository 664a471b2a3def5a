// The compiler's entry point: trace each graph (a model callback with its
// inputs and optimizers), differentiate it, add the optimizer updates, run
// the passes, cut kernels and sections, plan memory, and lower everything to
// the program a PEF file holds.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "compiler/autograd/backward.h"
#include "compiler/optim/optimizer.h"
#include "compiler/passes/mixed_precision.h"
#include "compiler/schedule/schedule.h"
#include "engine/pef/program.h"

namespace samba::compiler {

// The model: called once per trace with symbolic inputs; returns its
// outputs. Ops it calls are recorded, not computed.
using ModelFn = std::function<std::vector<Tensor>(std::span<const Tensor> inputs)>;

struct GraphSpec {
  std::string name = "model";
  ModelFn model;
  std::vector<Tensor> inputs;  // examples: name, dtype and shape of each input
  std::vector<OptimizerSpec> optimizers;
  BackwardOptions backward;
  bool inference = false;     // forward only: no gradients, no optimizer
  int64_t batch_size = 0;      // 0: not given
  int64_t micro_batch_size = 0;  // 0: the whole batch
  pef::Mapping mapping = pef::Mapping::Section;
};

struct CompileOptions {
  std::string name = "model";
  int opt_level = 1;  // 0 (o0) or 1 (o1): the levels of passes/pipeline.h
  // bf16 products with fp32 accumulation and fp32 master weights
  // (passes/mixed_precision.h); recorded in the PEF's metadata.
  MixedPrecision mixed_precision = MixedPrecision::None;
  bool io_host_memory = false;
  // Store the current values of parameters and buffers that have data in
  // the PEF, so it runs without the app's tensors (pure inference loads).
  bool embed_weights = true;
  std::vector<std::pair<std::string, std::string>> metadata;
  // Data parallel (--data-parallel -ws N): the replicas the PEF is for (0:
  // not data parallel) and the REDUCE section's bucket size (0: 25 MiB).
  int32_t data_parallel_world_size = 0;
  uint64_t data_parallel_bucket_bytes = 0;
};

// One graph after compilation, kept for tests, dumps and the runtime's
// re-trace check.
struct CompiledGraph {
  Graph graph;
  std::vector<Kernel> kernels;
  std::vector<SectionPlan> sections;
  std::vector<std::string> signature;
};

// Traces the forward graph of `spec` only (no backward, no passes): what a
// re-trace at load time compares against the PEF's signature.
CompiledGraph trace_forward(const GraphSpec& spec);

// Compiles the graphs into one program, in order. `compiled`, when given,
// receives the graphs after compilation.
pef::ProgramDesc compile_program(const std::vector<GraphSpec>& graphs, const CompileOptions& opts,
                                 std::vector<CompiledGraph>* compiled = nullptr);

}  // namespace samba::compiler
