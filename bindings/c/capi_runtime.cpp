// Loading PEFs, trace_graph, and run() with its options.
#include <algorithm>
#include <optional>

#include "bindings/c/capi.h"
#include "engine/ops/autograd.h"
#include "engine/pef/reader.h"
#include "engine/profile/profile_events.h"

using namespace samba;
using namespace samba::capi;

namespace samba::capi {

// Declared in capi_compile.cpp.
compiler::GraphSpec graph_spec(const char* name, samba_model_fn model, void* user_data,
                               samba_tensor* const* inputs, size_t n_inputs,
                               samba_optimizer* const* optimizers, size_t n_optimizers,
                               const samba_compile_options* opts);

namespace {

pef::ProgramDesc read_profiled(Session& s, const char* path) {
  require(path, "path");
  ProfileScope scope(s.profiles().profiler(), profile_events::kSetPef, ProfileCategory::Samba);
  return pef::read_pef(path);
}

// The re-trace must give the forward graph the PEF was compiled from.
void check_signature(const pef::GraphDesc& g, const std::vector<std::string>& traced, const std::string& path) {
  const size_t n = std::min(g.signature.size(), traced.size());
  for (size_t i = 0; i < n; ++i)
    SAMBA_CHECK(g.signature[i] == traced[i], Status::InvalidArgument,
                "trace_graph: the model traces differently from the one PEF '{}' was compiled from; "
                "op {} differs:\n  PEF:   {}\n  model: {}",
                path, i, g.signature[i], traced[i]);
  SAMBA_CHECK(g.signature.size() == traced.size(), Status::InvalidArgument,
              "trace_graph: the model traces to {} ops but PEF '{}' was compiled from {}; the first "
              "{} is:\n  {}",
              traced.size(), path, g.signature.size(), traced.size() > n ? "extra op" : "missing op",
              traced.size() > n ? traced[n] : g.signature[n]);
}

// Symbolic stand-ins for the outputs of graph g, named as the PEF names them.
std::vector<Tensor> traced_outputs(const pef::ProgramDesc& p, const pef::GraphDesc& g) {
  std::vector<Tensor> out;
  for (int32_t t : g.outputs) {
    const auto& td = p.tensors[static_cast<size_t>(t)];
    Dims shape = td.shape;
    if (td.batch_dim == 0 && g.micro_batch_size > 0 && g.micro_batch_size < g.batch_size)
      shape[0] = g.batch_size;
    Tensor s = Tensor::symbolic(shape, td.dtype);
    s.impl()->name = td.name;
    out.push_back(s);
  }
  return out;
}

int graph_output_index(const pef::ProgramDesc& p, const pef::GraphDesc& g, const std::string& name) {
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (p.tensors[static_cast<size_t>(g.outputs[i])].name == name) return static_cast<int>(i);
  return -1;
}

void require_output(const pef::ProgramDesc& p, const std::string& name) {
  std::vector<std::string> all;
  for (const auto& g : p.graphs) {
    if (graph_output_index(p, g, name) >= 0) return;
    for (int32_t t : g.outputs) all.push_back(p.tensors[static_cast<size_t>(t)].name);
  }
  fail(Status::NotFound, "init_output_grads: the PEF has no output named '{}'; its outputs are: {}", name,
       fmt::join(all, ", "));
}

// Fills `dst` with copies of `bytes` one after the other: a micro-batched
// output gradient holds one compiled micro-batch's values per micro-batch.
void fill_repeated(Tensor& dst, const std::vector<uint8_t>& bytes) {
  if (bytes.empty() || dst.nbytes() % bytes.size() != 0) return;
  auto* out = static_cast<uint8_t*>(dst.raw_data());
  for (size_t at = 0; at < dst.nbytes(); at += bytes.size()) std::copy(bytes.begin(), bytes.end(), out + at);
}

// The values each output gradient of graph g starts from: the compiled ones
// (the PEF's blob: ones for a loss, zeros for an output that is not one, the
// app's custom values), ones when the PEF has none, zeros for the outputs
// named in `zeroed`, or the given values. Everything is checked here, before
// the caller changes anything.
std::vector<std::pair<std::string, Tensor>> output_grad_values(
    const pef::ProgramDesc& p, const pef::GraphDesc& g, const std::vector<std::string>& zeroed,
    const std::vector<std::pair<std::string, Tensor>>& custom) {
  auto index_of = [&](const std::string& name) {
    const int i = graph_output_index(p, g, name);
    if (i < 0) require_output(p, name);
    SAMBA_CHECK(i >= 0 && g.output_grads[static_cast<size_t>(i)] >= 0, Status::InvalidArgument,
                "init_output_grads: output '{}' has no gradient in this PEF (not a loss, or an inference PEF)", name);
    return static_cast<size_t>(i);
  };
  std::vector<Tensor> values(g.outputs.size());
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    if (g.output_grads[i] < 0) continue;
    const auto& og = p.tensors[static_cast<size_t>(g.output_grads[i])];
    Dims shape = og.shape;
    if (og.batch_dim == 0 && g.micro_batch_size > 0 && g.micro_batch_size < g.batch_size) shape[0] = g.batch_size;
    values[i] = Tensor::empty(shape, og.dtype);
    // A micro-batched scalar loss starts from micro/batch, as compiled.
    const bool scaled = og.batch_dim < 0 && g.micro_batch_size > 0 && g.micro_batch_size < g.batch_size;
    values[i].copy_from(Tensor::scalar(
        scaled ? static_cast<double>(g.micro_batch_size) / static_cast<double>(g.batch_size) : 1.0, og.dtype));
    if (og.blob >= 0) fill_repeated(values[i], p.blobs[static_cast<size_t>(og.blob)].data);
  }
  for (const auto& n : zeroed) values[index_of(n)].copy_from(Tensor::scalar(0.0, values[index_of(n)].dtype()));
  for (const auto& [n, v] : custom) {
    Tensor& dst = values[index_of(n)];
    SAMBA_CHECK(v.has_data() && v.shape() == dst.shape(), Status::ShapeMismatch,
                "init_output_grads: the gradient given for output '{}' has shape {}; expected {}", n,
                dims_str(v.shape()), dims_str(dst.shape()));
    dst.copy_from(v);
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (g.output_grads[i] >= 0) out.emplace_back(p.tensors[static_cast<size_t>(g.output_grads[i])].name, values[i]);
  return out;
}

// Re-traces `spec` and checks it against graph g of the PEF at `path`;
// returns the host tensors the trace met (parameters, buffers, inputs).
std::vector<Tensor> retrace(Session& s, compiler::GraphSpec spec, const pef::GraphDesc& g, const std::string& path) {
  spec.batch_size = g.batch_size;
  spec.micro_batch_size = g.micro_batch_size;
  compiler::CompiledGraph traced;
  {
    ThreadPool::Scope pool(&s.pool());
    traced = compiler::trace_forward(spec);
  }
  check_signature(g, traced.signature, path);
  std::vector<Tensor> hosts;
  for (const auto& v : traced.graph.values)
    if (v.host.defined() && v.kind != compiler::ValueKind::Constant) hosts.push_back(v.host);
  return hosts;
}

// Copies the values of host parameters and buffers that have data to the
// device tensors of the same names.
void transfer_registered(runtime::Runtime& rt, const std::vector<Tensor>& hosts) {
  for (const Tensor& h : hosts) {
    const int32_t t = rt.program().find_tensor(h.name());
    if (t < 0 || !(h.has_data() || h.is_lazy())) continue;
    const auto role = rt.program().desc().tensors[static_cast<size_t>(t)].role;
    if (role == pef::TensorRole::Parameter || role == pef::TensorRole::Buffer) transfer_to_device(rt, h);
  }
}

}  // namespace
}  // namespace samba::capi

extern "C" {

samba_status samba_session_load_pef(samba_session* s, const char* path) {
  return SAMBA_GUARDED({
    require(s, "session");
    pef::ProgramDesc p = read_profiled(s->impl, path);
    s->impl.load(std::move(p), path);
  });
}

samba_status samba_session_unload(samba_session* s) {
  return SAMBA_GUARDED({
    require(s, "session");
    s->impl.unload();
  });
}

samba_status samba_trace_options_create(samba_trace_options** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    *out = new samba_trace_options();
  });
}

void samba_trace_options_release(samba_trace_options* o) { delete o; }

samba_status samba_trace_options_set_init_output_grads(samba_trace_options* o, int32_t enable) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->init_output_grads = enable != 0;
  });
}

samba_status samba_trace_options_add_unspecified_grad(samba_trace_options* o, const char* name) {
  return SAMBA_GUARDED({
    require(o, "opts");
    require(name, "output_name");
    o->unspecified_grads.emplace_back(name);
  });
}

samba_status samba_trace_options_set_custom_grad(samba_trace_options* o, const char* name, samba_tensor* values) {
  return SAMBA_GUARDED({
    require(o, "opts");
    require(name, "output_name");
    const Tensor v = tensor_arg(values, "values");
    o->custom_grads.emplace_back(name, v);
  });
}

samba_status samba_trace_options_set_transfer_device(samba_trace_options* o, int32_t enable) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->transfer_device = enable != 0;
  });
}

samba_status samba_trace_options_set_data_parallel_mode(samba_trace_options* o, const char* mode) {
  return SAMBA_GUARDED({
    require(o, "opts");
    require(mode, "mode");
    o->data_parallel_mode = runtime::data_parallel_mode_from_name(mode);
  });
}

samba_status samba_session_trace_graph(samba_session* s, samba_model_fn model, void* user_data,
                                       samba_tensor* const* inputs, size_t n_inputs,
                                       samba_optimizer* const* optimizers, size_t n_optimizers,
                                       const char* pef_path, const samba_trace_options* opts,
                                       samba_tensor** outputs, size_t capacity, size_t* n_outputs) {
  if (outputs)
    for (size_t i = 0; i < capacity; ++i) outputs[i] = nullptr;
  return SAMBA_GUARDED({
    require(s, "session");
    require(n_outputs, "n_outputs");
    *n_outputs = 0;
    if (capacity) require(outputs, "outputs");
    static const samba_trace_options kDefaults;
    const samba_trace_options& o = opts ? *opts : kDefaults;
    pef::ProgramDesc p = read_profiled(s->impl, pef_path);
    SAMBA_CHECK(!p.graphs.empty(), Status::CorruptFile, "trace_graph: PEF '{}' has no graph", pef_path);
    const pef::GraphDesc g = p.graphs[0];
    std::vector<Tensor> hosts;
    if (model) {
      compiler::GraphSpec spec = graph_spec(g.name.c_str(), model, user_data, inputs, n_inputs, optimizers,
                                            n_optimizers, nullptr);
      hosts = retrace(s->impl, spec, g, pef_path);
    } else {
      for (size_t i = 0; i < n_inputs; ++i) hosts.push_back(tensor_arg(inputs[i], "inputs[i]"));
    }
    const std::vector<Tensor> outs = traced_outputs(p, g);
    SAMBA_CHECK(outs.size() <= capacity, Status::OutOfRange,
                "trace_graph: the model has {} outputs but `outputs` holds {}", outs.size(), capacity);
    std::vector<std::pair<std::string, Tensor>> custom = o.custom_grads;
    std::vector<std::string> zeroed = o.unspecified_grads;
    // Without init_output_grads every output gradient starts at zero; an
    // inference PEF's outputs have none, so there is nothing to zero.
    if (!o.init_output_grads)
      for (size_t i = 0; i < g.outputs.size(); ++i)
        if (g.output_grads[i] >= 0) zeroed.push_back(p.tensors[static_cast<size_t>(g.outputs[i])].name);
    const auto grads = output_grad_values(p, g, zeroed, custom);  // checked before loading

    s->impl.load(std::move(p), pef_path);
    auto rt = s->impl.require_runtime("trace_graph");
    for (const Tensor& h : hosts) s->impl.register_tensor(h);
    if (o.transfer_device) {
      transfer_registered(*rt, hosts);
      for (const auto& [name, v] : grads) rt->write(name, v);
    }
    s->data_parallel_mode.store(o.data_parallel_mode);
    join_replicas(*rt);
    if (s->impl.pinned_memory()) {
      // Inputs and output gradients are fast access, as SambaFlow marks them.
      const auto& d = rt->program().desc();
      for (int32_t t : g.inputs)
        for (const Tensor& h : hosts)
          if (h.name() == d.tensors[static_cast<size_t>(t)].name) mark_fast_access(&s->impl, h, true);
      for (const auto& t : d.tensors)
        if (t.role == pef::TensorRole::OutputGrad) s->impl.set_fast_access(t.name, true);
    }
    *n_outputs = outs.size();
    for (size_t i = 0; i < outs.size() && i < capacity; ++i) outputs[i] = to_handle(outs[i]);
  });
}

samba_status samba_session_init_output_grads(samba_session* s, const char* const* unspecified, size_t n_unspecified,
                                             const char* const* custom_names, samba_tensor* const* custom_values,
                                             size_t n_custom) {
  return SAMBA_GUARDED({
    require(s, "session");
    if (n_unspecified) require(unspecified, "unspecified");
    if (n_custom) {
      require(custom_names, "custom_names");
      require(custom_values, "custom_values");
    }
    auto rt = s->impl.require_runtime("init_output_grads");
    std::vector<std::string> zeroed;
    for (size_t i = 0; i < n_unspecified; ++i) {
      SAMBA_CHECK(unspecified[i], Status::NullPointer, "unspecified[{}] is NULL", i);
      zeroed.emplace_back(unspecified[i]);
    }
    std::vector<std::pair<std::string, Tensor>> custom;
    for (size_t i = 0; i < n_custom; ++i) {
      SAMBA_CHECK(custom_names[i], Status::NullPointer, "custom_names[{}] is NULL", i);
      custom.emplace_back(custom_names[i], tensor_arg(custom_values[i], "custom_values[i]"));
    }
    const auto& d = rt->program().desc();
    std::vector<std::pair<std::string, Tensor>> all;
    for (const auto& g : d.graphs) {
      // Names of other graphs' outputs are not errors for this graph.
      std::vector<std::string> z;
      std::vector<std::pair<std::string, Tensor>> c;
      for (const auto& n : zeroed)
        if (graph_output_index(d, g, n) >= 0) z.push_back(n);
      for (const auto& kv : custom)
        if (graph_output_index(d, g, kv.first) >= 0) c.push_back(kv);
      for (auto& v : output_grad_values(d, g, z, c)) all.push_back(std::move(v));
    }
    for (const auto& n : zeroed) require_output(d, n);
    for (const auto& kv : custom) require_output(d, kv.first);
    for (const auto& [name, v] : all) rt->write(name, v);
  });
}

samba_status samba_session_init_multigraph_runtime(samba_session* s, const char* pef_path, int32_t transfer_device) {
  return SAMBA_GUARDED({
    require(s, "session");
    pef::ProgramDesc p = read_profiled(s->impl, pef_path);
    s->impl.load(std::move(p), pef_path);
    auto rt = s->impl.require_runtime("init_multigraph_runtime");
    join_replicas(*rt);
    if (!transfer_device) return;
    transfer_registered(*rt, s->impl.registered_tensors());
    const auto& d = rt->program().desc();
    for (const auto& g : d.graphs)
      for (const auto& [name, v] : output_grad_values(d, g, {}, {})) rt->write(name, v);
  });
}

samba_status samba_session_trace_multigraph(samba_session* s, const samba_graph* graph, samba_tensor** outputs,
                                            size_t capacity, size_t* n_outputs) {
  if (outputs)
    for (size_t i = 0; i < capacity; ++i) outputs[i] = nullptr;
  return SAMBA_GUARDED({
    require(s, "session");
    require(graph, "graph");
    require(n_outputs, "n_outputs");
    *n_outputs = 0;
    if (capacity) require(outputs, "outputs");
    auto rt = s->impl.require_runtime("trace_multigraph");
    const auto& d = rt->program().desc();
    const pef::GraphDesc* g = nullptr;
    std::vector<std::string> names;
    for (const auto& x : d.graphs) {
      names.push_back(x.name);
      if (x.name == graph->spec.name) g = &x;
    }
    SAMBA_CHECK(g, Status::NotFound, "trace_multigraph: the loaded PEF has no graph '{}'; its graphs are: {}",
                graph->spec.name, fmt::join(names, ", "));
    const std::vector<Tensor> hosts = retrace(s->impl, graph->spec, *g, s->impl.pef_path());
    const std::vector<Tensor> outs = traced_outputs(d, *g);
    *n_outputs = outs.size();
    SAMBA_CHECK(outs.size() <= capacity, Status::OutOfRange,
                "trace_multigraph: graph '{}' has {} outputs but `outputs` holds {}", g->name, outs.size(), capacity);
    for (const Tensor& h : hosts) s->impl.register_tensor(h);
    for (size_t i = 0; i < outs.size(); ++i) outputs[i] = to_handle(outs[i]);
  });
}

samba_status samba_run_options_create(samba_run_options** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    *out = new samba_run_options();
  });
}

void samba_run_options_release(samba_run_options* o) { delete o; }

samba_status samba_run_options_set_section_types(samba_run_options* o, const char* const* types, size_t n) {
  return SAMBA_GUARDED({
    require(o, "opts");
    if (n) require(types, "types");
    std::vector<std::string> v;
    for (size_t i = 0; i < n; ++i) {
      SAMBA_CHECK(types[i], Status::NullPointer, "types[{}] is NULL", i);
      v.emplace_back(types[i]);
    }
    o->request.section_types = std::move(v);
  });
}

samba_status samba_run_options_set_section_ids(samba_run_options* o, const int32_t* ids, size_t n) {
  return SAMBA_GUARDED({
    require(o, "opts");
    if (n) require(ids, "ids");
    o->request.section_ids.assign(ids, ids + n);
  });
}

samba_status samba_run_options_set_graph_name(samba_run_options* o, const char* graph_name) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->request.graph_name = graph_name ? graph_name : "";
  });
}

samba_status samba_run_options_set_call_range(samba_run_options* o, int64_t from, int64_t until) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(from >= -1 && until >= -1, Status::InvalidArgument,
                "call ids must be >= 0, or -1 for an open bound; got from {} until {}", from, until);
    o->request.from_call = from;
    o->request.until_call = until;
  });
}

samba_status samba_run_options_set_hyperparam(samba_run_options* o, const char* name, double value) {
  return SAMBA_GUARDED({
    require(o, "opts");
    require(name, "name");
    auto& hp = o->request.hyperparams;
    auto it = std::find_if(hp.begin(), hp.end(), [&](const auto& kv) { return kv.first == name; });
    if (it != hp.end())
      it->second = value;
    else
      hp.emplace_back(name, value);
  });
}

samba_status samba_run_options_clear_hyperparams(samba_run_options* o) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->request.hyperparams.clear();
  });
}

samba_status samba_run_options_set_train(samba_run_options* o, int32_t train) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->request.train = train != 0;
  });
}

samba_status samba_run_options_set_grad_of_outputs(samba_run_options* o, samba_tensor* const* grads, size_t n) {
  return SAMBA_GUARDED({
    require(o, "opts");
    if (n) require(grads, "grads");
    std::vector<Tensor> v;
    for (size_t i = 0; i < n; ++i) v.push_back(grads[i] ? tensor(grads[i]) : Tensor());
    o->request.grad_of_outputs = std::move(v);
  });
}

samba_status samba_run_options_set_data_parallel(samba_run_options* o, int32_t enable, int32_t reduce_on_rdu,
                                                 const char* mode) {
  return SAMBA_GUARDED({
    require(o, "opts");
    const auto m =
        mode ? runtime::data_parallel_mode_from_name(mode) : runtime::DataParallelMode::Normal;
    o->request.data_parallel = enable != 0;
    o->request.reduce_on_rdu = reduce_on_rdu != 0;
    o->request.data_parallel_mode = m;
    o->mode_given = mode != nullptr;
  });
}

samba_status samba_session_run(samba_session* s, samba_tensor* const* inputs, size_t n_inputs,
                               samba_tensor* const* output_tensors, size_t n_output_tensors,
                               const samba_run_options* opts, samba_tensor** outputs, size_t capacity,
                               size_t* n_outputs) {
  if (outputs)
    for (size_t i = 0; i < capacity; ++i) outputs[i] = nullptr;
  return SAMBA_GUARDED({
    require(s, "session");
    require(n_outputs, "n_outputs");
    if (capacity) require(outputs, "outputs");
    static const samba_run_options kDefaults;
    const samba_run_options& o = opts ? *opts : kDefaults;
    auto rt = s->impl.require_runtime("run");
    runtime::RunRequest r = o.request;
    if (!o.mode_given) r.data_parallel_mode = s->data_parallel_mode.load();
    if (n_inputs) require(inputs, "inputs");
    for (size_t i = 0; i < n_inputs; ++i) {
      SAMBA_CHECK(inputs[i], Status::NullPointer, "inputs[{}] is NULL", i);
      r.inputs.push_back(tensor(inputs[i]));
    }
    if (n_output_tensors) require(output_tensors, "output_tensors");
    for (size_t i = 0; i < n_output_tensors; ++i) {
      SAMBA_CHECK(output_tensors[i], Status::NullPointer, "output_tensors[{}] is NULL", i);
      r.outputs.push_back(tensor(output_tensors[i]).name());
    }
    // How many outputs the run returns is known before it runs: a too-small
    // array is refused without running.
    const size_t expected = rt->output_tensors(r).size();
    if (expected > capacity) {
      *n_outputs = expected;  // the one failure that sets it, as documented
      fail(Status::OutOfRange, "run: {} outputs but `outputs` holds {}; *n_outputs says how many are needed",
           expected, capacity);
    }
    std::vector<std::string_view> types(r.section_types.begin(), r.section_types.end());
    Profiler& prof = s->impl.profiles().profiler();
    std::optional<ProfileScope> scope;
    if (prof.enabled(ProfileCategory::Samba))
      scope.emplace(prof, prof.intern(profile_events::session_run_name(types)), ProfileCategory::Samba);
    std::vector<Tensor> outs;
    {
      autograd::NoGradGuard no_grad;
      outs = rt->run(r);
    }
    for (size_t i = 0; i < outs.size(); ++i) outputs[i] = to_handle(outs[i]);
    *n_outputs = outs.size();
  });
}

}  // extern "C"
