// Dtype dispatch: run a generic lambda with `scalar_t` bound to the C++ type
// of a runtime dtype. Kernels instantiate only the families they support, so
// compile time stays proportional to what is used.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "engine/core/dtype.h"
#include "engine/core/error.h"

#define SAMBA_DTYPE_CASE(D, ...)                  \
  case ::samba::DType::D: {                        \
    using scalar_t = ::samba::CppType<::samba::DType::D>::type; \
    return __VA_ARGS__();                          \
  }

#define SAMBA_DTYPE_UNSUPPORTED(dt, what)                                                  \
  default:                                                                                  \
    ::samba::fail(::samba::Status::DTypeMismatch, "{}: dtype {} is not supported", what, \
                  ::samba::dtype_name(dt));

// float32, float64, bfloat16, float16
#define SAMBA_DISPATCH_FLOAT(dt, what, ...)                    \
  [&] {                                                        \
    switch (dt) {                                              \
      SAMBA_DTYPE_CASE(Float32, __VA_ARGS__)                   \
      SAMBA_DTYPE_CASE(Float64, __VA_ARGS__)                   \
      SAMBA_DTYPE_CASE(BFloat16, __VA_ARGS__)                  \
      SAMBA_DTYPE_CASE(Float16, __VA_ARGS__)                   \
      SAMBA_DTYPE_UNSUPPORTED(dt, what)                        \
    }                                                          \
  }()

// int64, int32, int16, int8, uint8 (no bool)
#define SAMBA_DISPATCH_INT_CASES(...)      \
  SAMBA_DTYPE_CASE(Int64, __VA_ARGS__)     \
  SAMBA_DTYPE_CASE(Int32, __VA_ARGS__)     \
  SAMBA_DTYPE_CASE(Int16, __VA_ARGS__)     \
  SAMBA_DTYPE_CASE(Int8, __VA_ARGS__)      \
  SAMBA_DTYPE_CASE(UInt8, __VA_ARGS__)

#define SAMBA_DISPATCH_INTEGRAL(dt, what, ...)   \
  [&] {                                          \
    switch (dt) {                                \
      SAMBA_DISPATCH_INT_CASES(__VA_ARGS__)      \
      SAMBA_DTYPE_CASE(Bool, __VA_ARGS__)        \
      SAMBA_DTYPE_UNSUPPORTED(dt, what)          \
    }                                            \
  }()

// Every dtype but bool.
#define SAMBA_DISPATCH_NUMERIC(dt, what, ...)    \
  [&] {                                          \
    switch (dt) {                                \
      SAMBA_DTYPE_CASE(Float32, __VA_ARGS__)     \
      SAMBA_DTYPE_CASE(Float64, __VA_ARGS__)     \
      SAMBA_DTYPE_CASE(BFloat16, __VA_ARGS__)    \
      SAMBA_DTYPE_CASE(Float16, __VA_ARGS__)     \
      SAMBA_DISPATCH_INT_CASES(__VA_ARGS__)      \
      SAMBA_DTYPE_UNSUPPORTED(dt, what)          \
    }                                            \
  }()

// All ten dtypes.
#define SAMBA_DISPATCH_ALL(dt, what, ...)        \
  [&] {                                          \
    switch (dt) {                                \
      SAMBA_DTYPE_CASE(Float32, __VA_ARGS__)     \
      SAMBA_DTYPE_CASE(Float64, __VA_ARGS__)     \
      SAMBA_DTYPE_CASE(BFloat16, __VA_ARGS__)    \
      SAMBA_DTYPE_CASE(Float16, __VA_ARGS__)     \
      SAMBA_DISPATCH_INT_CASES(__VA_ARGS__)      \
      SAMBA_DTYPE_CASE(Bool, __VA_ARGS__)        \
      SAMBA_DTYPE_UNSUPPORTED(dt, what)          \
    }                                            \
  }()

namespace samba {

// A floating-point value as an integer of type To, defined for every input:
// C++ leaves a float-to-integer conversion out of the target's range
// undefined. Samba gives what PyTorch gives on x86, whose scalar casts
// compile to cvttsd2si: the value truncated toward zero to int32 (targets of
// up to 4 bytes) or int64, with NaN and values outside that range becoming
// its minimum, then narrowed modulo 2^bits. So -2.0 as uint8 is 254, 300.0
// is 44, and 3e9 is 0 as uint8 but INT32_MIN as int32.
template <typename To>
inline To float_to_integer(double v) {
  using Wide = std::conditional_t<sizeof(To) <= 4, int32_t, int64_t>;
  constexpr double kLimit = -static_cast<double>(std::numeric_limits<Wide>::min());
  const Wide whole = v >= -kLimit && v < kLimit ? static_cast<Wide>(v) : std::numeric_limits<Wide>::min();
  return static_cast<To>(whole);
}

// Value conversion between any two element types (bf16/fp16 through float).
template <typename To, typename From>
inline To convert_value(From v) {
  constexpr bool from_float = std::is_floating_point_v<From> || std::is_same_v<From, bf16> ||
                              std::is_same_v<From, f16>;
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f || static_cast<double>(v) != 0.0;
  } else if constexpr (std::is_integral_v<To> && from_float) {
    if constexpr (std::is_floating_point_v<From>)
      return float_to_integer<To>(static_cast<double>(v));
    else
      return float_to_integer<To>(static_cast<double>(static_cast<float>(v)));
  } else if constexpr (std::is_same_v<From, bf16> || std::is_same_v<From, f16>) {
    return static_cast<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bf16> || std::is_same_v<To, f16>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace samba
