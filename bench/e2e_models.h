// The models of the end-to-end benchmarks, built with the C++ compiler API:
//   - ResFFNLogReg of the SambaFlow guide at 784 features and 10 classes:
//     gemm1, layer_norm, tanh, gemm2, layer_norm, residual add, sigmoid,
//     gemm3, cross-entropy (bench/peers/peers.py builds the same model);
//   - DigitsConvNet on 8x8 single-channel images: conv 1->16 (3x3, pad 1),
//     relu, conv 16->32 (3x3, pad 1), relu, 2x2 max pooling, linear 512->10,
//     cross-entropy.
// Training programs use SGD with momentum 0.9 (lr 0.01); inference programs
// take the image alone and return the logits.
//
// FLOP counts are of the contractions only (2 m n k per GEMM, the same for
// a convolution as an implicit GEMM): what the peers' figures are read
// against too. The programs' own kernel estimates, which add the
// elementwise work, are reported beside them.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "engine/pef/reader.h"
#include "engine/pef/writer.h"

namespace samba::bench {

inline constexpr int64_t kFeatures = 784;
inline constexpr int64_t kClasses = 10;

inline Tensor uniform_tensor(const Dims& shape, double bound, uint32_t seed) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(static_cast<float>(-bound), static_cast<float>(bound));
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = u(gen);
  return t;
}

inline Tensor filled_tensor(const Dims& shape, float v) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = v;
  return t;
}

inline Tensor named(Tensor t, const std::string& name, bool parameter) {
  t.impl()->name = name;
  t.impl()->requires_grad = parameter;
  return t;
}

// Labels 0..classes-1 spread over the batch.
inline Tensor label_tensor(int64_t batch, int64_t classes) {
  Tensor t = Tensor::empty({batch}, DType::Int64);
  for (int64_t i = 0; i < batch; ++i) t.data<int64_t>()[i] = (i * 7) % classes;
  return named(t, "label", false);
}

inline compiler::OptimizerSpec sgd_momentum(const std::vector<Tensor>& params) {
  compiler::OptimizerSpec o;
  o.kind = compiler::OptimizerKind::SGD;
  o.defaults = Attrs{{"lr", 0.01}, {"momentum", 0.9}};
  o.groups.push_back({params, {}});
  return o;
}

// Compiles the spec at o1 and passes it through the PEF writer and reader,
// as a file would be; `mixed` compiles with bf16 mixed precision.
inline pef::ProgramDesc compile_to_pef(const compiler::GraphSpec& spec,
                                       compiler::MixedPrecision mixed = compiler::MixedPrecision::None) {
  compiler::CompileOptions o;
  o.name = spec.name;
  o.mixed_precision = mixed;
  return pef::parse_pef(pef::serialize_pef(compiler::compile_program({spec}, o)));
}

struct ResFFNLogReg {
  int64_t batch, hidden;
  Tensor w1, b1, w2, b2, w3, b3, n1w, n1b, n2w, n2b;

  ResFFNLogReg(int64_t batch_size, int64_t hidden_size) : batch(batch_size), hidden(hidden_size) {
    const double k1 = 1.0 / std::sqrt(static_cast<double>(kFeatures));
    const double k2 = 1.0 / std::sqrt(static_cast<double>(hidden));
    w1 = named(uniform_tensor({hidden, kFeatures}, k1, 1), "gemm1.weight", true);
    b1 = named(uniform_tensor({hidden}, k1, 2), "gemm1.bias", true);
    w2 = named(uniform_tensor({hidden, hidden}, k2, 3), "gemm2.weight", true);
    b2 = named(uniform_tensor({hidden}, k2, 4), "gemm2.bias", true);
    w3 = named(uniform_tensor({kClasses, hidden}, k2, 5), "gemm3.weight", true);
    b3 = named(uniform_tensor({kClasses}, k2, 6), "gemm3.bias", true);
    n1w = named(filled_tensor({hidden}, 1.0f), "norm1.weight", true);
    n1b = named(filled_tensor({hidden}, 0.0f), "norm1.bias", true);
    n2w = named(filled_tensor({hidden}, 1.0f), "norm2.weight", true);
    n2b = named(filled_tensor({hidden}, 0.0f), "norm2.bias", true);
  }
  ResFFNLogReg(const ResFFNLogReg&) = delete;
  ResFFNLogReg& operator=(const ResFFNLogReg&) = delete;

  std::vector<Tensor> params() const { return {w1, b1, w2, b2, w3, b3, n1w, n1b, n2w, n2b}; }

  Tensor image() const { return named(uniform_tensor({batch, kFeatures}, 1.0, 7), "image", false); }
  Tensor label() const { return label_tensor(batch, kClasses); }

  Tensor logits(const Tensor& x) const {
    const Attrs ln{{"normalized_shape", std::vector<int64_t>{hidden}}};
    Tensor res = call1("tanh", {call1("layer_norm", {call1("linear", {x, w1, b1}), n1w, n1b}, ln)});
    Tensor h = call1("layer_norm", {call1("linear", {res, w2, b2}), n2w, n2b}, ln);
    return call1("linear", {call1("sigmoid", {call1("add", {h, res})}), w3, b3});
  }

  // Training: inputs image and label, outputs loss and logits. Inference:
  // input image, output logits.
  compiler::GraphSpec spec(bool inference) const {
    compiler::GraphSpec s;
    s.name = "resffn_logreg";
    s.batch_size = batch;
    s.inference = inference;
    if (inference) {
      s.inputs = {image()};
      s.model = [this](std::span<const Tensor> in) -> std::vector<Tensor> {
        return {logits(in[0])};
      };
      return s;
    }
    s.inputs = {image(), label()};
    s.model = [this](std::span<const Tensor> in) -> std::vector<Tensor> {
      Tensor z = logits(in[0]);
      return {call1("cross_entropy", {z, in[1]}), z};
    };
    s.backward.loss_indices = {0};
    s.optimizers.push_back(sgd_momentum(params()));
    return s;
  }

  double forward_flops() const {
    return 2.0 * static_cast<double>(batch) *
           static_cast<double>(kFeatures * hidden + hidden * hidden + hidden * kClasses);
  }
  // Forward, then the weight gradient of gemm1 (the image needs none) and
  // both products of gemm2 and gemm3.
  double train_flops() const {
    return forward_flops() + 2.0 * static_cast<double>(batch) *
                                 static_cast<double>(kFeatures * hidden + 2 * hidden * hidden +
                                                     2 * hidden * kClasses);
  }
};

struct DigitsConvNet {
  static constexpr int64_t kSide = 8, kC1 = 16, kC2 = 32, kTaps = 9;
  static constexpr int64_t kFlat = kC2 * (kSide / 2) * (kSide / 2);
  int64_t batch;
  Tensor c1w, c1b, c2w, c2b, fw, fb;

  explicit DigitsConvNet(int64_t batch_size) : batch(batch_size) {
    const double k1 = 1.0 / std::sqrt(static_cast<double>(kTaps));
    const double k2 = 1.0 / std::sqrt(static_cast<double>(kC1 * kTaps));
    const double k3 = 1.0 / std::sqrt(static_cast<double>(kFlat));
    c1w = named(uniform_tensor({kC1, 1, 3, 3}, k1, 11), "conv1.weight", true);
    c1b = named(uniform_tensor({kC1}, k1, 12), "conv1.bias", true);
    c2w = named(uniform_tensor({kC2, kC1, 3, 3}, k2, 13), "conv2.weight", true);
    c2b = named(uniform_tensor({kC2}, k2, 14), "conv2.bias", true);
    fw = named(uniform_tensor({kClasses, kFlat}, k3, 15), "fc.weight", true);
    fb = named(uniform_tensor({kClasses}, k3, 16), "fc.bias", true);
  }
  DigitsConvNet(const DigitsConvNet&) = delete;
  DigitsConvNet& operator=(const DigitsConvNet&) = delete;

  std::vector<Tensor> params() const { return {c1w, c1b, c2w, c2b, fw, fb}; }
  Tensor image() const {
    return named(uniform_tensor({batch, 1, kSide, kSide}, 1.0, 17), "image", false);
  }
  Tensor label() const { return label_tensor(batch, kClasses); }

  Tensor logits(const Tensor& x) const {
    const Attrs pad{{"padding", std::vector<int64_t>{1, 1}}};
    Tensor h = call1("relu", {call1("conv2d", {x, c1w, c1b}, pad)});
    h = call1("relu", {call1("conv2d", {h, c2w, c2b}, pad)});
    h = call1("max_pool2d", {h}, {{"kernel_size", std::vector<int64_t>{2, 2}}});
    h = call1("flatten", {h}, {{"start_dim", int64_t{1}}});
    return call1("linear", {h, fw, fb});
  }

  compiler::GraphSpec spec(bool inference) const {
    compiler::GraphSpec s;
    s.name = "digits_convnet";
    s.batch_size = batch;
    s.inference = inference;
    if (inference) {
      s.inputs = {image()};
      s.model = [this](std::span<const Tensor> in) -> std::vector<Tensor> {
        return {logits(in[0])};
      };
      return s;
    }
    s.inputs = {image(), label()};
    s.model = [this](std::span<const Tensor> in) -> std::vector<Tensor> {
      Tensor z = logits(in[0]);
      return {call1("cross_entropy", {z, in[1]}), z};
    };
    s.backward.loss_indices = {0};
    s.optimizers.push_back(sgd_momentum(params()));
    return s;
  }

  double forward_flops() const {
    const double pixels = static_cast<double>(batch * kSide * kSide);
    return 2.0 * pixels * (kC1 * kTaps + kC2 * kC1 * kTaps) +
           2.0 * static_cast<double>(batch * kFlat * kClasses);
  }
  // Forward, conv1's weight gradient (the image needs none), both products
  // of conv2 and of the linear layer.
  double train_flops() const {
    const double pixels = static_cast<double>(batch * kSide * kSide);
    return forward_flops() + 2.0 * pixels * (kC1 * kTaps + 2 * kC2 * kC1 * kTaps) +
           4.0 * static_cast<double>(batch * kFlat * kClasses);
  }
};

}  // namespace samba::bench
