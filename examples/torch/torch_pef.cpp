// A LibTorch program running a Samba PEF: inputs are made with LibTorch,
// shared with Samba without copies (samba/torch.hpp), run through the PEF,
// and the outputs, shared back as at::Tensors, are compared with the
// TorchScript module compiled from the same weights (make_model.py writes
// both files).
//
//   torch_pef MODEL.pt MODEL.pef [--batches N] [--tolerance T]
//
// Exit status 0 when every output is within T (default 1e-6) of
// TorchScript's, 1 when one is not, 2 on a usage or Samba error.
#include <torch/script.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <samba/torch.hpp>

namespace {

struct Options {
  std::string torchscript_path;
  std::string pef_path;
  int batches = 8;
  double tolerance = 1e-6;
};

bool parse(int argc, char** argv, Options& o) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--batches" || arg == "--tolerance") && i + 1 < argc) {
      char* end = nullptr;
      const char* value = argv[++i];
      if (arg == "--batches") {
        o.batches = static_cast<int>(std::strtol(value, &end, 10));
        if (*end != '\0' || o.batches < 1) return false;
      } else {
        o.tolerance = std::strtod(value, &end);
        if (*end != '\0' || !(o.tolerance >= 0)) return false;
      }
    } else if (!arg.empty() && arg[0] == '-') {
      return false;
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2) return false;
  o.torchscript_path = positional[0];
  o.pef_path = positional[1];
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  if (!parse(argc, argv, opts)) {
    std::fprintf(stderr, "usage: %s MODEL.pt MODEL.pef [--batches N >= 1] [--tolerance T >= 0]\n",
                 argv[0]);
    return 2;
  }
  try {
    torch::jit::script::Module reference = torch::jit::load(opts.torchscript_path);
    reference.eval();

    samba::Session session;
    session.load_pef(opts.pef_path);
    // The PEF fixes the input's shape; the model's input list names it.
    const std::string input_name = samba::libtorch::names(session, SAMBA_NAMES_INPUTS).at(0);
    const std::vector<int64_t> input_shape =
        session.sn_data(samba::Tensor::zeros({1}).set_name(input_name)).shape();

    torch::manual_seed(1);
    double worst = 0;
    for (int b = 0; b < opts.batches; ++b) {
      const at::Tensor x = torch::randn(input_shape);
      const at::Tensor want = reference.forward({x}).toTensor();
      const std::vector<at::Tensor> got = samba::libtorch::run(session, std::vector<at::Tensor>{x});
      if (got.size() != 1 || !got[0].sizes().equals(want.sizes())) {
        std::fprintf(stderr,
                     "batch %d: the PEF gave %zu outputs, or one of another shape than "
                     "TorchScript's\n",
                     b, got.size());
        return 1;
      }
      worst = std::max(worst, (got[0] - want).abs().max().item<double>());
    }
    std::printf("%d batches of %s: largest |samba - torchscript| = %.3g (tolerance %.3g)\n",
                opts.batches, c10::str(c10::IntArrayRef(input_shape)).c_str(), worst,
                opts.tolerance);
    return worst <= opts.tolerance ? 0 : 1;
  } catch (const samba::Error& e) {
    std::fprintf(stderr, "samba: %s\n", e.what());
    return 2;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "libtorch: %s\n", e.what_without_backtrace());
    return 2;
  }
}
