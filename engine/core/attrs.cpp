#include "engine/core/attrs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/error.h"

namespace samba {

std::string_view attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::Int: return "int";
    case AttrType::Float: return "float";
    case AttrType::Bool: return "bool";
    case AttrType::String: return "string";
    case AttrType::Ints: return "ints";
    case AttrType::Floats: return "floats";
    case AttrType::DType: return "dtype";
  }
  return "?";
}

std::string attr_value_str(const AttrValue& v) {
  struct V {
    std::string operator()(std::monostate) const { return "none"; }
    std::string operator()(int64_t x) const { return fmt::format("{}", x); }
    std::string operator()(double x) const { return fmt::format("{}", x); }
    std::string operator()(bool x) const { return x ? "true" : "false"; }
    std::string operator()(const std::string& x) const { return fmt::format("'{}'", x); }
    std::string operator()(const std::vector<int64_t>& x) const { return fmt::format("[{}]", fmt::join(x, ", ")); }
    std::string operator()(const std::vector<double>& x) const { return fmt::format("[{}]", fmt::join(x, ", ")); }
    std::string operator()(DType x) const { return std::string(dtype_name(x)); }
  };
  return std::visit(V{}, v);
}

std::string_view attr_value_kind(const AttrValue& v) {
  static constexpr std::string_view kNames[] = {"none", "int", "float", "bool", "string", "ints", "floats", "dtype"};
  return kNames[v.index()];
}

Attrs& Attrs::set(std::string name, AttrValue v) {
  for (auto& [n, val] : items_)
    if (n == name) {
      val = std::move(v);
      return *this;
    }
  items_.emplace_back(std::move(name), std::move(v));
  return *this;
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& [n, v] : items_)
    if (n == name) return &v;
  return nullptr;
}

bool Attrs::has(std::string_view name) const {
  const AttrValue* v = find(name);
  return v && !std::holds_alternative<std::monostate>(*v);
}

const AttrValue& Attrs::get(std::string_view name) const {
  const AttrValue* v = find(name);
  if (!v || std::holds_alternative<std::monostate>(*v))
    fail(Status::NotFound, "attribute '{}' has no value", name);
  return *v;
}

template <typename T>
static const T& typed(const AttrValue& v, std::string_view name, std::string_view want) {
  if (auto* p = std::get_if<T>(&v)) return *p;
  fail(Status::InvalidArgument, "attribute '{}' holds {}, not {}", name, attr_value_kind(v), want);
}

int64_t Attrs::i(std::string_view n) const { return typed<int64_t>(get(n), n, "int"); }
double Attrs::f(std::string_view n) const { return typed<double>(get(n), n, "float"); }
bool Attrs::b(std::string_view n) const { return typed<bool>(get(n), n, "bool"); }
const std::string& Attrs::s(std::string_view n) const { return typed<std::string>(get(n), n, "string"); }
const std::vector<int64_t>& Attrs::ints(std::string_view n) const {
  return typed<std::vector<int64_t>>(get(n), n, "ints");
}
const std::vector<double>& Attrs::floats(std::string_view n) const {
  return typed<std::vector<double>>(get(n), n, "floats");
}
DType Attrs::dtype(std::string_view n) const { return typed<DType>(get(n), n, "dtype"); }

}  // namespace samba
