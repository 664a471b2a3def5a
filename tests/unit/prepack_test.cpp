// Weights pre-packed at load (engine/runtime/prepacked_weights.h): the
// packed kernel (at AVX2) or the kernel for rows against a packed B (at the
// AVX-512 levels) reads them instead of packing B per call, with the packed
// kernel's results bit for bit those of packing per call and the other's
// the same within fp32 rounding, and no write to the weights from outside
// the kernels leaves a stale copy behind.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "compile_test_util.h"
#include "compiler/compile.h"
#include "engine/core/isa.h"
#include "engine/kernels/gemm.h"
#include "engine/ops/autograd.h"
#include "engine/profile/profile_events.h"
#include "engine/profile/profiler.h"
#include "engine/runtime/runtime.h"
#include "op_test_util.h"
#include "prepack_test_util.h"

namespace samba::runtime {
namespace {

using compiler::GraphSpec;
using testing::bytes_of;
using testing::named;
using testing::rand_tensor;
using testing::round_trip;
using testing::values;
using testing::level_has_packed_kernel;
using testing::load_prepacked;
using testing::PackBuffer;
using testing::run_one;


// Whether `got`, a product read from pre-packed weights, is `want`, the same
// product packed per call: below AVX-512 the packed kernel reads the pack and
// sums as it does when it packs B itself, so bit for bit; at the AVX-512
// levels the kernel for rows against a packed B (prepacked_rows.h) sums each
// output over the whole depth in one chain, so within fp32 rounding (the
// outputs here are sums of up to 1000 products of values in [-1, 1], and
// the two orders differ by up to about 1e-5).
bool same_product(const Tensor& got, const Tensor& want) {
  if (active_isa() < IsaLevel::Avx512) return bytes_of(got) == bytes_of(want);
  const auto g = values(got), w = values(want);
  if (g.size() != w.size()) return false;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= 1e-4 * std::max(1.0, std::abs(w[i])))) return false;
  return true;
}

// ---- the GEMM layer ------------------------------------------------------------

// out = a @ op(b) through batched_product, with b packed first when `pack`.
Tensor product(const Tensor& a, const Tensor& b, bool trans_b, bool pack, const Tensor& pack_from) {
  const int64_t n = trans_b ? b.shape()[0] : b.shape()[1];
  Tensor out = Tensor::empty({a.shape()[0], n}, DType::Float32);
  ops::ProductEpilogue ep;
  std::optional<PackBuffer> buf;
  ops::PackedOperand packed;
  if (pack) {
    const auto src = ops::product_operand_b(pack_from, trans_b);
    const auto op = ops::product_operand_b(b, trans_b);
    const int64_t k = a.shape()[1];
    buf.emplace(ops::prepacked_b_floats(k, n));
    ops::prepack_b(*src, k, n, buf->p);
    // Declared as packed from b: the product must take the copy for b.
    packed = {buf->p, op->data, k, n, *op};
    ep.packed_b = &packed;
  }
  ThreadPool pool(2);
  ThreadPool::Scope scope(&pool);
  ops::batched_product(out, a, false, b, trans_b, ep);
  return out;
}

TEST(PrepackedGemm, PackedProductsAreThoseOfPackingPerCall) {
  if (!level_has_packed_kernel()) GTEST_SKIP() << "no packed kernel at this ISA level";
  // Edge panels (n not a multiple of the panel width), several depth blocks
  // (k above the level's block depth), both layouts of B; bit for bit
  // below AVX-512 (same_product). (128 x 80 x 96 with B row-major goes to
  // the direct kernel.)
  for (const auto& [m, n, k] : {std::tuple{128, 80, 96}, {200, 70, 600}, {96, 33, 1000}})
    for (const bool trans_b : {false, true}) {
      if (k < 600 && !trans_b) continue;
      const Tensor a = rand_tensor({m, k}, DType::Float32, 1);
      const Tensor b = rand_tensor(trans_b ? Dims{n, k} : Dims{k, n}, DType::Float32, 2);
      ASSERT_TRUE(ops::gemm_packs_b(m, n, k, false, trans_b)) << m << "x" << n << "x" << k;
      EXPECT_TRUE(same_product(product(a, b, trans_b, true, b), product(a, b, trans_b, false, b)))
          << m << "x" << n << "x" << k << " trans_b " << trans_b;
    }
}

TEST(PrepackedGemm, ThePackedKernelReadsThePackInsteadOfB) {
  if (!level_has_packed_kernel()) GTEST_SKIP() << "no packed kernel at this ISA level";
  // The copy is packed from other values than b's: the result is the
  // product with those (computed by the same kernel), not with b, so the
  // kernel did not pack b itself. 16 and 9 rows (a linear at small batch)
  // take the kernel for few rows where the level has one.
  for (const auto& [m, n, k] : {std::tuple{128, 80, 96}, {16, 256, 784}, {9, 45, 300}}) {
    if (!ops::gemm_packs_b(m, n, k, false, true)) continue;
    const Tensor a = rand_tensor({m, k}, DType::Float32, 1);
    const Tensor b = rand_tensor({n, k}, DType::Float32, 2), other = rand_tensor({n, k}, DType::Float32, 3);
    const std::vector<unsigned char> with_other = bytes_of(product(a, other, true, true, other));
    EXPECT_EQ(bytes_of(product(a, b, true, true, other)), with_other) << m << "x" << n << "x" << k;
    EXPECT_NE(bytes_of(product(a, b, true, true, b)), with_other) << m << "x" << n << "x" << k;
  }
}

TEST(PrepackedGemm, SmallProductsPackOnlyWhereAKernelReadsThePack) {
  // At AVX-512, up to 32 rows from a panel's width (32 columns) read B from
  // its packed copy (engine/kernels/x86/prepacked_rows.h); at the other
  // levels, and for narrower outputs, the dot, transposed and direct kernels
  // read B in place.
  const bool few_rows_read_the_pack = active_isa() >= IsaLevel::Avx512;
  EXPECT_EQ(ops::gemm_packs_b(1, 256, 256, false, true), few_rows_read_the_pack);
  EXPECT_EQ(ops::gemm_packs_b(3, 256, 784, false, true), few_rows_read_the_pack);
  EXPECT_EQ(ops::gemm_packs_b(16, 256, 256, false, true), few_rows_read_the_pack);
  EXPECT_EQ(ops::gemm_packs_b(8, 32, 32, false, false), few_rows_read_the_pack);
  EXPECT_FALSE(ops::gemm_packs_b(4, 256, 256, true, true));  // A stored transposed
  EXPECT_FALSE(ops::gemm_packs_b(16, 10, 256, false, true));
  EXPECT_FALSE(ops::gemm_packs_b(0, 32, 32, false, false));
}

// ---- the runtime -----------------------------------------------------------------

// out = linear(relu(x @ w0), w1, b1): a matmul (B row-major, deeper than the
// direct kernel takes) and a linear (B the weight, read transposed), both
// large enough for the packed kernel.
struct Mlp {
  Tensor w0 = named(rand_tensor({600, 96}, DType::Float32, 1, -0.1, 0.1), "w0", true);
  Tensor w1 = named(rand_tensor({80, 96}, DType::Float32, 2, -0.1, 0.1), "w1", true);
  Tensor b1 = named(rand_tensor({80}, DType::Float32, 3), "b1", true);
  Tensor forward(const Tensor& x) const {
    return call1("linear", {call1("relu", {call1("matmul", {x, w0})}), w1, b1});
  }
};

Tensor x_input(uint32_t seed = 4, int64_t rows = 128) {
  return named(rand_tensor({rows, 600}, DType::Float32, seed), "x");
}

GraphSpec inference_spec(const Mlp& m, int64_t rows = 128) {
  GraphSpec s;
  s.name = "mlp";
  s.inference = true;
  s.inputs = {x_input(4, rows)};
  s.model = [&m](std::span<const Tensor> in) -> std::vector<Tensor> { return {m.forward(in[0])}; };
  return s;
}

// With new weights, the model run eagerly.
Tensor eager(const Mlp& m, const Tensor& x) {
  autograd::NoGradGuard ng;
  return m.forward(x);
}

void expect_near(const Tensor& got, const Tensor& want) {
  const auto g = values(got), w = values(want);
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], 1e-4) << i;
}

compiler::CompileOptions with_precision(compiler::MixedPrecision mixed) {
  compiler::CompileOptions o;
  o.mixed_precision = mixed;
  return o;
}

struct Loaded {
  explicit Loaded(compiler::MixedPrecision mixed = compiler::MixedPrecision::None)
      : program(compiler::compile_program({inference_spec(m)}, with_precision(mixed))),
        packed(load_prepacked(program, pool, nullptr)),
        unpacked(load_prepacked(program, pool, "0")) {}
  Mlp m;
  ThreadPool pool{2};
  pef::ProgramDesc program;
  std::unique_ptr<Runtime> packed;
  std::unique_ptr<Runtime> unpacked;
};

TEST(PrepackedWeights, InferenceIsThatWithoutPrePacking) {
  if (!level_has_packed_kernel()) GTEST_SKIP() << "no packed kernel at this ISA level";
  Loaded l;
  ASSERT_NE(l.packed->prepacked(), nullptr);
  EXPECT_EQ(l.packed->prepacked()->weights(), 2u);
  // At least the weights themselves: 600 x 96 and 80 x 96 floats.
  EXPECT_GE(l.packed->prepacked()->bytes(), (600 * 96 + 80 * 96) * sizeof(float));
  EXPECT_EQ(l.unpacked->prepacked(), nullptr);
  const Tensor x = x_input();
  const Tensor got = run_one(*l.packed, x);
  EXPECT_TRUE(same_product(got, run_one(*l.unpacked, x)));
  expect_near(got, eager(l.m, x));
  EXPECT_EQ(l.packed->prepacked()->packs(), 1);
  // Whatever the kernel, a run's result does not depend on the threads.
  ThreadPool one(1);
  EXPECT_EQ(bytes_of(run_one(*load_prepacked(l.program, one, nullptr), x)), bytes_of(got));
  run_one(*l.packed, x);
  EXPECT_EQ(l.packed->prepacked()->packs(), 1) << "a run that writes nothing re-packed";
}

TEST(PrepackedWeights, ASmallBatchReadsItsWeightsPackedWhereAKernelDoes) {
  // At batch 16 both products take the kernel for few rows at the AVX-512
  // levels, which reads the packed copies (at AVX2 the linear reads its
  // weight in place). Either way the results are the model's.
  Mlp m;
  ThreadPool pool(2);
  const pef::ProgramDesc program = compiler::compile_program({inference_spec(m, 16)}, {});
  std::unique_ptr<Runtime> packed = load_prepacked(program, pool, nullptr);
  std::unique_ptr<Runtime> unpacked = load_prepacked(program, pool, "0");
  if (active_isa() >= IsaLevel::Avx512) {
    ASSERT_NE(packed->prepacked(), nullptr);
    EXPECT_EQ(packed->prepacked()->weights(), 2u);
  }
  const Tensor x = x_input(5, 16);
  const Tensor got = run_one(*packed, x);
  expect_near(got, eager(m, x));
  expect_near(got, run_one(*unpacked, x));
}

TEST(PrepackedWeights, AnUnknownSettingWarnsAndPacks) {
  if (!level_has_packed_kernel()) GTEST_SKIP() << "no packed kernel at this ISA level";
  Mlp m;
  ThreadPool pool(2);
  auto rt = load_prepacked(compiler::compile_program({inference_spec(m)}, {}), pool, "yes please");
  EXPECT_NE(rt->prepacked(), nullptr);
}

// After each way of writing a weight, the next run computes with the new
// values, as the runtime without pre-packing does: a stale copy would give
// the old weights' result. `near_eager`: the result is also the eager
// model's within fp32 rounding.
void expect_every_write_reaches_the_next_run(Loaded& l, bool near_eager) {
  const Tensor x = x_input();
  const Tensor before = run_one(*l.packed, x);  // packs the load-time weights
  const auto check = [&](const char* path) {
    SCOPED_TRACE(path);
    const Tensor got = run_one(*l.packed, x);
    EXPECT_TRUE(same_product(got, run_one(*l.unpacked, x)));
    EXPECT_NE(bytes_of(got), bytes_of(before));
    if (near_eager) expect_near(got, eager(l.m, x));
  };
  const std::filesystem::path ckpt =
      std::filesystem::temp_directory_path() / ("prepack_test_" + std::to_string(getpid()) + ".ckpt");
  const uint32_t params = 1u << static_cast<unsigned>(pef::TensorRole::Parameter);
  l.packed->save_checkpoint(ckpt.string(), params);

  // sn_data
  l.m.w1 = named(rand_tensor({80, 96}, DType::Float32, 20, -0.1, 0.1), "w1", true);
  for (Runtime* rt : {l.packed.get(), l.unpacked.get()}) rt->write("w1", l.m.w1);
  check("write");

  // materialization into device memory
  l.m.w0 = named(rand_tensor({600, 96}, DType::Float32, 21, -0.1, 0.1), "w0", true);
  for (Runtime* rt : {l.packed.get(), l.unpacked.get()})
    rt->fill("w0", [&](const Tensor& dst) { dst.copy_from(l.m.w0); });
  check("fill");

  // a weight bound as a run input
  l.m.w1 = named(rand_tensor({80, 96}, DType::Float32, 22, -0.1, 0.1), "w1", true);
  for (Runtime* rt : {l.packed.get(), l.unpacked.get()}) {
    RunRequest r;
    r.inputs = {x, l.m.w1};
    rt->run(r);
  }
  check("run input");

  // a checkpoint: back to the load-time weights
  l.packed->load_checkpoint(ckpt.string(), params, true);
  l.unpacked->load_checkpoint(ckpt.string(), params, true);
  std::filesystem::remove(ckpt);
  const Tensor got = run_one(*l.packed, x);
  EXPECT_EQ(bytes_of(got), bytes_of(before));
  EXPECT_TRUE(same_product(got, run_one(*l.unpacked, x)));
}

TEST(PrepackedWeights, EveryWriteToAWeightReachesTheNextRun) {
  if (!level_has_packed_kernel()) GTEST_SKIP() << "no packed kernel at this ISA level";
  Loaded l;
  expect_every_write_reaches_the_next_run(l, true);
}

// ---- casts of weights (bf16 mixed precision) -----------------------------------

// The program's casts of weights: (the cast's output, the weight) by name.
std::vector<std::pair<std::string, std::string>> weight_casts(const pef::ProgramDesc& p) {
  std::vector<std::pair<std::string, std::string>> casts;
  for (const pef::KernelDesc& k : p.kernels)
    for (const pef::OpCall& op : k.ops) {
      const pef::TensorDesc& in = p.tensors[static_cast<size_t>(op.inputs[0])];
      if (op.op == "cast" && in.role == pef::TensorRole::Parameter)
        casts.emplace_back(p.tensors[static_cast<size_t>(op.outputs[0])].name, in.name);
    }
  return casts;
}

TEST(PrepackedWeights, Bf16CastsOfWeightsAreComputedAtLoadWithTheSameBits) {
  Loaded l(compiler::MixedPrecision::Bf16);
  ASSERT_NE(l.packed->prepacked(), nullptr);
  // w0, w1 and b1 (a linear's bias is an operand of the product too).
  EXPECT_EQ(l.packed->prepacked()->casts(), 3u);
  EXPECT_EQ(l.unpacked->prepacked(), nullptr);
  const Tensor x = x_input();
  const Tensor got = run_one(*l.packed, x);
  EXPECT_EQ(bytes_of(got), bytes_of(run_one(*l.unpacked, x)));
  EXPECT_EQ(l.packed->prepacked()->packs(), 1);
  // sn_data of a cast's output reads the values the runs used: the weight's cast.
  const auto casts = weight_casts(l.program);
  ASSERT_EQ(casts.size(), 3u);
  for (const auto& [cast, weight] : casts) {
    SCOPED_TRACE(cast);
    autograd::NoGradGuard ng;
    const Tensor want = call1("cast", {l.packed->read(weight)}, {{"dtype", DType::BFloat16}});
    EXPECT_EQ(bytes_of(l.packed->read(cast)), bytes_of(want));
  }
  run_one(*l.packed, x);
  EXPECT_EQ(l.packed->prepacked()->packs(), 1) << "a run that writes nothing cast again";
}

TEST(PrepackedWeights, EveryWriteToAWeightReachesTheNextBf16Run) {
  Loaded l(compiler::MixedPrecision::Bf16);
  expect_every_write_reaches_the_next_run(l, false);
}

TEST(PrepackedWeights, TheProfileShowsEachPackingAndItsBytes) {
  if (!level_has_packed_kernel()) GTEST_SKIP() << "no packed kernel at this ISA level";
  Mlp m;
  ThreadPool pool(2);
  Profiler profiler;
  unsetenv("SAMBA_PREPACK");
  Runtime rt(round_trip(compiler::compile_program({inference_spec(m)}, {})), pool, &profiler);
  const auto id = profiler.start(category_bit(ProfileCategory::Runtime));
  const Tensor x = x_input();
  run_one(rt, x);
  run_one(rt, x);  // nothing written in between: nothing packed
  rt.write("w1", m.w1);
  run_one(rt, x);
  const ProfileTrace t = profiler.stop(id);
  int packings = 0;
  for (const ProfileEvent& e : t.events) {
    if (e.name != profile_events::kPrepackWeights) continue;
    ++packings;
    ASSERT_EQ(e.num_args, 1);
    EXPECT_EQ(e.args[0].i, static_cast<int64_t>(rt.prepacked()->bytes()));
  }
  EXPECT_EQ(packings, 2);
}

TEST(PrepackedWeights, ConcurrentRunsAfterAWriteUseTheNewWeights) {
  if (!level_has_packed_kernel()) GTEST_SKIP() << "no packed kernel at this ISA level";
  Loaded l;
  constexpr int kThreads = 6, kRuns = 20;
  std::vector<Tensor> inputs;
  for (int t = 0; t < kThreads; ++t) inputs.push_back(x_input(100 + t));
  for (int round = 0; round < 3; ++round) {
    const Tensor w = named(rand_tensor({80, 96}, DType::Float32, 30 + round, -0.1, 0.1), "w1", true);
    l.packed->write("w1", w);
    l.unpacked->write("w1", w);
    std::vector<Tensor> want;
    for (const Tensor& x : inputs) want.push_back(run_one(*l.unpacked, x));
    // The first runs after the write race to re-pack; every one must see
    // the new weights, in whichever context it gets.
    std::vector<int> mismatches(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kRuns; ++i)
          if (!same_product(run_one(*l.packed, inputs[t]), want[t])) ++mismatches[t];
      });
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "round " << round << " thread " << t;
  }
}

// The optimizer writes the weights: neither packed copies nor casts of them
// would stay valid through a step, so none are made and training runs as
// without pre-packing, bit for bit.
void expect_training_packs_nothing(compiler::MixedPrecision mixed) {
  Mlp m;
  GraphSpec s = inference_spec(m);
  s.inference = false;
  s.inputs = {x_input()};
  s.model = [&m](std::span<const Tensor> in) -> std::vector<Tensor> {
    return {call1("mean", {m.forward(in[0])})};
  };
  s.backward.loss_indices = {0};
  compiler::OptimizerSpec o;
  o.kind = compiler::OptimizerKind::SGD;
  o.defaults = Attrs{{"lr", 0.1}};
  o.groups.push_back({{m.w0, m.w1, m.b1}, {}});
  s.optimizers.push_back(o);
  ThreadPool pool(2);
  const pef::ProgramDesc p = compiler::compile_program({s}, with_precision(mixed));
  auto rt = load_prepacked(p, pool, nullptr);
  auto unpacked = load_prepacked(p, pool, "0");
  EXPECT_EQ(rt->prepacked(), nullptr);
  for (int step = 0; step < 3; ++step) {
    const Tensor x = x_input(50 + static_cast<uint32_t>(step));
    EXPECT_EQ(bytes_of(run_one(*rt, x)), bytes_of(run_one(*unpacked, x))) << "step " << step;
  }
  EXPECT_EQ(bytes_of(rt->read("w1")), bytes_of(unpacked->read("w1")));
}

TEST(PrepackedWeights, ATrainingPefPacksNothing) {
  expect_training_packs_nothing(compiler::MixedPrecision::None);
}

TEST(PrepackedWeights, ABf16TrainingPefCastsItsWeightsEveryStep) {
  expect_training_packs_nothing(compiler::MixedPrecision::Bf16);
}

}  // namespace
}  // namespace samba::runtime
