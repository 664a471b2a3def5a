// A data-parallel compile: the REDUCE section's place in the schedule, the
// gradient buckets the memory plan lays out (contiguous, in the order
// backward finishes the gradients, cut at the bucket size), the refusals,
// and the verifier's checks of those fields on a PEF that lies about them.
#include <gtest/gtest.h>

#include <functional>

#include "compiler/compile.h"
#include "engine/core/error.h"
#include "engine/pef/pef_log.h"
#include "engine/pef/reader.h"
#include "engine/pef/verify.h"
#include "engine/pef/writer.h"
#include "op_test_util.h"

namespace samba::compiler {
namespace {

using testing::make;
using testing::rand_tensor;

Tensor param(const std::string& name, const Dims& shape, uint32_t seed) {
  Tensor t = rand_tensor(shape, DType::Float32, seed, -0.5, 0.5);
  t.impl()->name = name;
  t.impl()->requires_grad = true;
  return t;
}

struct Net {
  Tensor w1 = param("fc1.weight", {16, 8}, 1), b1 = param("fc1.bias", {16}, 2);
  Tensor w2 = param("fc2.weight", {16, 16}, 3), b2 = param("fc2.bias", {16}, 4);
  Tensor w3 = param("head.weight", {3, 16}, 5), b3 = param("head.bias", {3}, 6);
};

GraphSpec spec(const Net& n, bool clip = false) {
  GraphSpec s;
  Tensor x = rand_tensor({4, 8}, DType::Float32, 9);
  x.impl()->name = "x";
  Tensor y = make({0, 2, 1, 0}, {4}, DType::Int64);
  y.impl()->name = "y";
  s.inputs = {x, y};
  s.model = [&n](std::span<const Tensor> in) {
    Tensor h = call1("relu", {call1("linear", {in[0], n.w1, n.b1})});
    h = call1("relu", {call1("linear", {h, n.w2, n.b2})});
    return std::vector<Tensor>{call1("cross_entropy", {call1("linear", {h, n.w3, n.b3}), in[1]})};
  };
  OptimizerSpec sgd;
  sgd.kind = OptimizerKind::SGD;
  sgd.defaults = Attrs{{"lr", 0.1}};
  if (clip) sgd.defaults.set("max_grad_norm", 1.0);
  sgd.groups.push_back({{n.w1, n.b1, n.w2, n.b2, n.w3, n.b3}, {}});
  s.optimizers = {sgd};
  return s;
}

pef::ProgramDesc compile_dp(int32_t world, uint64_t bucket_bytes, bool clip = false) {
  static const Net net;
  CompileOptions o;
  o.data_parallel_world_size = world;
  o.data_parallel_bucket_bytes = bucket_bytes;
  return compile_program({spec(net, clip)}, o);
}

std::string name_of(const pef::ProgramDesc& p, int32_t t) {
  return p.tensors[static_cast<size_t>(t)].name;
}

TEST(DataParallelCompile, ReduceComesAfterBackwardAndBeforeGradNormAndOpt) {
  const pef::ProgramDesc p = compile_dp(4, 0, /*clip=*/true);
  std::vector<pef::SectionType> order;
  for (const auto& c : p.schedule) order.push_back(p.sections[static_cast<size_t>(c.section)].type);
  const auto at = [&](pef::SectionType t) {
    return std::find(order.begin(), order.end(), t) - order.begin();
  };
  ASSERT_LT(at(pef::SectionType::REDUCE), static_cast<std::ptrdiff_t>(order.size()));
  EXPECT_EQ(at(pef::SectionType::REDUCE), at(pef::SectionType::BCKWD) + 1);
  EXPECT_LT(at(pef::SectionType::REDUCE), at(pef::SectionType::GRADNORM));
  EXPECT_LT(at(pef::SectionType::GRADNORM), at(pef::SectionType::OPT));
  EXPECT_EQ(p.data_parallel.world_size, 4);
  EXPECT_EQ(p.data_parallel.bucket_bytes, uint64_t{25} << 20);
  // Every gradient is in the one default-size bucket, head's first: backward
  // finishes the last layer's gradients first.
  ASSERT_EQ(p.data_parallel.buckets.size(), 1u);
  const auto& g = p.data_parallel.buckets[0].gradients;
  ASSERT_EQ(g.size(), 6u);
  EXPECT_EQ(name_of(p, g.front()).rfind("head.", 0), 0u) << name_of(p, g.front());
  EXPECT_EQ(name_of(p, g.back()).rfind("fc1.", 0), 0u) << name_of(p, g.back());
  EXPECT_NE(pef::format_pef_log(p).find("== data parallel =="), std::string::npos);
}

TEST(DataParallelCompile, BucketsAreContiguousAndCutAtTheirSize) {
  const pef::ProgramDesc p = pef::parse_pef(pef::serialize_pef(compile_dp(2, 1100)));
  // fc2.weight (1 KiB) fits alone; 1100 bytes never hold two weights.
  EXPECT_GE(p.data_parallel.buckets.size(), 3u);
  for (const auto& b : p.data_parallel.buckets) {
    uint64_t at = b.arena_offset;
    for (int32_t t : b.gradients) {
      const auto& td = p.tensors[static_cast<size_t>(t)];
      EXPECT_EQ(td.role, pef::TensorRole::Gradient);
      EXPECT_GE(td.arena_offset, at);
      EXPECT_LT(td.arena_offset, at + 64) << "a gap larger than the plan's alignment";
      at = td.arena_offset + td.nbytes;
    }
    EXPECT_EQ(at, b.arena_offset + b.nbytes);
    EXPECT_TRUE(b.nbytes <= 1100 || b.gradients.size() == 1) << b.nbytes;
  }
}

TEST(DataParallelCompile, InferenceIsRefused) {
  static const Net net;
  GraphSpec s = spec(net);
  s.inference = true;
  s.optimizers.clear();
  CompileOptions o;
  o.data_parallel_world_size = 2;
  try {
    compile_program({s}, o);
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("inference"), std::string::npos) << e.what();
  }
}

struct Lie {
  const char* what;
  std::function<void(pef::ProgramDesc&)> mutate;
  const char* expected;
};

TEST(DataParallelCompile, TheVerifierRefusesBucketsThatTouchOtherMemory) {
  const pef::ProgramDesc good = compile_dp(2, 1100);
  ASSERT_NO_THROW(pef::verify_program(good));
  auto param_index = [&](const pef::ProgramDesc& p) {
    for (size_t i = 0; i < p.tensors.size(); ++i)
      if (p.tensors[i].role == pef::TensorRole::Parameter) return static_cast<int32_t>(i);
    return -1;
  };
  const std::vector<Lie> lies = {
      {"bucket past the state area",
       [](pef::ProgramDesc& p) { p.data_parallel.buckets.back().nbytes += 1 << 20; },
       "outside the DDR state area"},
      {"bucket offset overflows",
       [](pef::ProgramDesc& p) { p.data_parallel.buckets[0].arena_offset = ~uint64_t{0} - 8; },
       "outside"},
      {"a parameter in a bucket",
       [&](pef::ProgramDesc& p) { p.data_parallel.buckets[0].gradients[0] = param_index(p); },
       "not a gradient"},
      {"a gradient index out of range",
       [](pef::ProgramDesc& p) { p.data_parallel.buckets[0].gradients[0] = 100000; },
       "out of range"},
      {"a gradient in no bucket", [](pef::ProgramDesc& p) { p.data_parallel.buckets.pop_back(); },
       "in no bucket"},
      {"a gradient in two buckets",
       [](pef::ProgramDesc& p) {
         p.data_parallel.buckets[1].gradients.push_back(p.data_parallel.buckets[0].gradients[0]);
       },
       "offset"},
      {"bucket bigger than its gradients",
       [](pef::ProgramDesc& p) { p.data_parallel.buckets[0].nbytes += 4; },
       "its last gradient ends"},
      {"bucket dtype", [](pef::ProgramDesc& p) { p.data_parallel.buckets[0].dtype = DType::Int64; },
       "not float32 or float64"},
      {"REDUCE with a kernel",
       [](pef::ProgramDesc& p) {
         // OPT's last kernel moved into REDUCE (a kernel is in one section).
         int32_t k = -1;
         for (auto& s : p.sections)
           if (s.type == pef::SectionType::OPT) k = s.kernels.back(), s.kernels.pop_back();
         for (auto& s : p.sections)
           if (s.type == pef::SectionType::REDUCE) s.kernels.push_back(k);
       },
       "has no kernels"},
      {"REDUCE without data parallel", [](pef::ProgramDesc& p) { p.data_parallel = {}; },
       "not data parallel"},
      {"world size", [](pef::ProgramDesc& p) { p.data_parallel.world_size = -3; }, "world size -3"},
  };
  for (const Lie& lie : lies) {
    pef::ProgramDesc p = good;
    lie.mutate(p);
    try {
      pef::verify_program(p);
      ADD_FAILURE() << lie.what << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Status::CorruptFile) << lie.what;
      EXPECT_NE(std::string(e.what()).find(lie.expected), std::string::npos)
          << lie.what << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace samba::compiler
