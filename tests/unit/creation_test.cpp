// Creation ops: constants, arange, eye, and the Philox random ops
// (reproducible for any thread count, right moments, right ranges).
#include <cmath>

#include "engine/core/parallel.h"
#include "engine/core/allocation_limit.h"
#include "error_test_util.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

using Ints = std::vector<int64_t>;

Tensor create(const std::string& op, const Attrs& a) {
  return call(op, std::span<const Tensor>{}, a)[0];
}

struct Moments {
  double mean = 0, var = 0, min = 1e300, max = -1e300;
};

Moments moments_of(const Tensor& t) {
  auto v = values(t);
  Moments m;
  for (double x : v) m.mean += x, m.min = std::min(m.min, x), m.max = std::max(m.max, x);
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(v.size() - 1);
  return m;
}

}  // namespace

TEST(Constants, ZerosOnesFullEmpty) {
  Tensor z = create("zeros", {{"shape", Ints{2, 3}}});
  EXPECT_EQ(z.dtype(), DType::Float32);
  EXPECT_EQ(z.shape(), (Dims{2, 3}));
  expect_values(z, {0, 0, 0, 0, 0, 0});
  Tensor o = create("ones", {{"shape", Ints{3}}, {"dtype", DType::Int8}});
  EXPECT_EQ(o.dtype(), DType::Int8);
  expect_values(o, {1, 1, 1});
  expect_values(create("full", {{"shape", Ints{2}}, {"value", -2.5}, {"dtype", DType::BFloat16}}),
                {-2.5, -2.5});
  expect_values(create("full", {{"shape", Ints{2}}, {"value", 3.7}, {"dtype", DType::Int32}}),
                {3, 3});
  expect_values(create("full", {{"shape", Ints{1}}, {"value", 2.0}, {"dtype", DType::Bool}}), {1});
  EXPECT_EQ(create("full", {{"shape", Ints{}}, {"value", 4.0}}).item_double(), 4.0);
  Tensor e = create("empty", {{"shape", Ints{4, 0}}, {"dtype", "float64"}});
  EXPECT_EQ(e.shape(), (Dims{4, 0}));
  EXPECT_EQ(e.dtype(), DType::Float64);
  // Large enough for several tasks.
  Tensor big = create("full", {{"shape", Ints{300000}}, {"value", 1.5}});
  auto m = moments_of(big);
  EXPECT_EQ(m.min, 1.5);
  EXPECT_EQ(m.max, 1.5);
}

TEST(Constants, Errors) {
  EXPECT_EQ(status_of([&] { create("zeros", {}); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { create("zeros", {{"shape", Ints{2, -1}}}); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { create("full", {{"shape", Ints{2}}}); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              create("ones", {{"shape", Ints{2}}, {"dtype", "float128"}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("zeros", {Tensor::scalar(1, DType::Float32)}, {{"shape", Ints{1}}});
            }),
            Status::InvalidArgument);
}

TEST(Constants, AnAllocationAboveTheHostLimitIsRefusedNamingIt) {
  const size_t before = host_allocation_limit();
  set_host_allocation_limit(size_t{1} << 20);
  expect_status(Status::OutOfMemory, [] { Tensor::empty({int64_t{1} << 20}, DType::Float32); },
                {"4194304 bytes", "host allocation limit of 1048576 bytes"});
  expect_status(Status::OutOfMemory,
                [] { create("arange", {{"end", double(int64_t{1} << 19)}, {"dtype", DType::Float32}}); });
  EXPECT_EQ(Tensor::empty({1024}, DType::Float32).numel(), 1024);
  set_host_allocation_limit(before);
  EXPECT_EQ(Tensor::empty({int64_t{1} << 20}, DType::Float32).numel(), int64_t{1} << 20);
}

TEST(Arange, ValuesAndDTypeRule) {
  Tensor a = create("arange", {{"end", 5.0}});
  EXPECT_EQ(a.dtype(), DType::Int64);
  expect_values(a, {0, 1, 2, 3, 4});
  Tensor b = create("arange", {{"start", 1.0}, {"end", 2.0}, {"step", 0.25}});
  EXPECT_EQ(b.dtype(), DType::Float32);
  expect_values(b, {1, 1.25, 1.5, 1.75});
  Tensor c = create("arange", {{"start", 10}, {"end", 1}, {"step", -3}});
  EXPECT_EQ(c.dtype(), DType::Int64);
  expect_values(c, {10, 7, 4});
  Tensor d = create("arange", {{"end", 3}, {"dtype", DType::Float64}});
  EXPECT_EQ(d.dtype(), DType::Float64);
  expect_values(d, {0, 1, 2});
  EXPECT_EQ(create("arange", {{"start", 0.5}, {"end", 3}}).shape(), (Dims{3}));  // 0.5, 1.5, 2.5
  EXPECT_EQ(create("arange", {{"start", 2}, {"end", 2}}).shape(), (Dims{0}));
  EXPECT_EQ(status_of([&] {
              create("arange", {{"end", 3}, {"step", 0}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { create("arange", {{"end", -3}}); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { create("arange", {}); }), Status::InvalidArgument);
}

TEST(Eye, SquareAndRectangular) {
  expect_values(create("eye", {{"n", 3}}), {1, 0, 0, 0, 1, 0, 0, 0, 1});
  Tensor r = create("eye", {{"n", 2}, {"m", 3}, {"dtype", DType::Int32}});
  EXPECT_EQ(r.shape(), (Dims{2, 3}));
  EXPECT_EQ(r.dtype(), DType::Int32);
  expect_values(r, {1, 0, 0, 0, 1, 0});
  expect_values(create("eye", {{"n", 3}, {"m", 1}}), {1, 0, 0});
  EXPECT_EQ(status_of([&] { create("eye", {{"n", -1}}); }), Status::InvalidArgument);
}

// ---- random ---------------------------------------------------------------------------------

TEST(Random, SameSeedAndOffsetSameValues) {
  for (const char* op : {"rand", "randn", "normal"}) {
    SCOPED_TRACE(op);
    Attrs a{{"shape", Ints{1000}}, {"seed", 7}, {"offset", 3}};
    auto v1 = values(create(op, a)), v2 = values(create(op, a));
    EXPECT_EQ(v1, v2);
    Attrs other_seed{{"shape", Ints{1000}}, {"seed", 8}, {"offset", 3}};
    Attrs other_offset{{"shape", Ints{1000}}, {"seed", 7}, {"offset", 4}};
    EXPECT_NE(values(create(op, other_seed)), v1);
    EXPECT_NE(values(create(op, other_offset)), v1);
  }
  Attrs ri{{"shape", Ints{1000}}, {"high", 1000}, {"seed", 1}};
  EXPECT_EQ(values(create("randint", ri)), values(create("randint", ri)));
  Attrs ri2{{"shape", Ints{1000}}, {"high", 1000}, {"seed", 2}};
  EXPECT_NE(values(create("randint", ri)), values(create("randint", ri2)));
}

TEST(Random, IndependentOfThreadCountAndShape) {
  ThreadPool one(1), two(2);
  for (const char* op : {"rand", "randn", "randint"}) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(dt)));
      Attrs a{{"shape", Ints{100001}}, {"seed", 11}, {"offset", 2}, {"dtype", dt}, {"high", 50}};
      if (std::string(op) != "randint")
        a = Attrs{{"shape", Ints{100001}}, {"seed", 11}, {"offset", 2}, {"dtype", dt}};
      std::vector<double> serial, parallel;
      {
        ThreadPool::Scope s(&one);
        serial = values(create(op, a));
      }
      {
        ThreadPool::Scope s(&two);
        parallel = values(create(op, a));
      }
      EXPECT_EQ(serial, parallel);
      // Element i depends only on i: a prefix of a longer tensor is the shorter one.
      a.set("shape", Ints{7});
      auto prefix = values(create(op, a));
      EXPECT_EQ(prefix, std::vector<double>(serial.begin(), serial.begin() + 7));
    }
  }
}

TEST(Random, UniformMoments) {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor u = create("rand", {{"shape", Ints{100000}}, {"seed", 3}, {"dtype", dt}});
    EXPECT_EQ(u.dtype(), dt);
    auto m = moments_of(u);
    EXPECT_NEAR(m.mean, 0.5, 0.01);
    EXPECT_NEAR(m.var, 1.0 / 12.0, 0.005);
    EXPECT_GE(m.min, 0.0);
    EXPECT_LT(m.max, 1.0);
  }
}

TEST(Random, NormalMoments) {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto m = moments_of(create("randn", {{"shape", Ints{100000}}, {"seed", 5}, {"dtype", dt}}));
    EXPECT_NEAR(m.mean, 0.0, 0.015);
    EXPECT_NEAR(m.var, 1.0, 0.02);
    auto n = moments_of(
        create("normal", {{"shape", Ints{100000}}, {"mean", 3.0}, {"std", 0.5}, {"dtype", dt}}));
    EXPECT_NEAR(n.mean, 3.0, 0.02);
    EXPECT_NEAR(n.var, 0.25, 0.01);
  }
  EXPECT_EQ(status_of([&] {
              create("normal", {{"shape", Ints{2}}, {"std", -1.0}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              create("randn", {{"shape", Ints{2}}, {"dtype", DType::Int32}});
            }),
            Status::DTypeMismatch);
  EXPECT_EQ(status_of([&] {
              create("rand", {{"shape", Ints{2}}, {"dtype", DType::Bool}});
            }),
            Status::DTypeMismatch);
}

TEST(Random, RandintRange) {
  Tensor r = create("randint", {{"shape", Ints{100000}}, {"low", -3}, {"high", 5}, {"seed", 9}});
  EXPECT_EQ(r.dtype(), DType::Int64);
  auto v = values(r);
  std::vector<int> counts(8, 0);
  for (double x : v) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 5);
    ASSERT_EQ(x, std::floor(x));
    ++counts[static_cast<int>(x) + 3];
  }
  for (int c : counts) EXPECT_NEAR(c, 12500, 500);  // every value about equally often
  auto m = moments_of(
      create("randint", {{"shape", Ints{100000}}, {"high", 256}, {"dtype", DType::UInt8}}));
  EXPECT_GE(m.min, 0);
  EXPECT_LE(m.max, 255);
  EXPECT_NEAR(m.mean, 127.5, 1.5);
  auto f = values(
      create("randint", {{"shape", Ints{10}}, {"low", 2}, {"high", 3}, {"dtype", DType::Float32}}));
  EXPECT_EQ(f, std::vector<double>(10, 2.0));
  EXPECT_EQ(status_of([&] {
              create("randint", {{"shape", Ints{2}}, {"low", 3}, {"high", 3}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              create("randint", {{"shape", Ints{2}}, {"high", 300}, {"dtype", DType::UInt8}});
            }),
            Status::OutOfRange);
  EXPECT_EQ(status_of([&] { create("randint", {{"shape", Ints{2}}}); }), Status::InvalidArgument);
}

TEST(Random, RegisteredAsSeededCreation) {
  for (const char* op : {"rand", "randn", "randint", "normal"}) {
    const OpDef& d = OpRegistry::global().get(op);
    EXPECT_TRUE(d.nondeterministic_seeded) << op;
    EXPECT_EQ(d.fusion, Fusion::Creation) << op;
  }
  EXPECT_EQ(OpRegistry::global().get("zeros").fusion, Fusion::Creation);
}
