// resffn_pef: compiles the ResFFN classifier of the SambaFlow modeling guide
// for inference (logits only, one input "image" [batch, features]) into a
// PEF for samba-server. The test and the benchmark serve it; the same
// network in PyTorch is bench/peers/peers.py's ResFFN.
//
//   resffn_pef --out model.pef [--batch 32] [--features 784] [--hidden 1024] [--seed 7]
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <random>
#include <samba/samba.hpp>

namespace {

// nn.Linear's default initialisation: uniform in +-1/sqrt(fan_in).
samba::Tensor uniform(const std::vector<int64_t>& shape, int64_t fan_in, std::mt19937& rng,
                      const std::string& name) {
  std::uniform_real_distribution<float> dist(-1.0f / std::sqrt(float(fan_in)),
                                             1.0f / std::sqrt(float(fan_in)));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = dist(rng);
  return samba::Tensor::from(values, shape).set_name(name);
}

// The tensor a typed op function writes to its out-parameter.
template <typename Op>
samba::Tensor result_of(Op op) {
  samba_tensor* out = nullptr;
  samba::check(op(&out));
  return samba::Tensor::adopt(out);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"resffn_pef: compiles the ResFFN classifier for inference into a PEF"};
  std::string out;
  int64_t batch = 32, features = 784, hidden = 1024, classes = 10;
  unsigned seed = 7;
  app.add_option("--out", out, "The PEF to write")->required();
  app.add_option("--batch", batch, "Batch size (rows of one run)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--features", features, "Input features")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--hidden", hidden, "Hidden width")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--seed", seed, "Seed of the weights")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    std::mt19937 rng(seed);
    const samba::Tensor w1 = uniform({hidden, features}, features, rng, "gemm1.weight");
    const samba::Tensor b1 = uniform({hidden}, features, rng, "gemm1.bias");
    const samba::Tensor w2 = uniform({hidden, hidden}, hidden, rng, "gemm2.weight");
    const samba::Tensor b2 = uniform({hidden}, hidden, rng, "gemm2.bias");
    const samba::Tensor w3 = uniform({classes, hidden}, hidden, rng, "gemm3.weight");
    const samba::Tensor b3 = uniform({classes}, hidden, rng, "gemm3.bias");
    auto model = [&](const std::vector<samba::Tensor>& in) {
      auto linear = [&](const samba::Tensor& x, const samba::Tensor& w, const samba::Tensor& b) {
        return result_of(
            [&](samba_tensor** t) { return samba_linear(nullptr, x.get(), w.get(), b.get(), t); });
      };
      auto norm = [&](const samba::Tensor& x) {
        return result_of([&](samba_tensor** t) {
          return samba_layer_norm(nullptr, x.get(), nullptr, nullptr, &hidden, 1, 1e-5, t);
        });
      };
      const samba::Tensor h1 = norm(linear(in[0], w1, b1));
      const samba::Tensor res =
          result_of([&](samba_tensor** t) { return samba_tanh(nullptr, h1.get(), t); });
      const samba::Tensor h2 = norm(linear(res, w2, b2));
      const samba::Tensor sum =
          result_of([&](samba_tensor** t) { return samba_add(nullptr, h2.get(), res.get(), t); });
      const samba::Tensor act =
          result_of([&](samba_tensor** t) { return samba_sigmoid(nullptr, sum.get(), t); });
      return std::vector<samba::Tensor>{linear(act, w3, b3)};  // the logits
    };
    samba::Session session;
    const samba::Tensor image = samba::Tensor::zeros({batch, features}).set_name("image");
    session.compile(model, {image}, {},
                    samba::CompileOptions().name("resffn").pef_path(out).inference(true));
  } catch (const std::exception& e) {
    std::cerr << "resffn_pef: " << e.what() << "\n";
    return 1;
  }
  std::cout << "resffn_pef: wrote " << out << " (batch " << batch << ", " << features
            << " features, hidden " << hidden << ")\n";
  return 0;
}
