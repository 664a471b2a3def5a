// Element types and PyTorch's type-promotion rules.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace samba {

// Values match samba_dtype in include/samba.h and never change.
enum class DType : int32_t {
  Float32 = 0,
  BFloat16 = 1,
  Float16 = 2,
  Float64 = 3,
  Int64 = 4,
  Int32 = 5,
  Int16 = 6,
  Int8 = 7,
  UInt8 = 8,
  Bool = 9,
};
inline constexpr int kNumDTypes = 10;

using bf16 = Eigen::bfloat16;
using f16 = Eigen::half;

size_t element_size(DType t);
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);  // "float32", "float", "bf16", ...
bool is_valid_dtype(int32_t raw);
bool is_floating(DType t);
bool is_integral(DType t, bool include_bool);
inline bool is_reduced_float(DType t) { return t == DType::BFloat16 || t == DType::Float16; }

// torch.promote_types: the smallest type both operands convert to safely.
DType promote_types(DType a, DType b);

// How an operand takes part in torch.result_type: tensors with dimensions
// outrank zero-dimensional tensors, which outrank wrapped Python-style scalars;
// a lower tier only changes the result when it is of a higher category
// (bool < integer < floating).
enum class OperandTier { Dimensioned = 0, ZeroDim = 1, WrappedScalar = 2 };

class ResultTypeState {
 public:
  void add(DType t, OperandTier tier);
  DType result() const;

 private:
  std::optional<DType> tier_[3];
};

// C++ type for each dtype and back.
template <DType D> struct CppType;
template <> struct CppType<DType::Float32> { using type = float; };
template <> struct CppType<DType::BFloat16> { using type = bf16; };
template <> struct CppType<DType::Float16> { using type = f16; };
template <> struct CppType<DType::Float64> { using type = double; };
template <> struct CppType<DType::Int64> { using type = int64_t; };
template <> struct CppType<DType::Int32> { using type = int32_t; };
template <> struct CppType<DType::Int16> { using type = int16_t; };
template <> struct CppType<DType::Int8> { using type = int8_t; };
template <> struct CppType<DType::UInt8> { using type = uint8_t; };
template <> struct CppType<DType::Bool> { using type = bool; };

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<bf16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<f16>() { return DType::Float16; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int16_t>() { return DType::Int16; }
template <> constexpr DType dtype_of<int8_t>() { return DType::Int8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::UInt8; }
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }

// The type arithmetic is carried out in: bf16/fp16 accumulate in fp32.
template <typename T> struct AccType { using type = T; };
template <> struct AccType<bf16> { using type = float; };
template <> struct AccType<f16> { using type = float; };
template <typename T> using acc_t = typename AccType<T>::type;

}  // namespace samba
