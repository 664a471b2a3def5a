// A row-wise kernel run on the rows a product finishes (ops::RowsWork): a
// linear that reads its weight pre-packed calls it once per row of its
// output after every column of the row is final, and the runtime pairs a
// lone linear with the layer_norm (and its fused chain) that reads its
// output, running both in the linear's tasks. Results are those of running
// the two apart.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "compile_test_util.h"
#include "compiler/compile.h"
#include "engine/core/isa.h"
#include "engine/kernels/gemm.h"
#include "engine/ops/autograd.h"
#include "engine/profile/profile_events.h"
#include "engine/profile/profiler.h"
#include "engine/runtime/program.h"
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


// ---- the GEMM layer ------------------------------------------------------------

// What the test's RowsWork sees: per row, how often it was called and
// whether the row then held the product's final values.
struct Seen {
  const float* c = nullptr;
  const float* want = nullptr;
  int64_t n = 0;
  std::vector<std::atomic<int>> calls;
  std::vector<std::atomic<int>> final_then;
  explicit Seen(int64_t m) : calls(static_cast<size_t>(m)), final_then(static_cast<size_t>(m)) {}
};

void record(const ops::RowsWork& w, int64_t row0, int64_t rows) {
  auto& s = *static_cast<Seen*>(const_cast<void*>(w.ctx));
  for (int64_t r = row0; r < row0 + rows; ++r) {
    s.calls[static_cast<size_t>(r)]++;
    const bool same = std::memcmp(s.c + r * s.n, s.want + r * s.n, static_cast<size_t>(s.n) * sizeof(float)) == 0;
    s.final_then[static_cast<size_t>(r)] += same ? 1 : 0;
  }
}

// x @ wᵀ + bias with w packed at load (when `pack`), on `threads` threads,
// with `work` (may be null) as the rows consumer; the output in `*into` and
// its data in `*data` before the product runs, when given.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias, int threads, ops::RowsWork* work,
              bool pack = true, Tensor* into = nullptr, const float** data = nullptr) {
  const int64_t m = x.shape()[0], k = x.shape()[1], n = w.shape()[0];
  Tensor out = Tensor::empty({m, n}, DType::Float32);
  if (into) *into = out;
  if (data) *data = out.data<float>();
  ops::ProductEpilogue ep;
  ep.bias = bias;
  std::optional<PackBuffer> buf;
  ops::PackedOperand packed;
  if (pack) {
    const auto op = ops::product_operand_b(w, true);
    buf.emplace(ops::prepacked_b_floats(k, n));
    ops::prepack_b(*op, k, n, buf->p);
    packed = {buf->p, op->data, k, n, *op};
    ep.packed_b = &packed;
  }
  ep.rows = work;
  ThreadPool pool(threads);
  ThreadPool::Scope scope(&pool);
  ops::batched_product(out, x, false, w, true, ep);
  return out;
}

TEST(RowsWork, AProductFinishesEachRowOnceWithEveryColumnFinal) {
  if (!level_has_packed_kernel()) GTEST_SKIP() << "no packed kernel at this ISA level";
  // Rows not a multiple of the register block or of the tiles, columns not
  // of the panel width, depths below and above the level's depth block.
  for (const auto& [m, n, k] : {std::tuple{40, 96, 120}, {256, 200, 784}, {301, 33, 300}, {1100, 64, 64}})
    for (const int threads : {1, 2}) {
      SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " threads " +
                   std::to_string(threads));
      const Tensor x = rand_tensor({m, k}, DType::Float32, 1);
      const Tensor w = rand_tensor({n, k}, DType::Float32, 2);
      const Tensor b = rand_tensor({n}, DType::Float32, 3);
      const Tensor want = linear(x, w, b, threads, nullptr);
      Tensor out;
      Seen seen(m);
      seen.want = want.data<float>();
      seen.n = n;
      ops::RowsWork work;
      work.fn = record;
      work.ctx = &seen;
      work.rows = m;
      work.len = n;
      linear(x, w, b, threads, &work, true, &out, &seen.c);
      ASSERT_TRUE(work.applied);
      EXPECT_EQ(bytes_of(out), bytes_of(want)) << "rows cut differently changed the sums";
      for (int64_t r = 0; r < m; ++r) {
        ASSERT_EQ(seen.calls[static_cast<size_t>(r)].load(), 1) << "row " << r;
        ASSERT_EQ(seen.final_then[static_cast<size_t>(r)].load(), 1) << "row " << r << " not final";
      }
    }
}

TEST(RowsWork, ProductsThatCannotFinishRowsLeaveThemToTheCaller) {
  if (!level_has_packed_kernel()) GTEST_SKIP() << "no packed kernel at this ISA level";
  const Tensor w = rand_tensor({64, 96}, DType::Float32, 2);
  auto untouched = [&](int64_t m, bool pack, int64_t rows, int64_t len) {
    const Tensor x = rand_tensor({m, 96}, DType::Float32, 1);
    Seen seen(m);
    ops::RowsWork work;
    work.fn = record;
    work.ctx = &seen;
    work.rows = rows;
    work.len = len;
    linear(x, w, Tensor(), 2, &work, pack);
    int calls = 0;
    for (auto& c : seen.calls) calls += c.load();
    return !work.applied && calls == 0;
  };
  // B not packed at load: each task would pack all of it.
  EXPECT_TRUE(untouched(128, false, 128, 64));
  // A short output keeps its column panels.
  EXPECT_TRUE(untouched(16, true, 16, 64));
  // Rows of another length than the product's.
  EXPECT_TRUE(untouched(128, true, 256, 32));
}

// ---- the runtime -----------------------------------------------------------------

// The ResFFN block of the benchmarks, small: linear, layer_norm, tanh;
// linear, layer_norm, add, sigmoid; linear.
struct ResBlock {
  static constexpr int64_t kIn = 120, kHidden = 96, kOut = 10;
  Tensor w1 = named(rand_tensor({kHidden, kIn}, DType::Float32, 1, -0.1, 0.1), "w1", true);
  Tensor b1 = named(rand_tensor({kHidden}, DType::Float32, 2, -0.1, 0.1), "b1", true);
  Tensor w2 = named(rand_tensor({kHidden, kHidden}, DType::Float32, 3, -0.1, 0.1), "w2", true);
  Tensor b2 = named(rand_tensor({kHidden}, DType::Float32, 4, -0.1, 0.1), "b2", true);
  Tensor w3 = named(rand_tensor({kOut, kHidden}, DType::Float32, 5, -0.1, 0.1), "w3", true);
  Tensor b3 = named(rand_tensor({kOut}, DType::Float32, 6, -0.1, 0.1), "b3", true);
  Tensor g1 = named(rand_tensor({kHidden}, DType::Float32, 7, 0.5, 1.5), "g1", true);
  Tensor g2 = named(rand_tensor({kHidden}, DType::Float32, 8, 0.5, 1.5), "g2", true);
  Tensor s2 = named(rand_tensor({kHidden}, DType::Float32, 9, -0.5, 0.5), "s2", true);

  Tensor forward(const Tensor& x) const {
    const Attrs ln{{"normalized_shape", std::vector<int64_t>{kHidden}}};
    Tensor res = call1("tanh", {call1("layer_norm", {call1("linear", {x, w1, b1}), g1}, ln)});
    Tensor h = call1("layer_norm", {call1("linear", {res, w2, b2}), g2, s2}, ln);
    return call1("linear", {call1("sigmoid", {call1("add", {h, res})}), w3, b3});
  }
};

GraphSpec spec(const ResBlock& m, int64_t batch) {
  GraphSpec s;
  s.name = "res_block";
  s.inference = true;
  s.inputs = {named(rand_tensor({batch, ResBlock::kIn}, DType::Float32, 11), "x")};
  s.model = [&m](std::span<const Tensor> in) -> std::vector<Tensor> { return {m.forward(in[0])}; };
  return s;
}

void expect_near(const Tensor& got, const Tensor& want, double tol) {
  const auto g = values(got), w = values(want);
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol) << i;
}

TEST(RowConsumers, EachLinearRunsTheLayerNormReadingIt) {
  ResBlock m;
  const Program p(round_trip(compiler::compile_program({spec(m, 64)}, {})));
  int pairs = 0;
  for (size_t k = 0; k < p.kernels().size(); ++k) {
    const KernelPlan& kp = p.kernels()[k];
    if (kp.rows_consumer < 0) continue;
    ++pairs;
    const KernelPlan& c = p.kernels()[static_cast<size_t>(kp.rows_consumer)];
    EXPECT_EQ(kp.steps[0].op->name, "linear");
    EXPECT_EQ(c.steps[0].op->name, "layer_norm");
    EXPECT_EQ(c.rows_producer, static_cast<int32_t>(k));
    EXPECT_EQ(kp.pair_name, kp.name + "+" + c.name);
    EXPECT_LT(kp.pair_bytes, kp.bytes + c.bytes) << "the product's output is read back from cache";
  }
  EXPECT_EQ(pairs, 2);
}

TEST(RowConsumers, PairedInferenceIsThatOfTheKernelsApart) {
  ResBlock m;
  for (const int64_t batch : {64, 300}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const pef::ProgramDesc program = compiler::compile_program({spec(m, batch)}, {});
    ThreadPool two(2), one(1);
    auto paired = load_prepacked(program, two, nullptr);
    auto apart = load_prepacked(program, two, "0");  // nothing packed: nothing paired
    const Tensor x = named(rand_tensor({batch, ResBlock::kIn}, DType::Float32, 12), "x");
    const Tensor got = run_one(*paired, x);
    Tensor want;
    {
      autograd::NoGradGuard ng;
      want = m.forward(x);
    }
    expect_near(got, want, 1e-5);
    expect_near(got, run_one(*apart, x), 1e-5);
    // The rows each task finishes do not change a result's bits.
    EXPECT_EQ(bytes_of(run_one(*load_prepacked(program, one, nullptr), x)), bytes_of(got));
    EXPECT_EQ(bytes_of(run_one(*paired, x)), bytes_of(got)) << "a second run differs";
  }
}

TEST(RowConsumers, TheProfileShowsEachPairAsOneKernel) {
  if (!level_has_packed_kernel()) GTEST_SKIP() << "no packed kernel at this ISA level";
  ResBlock m;
  ThreadPool pool(2);
  Profiler profiler;
  auto rt = load_prepacked(compiler::compile_program({spec(m, 64)}, {}), pool, nullptr, &profiler);
  const auto id = profiler.start(category_bit(ProfileCategory::Kernel));
  run_one(*rt, named(rand_tensor({64, ResBlock::kIn}, DType::Float32, 12), "x"));
  const ProfileTrace t = profiler.stop(id);
  const Program& p = rt->program();
  for (const KernelPlan& kp : p.kernels()) {
    int as_pair = 0, alone = 0;
    for (const ProfileEvent& e : t.events) {
      as_pair += !kp.pair_name.empty() && e.name == kp.pair_name;
      alone += e.name == kp.name;
    }
    if (kp.rows_consumer >= 0) {
      EXPECT_EQ(as_pair, 1) << kp.pair_name;
      EXPECT_EQ(alone, 0) << kp.name;
    } else if (kp.rows_producer >= 0) {
      EXPECT_EQ(alone, 0) << kp.name << " ran in its producer's event";
    } else {
      EXPECT_EQ(alone, 1) << kp.name;
    }
  }
}

TEST(RowConsumers, ALayerNormOverMoreThanTheProductsRowsRunsOnItsOwn) {
  // normalized over the last two dims: rows of the product are not rows of
  // the normalization, so the op refuses the rows and runs after the product.
  Tensor w = named(rand_tensor({48, 40}, DType::Float32, 1, -0.2, 0.2), "w", true);
  GraphSpec s;
  s.name = "ln2";
  s.inference = true;
  s.inputs = {named(rand_tensor({8, 16, 40}, DType::Float32, 2), "x")};
  const Attrs ln{{"normalized_shape", std::vector<int64_t>{16, 48}}};
  s.model = [&](std::span<const Tensor> in) -> std::vector<Tensor> {
    return {call1("tanh", {call1("layer_norm", {call1("linear", {in[0], w}), Tensor(), Tensor()}, ln)})};
  };
  ThreadPool pool(2);
  auto rt = load_prepacked(compiler::compile_program({s}, {}), pool, nullptr);
  const Tensor x = named(rand_tensor({8, 16, 40}, DType::Float32, 3), "x");
  Tensor want;
  {
    autograd::NoGradGuard ng;
    want = call1("tanh", {call1("layer_norm", {call1("linear", {x, w}), Tensor(), Tensor()}, ln)});
  }
  expect_near(run_one(*rt, x), want, 1e-5);
}

}  // namespace
}  // namespace samba::runtime
