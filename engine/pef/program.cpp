#include "engine/pef/program.h"

#include <fmt/format.h>

#include <array>
#include <cctype>

#include "engine/core/error.h"

namespace samba::pef {
namespace {

// Names of enum values read from a file may be asked for before the value is
// verified (pef dump of a damaged program), so out-of-range values get "?".
template <size_t N>
std::string_view name_in(const std::array<std::string_view, N>& names, size_t i) {
  return i < N ? names[i] : std::string_view("?");
}

constexpr std::array<std::string_view, 3> kMemTypeNames = {"DDR", "HBM", "HOST"};
constexpr std::array<std::string_view, 10> kRoleNames = {
    "input",           "output",      "parameter", "buffer",       "gradient",
    "optimizer_state", "output_grad", "constant",  "intermediate", "alias"};
constexpr std::array<std::string_view, 6> kSectionTypeNames = {"FWD", "BCKWD",    "GRADNORM",
                                                               "OPT", "ZEROGRAD", "REDUCE"};
constexpr std::array<std::string_view, 3> kArginKindNames = {"hyperparam", "dropout_rate",
                                                             "dropout_seed"};
constexpr std::array<std::string_view, 2> kMappingNames = {"section", "spatial"};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

bool in_activation_area(TensorRole r) {
  return r == TensorRole::Input || r == TensorRole::Output || r == TensorRole::Intermediate;
}

std::string_view mem_type_name(MemType m) { return name_in(kMemTypeNames, static_cast<size_t>(m)); }
std::string_view tensor_role_name(TensorRole r) {
  return name_in(kRoleNames, static_cast<size_t>(r));
}
std::string_view section_type_name(SectionType t) {
  return name_in(kSectionTypeNames, static_cast<size_t>(t));
}
std::string_view argin_kind_name(ArginKind k) {
  return name_in(kArginKindNames, static_cast<size_t>(k));
}
std::string_view mapping_name(Mapping m) { return name_in(kMappingNames, static_cast<size_t>(m)); }

SectionType section_type_from_name(std::string_view name) {
  for (size_t i = 0; i < kSectionTypeNames.size(); ++i)
    if (iequals(name, kSectionTypeNames[i])) return static_cast<SectionType>(i);
  fail(Status::NotFound, "unknown section type '{}'; the section types are: {}", name,
       fmt::join(kSectionTypeNames, ", "));
}

}  // namespace samba::pef
