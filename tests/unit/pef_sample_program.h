// Realistic ProgramDescs for the PEF tests, the `samba` tool test and the
// PEF benchmark, built the way the compiler builds them: resolved attributes,
// laid-out arenas, every tensor role, fused kernels with argin bindings,
// sections of several types, blobs, materializers and two graphs.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine/ops/registry.h"
#include "engine/pef/program.h"

namespace samba::pef::sample {

// Adds tensors and kernels, then lays the arenas out: persistent tensors one
// after the other (64-byte aligned) in their memory type, intermediates in a
// scratch area after them, each at the slot it was given (reused by liveness).
class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string name) {
    p_.name = std::move(name);
    p_.compiler_version = "samba 0.1.0";
    p_.opt_level = 1;
  }

  int32_t tensor(std::string name, TensorRole role, DType dtype, Dims shape,
                 MemType mem = MemType::DDR) {
    TensorDesc t;
    t.name = std::move(name);
    t.role = role;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.mem = mem;
    t.nbytes = role == TensorRole::Alias
                   ? 0
                   : static_cast<uint64_t>(numel_of(t.shape)) * element_size(dtype);
    p_.tensors.push_back(std::move(t));
    scratch_slot_.push_back(0);
    return static_cast<int32_t>(p_.tensors.size() - 1);
  }
  int32_t intermediate(std::string name, DType dtype, Dims shape, uint64_t slot) {
    int32_t i = tensor(std::move(name), TensorRole::Intermediate, dtype, std::move(shape));
    scratch_slot_[static_cast<size_t>(i)] = slot;
    return i;
  }
  int32_t alias(std::string name, int32_t base, Dims shape, Dims strides, int64_t offset) {
    int32_t i =
        tensor(std::move(name), TensorRole::Alias, p_.tensors[static_cast<size_t>(base)].dtype,
               std::move(shape), p_.tensors[static_cast<size_t>(base)].mem);
    TensorDesc& t = p_.tensors[static_cast<size_t>(i)];
    t.alias_of = base;
    t.strides = std::move(strides);
    t.view_offset = offset;
    return i;
  }
  TensorDesc& at(int32_t i) { return p_.tensors[static_cast<size_t>(i)]; }

  int32_t blob(std::vector<uint8_t> bytes) {
    p_.blobs.push_back({std::move(bytes)});
    return static_cast<int32_t>(p_.blobs.size() - 1);
  }
  int32_t materializer(std::string kind, Attrs params) {
    p_.materializers.push_back({std::move(kind), std::move(params)});
    return static_cast<int32_t>(p_.materializers.size() - 1);
  }
  int32_t argin(std::string name, ArginKind kind, AttrValue def) {
    p_.argins.push_back({std::move(name), kind, std::move(def)});
    return static_cast<int32_t>(p_.argins.size() - 1);
  }

  // One op call, its attributes resolved against the registry as the
  // compiler stores them.
  static OpCall op(std::string name, std::vector<int32_t> in, std::vector<int32_t> out,
                   const Attrs& attrs = {}, std::vector<ArginBinding> bindings = {}) {
    OpCall c;
    c.attrs = OpRegistry::global().get(name).resolve(attrs);
    c.op = std::move(name);
    c.inputs = std::move(in);
    c.outputs = std::move(out);
    c.bindings = std::move(bindings);
    return c;
  }
  // A kernel whose reads and writes are derived from its ops: outputs are
  // written, inputs are read unless an earlier op of the kernel wrote them.
  int32_t kernel(std::string name, Fusion fusion, std::vector<OpCall> ops,
                 std::vector<int32_t> extra_writes = {}) {
    KernelDesc k;
    k.name = std::move(name);
    k.fusion = fusion;
    for (const OpCall& c : ops) {
      for (int32_t i : c.inputs)
        if (i >= 0 && !contains(k.writes, i) && !contains(k.reads, i)) k.reads.push_back(i);
      for (int32_t o : c.outputs)
        if (!contains(k.writes, o)) k.writes.push_back(o);
    }
    for (int32_t w : extra_writes)
      if (!contains(k.writes, w)) k.writes.push_back(w);
    for (int32_t t : k.reads)
      k.bytes += static_cast<double>(p_.tensors[static_cast<size_t>(t)].nbytes);
    for (int32_t t : k.writes) {
      k.bytes += static_cast<double>(p_.tensors[static_cast<size_t>(t)].nbytes);
      k.flops += 2.0 * static_cast<double>(numel_of(p_.tensors[static_cast<size_t>(t)].shape));
    }
    k.ops = std::move(ops);
    p_.kernels.push_back(std::move(k));
    return static_cast<int32_t>(p_.kernels.size() - 1);
  }
  int32_t section(int32_t id, std::string name, SectionType type, int32_t graph,
                  std::vector<int32_t> kernels, bool micro_batched = false) {
    SectionDesc s;
    s.id = id;
    s.name = std::move(name);
    s.type = type;
    s.graph = graph;
    s.kernels = std::move(kernels);
    s.micro_batched = micro_batched;
    // Reads: tensors read by its kernels and not written earlier in it;
    // writes: every non-intermediate tensor its kernels write.
    std::vector<int32_t> written;
    for (int32_t k : s.kernels) {
      const KernelDesc& kd = p_.kernels[static_cast<size_t>(k)];
      for (int32_t t : kd.reads)
        if (!contains(written, t) && !contains(s.reads, t)) s.reads.push_back(t);
      for (int32_t t : kd.writes) {
        written.push_back(t);
        if (p_.tensors[static_cast<size_t>(t)].role != TensorRole::Intermediate &&
            !contains(s.writes, t))
          s.writes.push_back(t);
      }
    }
    p_.sections.push_back(std::move(s));
    return static_cast<int32_t>(p_.sections.size() - 1);
  }
  void call(int32_t id, int32_t section) { p_.schedule.push_back({id, section}); }
  GraphDesc& graph(std::string name) {
    p_.graphs.emplace_back();
    p_.graphs.back().name = std::move(name);
    return p_.graphs.back();
  }
  void metadata(std::string k, std::string v) {
    p_.metadata.emplace_back(std::move(k), std::move(v));
  }

  ProgramDesc finish() {
    // Two areas per memory type: state (weights, gradients, ...) and
    // activation (inputs, outputs, intermediates).
    uint64_t state_end[kNumMemTypes] = {0, 0, 0}, act_end[kNumMemTypes] = {0, 0, 0};
    auto align = [](uint64_t n) { return (n + 63) / 64 * 64; };
    std::vector<std::pair<std::string, size_t>> regions;
    for (size_t i = 0; i < p_.tensors.size(); ++i) {
      TensorDesc& t = p_.tensors[i];
      if (t.role == TensorRole::Alias || t.role == TensorRole::Intermediate) continue;
      if (!t.region.empty()) {
        auto it = std::find_if(regions.begin(), regions.end(),
                               [&](const auto& r) { return r.first == t.region; });
        if (it != regions.end()) {
          t.arena_offset = p_.tensors[it->second].arena_offset;
          continue;
        }
        regions.emplace_back(t.region, i);
      }
      uint64_t& e = (in_activation_area(t.role) ? act_end : state_end)[static_cast<size_t>(t.mem)];
      t.arena_offset = e;
      e = align(e + t.nbytes);
    }
    uint64_t scratch = act_end[0], scratch_end = act_end[0];
    for (size_t i = 0; i < p_.tensors.size(); ++i) {
      TensorDesc& t = p_.tensors[i];
      if (t.role != TensorRole::Intermediate) continue;
      t.mem = MemType::DDR;
      t.arena_offset = scratch + scratch_slot_[i];
      scratch_end = std::max(scratch_end, align(t.arena_offset + t.nbytes));
    }
    act_end[0] = scratch_end;
    p_.memory.peak_bytes = 0;
    for (int m = 0; m < kNumMemTypes; ++m) {
      p_.memory.arena_bytes[m] = state_end[m];
      p_.memory.activation_bytes[m] = act_end[m];
      p_.memory.peak_bytes += state_end[m] + act_end[m];
    }
    p_.memory.lower_bound_bytes = p_.memory.peak_bytes - (scratch_end - scratch) / 2;
    return p_;
  }

 private:
  static bool contains(const std::vector<int32_t>& v, int32_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  }
  ProgramDesc p_;
  std::vector<uint64_t> scratch_slot_;
};

// Deterministic bytes of `n` floats: a smooth ramp (compresses a little)
// or noise (does not compress, so it is stored raw).
inline std::vector<uint8_t> float_bytes(size_t n, bool noise, uint32_t seed = 1) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    v[i] =
        noise ? static_cast<float>(s) / 4294967296.0f - 0.5f : static_cast<float>(i % 97) * 0.125f;
  }
  std::vector<uint8_t> out(n * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Deterministic random bytes: incompressible, so zstd is not used for them.
inline std::vector<uint8_t> noise_bytes(size_t n, uint64_t seed = 7) {
  std::vector<uint8_t> out(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : out) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    b = static_cast<uint8_t>(s >> 56);
  }
  return out;
}

// A ResFFN-like training program with an inference graph beside it.
inline ProgramDesc resffn_program() {
  using R = TensorRole;
  using F = DType;
  ProgramBuilder b("resffn");
  constexpr int64_t B = 8, IN = 16, H = 32, C = 4;
  int32_t lr = b.argin("sgd.lr", ArginKind::Hyperparam, 0.01);
  int32_t momentum = b.argin("sgd.momentum", ArginKind::Hyperparam, 0.9);
  int32_t drop_p = b.argin("dropout_0.p", ArginKind::DropoutRate, 0.1);
  int32_t drop_seed = b.argin("dropout_0.seed", ArginKind::DropoutSeed, int64_t{1234});

  int32_t kaiming = b.materializer("kaiming_uniform", {{"a", 2.23606797749979},
                                                       {"mode", std::string("fan_in")},
                                                       {"nonlinearity", std::string("leaky_relu")}});
  int32_t zeros = b.materializer("zeros", {});
  int32_t normal = b.materializer("trunc_normal", {{"mean", 0.0}, {"std", 0.02}, {"a", -0.04}, {"b", 0.04}});

  int32_t x = b.tensor("x", R::Input, F::Float32, {B, IN}, MemType::HOST);
  b.at(x).batch_dim = 0;
  b.at(x).region = "io.x";
  int32_t y = b.tensor("y", R::Input, F::Int64, {B});
  b.at(y).batch_dim = 0;
  int32_t w1 = b.tensor("gemm1.weight", R::Parameter, F::Float32, {H, IN});
  int32_t b1 = b.tensor("gemm1.bias", R::Parameter, F::Float32, {H});
  int32_t w2 = b.tensor("gemm2.weight", R::Parameter, F::Float32, {C, H});
  int32_t emb = b.tensor("embed.weight", R::Parameter, F::Int8, {64, 16}, MemType::HBM);
  int32_t g1 = b.tensor("gemm1.weight.grad", R::Gradient, F::Float32, {H, IN});
  int32_t gb1 = b.tensor("gemm1.bias.grad", R::Gradient, F::Float32, {H});
  int32_t g2 = b.tensor("gemm2.weight.grad", R::Gradient, F::Float32, {C, H});
  int32_t m1 = b.tensor("gemm1.weight.momentum_buffer", R::OptimizerState, F::Float32, {H, IN});
  int32_t mean = b.tensor("norm1.running_mean", R::Buffer, F::Float32, {H});
  int32_t scale = b.tensor("scale", R::Constant, F::BFloat16, {C});
  int32_t loss = b.tensor("loss", R::Output, F::Float32, {});
  int32_t dloss = b.tensor("loss.grad", R::OutputGrad, F::Float32, {});
  int32_t h1 = b.intermediate("h1", F::Float32, {B, H}, 0);
  int32_t t1 = b.intermediate("t1", F::Float32, {B, H}, 1024);
  int32_t logits = b.intermediate("logits", F::Float32, {B, C}, 0);
  int32_t logits_t = b.alias("logits.t", logits, {C, B}, {1, C}, 0);
  int32_t dropped = b.intermediate("dropped", F::Float32, {B, C}, 256);
  int32_t dlogits = b.intermediate("dlogits", F::Float32, {B, C}, 2048);
  int32_t colsum = b.intermediate("logits.colsum", F::Float32, {C}, 3072);
  int32_t x2 = b.tensor("predict.x", R::Input, F::Float32, {B, IN}, MemType::HOST);
  b.at(x2).region = "io.x";
  int32_t probs = b.tensor("predict.probs", R::Output, F::Float32, {B, C});

  for (auto [p, g] : {std::pair{w1, g1}, {b1, gb1}, {w2, g2}}) {
    b.at(p).grad = g;
    b.at(p).requires_grad = true;
    b.at(g).owner = b.at(p).name;
  }
  b.at(m1).owner = "gemm1.weight";
  b.at(w1).materializer = kaiming;
  b.at(w2).materializer = normal;
  b.at(m1).materializer = zeros;
  b.at(b1).blob = b.blob(float_bytes(H, false));
  b.at(mean).blob = b.blob(std::vector<uint8_t>(H * 4, 0));
  b.at(scale).blob = b.blob({0x80, 0x3f, 0x00, 0x40, 0x40, 0x40, 0x80, 0x40});
  b.at(emb).blob = b.blob(noise_bytes(64 * 16));  // int8-quantized

  using P = ProgramBuilder;
  // Forward: GEMM with a fused tanh, then the classifier, dropout and loss.
  int32_t k0 = b.kernel("gemm1_tanh", Fusion::Contraction,
                        {P::op("linear", {x, w1, b1}, {h1}), P::op("tanh", {h1}, {t1})});
  int32_t k1 =
      b.kernel("gemm2_scale", Fusion::Contraction,
               {P::op("linear", {t1, w2, -1}, {logits}), P::op("mul", {logits, scale}, {logits})});
  int32_t k2 =
      b.kernel("dropout_0", Fusion::Elementwise,
               {P::op("dropout", {logits}, {dropped}, {{"p", 0.1}, {"seed", int64_t{1234}}},
                      {{"p", drop_p}, {"seed", drop_seed}})});
  int32_t k3 =
      b.kernel("loss", Fusion::Reduction, {P::op("cross_entropy", {dropped, y, -1}, {loss})});
  // Backward.
  int32_t k4 = b.kernel("loss_backward", Fusion::Opaque,
                        {P::op("cross_entropy_backward", {dloss, dropped, y}, {dlogits})});
  int32_t k5 = b.kernel("gemm_backward", Fusion::Contraction,
                        {P::op("matmul_tn", {dlogits, t1}, {g2}), P::op("matmul_tn", {h1, x}, {g1}),
                         P::op("sum", {h1}, {gb1}, {{"dim", std::vector<int64_t>{0}}}),
                         P::op("sum", {logits_t}, {colsum}, {{"dim", std::vector<int64_t>{1}}})});
  // Optimizer: momentum SGD with the rates bound to argins. The step
  // counter comes last so that the other tensors keep their indices.
  int32_t step = b.tensor("gemm1.weight.step", R::OptimizerState, F::Float32, {});
  b.at(step).owner = "gemm1.weight";
  int32_t k6 = b.kernel("sgd_gemm1.weight", Fusion::Opaque,
                        {P::op("sgd_update", {w1, g1, m1, step}, {},
                               {{"lr", 0.01}, {"momentum", 0.9}},
                               {{"lr", lr}, {"momentum", momentum}})},
                        {w1, m1, step});
  // Zeroing gradients between accumulation steps.
  int32_t k7 = b.kernel(
      "zero_grads", Fusion::Creation,
      {P::op("zeros", {}, {g1}, {{"shape", std::vector<int64_t>{H, IN}}}),
       P::op("zeros", {}, {gb1}, {{"shape", std::vector<int64_t>{H}}}),
       P::op("zeros", {}, {g2}, {{"shape", std::vector<int64_t>{C, H}}, {"dtype", F::Float32}})});
  // Inference graph: the forward without dropout.
  int32_t k8 = b.kernel("predict", Fusion::Contraction,
                        {P::op("linear", {x2, w1, b1}, {h1}), P::op("tanh", {h1}, {t1}),
                         P::op("linear", {t1, w2}, {probs})});

  int32_t s_zero = b.section(0, "zero_grad", SectionType::ZEROGRAD, 0, {k7});
  int32_t s_fwd = b.section(1, "fwd", SectionType::FWD, 0, {k0, k1, k2, k3}, true);
  int32_t s_bwd = b.section(2, "bckwd", SectionType::BCKWD, 0, {k4, k5}, true);
  int32_t s_opt = b.section(3, "opt", SectionType::OPT, 0, {k6});
  int32_t s_pred = b.section(10, "predict_fwd", SectionType::FWD, 1, {k8});
  b.call(0, s_zero);
  b.call(1, s_fwd);
  b.call(2, s_bwd);
  b.call(3, s_opt);
  b.call(4, s_pred);  // call ids are schedule positions

  GraphDesc& train = b.graph("train");
  train.inputs = {x, y};
  train.outputs = {loss};
  train.output_grads = {dloss};
  train.parameters = {w1, b1, w2, emb};
  train.sections = {s_zero, s_fwd, s_bwd, s_opt};
  train.batch_size = B;
  train.micro_batch_size = B / 2;
  train.grad_accumulation = true;
  train.signature = {
      "linear(x: float32[8, 16], gemm1.weight: float32[32, 16], gemm1.bias: float32[32]) -> "
      "float32[8, 32]",
      "tanh(float32[8, 32]) -> float32[8, 32]",
      "linear(float32[8, 32], gemm2.weight: float32[4, 32]) -> float32[8, 4]",
      "mul(float32[8, 4], scale: bfloat16[4]) -> float32[8, 4]",
      "dropout(float32[8, 4], p=0.1) -> float32[8, 4]",
      "cross_entropy(float32[8, 4], y: int64[8]) -> float32[]"};
  GraphDesc& predict = b.graph("predict");
  predict.inputs = {x2};
  predict.outputs = {probs};
  predict.output_grads = {-1};
  predict.parameters = {w1, b1, w2};
  predict.sections = {s_pred};
  predict.batch_size = B;
  predict.mapping = Mapping::Spatial;
  predict.inference = true;
  predict.signature = {
      "linear(predict.x: float32[8, 16], gemm1.weight: float32[32, 16], gemm1.bias: float32[32]) "
      "-> float32[8, 32]",
      "tanh(float32[8, 32]) -> float32[8, 32]",
      "linear(float32[8, 32], gemm2.weight: float32[4, 32]) -> float32[8, 4]"};
  b.metadata("model", "ResFFNLogReg");
  b.metadata("dataset", "digits");
  b.metadata("notes", "unicode \xc3\xa9 and spaces = fine");
  return b.finish();
}

// A large program for the benchmark: `tensors` tensors (an input, an
// output, one intermediate per kernel, the rest weights embedded as blobs
// adding up to about `blob_bytes`) and `kernels` fused add+relu kernels.
inline ProgramDesc large_program(int tensors, int kernels, size_t blob_bytes) {
  using R = TensorRole;
  ProgramBuilder b("large");
  constexpr int64_t kRows = 32, kWidth = 64;
  b.argin("sgd.lr", ArginKind::Hyperparam, 0.01);
  int32_t x = b.tensor("x", R::Input, DType::Float32, {kRows, kWidth});
  b.at(x).batch_dim = 0;
  int weights = std::max(1, tensors - kernels - 1);
  int64_t elems = static_cast<int64_t>(blob_bytes / static_cast<size_t>(weights) / 4);
  std::vector<int32_t> params;
  for (int i = 0; i < weights; ++i) {
    int32_t w =
        b.tensor("layer" + std::to_string(i) + ".weight", R::Parameter, DType::Float32, {elems});
    // Half the weights compress (ramps), half do not (noise, stored raw).
    b.at(w).blob =
        b.blob(float_bytes(static_cast<size_t>(elems), i % 2 == 0, static_cast<uint32_t>(i)));
    params.push_back(w);
  }
  std::vector<int32_t> ks;
  int32_t prev = x;
  for (int k = 0; k + 1 < kernels; ++k) {
    int32_t out = b.intermediate("act" + std::to_string(k), DType::Float32, {kRows, kWidth},
                                 static_cast<uint64_t>(k % 2) * kRows * kWidth * 4);
    ks.push_back(
        b.kernel("layer" + std::to_string(k), Fusion::Elementwise,
                 {ProgramBuilder::op("add", {prev, prev}, {out}, {{"alpha", 0.5}}),
                  ProgramBuilder::op("relu", {out}, {out})}));
    prev = out;
  }
  int32_t y = b.tensor("y", R::Output, DType::Float32, {kRows, kWidth});
  ks.push_back(b.kernel("copy_out", Fusion::Elementwise,
                        {ProgramBuilder::op("add", {prev, prev}, {y}, {{"alpha", 0.0}})}));
  int32_t s = b.section(0, "fwd", SectionType::FWD, 0, ks);
  b.call(0, s);
  GraphDesc& g = b.graph("large");
  g.inputs = {x};
  g.outputs = {y};
  g.output_grads = {-1};
  g.parameters = params;
  g.sections = {s};
  g.batch_size = kRows;
  g.inference = true;
  return b.finish();
}

}  // namespace samba::pef::sample
