#include "compiler/lower/lower_program.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "compiler/memplan/memory_plan.h"
#include "compiler/passes/pipeline.h"
#include "engine/core/error.h"
#include "samba/core.h"

namespace samba::compiler {
namespace {

constexpr std::string_view kPassesKey = "compiler.passes";
constexpr std::string_view kMixedPrecisionKey = "compiler.mixed_precision";

pef::TensorRole role_of(const Value& v) {
  if (v.is_view()) return pef::TensorRole::Alias;
  switch (v.kind) {
    case ValueKind::Input: return pef::TensorRole::Input;
    case ValueKind::Parameter: return pef::TensorRole::Parameter;
    case ValueKind::Buffer: return pef::TensorRole::Buffer;
    case ValueKind::Constant: return pef::TensorRole::Constant;
    case ValueKind::Gradient: return pef::TensorRole::Gradient;
    case ValueKind::OptimizerState: return pef::TensorRole::OptimizerState;
    case ValueKind::OutputGrad: return pef::TensorRole::OutputGrad;
    case ValueKind::Intermediate: return v.is_output ? pef::TensorRole::Output : pef::TensorRole::Intermediate;
  }
  return pef::TensorRole::Intermediate;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint8_t> out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.raw_data(), out.size());
  return out;
}

class Lowering {
 public:
  Lowering(const std::vector<CompiledGraph>& graphs, const std::vector<GraphSpec>& specs,
           const CompileOptions& opts)
      : graphs_(graphs), specs_(specs), opts_(opts) {}

  pef::ProgramDesc run() {
    p_.name = opts_.name;
    p_.compiler_version = samba_version();
    p_.opt_level = opts_.opt_level;
    p_.metadata = opts_.metadata;
    record_passes();
    record_mixed_precision();

    std::vector<PlanInput> plan_in;
    for (const CompiledGraph& cg : graphs_)
      plan_in.push_back({&cg.graph, &cg.kernels, &cg.sections});
    const bool data_parallel = opts_.data_parallel_world_size > 0;
    plan_ = plan_memory(plan_in, opts_.io_host_memory, data_parallel);
    for (int m = 0; m < pef::kNumMemTypes; ++m) {
      p_.memory.arena_bytes[m] = plan_.arena_bytes[m];
      p_.memory.activation_bytes[m] = plan_.activation_bytes[m];
    }
    p_.memory.peak_bytes = plan_.peak_bytes;
    p_.memory.lower_bound_bytes = plan_.lower_bound_bytes;

    tensor_of_.resize(graphs_.size());
    for (size_t gi = 0; gi < graphs_.size(); ++gi) lower_tensors(gi);
    if (data_parallel) lower_buckets();
    for (size_t gi = 0; gi < graphs_.size(); ++gi) lower_graph(gi);
    return std::move(p_);
  }

 private:
  // Graphs share a parameter or buffer by using the same tensor (one device
  // tensor, as a prompt graph and a token graph share weights and a KV
  // cache). Two different tensors that only happen to have the same name
  // would silently become one: refused, naming both graphs.
  void check_same_host(const std::string& graph, const Value& v) const {
    auto it = first_host_.find(v.name);
    if (it == first_host_.end() || !v.host.defined() ||
        (v.kind != ValueKind::Parameter && v.kind != ValueKind::Buffer))
      return;
    SAMBA_CHECK(it->second.second == v.host.impl(), Status::InvalidArgument,
                "compile: graphs '{}' and '{}' both have a {} named '{}' but they are different tensors; "
                "pass the same tensor to both graphs to share it, or give them different names",
                it->second.first, graph, v.kind == ValueKind::Buffer ? "buffer" : "parameter", v.name);
  }

  int32_t argin_index(const std::string& name) {
    for (size_t i = 0; i < p_.argins.size(); ++i)
      if (p_.argins[i].name == name) return static_cast<int32_t>(i);
    fail(Status::Internal, "lowering: argin '{}' was not declared", name);
  }

  int32_t add_blob(const Tensor& t) {
    p_.blobs.push_back({bytes_of(t)});
    return static_cast<int32_t>(p_.blobs.size() - 1);
  }

  // The passes the program went through, for the .pef.log and tools; a
  // value the app set under the same key is kept.
  void record_passes() {
    for (const auto& [key, value] : p_.metadata)
      if (key == kPassesKey) return;
    const auto names = pass_names(opts_.opt_level, opts_.mixed_precision);
    p_.metadata.emplace_back(kPassesKey, fmt::format("{}", fmt::join(names, ", ")));
  }

  // A mixed-precision PEF says so (the .pef.log header shows it); an fp32
  // one carries no entry, as before mixed precision existed.
  void record_mixed_precision() {
    if (opts_.mixed_precision == MixedPrecision::None) return;
    for (const auto& [key, value] : p_.metadata)
      SAMBA_CHECK(key != kMixedPrecisionKey, Status::InvalidArgument,
                  "compile: metadata key '{}' is the compiler's (the mixed precision it compiled "
                  "with)",
                  key);
    p_.metadata.emplace_back(kMixedPrecisionKey, mixed_precision_name(opts_.mixed_precision));
  }

  // Every value of a compiled graph is used (the passes erase the rest), so
  // each becomes a tensor of the program.
  void lower_tensors(size_t gi) {
    const Graph& g = graphs_[gi].graph;
    const Placement& pl = plan_.graphs[gi];
    std::vector<int32_t>& index = tensor_of_[gi];
    index.assign(g.values.size(), -1);
    const bool prefix = graphs_.size() > 1;
    // Roots first, so aliases can name their base.
    for (int pass = 0; pass < 2; ++pass)
      for (const Value& v : g.values) {
        if (v.is_view() != (pass == 1)) continue;
        const bool shared = is_shared_across_graphs(v.kind);
        std::string name = v.name;
        if (prefix && !shared) name = fmt::format("{}/{}", g.name, v.name);
        if (shared) {
          if (auto it = persistent_.find(name); it != persistent_.end()) {
            const pef::TensorDesc& t = p_.tensors[it->second];
            SAMBA_CHECK(t.dtype == v.dtype && t.shape == v.shape, Status::InvalidArgument,
                        "compile: graphs '{}' and another graph both use a tensor named '{}' but "
                        "as {}{} and {}{}",
                        g.name, name, dtype_name(v.dtype), dims_str(v.shape), dtype_name(t.dtype),
                        dims_str(t.shape));
            check_same_host(g.name, v);
            index[v.id] = it->second;
            continue;
          }
        }
        pef::TensorDesc t;
        t.name = name;
        t.dtype = v.dtype;
        t.shape = v.shape;
        t.role = role_of(v);
        t.requires_grad = v.requires_grad;
        t.batch_dim = v.batch_dim;
        t.owner = v.owner;
        if (v.is_view()) {
          t.alias_of = index[v.view_of];
          t.strides = v.strides;
          t.view_offset = v.view_offset;
        } else {
          t.mem = pl.mem[v.id];
          t.arena_offset = pl.offset[v.id];
          t.nbytes = pl.nbytes[v.id];
          t.region = v.region;
          t.strides = contiguous_strides(v.shape);
        }
        const bool has_values = v.host.defined() && v.host.has_data();
        if (v.kind == ValueKind::Constant || v.kind == ValueKind::OutputGrad ||
            (opts_.embed_weights && has_values &&
             (v.kind == ValueKind::Parameter || v.kind == ValueKind::Buffer))) {
          if (has_values) t.blob = add_blob(v.host);
        }
        // Embedded values are the tensor's contents; a materializer only
        // describes a tensor whose values the PEF does not carry.
        if (v.materializer && t.blob < 0) {
          p_.materializers.push_back(*v.materializer);
          t.materializer = static_cast<int32_t>(p_.materializers.size() - 1);
        }
        p_.tensors.push_back(std::move(t));
        index[v.id] = static_cast<int32_t>(p_.tensors.size() - 1);
        if (shared) persistent_[name] = index[v.id];
        if (shared && v.host.defined()) first_host_[name] = {g.name, v.host.impl()};
      }
    for (ValueId pv : g.parameters) {
      const Value& v = g.value(pv);
      if (v.grad != kNone && index[pv] >= 0) p_.tensors[index[pv]].grad = index[v.grad];
    }
    for (size_t i = 0; i < g.output_grads.size() && i < g.outputs.size(); ++i)
      if (g.output_grads[i] != kNone && index[g.output_grads[i]] >= 0)
        p_.tensors[index[g.output_grads[i]]].owner = p_.tensors[index[g.outputs[i]]].name;
    for (const ArginSpec& a : g.argins) {
      bool known = false;
      for (const auto& have : p_.argins)
        if (have.name == a.name) {
          SAMBA_CHECK(have.default_value == a.default_value && have.kind == a.kind,
                      Status::InvalidArgument,
                      "compile: argin '{}' has default {} in graph '{}' and {} in another graph",
                      a.name, attr_value_str(a.default_value), g.name, attr_value_str(have.default_value));
          known = true;
        }
      if (!known) p_.argins.push_back({a.name, a.kind, a.default_value});
    }
  }

  pef::KernelDesc lower_kernel(size_t gi, const Kernel& k) {
    const Graph& g = graphs_[gi].graph;
    const auto& index = tensor_of_[gi];
    pef::KernelDesc kd;
    // A fused kernel is an elementwise chain, or a producer followed by one.
    kd.fusion = g.node(k.nodes[0]).op->fusion;
    std::vector<std::string> names;
    auto add_unique = [](std::vector<int32_t>& list, int32_t t) {
      for (int32_t x : list)
        if (x == t) return;
      list.push_back(t);
    };
    for (NodeId nid : k.nodes) {
      const Node& n = g.node(nid);
      names.push_back(n.name);
      pef::OpCall call;
      call.op = n.op->name;
      call.attrs = n.attrs;
      std::vector<Tensor> sym_in;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const ValueId v = n.inputs[i];
        call.inputs.push_back(v == kNone ? -1 : index[v]);
        if (v == kNone) {
          sym_in.emplace_back();
          continue;
        }
        const Value& val = g.value(v);
        sym_in.push_back(Tensor::symbolic(val.shape, val.dtype));
        const InputSpec& spec = n.op->inputs[std::min(i, n.op->inputs.size() - 1)];
        // A value an earlier op of this kernel computed is internal to it.
        const bool internal = std::find(kd.writes.begin(), kd.writes.end(), index[v]) != kd.writes.end();
        if (spec.mutated) add_unique(kd.writes, index[v]);
        if (!internal) add_unique(kd.reads, index[v]);
      }
      std::vector<TensorMeta> metas;
      for (ValueId o : n.outputs) {
        const Value& val = g.value(o);
        call.outputs.push_back(index[o]);
        add_unique(kd.writes, index[o]);
        metas.push_back({val.dtype, val.shape});
      }
      for (const Binding& b : n.bindings) call.bindings.push_back({b.attr, argin_index(b.argin)});
      kd.flops += estimate_flops(*n.op, InferContext{*n.op, sym_in, n.attrs}, metas);
      kd.ops.push_back(std::move(call));
    }
    kd.name = names.size() == 1 ? names[0] : fmt::format("fused[{}]", fmt::join(names, "+"));
    if (graphs_.size() > 1) kd.name = fmt::format("{}/{}", g.name, kd.name);
    return kd;
  }

  // Cuts the gradients, in the order backward finishes them (the memory
  // plan laid them out so), into buckets of about bucket_bytes: a bucket
  // closes before the gradient that would take it past the size (a larger
  // gradient is a bucket of its own), or that has another dtype or memory
  // type.
  void lower_buckets() {
    constexpr uint64_t kDefaultBucketBytes = uint64_t{25} << 20;
    pef::DataParallelDesc& dp = p_.data_parallel;
    dp.world_size = opts_.data_parallel_world_size;
    dp.bucket_bytes =
        opts_.data_parallel_bucket_bytes ? opts_.data_parallel_bucket_bytes : kDefaultBucketBytes;
    for (const auto& [gi, v] : plan_.gradient_order) {
      const int32_t t = tensor_of_[gi][v];
      const pef::TensorDesc& td = p_.tensors[static_cast<size_t>(t)];
      SAMBA_CHECK(
          td.dtype == DType::Float32 || td.dtype == DType::Float64, Status::Unsupported,
          "compile: data parallel averages float32 and float64 gradients; the gradient '{}' is {} "
          "(train that parameter in float32)",
          td.name, dtype_name(td.dtype));
      const bool fits =
          !dp.buckets.empty() && dp.buckets.back().dtype == td.dtype &&
          dp.buckets.back().mem == td.mem &&
          td.arena_offset + td.nbytes - dp.buckets.back().arena_offset <= dp.bucket_bytes;
      if (!fits) {
        pef::ReduceBucketDesc b;
        b.mem = td.mem;
        b.dtype = td.dtype;
        b.arena_offset = td.arena_offset;
        dp.buckets.push_back(std::move(b));
      }
      pef::ReduceBucketDesc& b = dp.buckets.back();
      b.gradients.push_back(t);
      b.nbytes = td.arena_offset + td.nbytes - b.arena_offset;
    }
  }

  void lower_graph(size_t gi) {
    const CompiledGraph& cg = graphs_[gi];
    const Graph& g = cg.graph;
    const GraphSpec& spec = specs_[gi];
    const auto& index = tensor_of_[gi];
    const int32_t graph_index = static_cast<int32_t>(p_.graphs.size());
    pef::GraphDesc gd;
    gd.name = g.name;
    for (ValueId v : g.inputs) gd.inputs.push_back(index[v]);
    for (ValueId v : g.outputs) gd.outputs.push_back(index[v]);
    for (size_t i = 0; i < g.outputs.size(); ++i)
      gd.output_grads.push_back(i < g.output_grads.size() && g.output_grads[i] != kNone ? index[g.output_grads[i]] : -1);
    for (ValueId v : g.parameters)
      if (index[v] >= 0) gd.parameters.push_back(index[v]);
    gd.batch_size = spec.batch_size;
    gd.micro_batch_size = spec.micro_batch_size;
    gd.mapping = spec.mapping;
    gd.inference = spec.inference;
    gd.grad_accumulation = spec.backward.grad_accumulation;
    gd.signature = cg.signature;

    std::vector<ValueId> value_of_tensor(p_.tensors.size(), kNone);
    for (size_t v = 0; v < index.size(); ++v)
      if (index[v] >= 0) value_of_tensor[index[v]] = static_cast<ValueId>(v);
    const int32_t kernel_base = static_cast<int32_t>(p_.kernels.size());
    for (const Kernel& k : cg.kernels) p_.kernels.push_back(lower_kernel(gi, k));
    const bool micro = spec.micro_batch_size > 0 && spec.micro_batch_size < spec.batch_size;
    std::map<pef::SectionType, int> count;
    for (const SectionPlan& sp : cg.sections) {
      pef::SectionDesc sd;
      sd.id = static_cast<int32_t>(p_.sections.size());
      const int nth = count[sp.type]++;
      sd.name = fmt::format("{}_{}{}", g.name, pef::section_type_name(sp.type), nth ? fmt::format("_{}", nth) : "");
      sd.type = sp.type;
      sd.graph = graph_index;
      sd.micro_batched = micro && (sp.type == pef::SectionType::FWD || sp.type == pef::SectionType::BCKWD);
      std::vector<bool> written(p_.tensors.size(), false), listed_read(p_.tensors.size(), false),
          listed_write(p_.tensors.size(), false);
      for (int32_t k : sp.kernels) {
        const pef::KernelDesc& kd = p_.kernels[kernel_base + k];
        sd.kernels.push_back(kernel_base + k);
        for (int32_t t : kd.reads)
          if (!written[t] && !listed_read[t]) {
            listed_read[t] = true;
            sd.reads.push_back(t);
          }
        for (int32_t t : kd.writes) {
          written[t] = true;
          const pef::TensorDesc& td = p_.tensors[t];
          const ValueId v = value_of_tensor[t];
          const bool lives_on = td.role != pef::TensorRole::Intermediate ||
                                (v != kNone && plan_.graphs[gi].pinned[g.root(v)]);
          if (lives_on && !listed_write[t]) {
            listed_write[t] = true;
            sd.writes.push_back(t);
          }
        }
      }
      if (sp.type == pef::SectionType::REDUCE)
        for (const auto& b : p_.data_parallel.buckets)
          for (int32_t t : b.gradients)
            if (value_of_tensor[static_cast<size_t>(t)] != kNone) {
              sd.reads.push_back(t);
              sd.writes.push_back(t);
            }
      gd.sections.push_back(sd.id);
      p_.schedule.push_back({static_cast<int32_t>(p_.schedule.size()), sd.id});
      p_.sections.push_back(std::move(sd));
    }
    p_.graphs.push_back(std::move(gd));
  }

  const std::vector<CompiledGraph>& graphs_;
  const std::vector<GraphSpec>& specs_;
  const CompileOptions& opts_;
  pef::ProgramDesc p_;
  MemoryPlan plan_;
  std::vector<std::vector<int32_t>> tensor_of_;
  std::map<std::string, int32_t> persistent_;
  // Per shared parameter or buffer name: the graph that first used it and its host tensor.
  std::map<std::string, std::pair<std::string, const TensorImpl*>> first_host_;
};

}  // namespace

pef::ProgramDesc lower_program(const std::vector<CompiledGraph>& graphs,
                               const std::vector<GraphSpec>& specs, const CompileOptions& opts) {
  return Lowering(graphs, specs, opts).run();
}

}  // namespace samba::compiler
