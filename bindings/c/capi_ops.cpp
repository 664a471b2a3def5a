// The generic op entry point and schema introspection.
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "bindings/c/capi.h"
#define SAMBA_EXPERIMENTAL
#include "samba/experimental.h"

using namespace samba;
using namespace samba::capi;

namespace {

nlohmann::json attr_default_json(const AttrValue& v) {
  struct V {
    nlohmann::json operator()(std::monostate) const { return nullptr; }
    nlohmann::json operator()(int64_t x) const { return x; }
    nlohmann::json operator()(double x) const { return x; }
    nlohmann::json operator()(bool x) const { return x; }
    nlohmann::json operator()(const std::string& x) const { return x; }
    nlohmann::json operator()(const std::vector<int64_t>& x) const { return x; }
    nlohmann::json operator()(const std::vector<double>& x) const { return x; }
    nlohmann::json operator()(DType x) const { return std::string(dtype_name(x)); }
  };
  return std::visit(V{}, v);
}

std::string schema_json(const OpDef& op) {
  nlohmann::json j;
  j["name"] = op.name;
  j["doc"] = op.doc;
  j["fusion"] = std::string(fusion_name(op.fusion));
  j["signature"] = op.signature();
  j["inputs"] = nlohmann::json::array();
  for (const auto& i : op.inputs)
    j["inputs"].push_back({{"name", i.name},
                           {"doc", i.doc},
                           {"optional", i.optional},
                           {"variadic", i.variadic},
                           {"mutated", i.mutated}});
  j["outputs"] = nlohmann::json::array();
  for (const auto& o : op.outputs)
    j["outputs"].push_back({{"name", o.name}, {"doc", o.doc}, {"variadic", o.variadic}});
  j["attrs"] = nlohmann::json::array();
  for (const auto& a : op.attrs) {
    bool required = std::holds_alternative<std::monostate>(a.default_value) && !a.optional;
    nlohmann::json attr = {{"name", a.name},
                           {"type", std::string(attr_type_name(a.type))},
                           {"doc", a.doc},
                           {"required", required},
                           {"optional", a.optional},
                           {"default", attr_default_json(a.default_value)}};
    samba::capi::add_argin_schema(a, attr);
    j["attrs"].push_back(std::move(attr));
  }
  return j.dump();
}

// Text about op `name`, made once per op and kept for the life of the
// process, so C callers can hold it as a BORROWED static string. Each
// `make` (a distinct lambda type) has its own cache.
template <typename Make>
const char* op_text(const char* name, Make make) {
  const OpDef& op = OpRegistry::global().get(name);
  static std::mutex mu;
  static std::unordered_map<const OpDef*, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(&op);
  if (it == cache.end()) it = cache.emplace(&op, make(op)).first;
  return it->second.c_str();
}

}  // namespace

namespace samba::capi {

std::vector<Tensor> run_op(samba_session* session, const OpDef& op, std::span<const Tensor> inputs,
                           const Attrs& attrs) {
  // Without a session the calling thread's current pool is kept (the
  // default pool, unless the call comes from inside a session's work).
  if (!session) return call(op, inputs, attrs);
  ThreadPool::Scope scope(&session->impl.pool());
  return call(op, inputs, attrs);
}

Tensor run_op1(samba_session* session, std::string_view name, std::span<const Tensor> inputs,
               const Attrs& attrs) {
  const OpDef& op = OpRegistry::global().get(name);
  std::vector<Tensor> out = run_op(session, op, inputs, attrs);
  SAMBA_CHECK(out.size() == 1, Status::Internal, "op '{}' returned {} outputs; expected one", name,
              out.size());
  return std::move(out[0]);
}

}  // namespace samba::capi

extern "C" {

samba_status samba_op_call(samba_session* session, const char* name, samba_tensor* const* inputs,
                           size_t n_inputs, const samba_attrs* attrs, samba_tensor** outputs,
                           size_t capacity, size_t* n_outputs) {
  if (outputs)
    for (size_t i = 0; i < capacity; ++i) outputs[i] = nullptr;
  if (n_outputs) *n_outputs = 0;
  return SAMBA_GUARDED({
    require(name, "name");
    require(n_outputs, "n_outputs");
    if (n_inputs) require(inputs, "inputs");
    if (capacity) require(outputs, "outputs");
    const OpDef& op = OpRegistry::global().get(name);
    std::vector<Tensor> in;
    in.reserve(n_inputs);
    for (size_t i = 0; i < n_inputs; ++i) in.push_back(inputs[i] ? tensor(inputs[i]) : Tensor());
    static const Attrs kNoAttrs;
    std::vector<Tensor> out = run_op(session, op, in, attrs ? attrs->impl : kNoAttrs);
    *n_outputs = out.size();
    SAMBA_CHECK(out.size() <= capacity, Status::OutOfRange,
                "op '{}' produced {} outputs but `outputs` has room for {}", name, out.size(),
                capacity);
    for (size_t i = 0; i < out.size(); ++i) outputs[i] = to_handle(std::move(out[i]));
  });
}

size_t samba_op_count(void) {
  try {
    return OpRegistry::global().all().size();
  } catch (...) {
    return 0;
  }
}

samba_status samba_op_name(size_t index, const char** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    const auto& all = OpRegistry::global().all();
    SAMBA_CHECK(index < all.size(), Status::OutOfRange,
                "index {} is out of range: there are {} ops", index, all.size());
    *out = all[index]->name.c_str();
  });
}

samba_status samba_op_schema_json(const char* name, const char** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(name, "name");
    *out = op_text(name, [](const OpDef& op) { return schema_json(op); });
  });
}

samba_status samba_op_signature(const char* name, const char** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(name, "name");
    *out = op_text(name, [](const OpDef& op) { return op.signature(); });
  });
}

}  // extern "C"
