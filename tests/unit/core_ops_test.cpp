// The reference ops the registry is built around (add, mul, sum, reshape,
// expand) and the autograd engine itself.
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

TEST(CoreOps, AddBroadcastAndAlpha) {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = make({10, 20, 30}, {3});
  expect_values(call1("add", {a, b}), {11, 22, 33, 14, 25, 36});
  expect_values(call1("add", {a, b}, {{"alpha", 2.0}}), {21, 42, 63, 24, 45, 66});
}

TEST(CoreOps, PromotionWithScalars) {
  Tensor i8 = make({1, 2}, {2}, DType::Int8);
  EXPECT_EQ(call1("add", {i8, Tensor::scalar(5, DType::Int64, true)}).dtype(), DType::Int8);
  Tensor f = call1("mul", {i8, Tensor::scalar(2.5, DType::Float64, true)});
  EXPECT_EQ(f.dtype(), DType::Float32);
  expect_values(f, {2.5, 5.0});
  Tensor h = make({1, 2}, {2}, DType::BFloat16);
  EXPECT_EQ(call1("add", {h, make({1, 2}, {2}, DType::Float16)}).dtype(), DType::Float32);
}

TEST(CoreOps, SumDimsKeepdim) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(call1("sum", {x}), {21});
  Tensor s0 = call1("sum", {x}, {{"dim", std::vector<int64_t>{0}}});
  EXPECT_EQ(s0.shape(), (Dims{3}));
  expect_values(s0, {5, 7, 9});
  Tensor s1 = call1("sum", {x}, {{"dim", std::vector<int64_t>{-1}}, {"keepdim", true}});
  EXPECT_EQ(s1.shape(), (Dims{2, 1}));
  expect_values(s1, {6, 15});
  EXPECT_EQ(call1("sum", {make({1, 1}, {2}, DType::Bool)}).dtype(), DType::Int64);
}

TEST(CoreOps, NonContiguousInputs) {
  Tensor a = rand_tensor({3, 4}), b = rand_tensor({3, 4}, DType::Float64, 2);
  auto want = values(call1("mul", {a, b}));
  expect_values(call1("mul", {noncontiguous(a), noncontiguous(b)}), want);
  expect_values(call1("sum", {noncontiguous(a)}, {{"dim", std::vector<int64_t>{1}}}),
                values(call1("sum", {a}, {{"dim", std::vector<int64_t>{1}}})));
}

TEST(CoreOps, ReshapeIsAViewWhenContiguous) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor r = call1("reshape", {x}, {{"shape", std::vector<int64_t>{3, -1}}});
  EXPECT_EQ(r.shape(), (Dims{3, 2}));
  EXPECT_EQ(r.raw_data(), x.raw_data());
  EXPECT_THROW(call1("reshape", {x}, {{"shape", std::vector<int64_t>{4, -1}}}), Error);
}

TEST(CoreOps, Gradients) {
  check_gradients("add", {rand_tensor({2, 3}), rand_tensor({3}, DType::Float64, 3)}, {{"alpha", 0.5}});
  check_gradients("mul", {rand_tensor({2, 1, 3}), rand_tensor({4, 1}, DType::Float64, 3)});
  check_gradients("sum", {rand_tensor({2, 3, 4})}, {{"dim", std::vector<int64_t>{0, 2}}});
  check_gradients("reshape", {rand_tensor({2, 3})}, {{"shape", std::vector<int64_t>{6}}});
  check_gradients("expand", {rand_tensor({3, 1})}, {{"shape", std::vector<int64_t>{2, 3, 4}}});
  check_gradients("mul", {noncontiguous(rand_tensor({2, 3})), rand_tensor({2, 3}, DType::Float64, 5)});
}

TEST(Autograd, AccumulatesAcrossBackwardCalls) {
  Tensor x = make({1, 2, 3}, {3});
  x.impl()->requires_grad = true;
  Tensor y = call1("sum", {call1("mul", {x, x})});
  autograd::backward({y}, {Tensor()}, true);
  expect_values(x.grad(), {2, 4, 6});
  Tensor g0 = x.grad();
  autograd::backward({y}, {Tensor()}, false);
  expect_values(x.grad(), {4, 8, 12});
  EXPECT_EQ(g0.impl(), x.grad().impl()) << "accumulation is in place";
  EXPECT_THROW(autograd::backward({y}, {Tensor()}, false), Error) << "graph freed";
}

TEST(Autograd, DiamondGraphSumsBothPaths) {
  Tensor x = make({2}, {1});
  x.impl()->requires_grad = true;
  Tensor a = call1("mul", {x, Tensor::scalar(3, DType::Float64, true)});
  Tensor y = call1("mul", {a, a});  // 9 x^2 -> dy/dx = 18 x = 36
  autograd::backward({y}, {Tensor()}, false);
  expect_values(x.grad(), {36});
}

TEST(Registry, ErrorsNameTheProblem) {
  Tensor a = make({1}, {1});
  try {
    call1("add", {a, a}, {{"alhpa", 1.0}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::NotFound);
    EXPECT_NE(std::string(e.what()).find("alpha"), std::string::npos) << e.what();
  }
  try {
    call1("ad", {a, a});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'add'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(call1("add", {a}), Error);
  EXPECT_THROW(call1("add", {make({1, 2}, {2}), make({1, 2, 3}, {3})}), Error);
}
