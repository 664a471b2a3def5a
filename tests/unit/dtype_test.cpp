// PyTorch's promotion rules, checked against results PyTorch gives.
#include <gtest/gtest.h>

#include "engine/core/dtype.h"

using namespace samba;
using D = DType;

TEST(DType, PromoteTypesTable) {
  struct Row { D a, b, want; };
  const Row rows[] = {
      {D::Float32, D::Float64, D::Float64}, {D::BFloat16, D::Float16, D::Float32},
      {D::BFloat16, D::Float32, D::Float32}, {D::Float16, D::Float64, D::Float64},
      {D::Int64, D::Float16, D::Float16},   {D::Int64, D::BFloat16, D::BFloat16},
      {D::UInt8, D::Int8, D::Int16},        {D::UInt8, D::Int16, D::Int16},
      {D::UInt8, D::Int32, D::Int32},       {D::UInt8, D::Int64, D::Int64},
      {D::Int8, D::Int32, D::Int32},        {D::Int16, D::Int64, D::Int64},
      {D::Bool, D::UInt8, D::UInt8},        {D::Bool, D::Int8, D::Int8},
      {D::Bool, D::Float16, D::Float16},    {D::Bool, D::Bool, D::Bool},
      {D::Int32, D::Float32, D::Float32},   {D::UInt8, D::BFloat16, D::BFloat16},
  };
  for (const auto& r : rows) {
    EXPECT_EQ(promote_types(r.a, r.b), r.want) << dtype_name(r.a) << " + " << dtype_name(r.b);
    EXPECT_EQ(promote_types(r.b, r.a), r.want) << dtype_name(r.b) << " + " << dtype_name(r.a);
  }
}

TEST(DType, ResultTypeCategories) {
  auto rt = [](std::initializer_list<std::pair<D, OperandTier>> ops) {
    ResultTypeState s;
    for (auto [d, t] : ops) s.add(d, t);
    return s.result();
  };
  using T = OperandTier;
  // torch.tensor([1], dtype=torch.int8) + 5 -> int8
  EXPECT_EQ(rt({{D::Int8, T::Dimensioned}, {D::Int64, T::WrappedScalar}}), D::Int8);
  // int tensor + 2.5 -> float32 (the default dtype)
  EXPECT_EQ(rt({{D::Int32, T::Dimensioned}, {D::Float64, T::WrappedScalar}}), D::Float32);
  // float16 tensor + 2.5 -> float16
  EXPECT_EQ(rt({{D::Float16, T::Dimensioned}, {D::Float64, T::WrappedScalar}}), D::Float16);
  // bool tensor + 1 -> int64
  EXPECT_EQ(rt({{D::Bool, T::Dimensioned}, {D::Int64, T::WrappedScalar}}), D::Int64);
  // int32 tensor + 0-dim float64 tensor -> float64
  EXPECT_EQ(rt({{D::Int32, T::Dimensioned}, {D::Float64, T::ZeroDim}}), D::Float64);
  // float32 tensor + 0-dim float64 tensor -> float32 (same category)
  EXPECT_EQ(rt({{D::Float32, T::Dimensioned}, {D::Float64, T::ZeroDim}}), D::Float32);
  // uint8 tensor + 0-dim int64 tensor -> uint8
  EXPECT_EQ(rt({{D::UInt8, T::Dimensioned}, {D::Int64, T::ZeroDim}}), D::UInt8);
  // two zero-dim tensors promote normally
  EXPECT_EQ(rt({{D::Int32, T::ZeroDim}, {D::Int64, T::ZeroDim}}), D::Int64);
  // bf16 tensor + 0-dim float64 tensor -> bf16
  EXPECT_EQ(rt({{D::BFloat16, T::Dimensioned}, {D::Float64, T::ZeroDim}}), D::BFloat16);
}

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    D d = static_cast<D>(i);
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d);
  }
  EXPECT_EQ(dtype_from_name("long"), D::Int64);
  EXPECT_FALSE(dtype_from_name("complex64").has_value());
  EXPECT_EQ(element_size(D::BFloat16), 2u);
}
