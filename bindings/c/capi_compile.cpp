// Compiling models into PEFs: compile options, the model callback, single
// and multigraph compiles.
#include <algorithm>
#include <optional>
#include <vector>

#include "bindings/c/capi.h"
#include "compiler/compile.h"
#include "compiler/passes/pipeline.h"
#include "engine/io/atomic_file.h"
#include "engine/pef/pef_log.h"
#include "engine/pef/writer.h"

using namespace samba;
using namespace samba::capi;

namespace samba::capi {
namespace {

thread_local const samba_session* t_tracing_session = nullptr;

// Marks the calling thread as tracing for `s` while a compile runs.
class TracingScope {
 public:
  explicit TracingScope(const samba_session* s) : prev_(t_tracing_session) { t_tracing_session = s; }
  ~TracingScope() { t_tracing_session = prev_; }
  TracingScope(const TracingScope&) = delete;
  TracingScope& operator=(const TracingScope&) = delete;

 private:
  const samba_session* prev_;
};

// Outputs a callback may return; more is refused with a message.
constexpr size_t kMaxModelOutputs = 256;

}  // namespace

compiler::ModelFn model_from_callback(samba_model_fn fn, void* user_data) {
  return [fn, user_data](std::span<const Tensor> in) {
    std::vector<samba_tensor*> handles;
    handles.reserve(in.size());
    for (const Tensor& t : in) handles.push_back(borrowed_handle(t));
    std::vector<samba_tensor*> outs(kMaxModelOutputs, nullptr);
    size_t n = 0;
    clear_error();
    const samba_status st = fn(user_data, handles.data(), handles.size(), outs.data(), outs.size(), &n);
    // The engine owns whatever the callback wrote, even when it then failed.
    std::vector<Tensor> result;
    for (size_t i = 0; i < std::min(n, outs.size()); ++i)
      if (outs[i]) result.emplace_back(Ref<TensorImpl>::adopt(impl(outs[i])));
    if (st != SAMBA_OK) fail_from_callback(st, "the model callback");
    SAMBA_CHECK(n <= outs.size(), Status::OutOfRange,
                "the model callback reported {} outputs; at most {} are supported", n, outs.size());
    SAMBA_CHECK(result.size() == n, Status::NullPointer,
                "the model callback reported {} outputs but wrote {} non-NULL tensors", n, result.size());
    return result;
  };
}

std::vector<Tensor> tensors_of(samba_tensor* const* ts, size_t n, const char* what) {
  if (n) require(ts, what);
  std::vector<Tensor> out;
  for (size_t i = 0; i < n; ++i) {
    SAMBA_CHECK(ts[i], Status::NullPointer, "{}[{}] is NULL", what, i);
    out.push_back(tensor(ts[i]));
  }
  return out;
}

std::vector<compiler::OptimizerSpec> optimizers_of(samba_optimizer* const* os, size_t n) {
  if (n) require(os, "optimizers");
  std::vector<compiler::OptimizerSpec> out;
  for (size_t i = 0; i < n; ++i) {
    SAMBA_CHECK(os[i], Status::NullPointer, "optimizers[{}] is NULL", i);
    out.push_back(os[i]->spec);
  }
  return out;
}

compiler::GraphSpec graph_spec(const char* name, samba_model_fn model, void* user_data,
                               samba_tensor* const* inputs, size_t n_inputs,
                               samba_optimizer* const* optimizers, size_t n_optimizers,
                               const samba_compile_options* opts) {
  SAMBA_CHECK(model, Status::NullPointer, "argument 'model' is NULL");
  static const samba_compile_options kDefaults;
  const samba_compile_options& o = opts ? *opts : kDefaults;
  compiler::GraphSpec g;
  g.name = name ? name : o.program.name;
  g.model = model_from_callback(model, user_data);
  g.inputs = tensors_of(inputs, n_inputs, "inputs");
  g.optimizers = optimizers_of(optimizers, n_optimizers);
  g.backward = o.backward;
  g.inference = o.inference;
  g.batch_size = o.batch_size;
  g.micro_batch_size = o.micro_batch_size;
  g.mapping = o.mapping;
  return g;
}

void compile_and_write(samba_session* s, const std::vector<compiler::GraphSpec>& graphs,
                       const samba_compile_options* opts) {
  static const samba_compile_options kDefaults;
  const samba_compile_options& o = opts ? *opts : kDefaults;
  pef::ProgramDesc program;
  {
    TracingScope tracing(s);
    ThreadPool::Scope pool(&s->impl.pool());
    program = compiler::compile_program(graphs, o.program);
  }
  const std::string path = o.pef_path.empty() ? o.program.name + ".pef" : o.pef_path;
  // Both files are made in memory and in temporaries before either is
  // committed (a commit allocates nothing), so a failure, out of memory
  // included, leaves neither a PEF without its log nor a log of another PEF.
  AtomicFile pef_file(path);
  const std::vector<uint8_t> pef_bytes = pef::serialize_pef(program);
  pef_file.write(pef_bytes.data(), pef_bytes.size());
  std::optional<AtomicFile> log_file;
  if (o.write_log) {
    log_file.emplace(path + ".log");
    log_file->write(pef::format_pef_log(program));
  }
  pef_file.commit();
  if (log_file) log_file->commit();
}

}  // namespace samba::capi

extern "C" {

samba_status samba_compile_options_create(samba_compile_options** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    *out = new samba_compile_options();
  });
}

void samba_compile_options_release(samba_compile_options* o) { delete o; }

samba_status samba_compile_options_set_name(samba_compile_options* o, const char* name) {
  return SAMBA_GUARDED({
    require(o, "opts");
    require(name, "name");
    SAMBA_CHECK(*name, Status::InvalidArgument, "the program name must not be empty");
    o->program.name = name;
  });
}

samba_status samba_compile_options_set_pef_path(samba_compile_options* o, const char* path) {
  return SAMBA_GUARDED({
    require(o, "opts");
    require(path, "path");
    SAMBA_CHECK(*path, Status::InvalidArgument, "the PEF path must not be empty");
    o->pef_path = path;
  });
}

samba_status samba_compile_options_set_opt_level(samba_compile_options* o, int32_t level) {
  return SAMBA_GUARDED({
    require(o, "opts");
    compiler::opt_level(level);  // refuses a level the pipeline does not have
    o->program.opt_level = level;
  });
}

samba_status samba_compile_options_set_mixed_precision(samba_compile_options* o, const char* mode) {
  return SAMBA_GUARDED({
    require(o, "opts");
    require(mode, "mode");
    o->program.mixed_precision = compiler::mixed_precision_from_name(mode);
  });
}

samba_status samba_compile_options_set_inference(samba_compile_options* o, int32_t inference) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->inference = inference != 0;
  });
}

samba_status samba_compile_options_set_batch_size(samba_compile_options* o, int64_t b) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(b >= 0, Status::InvalidArgument, "batch size {} must not be negative", b);
    o->batch_size = b;
  });
}

samba_status samba_compile_options_set_micro_batch_size(samba_compile_options* o, int64_t mb) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(mb >= 0, Status::InvalidArgument, "micro-batch size {} must not be negative", mb);
    o->micro_batch_size = mb;
  });
}

samba_status samba_compile_options_set_mapping(samba_compile_options* o, const char* mapping) {
  return SAMBA_GUARDED({
    require(o, "opts");
    require(mapping, "mapping");
    const std::string_view m = mapping;
    SAMBA_CHECK(m == "section" || m == "spatial", Status::InvalidArgument,
                "mapping '{}' is not supported; expected 'section' or 'spatial'", m);
    o->mapping = m == "spatial" ? pef::Mapping::Spatial : pef::Mapping::Section;
  });
}

samba_status samba_compile_options_set_loss_indices(samba_compile_options* o, const int64_t* idx,
                                                    size_t n) {
  return SAMBA_GUARDED({
    require(o, "opts");
    if (n) require(idx, "indices");
    for (size_t i = 0; i < n; ++i)
      SAMBA_CHECK(idx[i] >= 0, Status::OutOfRange, "loss index {} is negative", idx[i]);
    o->backward.loss_indices.assign(idx, idx + n);
  });
}

samba_status samba_compile_options_set_output_grad(samba_compile_options* o, size_t index,
                                                   int32_t mode, samba_tensor* values) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(mode >= SAMBA_OUTPUT_GRAD_ONES && mode <= SAMBA_OUTPUT_GRAD_UNSPECIFIED,
                Status::InvalidArgument,
                "output gradient mode {} is unknown; expected SAMBA_OUTPUT_GRAD_ONES (0), _CUSTOM "
                "(1) or _UNSPECIFIED (2)",
                mode);
    SAMBA_CHECK(index < 4096, Status::OutOfRange, "output index {} is out of range", index);
    compiler::OutputGradSpec spec;
    spec.mode = static_cast<compiler::OutputGradMode>(mode);
    spec.given = true;
    if (mode == SAMBA_OUTPUT_GRAD_CUSTOM) {
      require(values, "values");
      const Tensor v = tensor(values);
      SAMBA_CHECK(v.has_data(), Status::InvalidState, "the custom output gradient has no data");
      spec.values = v.clone();
    }
    auto& list = o->backward.output_grads;
    if (list.size() <= index) list.resize(index + 1);
    list[index] = std::move(spec);
  });
}

samba_status samba_compile_options_set_io_host_memory(samba_compile_options* o, int32_t enable) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->program.io_host_memory = enable != 0;
  });
}

samba_status samba_compile_options_set_grad_accumulation(samba_compile_options* o, int32_t enable) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->backward.grad_accumulation = enable != 0;
  });
}

samba_status samba_compile_options_set_embed_weights(samba_compile_options* o, int32_t enable) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->program.embed_weights = enable != 0;
  });
}

samba_status samba_compile_options_set_write_log(samba_compile_options* o, int32_t enable) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->write_log = enable != 0;
  });
}

samba_status samba_compile_options_add_metadata(samba_compile_options* o, const char* key,
                                                const char* value) {
  return SAMBA_GUARDED({
    require(o, "opts");
    require(key, "key");
    require(value, "value");
    SAMBA_CHECK(*key, Status::InvalidArgument, "metadata keys must not be empty");
    auto& md = o->program.metadata;
    auto it = std::find_if(md.begin(), md.end(), [&](const auto& kv) { return kv.first == key; });
    if (it != md.end())
      it->second = value;
    else
      md.emplace_back(key, value);
  });
}

samba_status samba_session_compile(samba_session* s, samba_model_fn model, void* user_data,
                                   samba_tensor* const* inputs, size_t n_inputs,
                                   samba_optimizer* const* optimizers, size_t n_optimizers,
                                   const samba_compile_options* opts) {
  return SAMBA_GUARDED({
    require(s, "session");
    compile_and_write(s, {graph_spec(nullptr, model, user_data, inputs, n_inputs, optimizers, n_optimizers, opts)},
                      opts);
  });
}

samba_status samba_session_is_tracing(const samba_session* s, int32_t* out) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(out, "out");
    *out = t_tracing_session == s && current_interceptor() != nullptr;
  });
}

samba_status samba_graph_create(const char* name, samba_model_fn model, void* user_data,
                                samba_tensor* const* inputs, size_t n_inputs,
                                samba_optimizer* const* optimizers, size_t n_optimizers,
                                const samba_compile_options* opts, samba_graph** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(name, "name");
    SAMBA_CHECK(*name, Status::InvalidArgument, "a graph name must not be empty");
    auto g = std::make_unique<samba_graph>();
    g->spec = graph_spec(name, model, user_data, inputs, n_inputs, optimizers, n_optimizers, opts);
    *out = g.release();
  });
}

void samba_graph_release(samba_graph* g) { delete g; }

samba_status samba_session_add_graph(samba_session* s, samba_graph* g, int32_t overwrite) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(g, "graph");
    std::lock_guard<std::mutex> lock(s->mu);
    auto& list = s->graphs;
    auto it = std::find_if(list.begin(), list.end(), [&](const auto& x) { return x.name == g->spec.name; });
    if (it != list.end()) {
      SAMBA_CHECK(overwrite, Status::InvalidArgument,
                  "a graph named '{}' was already added; pass overwrite to replace it", g->spec.name);
      list.erase(it);
    }
    list.push_back(g->spec);
  });
}

samba_status samba_session_graph_count(const samba_session* s, size_t* out) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(out, "out");
    *out = s->graphs.size();
  });
}

samba_status samba_session_compile_multigraph(samba_session* s, const samba_compile_options* opts) {
  return SAMBA_GUARDED({
    require(s, "session");
    std::vector<compiler::GraphSpec> graphs;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      graphs = s->graphs;
    }
    SAMBA_CHECK(!graphs.empty(), Status::InvalidState,
                "no graph was added to the session (samba_session_add_graph)");
    compile_and_write(s, graphs, opts);
  });
}

}  // extern "C"
