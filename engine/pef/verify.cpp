#include "engine/pef/verify.h"

#include <unordered_map>
#include <unordered_set>

#include "engine/pef/verify_internal.h"
#include "engine/rng/materializer.h"

namespace samba::pef {
namespace verify_detail {

std::string tensor_label(const ProgramDesc& p, int64_t i) {
  if (i < 0 || static_cast<size_t>(i) >= p.tensors.size()) return fmt::format("tensor {}", i);
  return fmt::format("tensor {} '{}'", i, p.tensors[static_cast<size_t>(i)].name);
}

void check_index(int64_t index, size_t count, bool allow_none, std::string_view where,
                 std::string_view field, std::string_view items) {
  if (index >= 0 && static_cast<uint64_t>(index) < count) return;
  if (allow_none && index == -1) return;
  corrupt("{}: {} {} is out of range (the program has {} {}{})", where, field, index, count, items,
          allow_none ? "; -1 means none" : "");
}

void check_attr_value(const AttrValue& v, std::string_view where) {
  if (const auto* d = std::get_if<DType>(&v))
    if (!is_valid_dtype(static_cast<int32_t>(*d)))
      corrupt("{}: dtype code {} is not a dtype (0..{})", where, static_cast<int32_t>(*d),
              kNumDTypes - 1);
}

bool is_contiguous_run(const Dims& shape, const Dims& strides) {
  if (strides.size() != shape.size()) return false;
  for (int64_t d : shape)
    if (d == 0) return true;
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    if (__builtin_mul_overflow(expected, shape[d], &expected)) return false;
  }
  return true;
}

void verify_materializers(const ProgramDesc& p) {
  for (size_t i = 0; i < p.materializers.size(); ++i) {
    const MaterializerDesc& m = p.materializers[i];
    std::string where = fmt::format("materializer {} '{}'", i, m.kind);
    if (m.kind.empty()) corrupt("materializer {}: kind is empty", i);
    std::unordered_set<std::string_view> names;
    for (const auto& [name, value] : m.params.items()) {
      if (name.empty()) corrupt("{}: a parameter has an empty name", where);
      if (!names.insert(name).second) corrupt("{}: parameter '{}' appears twice", where, name);
      if (std::holds_alternative<std::monostate>(value))
        corrupt("{}: parameter '{}' has no value", where, name);
      check_attr_value(value, fmt::format("{} parameter '{}'", where, name));
    }
  }
  // Each use against its tensor: the kind, its parameters and the shape and
  // dtype it fills (a fan computation needs rank >= 2, ...).
  for (const TensorDesc& t : p.tensors) {
    if (t.materializer < 0) continue;
    if (static_cast<size_t>(t.materializer) >= p.materializers.size())
      corrupt("tensor '{}': materializer index {} is out of range (the PEF has {})", t.name, t.materializer,
              p.materializers.size());
    try {
      rng::check_materializer(p.materializers[static_cast<size_t>(t.materializer)], t.dtype, t.shape, t.name);
    } catch (const Error& e) {
      corrupt("tensor '{}': {}", t.name, e.what());
    }
  }
}

}  // namespace verify_detail

void verify_program(const ProgramDesc& p) {
  using namespace verify_detail;
  if (p.format_major != kFormatMajor)
    fail(Status::VersionMismatch, "program has PEF format {}.{}; this runtime reads {}.x",
         p.format_major, p.format_minor, kFormatMajor);
  if (p.name.empty()) corrupt("program: name is empty");
  if (p.opt_level < 0 || p.opt_level > 3)
    corrupt("program '{}': opt_level {} is not 0..3", p.name, p.opt_level);
  verify_tensors(p);
  verify_materializers(p);
  verify_argins(p);
  verify_kernels(p);
  verify_sections_and_schedule(p);
  verify_graphs(p);
  verify_data_parallel(p);
  std::unordered_map<std::string_view, size_t> keys;
  for (size_t i = 0; i < p.metadata.size(); ++i) {
    const std::string& key = p.metadata[i].first;
    if (key.empty()) corrupt("metadata {}: key is empty", i);
    auto [it, fresh] = keys.emplace(key, i);
    if (!fresh) corrupt("metadata {}: key '{}' already used by metadata {}", i, key, it->second);
  }
}

}  // namespace samba::pef
