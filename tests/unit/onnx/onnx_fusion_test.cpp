// An imported ONNX chain of (MatMul, Add, Relu) blocks, the layout exporters
// write for dense layers, compiles to one GEMM kernel per block (the bias
// add and the relu run in its epilogue), and the PEF loads and computes the
// chain.
#include <gtest/gtest.h>

#include <algorithm>

#include "compile_test_util.h"
#include "compiler/compile.h"
#include "engine/onnx/onnx_model.h"
#include "engine/runtime/runtime.h"
#include "onnx_test_models.h"
#include "op_test_util.h"

namespace samba::compiler {
namespace {

namespace om = samba::testing::onnx_models;

constexpr int64_t kBatch = 8, kWidth = 32, kBlocks = 3;

// Deterministic values in [-0.5, 0.5) without a generator to agree with.
std::vector<float> pattern(size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37 + salt * 11) % 64) / 64.f - 0.5f;
  return v;
}

struct Chain {
  std::vector<std::vector<float>> w, b;
  std::vector<float> x = pattern(kBatch * kWidth, 99);

  Chain() {
    for (int i = 0; i < kBlocks; ++i) {
      w.push_back(pattern(kWidth * kWidth, 2 * i));
      b.push_back(pattern(kWidth, 2 * i + 1));
    }
  }

  // Each block is x @ W + b then relu; W stored (in, out) as MatMul reads it.
  onnx::ModelProto model() const {
    onnx::ModelProto m = om::model(17);
    om::input(m, "x", {kBatch, kWidth});
    std::string h = "x";
    for (int i = 0; i < kBlocks; ++i) {
      const std::string s = std::to_string(i);
      om::initializer(m, "w" + s, {kWidth, kWidth}, w[i]);
      om::initializer(m, "b" + s, {kWidth}, b[i]);
      om::node(m, "MatMul", {h, "w" + s}, {"m" + s});
      // Exporters write the bias first or second; both must fuse.
      om::node(m, "Add", i % 2 ? std::vector<std::string>{"b" + s, "m" + s}
                                : std::vector<std::string>{"m" + s, "b" + s},
               {"a" + s});
      om::node(m, "Relu", {"a" + s}, {"r" + s});
      h = "r" + s;
    }
    om::output(m, h, {kBatch, kWidth});
    return m;
  }

  // The chain in double precision.
  std::vector<double> reference() const {
    std::vector<double> h(x.begin(), x.end());
    for (int i = 0; i < kBlocks; ++i) {
      std::vector<double> next(kBatch * kWidth);
      for (int64_t r = 0; r < kBatch; ++r)
        for (int64_t c = 0; c < kWidth; ++c) {
          double acc = b[i][c];
          for (int64_t k = 0; k < kWidth; ++k) acc += h[r * kWidth + k] * w[i][k * kWidth + c];
          next[r * kWidth + c] = std::max(acc, 0.0);
        }
      h = std::move(next);
    }
    return h;
  }
};

TEST(OnnxFusion, AMatMulAddReluChainIsOneKernelPerBlockAndRunsFromItsPef) {
  const Chain chain;
  const std::string bytes = om::bytes(chain.model());
  const auto model = onnx_import::Model::from_bytes(
      std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "");
  Tensor x = Tensor::empty({kBatch, kWidth}, DType::Float32);
  std::copy(chain.x.begin(), chain.x.end(), x.data<float>());
  x.impl()->name = "x";
  GraphSpec spec;
  spec.name = "chain";
  spec.inference = true;
  spec.inputs = {x};
  spec.model = [&model](std::span<const Tensor> in) { return model->forward(in); };

  std::vector<CompiledGraph> graphs;
  const pef::ProgramDesc p = compile_program({spec}, {}, &graphs);
  ASSERT_EQ(p.kernels.size(), static_cast<size_t>(kBlocks)) << graphs[0].graph.dump();
  for (const auto& k : p.kernels) {
    ASSERT_EQ(k.ops.size(), 1u) << k.name;
    EXPECT_EQ(k.ops[0].op, "linear");
    EXPECT_EQ(k.ops[0].attrs.s("activation"), "relu");
  }

  ThreadPool pool(2);
  runtime::Runtime rt(samba::testing::round_trip(p), pool, nullptr);
  runtime::RunRequest req;
  req.inputs = {x};
  samba::testing::expect_values(rt.run(req)[0], chain.reference(), 1e-4);
}

}  // namespace
}  // namespace samba::compiler
