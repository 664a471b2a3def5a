#include "engine/core/dtype.h"

#include <array>

namespace samba {
namespace {

struct DTypeInfo {
  std::string_view name;
  size_t size;
  int float_rank;  // 0 not floating; 1 half types; 2 float32; 3 float64
  int int_bits;    // 0 not integral; bool counts as 1
  bool is_unsigned;
};

constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {"float32", 4, 2, 0, false},
    {"bfloat16", 2, 1, 0, false},
    {"float16", 2, 1, 0, false},
    {"float64", 8, 3, 0, false},
    {"int64", 8, 0, 64, false},
    {"int32", 4, 0, 32, false},
    {"int16", 2, 0, 16, false},
    {"int8", 1, 0, 8, false},
    {"uint8", 1, 0, 8, true},
    {"bool", 1, 0, 1, true},
}};

const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }

int category(DType t) {
  if (t == DType::Bool) return 0;
  return is_floating(t) ? 2 : 1;
}

DType signed_int_of_bits(int bits) {
  switch (bits) {
    case 8: return DType::Int8;
    case 16: return DType::Int16;
    case 32: return DType::Int32;
    default: return DType::Int64;
  }
}

}  // namespace

size_t element_size(DType t) { return info(t).size; }
// Safe on any code: names are printed for untrusted values too (a damaged
// PEF's attributes in `sambaflow pef dump`).
std::string_view dtype_name(DType t) {
  return is_valid_dtype(static_cast<int32_t>(t)) ? info(t).name : std::string_view("invalid-dtype");
}
bool is_valid_dtype(int32_t raw) { return raw >= 0 && raw < kNumDTypes; }
bool is_floating(DType t) { return info(t).float_rank > 0; }
bool is_integral(DType t, bool include_bool) {
  return t == DType::Bool ? include_bool : info(t).int_bits > 0;
}

std::optional<DType> dtype_from_name(std::string_view n) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kInfo[i].name == n) return static_cast<DType>(i);
  struct Alias { std::string_view name; DType t; };
  static constexpr Alias kAliases[] = {
      {"float", DType::Float32},  {"f32", DType::Float32},   {"bf16", DType::BFloat16},
      {"half", DType::Float16},   {"f16", DType::Float16},   {"double", DType::Float64},
      {"f64", DType::Float64},    {"long", DType::Int64},    {"int", DType::Int32},
      {"short", DType::Int16},    {"char", DType::Int8},     {"byte", DType::UInt8},
  };
  for (const auto& a : kAliases)
    if (a.name == n) return a.t;
  return std::nullopt;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  const auto &ia = info(a), &ib = info(b);
  if (ia.float_rank || ib.float_rank) {
    if (!ia.float_rank) return b;
    if (!ib.float_rank) return a;
    if (ia.float_rank == 1 && ib.float_rank == 1) return DType::Float32;  // bf16 with fp16
    return ia.float_rank > ib.float_rank ? a : b;
  }
  // Both integers of different types.
  if (ia.is_unsigned != ib.is_unsigned) {
    const auto& s = ia.is_unsigned ? ib : ia;  // uint8 against a signed type
    return signed_int_of_bits(s.int_bits > 8 ? s.int_bits : 16);
  }
  return ia.int_bits > ib.int_bits ? a : b;
}

void ResultTypeState::add(DType t, OperandTier tier) {
  // A wrapped float scalar stands for "some float": it takes the default
  // dtype, as a Python float does in PyTorch; an integer scalar is int64.
  if (tier == OperandTier::WrappedScalar && is_floating(t)) t = DType::Float32;
  auto& slot = tier_[static_cast<int>(tier)];
  slot = slot ? promote_types(*slot, t) : t;
}

DType ResultTypeState::result() const {
  // Combine a higher tier with a lower one: the lower one only matters when
  // its category is above the higher tier's.
  auto combine = [](std::optional<DType> higher, std::optional<DType> lower) -> std::optional<DType> {
    if (!higher) return lower;
    if (!lower) return higher;
    if (is_floating(*higher)) return higher;
    if (*higher == DType::Bool || category(*lower) > category(*higher))
      return promote_types(*higher, *lower);
    return higher;
  };
  auto r = combine(tier_[0], combine(tier_[1], tier_[2]));
  return r.value_or(DType::Float32);
}

}  // namespace samba
