#include "tools/pef_json.h"

#include <fmt/format.h>

#include "engine/pef/blob_codec.h"

namespace samba::tool {
namespace {

using json = nlohmann::ordered_json;
using namespace samba::pef;

// An attribute value as JSON: a dtype becomes {"dtype": "float32"} so it is
// not mistaken for a string; an absent optional value is null.
json value_json(const AttrValue& v) {
  struct Visitor {
    json operator()(std::monostate) const { return nullptr; }
    json operator()(int64_t x) const { return x; }
    json operator()(double x) const { return x; }
    json operator()(bool x) const { return x; }
    json operator()(const std::string& x) const { return x; }
    json operator()(const std::vector<int64_t>& x) const { return x; }
    json operator()(const std::vector<double>& x) const { return x; }
    json operator()(DType x) const {
      return json{
          {"dtype", is_valid_dtype(static_cast<int32_t>(x)) ? std::string(dtype_name(x)) : "?"}};
    }
  };
  return std::visit(Visitor{}, v);
}

json attrs_json(const Attrs& a) {
  json out = json::object();
  for (const auto& [n, v] : a.items()) out[n] = value_json(v);
  return out;
}

json tensor_json(const TensorDesc& t) {
  json j{{"name", t.name},
         {"role", tensor_role_name(t.role)},
         {"dtype", is_valid_dtype(static_cast<int32_t>(t.dtype)) ? dtype_name(t.dtype) : "?"},
         {"shape", t.shape},
         {"mem", mem_type_name(t.mem)},
         {"arena_offset", t.arena_offset},
         {"nbytes", t.nbytes},
         {"region", t.region},
         {"alias_of", t.alias_of},
         {"strides", t.strides},
         {"view_offset", t.view_offset},
         {"blob", t.blob},
         {"materializer", t.materializer},
         {"grad", t.grad},
         {"batch_dim", t.batch_dim},
         {"requires_grad", t.requires_grad},
         {"owner", t.owner}};
  return j;
}

json kernel_json(const KernelDesc& k) {
  json ops = json::array();
  for (const auto& c : k.ops) {
    json bindings = json::array();
    for (const auto& b : c.bindings) bindings.push_back({{"attr", b.attr}, {"argin", b.argin}});
    ops.push_back({{"op", c.op},
                   {"attrs", attrs_json(c.attrs)},
                   {"inputs", c.inputs},
                   {"outputs", c.outputs},
                   {"bindings", bindings}});
  }
  return {{"name", k.name},     {"fusion", fusion_name(k.fusion)},
          {"ops", ops},         {"reads", k.reads},
          {"writes", k.writes}, {"flops", k.flops},
          {"bytes", k.bytes}};
}

json graph_json(const GraphDesc& g) {
  return {{"name", g.name},
          {"inputs", g.inputs},
          {"outputs", g.outputs},
          {"output_grads", g.output_grads},
          {"parameters", g.parameters},
          {"sections", g.sections},
          {"batch_size", g.batch_size},
          {"micro_batch_size", g.micro_batch_size},
          {"mapping", mapping_name(g.mapping)},
          {"inference", g.inference},
          {"grad_accumulation", g.grad_accumulation},
          {"signature", g.signature}};
}

}  // namespace

json program_json(const ProgramDesc& p) {
  json j;
  j["name"] = p.name;
  j["format"] = {{"major", p.format_major}, {"minor", p.format_minor}};
  j["compiler_version"] = p.compiler_version;
  j["opt_level"] = p.opt_level;
  json graphs = json::array();
  for (const auto& g : p.graphs) graphs.push_back(graph_json(g));
  j["graphs"] = graphs;
  json sections = json::array();
  for (const auto& s : p.sections)
    sections.push_back({{"id", s.id},
                        {"name", s.name},
                        {"type", section_type_name(s.type)},
                        {"graph", s.graph},
                        {"kernels", s.kernels},
                        {"reads", s.reads},
                        {"writes", s.writes},
                        {"micro_batched", s.micro_batched}});
  j["sections"] = sections;
  json schedule = json::array();
  for (const auto& c : p.schedule) schedule.push_back({{"id", c.id}, {"section", c.section}});
  j["schedule"] = schedule;
  json kernels = json::array();
  for (const auto& k : p.kernels) kernels.push_back(kernel_json(k));
  j["kernels"] = kernels;
  json argins = json::array();
  for (const auto& a : p.argins)
    argins.push_back({{"name", a.name},
                      {"kind", argin_kind_name(a.kind)},
                      {"default", value_json(a.default_value)}});
  j["argins"] = argins;
  json tensors = json::array();
  for (const auto& t : p.tensors) tensors.push_back(tensor_json(t));
  j["tensors"] = tensors;
  json blobs = json::array();
  for (const auto& b : p.blobs)
    blobs.push_back(
        {{"size", b.data.size()}, {"xxh64", fmt::format("{:016x}", blob_checksum(b.data))}});
  j["blobs"] = blobs;
  json mats = json::array();
  for (const auto& m : p.materializers)
    mats.push_back({{"kind", m.kind}, {"params", attrs_json(m.params)}});
  j["materializers"] = mats;
  j["memory"] = {{"arena_bytes",
                  {{"DDR", p.memory.arena_bytes[0]},
                   {"HBM", p.memory.arena_bytes[1]},
                   {"HOST", p.memory.arena_bytes[2]}}},
                 {"peak_bytes", p.memory.peak_bytes},
                 {"lower_bound_bytes", p.memory.lower_bound_bytes}};
  if (p.data_parallel.world_size > 0) {
    json buckets = json::array();
    for (const auto& b : p.data_parallel.buckets)
      buckets.push_back({{"mem", std::string(mem_type_name(b.mem))},
                         {"dtype", std::string(dtype_name(b.dtype))},
                         {"arena_offset", b.arena_offset},
                         {"nbytes", b.nbytes},
                         {"gradients", b.gradients}});
    j["data_parallel"] = {{"world_size", p.data_parallel.world_size},
                          {"bucket_bytes", p.data_parallel.bucket_bytes},
                          {"buckets", buckets}};
  }
  json metadata = json::object();
  for (const auto& [k, v] : p.metadata) metadata[k] = v;
  j["metadata"] = metadata;
  return j;
}

}  // namespace samba::tool
