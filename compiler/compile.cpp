#include "compiler/compile.h"

#include "compiler/lower/lower_program.h"
#include "compiler/passes/pipeline.h"
#include "engine/core/error.h"
#include "engine/core/log.h"
#include "engine/pef/verify.h"
#include "engine/runtime/program.h"

namespace samba::compiler {
namespace {

bool micro_batched(const GraphSpec& s) {
  return s.micro_batch_size > 0 && s.batch_size > 0 && s.micro_batch_size < s.batch_size;
}

void check_spec(const GraphSpec& s) {
  SAMBA_CHECK(static_cast<bool>(s.model), Status::NullPointer, "compile: graph '{}' has no model function",
              s.name);
  SAMBA_CHECK(!s.name.empty(), Status::InvalidArgument, "compile: a graph needs a non-empty name");
  SAMBA_CHECK(s.batch_size >= 0 && s.micro_batch_size >= 0, Status::InvalidArgument,
              "compile: batch size {} and micro-batch size {} must not be negative", s.batch_size,
              s.micro_batch_size);
  if (micro_batched(s))
    SAMBA_CHECK(s.batch_size % s.micro_batch_size == 0, Status::InvalidArgument,
                "compile: batch size {} is not a multiple of micro-batch size {}", s.batch_size,
                s.micro_batch_size);
  SAMBA_CHECK(!s.inference || s.optimizers.empty(), Status::InvalidArgument,
              "compile: graph '{}' is compiled for inference but has {} optimizer(s); inference "
              "graphs have no OPT section",
              s.name, s.optimizers.size());
}

// Traces the model into cg.graph (forward nodes only) and records the
// signature.
void trace_model(const GraphSpec& spec, CompiledGraph& cg, Tracer& tracer) {
  Graph& g = cg.graph;
  g.name = spec.name;
  std::vector<Tensor> inputs;
  const bool micro = micro_batched(spec);
  for (const Tensor& example : spec.inputs) {
    SAMBA_CHECK(example.defined(), Status::NullPointer, "compile: graph '{}': an input is NULL", spec.name);
    Dims shape = example.shape();
    int32_t batch_dim = -1;
    if (micro && !shape.empty() && shape[0] == spec.batch_size) {
      // Traced at the micro-batch size; the runtime streams the batch through.
      shape[0] = spec.micro_batch_size;
      batch_dim = 0;
    }
    inputs.push_back(tracer.add_input(example, shape, batch_dim));
  }
  std::vector<Tensor> outputs;
  {
    Tracer::Active active(tracer);
    outputs = spec.model(inputs);
    // A view has no storage of its own (the PEF gives it the alias role, and
    // the runtime returns only outputs), so an output that is one is copied.
    for (Tensor& out : outputs)
      if (out.defined() && g.value(tracer.value_of(out)).is_view())
        out = call1("cast", {out}, {{"dtype", out.dtype()}});
  }
  SAMBA_CHECK(!outputs.empty(), Status::InvalidArgument, "compile: the model of graph '{}' returned no outputs",
              spec.name);
  for (size_t i = 0; i < outputs.size(); ++i) {
    SAMBA_CHECK(outputs[i].defined(), Status::NullPointer,
                "compile: output {} of the model of graph '{}' is NULL", i, spec.name);
    const ValueId v = tracer.value_of(outputs[i]);
    g.value(v).is_output = true;
    if (micro && !g.value(v).shape.empty() && g.value(v).shape[0] == spec.micro_batch_size)
      g.value(v).batch_dim = 0;
    g.outputs.push_back(v);
  }
  for (const Node& n : g.nodes) cg.signature.push_back(signature_line(g, n));
}

// Each kernel's bytes as the runtime will run it: which chains run as one
// pass is the runtime's decision (fused_elementwise.h), so the PEF, its
// .pef.log and the profiles all take the figure from the program the
// runtime plans. It is planned here without the blobs' bytes, which it does
// not read, so a large model's weights are not copied.
void set_kernel_bytes(pef::ProgramDesc& program) {
  std::vector<std::vector<uint8_t>> data;
  data.reserve(program.blobs.size());
  for (pef::BlobDesc& b : program.blobs) data.push_back(std::move(b.data));
  auto restore = [&] {
    for (size_t i = 0; i < data.size(); ++i) program.blobs[i].data = std::move(data[i]);
  };
  try {
    const runtime::Program planned(program);
    for (size_t k = 0; k < program.kernels.size(); ++k)
      program.kernels[k].bytes = planned.kernels()[k].bytes;
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

}  // namespace

CompiledGraph trace_forward(const GraphSpec& spec) {
  check_spec(spec);
  CompiledGraph cg;
  Tracer tracer(cg.graph);
  trace_model(spec, cg, tracer);
  cg.graph.verify();
  return cg;
}

pef::ProgramDesc compile_program(const std::vector<GraphSpec>& specs, const CompileOptions& opts,
                                 std::vector<CompiledGraph>* compiled) {
  SAMBA_CHECK(!specs.empty(), Status::InvalidArgument, "compile: no graph to compile");
  const OptLevel& level = opt_level(opts.opt_level);
  std::vector<CompiledGraph> graphs;
  graphs.reserve(specs.size());
  for (const GraphSpec& spec : specs) {
    check_spec(spec);
    for (const CompiledGraph& other : graphs)
      SAMBA_CHECK(other.graph.name != spec.name, Status::InvalidArgument,
                  "compile: two graphs are named '{}'", spec.name);
    CompiledGraph& cg = graphs.emplace_back();
    Tracer tracer(cg.graph);
    trace_model(spec, cg, tracer);
    Graph& g = cg.graph;
    if (const std::span<const Pass> rewrites = forward_passes(opts.mixed_precision);
        !rewrites.empty()) {
      g = run_passes(std::move(g), rewrites);
      // Values the rewrite retyped need symbols of their new dtype.
      tracer.forget_symbols();
    }
    if (!spec.inference) {
      BackwardOptions bo = spec.backward;
      // Micro-batches add their gradients into the parameters' gradients, so
      // the update sees the whole batch's.
      if (micro_batched(spec)) bo.grad_accumulation = true;
      if (micro_batched(spec)) {
        const double scale = static_cast<double>(spec.micro_batch_size) / static_cast<double>(spec.batch_size);
        // A loss reduced over the micro-batch (a scalar) is one of
        // batch/micro-batch terms of the whole batch's mean.
        bo.output_grads.resize(g.outputs.size());
        for (size_t i = 0; i < g.outputs.size(); ++i) {
          OutputGradSpec& og = bo.output_grads[i];
          const Value& out = g.value(g.outputs[i]);
          if (og.mode == OutputGradMode::Ones && out.batch_dim < 0) {
            og.mode = OutputGradMode::Custom;
            og.values = Tensor::empty(out.shape, out.dtype);
            og.values.copy_from(Tensor::scalar(scale, out.dtype));
          }
        }
      }
      build_backward(g, tracer, bo);
      for (size_t i = 0; i < spec.optimizers.size(); ++i)
        emit_optimizer(g, tracer, spec.optimizers[i], static_cast<int>(i));
    }
    g = run_passes(std::move(g), level.passes);
    cg.kernels = form_kernels(g, level.fuse_elementwise);
    cg.sections = cut_sections(cg.kernels);
    if (opts.data_parallel_world_size > 0) {
      SAMBA_CHECK(
          !spec.inference, Status::InvalidArgument,
          "compile: graph '{}' is an inference compile; data parallel averages training gradients "
          "(compile for training, or without data parallel)",
          spec.name);
      add_reduce_section(cg.sections);
    }
    log::debug("compile: graph '{}': {} nodes, {} kernels, {} sections", g.name, g.nodes.size(),
               cg.kernels.size(), cg.sections.size());
  }
  pef::ProgramDesc program = lower_program(graphs, specs, opts);
  // The loader verifies every PEF; checking here too means the compiler can
  // never write one its own loader refuses, and says so as a bug in Samba
  // rather than as a corrupt file the user would be left to explain.
  try {
    pef::verify_program(program);
  } catch (const Error& e) {
    fail(Status::Internal, "compile: the program compiled for '{}' fails the loader's checks (a bug in Samba): {}",
         program.name, e.what());
  }
  set_kernel_bytes(program);
  if (compiled) *compiled = std::move(graphs);
  return program;
}

}  // namespace samba::compiler
