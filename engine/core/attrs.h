// Named, typed attribute values: what an op invocation carries besides its
// tensors (registry ops, PEF kernels, materializer descriptors). The
// registry's schemas give attributes their meaning; this is only the data.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "engine/core/dtype.h"

namespace samba {

enum class AttrType { Int, Float, Bool, String, Ints, Floats, DType };
std::string_view attr_type_name(AttrType t);

using AttrVariant = std::variant<std::monostate, int64_t, double, bool, std::string,
                                 std::vector<int64_t>, std::vector<double>, DType>;

// An attribute value: the variant, with a copy that survives a failed
// allocation. libstdc++ 12's variant copy constructor, when the copy of a
// string or vector throws, destroys the never-constructed alternative (it
// takes these types' variants to be never valueless), so out of memory
// while copying Attrs crashed instead of failing. Here the copy starts as
// monostate and emplaces the alternative, which builds it before storing it.
struct AttrValue : AttrVariant {
  using AttrVariant::AttrVariant;
  using AttrVariant::operator=;
  AttrValue() = default;
  AttrValue(const AttrValue& o) : AttrVariant() {
    std::visit([this](const auto& v) { emplace<std::decay_t<decltype(v)>>(v); },
               static_cast<const AttrVariant&>(o));
  }
  AttrValue(AttrValue&&) noexcept = default;
  AttrValue& operator=(const AttrValue& o) {
    if (this != &o) *this = AttrValue(o);
    return *this;
  }
  AttrValue& operator=(AttrValue&&) noexcept = default;
};

std::string attr_value_str(const AttrValue& v);
// What a value holds, as attribute types are named ("none" for monostate).
std::string_view attr_value_kind(const AttrValue& v);

// Named attribute values. Resolved attributes (what kernels see) always hold
// every attribute of the schema with the schema's type; optional ones without
// a default are std::monostate.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> init) : items_(init) {}

  Attrs& set(std::string name, AttrValue v);
  const AttrValue* find(std::string_view name) const;
  bool has(std::string_view name) const;  // present and not monostate

  int64_t i(std::string_view name) const;
  double f(std::string_view name) const;
  bool b(std::string_view name) const;
  const std::string& s(std::string_view name) const;
  const std::vector<int64_t>& ints(std::string_view name) const;
  const std::vector<double>& floats(std::string_view name) const;
  DType dtype(std::string_view name) const;

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  // Value of the i-th item, for code that patches resolved attributes in
  // place (the runtime's argins); the set of names never changes through it.
  AttrValue& value_at(size_t i) { return items_.at(i).second; }
  bool operator==(const Attrs& o) const { return items_ == o.items_; }

 private:
  const AttrValue& get(std::string_view name) const;
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace samba
