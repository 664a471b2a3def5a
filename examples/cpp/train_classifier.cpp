// A linear classifier trained through samba.hpp: compile with SGD, load,
// run training steps and check the loss falls; then a model that throws,
// whose message comes back as a samba::Error. Exits non-zero on failure, so
// it doubles as the wrapper's test.
#include <samba/samba.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>

int main() {
  try {
    // 12 points in 4-d, label = how many of the first two coordinates are positive.
    std::vector<float> xs(48);
    std::vector<int64_t> ys(12);
    for (int i = 0; i < 12; ++i) {
      for (int j = 0; j < 4; ++j) xs[static_cast<size_t>(i * 4 + j)] = static_cast<float>(std::cos(1.7 * i + 0.9 * j));
      ys[static_cast<size_t>(i)] = (xs[static_cast<size_t>(i * 4)] > 0) + (xs[static_cast<size_t>(i * 4 + 1)] > 0);
    }
    samba::Tensor x = samba::Tensor::from(xs, {12, 4}).set_name("x");
    samba::Tensor y = samba::Tensor::from(ys, {12}).set_name("y");
    samba::Tensor w = samba::Tensor::from(std::vector<float>(12, 0.1f), {3, 4}).set_name("fc.weight");
    samba::Tensor b = samba::Tensor::zeros({3}).set_name("fc.bias");
    w.set_requires_grad();
    b.set_requires_grad();

    samba::Model model = [&](const std::vector<samba::Tensor>& in) {
      samba::Tensor logits = samba::op1("linear", {in[0], w, b});
      return std::vector<samba::Tensor>{samba::op1("cross_entropy", {logits, in[1]}), logits};
    };
    samba::Optimizer sgd("sgd", samba::Attrs().set("lr", 0.5).set("momentum", 0.9));
    sgd.add_param_group({w, b});

    samba::Session session(2);
    session.compile(model, {x, y}, {&sgd}, samba::CompileOptions().pef_path("cpp_classifier.pef").loss_indices({0}));
    std::vector<samba::Tensor> outs = session.trace_graph(model, {x, y}, {&sgd}, "cpp_classifier.pef");

    const double first = session.run({x, y}, outs).at(0).item();
    double last = first;
    for (int step = 0; step < 40; ++step) last = session.run({x, y}, outs).at(0).item();
    std::printf("loss %.4f -> %.4f\n", first, last);
    if (!(last < 0.5 * first)) {
      std::fprintf(stderr, "the loss did not fall enough\n");
      return 1;
    }
    // Evaluation: FWD only leaves the weights as they are.
    const std::vector<float> before = session.sn_data(w).to_vector<float>();
    samba::RunOptions fwd;
    fwd.section_types({"FWD"});
    session.run({x, y}, outs, &fwd);
    if (session.sn_data(w).to_vector<float>() != before) {
      std::fprintf(stderr, "a forward run changed the weights\n");
      return 1;
    }

    // A throwing model: the compile fails with its message.
    samba::Model broken = [](const std::vector<samba::Tensor>&) -> std::vector<samba::Tensor> {
      throw std::runtime_error("layer 3 is missing");
    };
    try {
      session.compile(broken, {x, y}, {}, samba::CompileOptions().pef_path("cpp_broken.pef"));
      std::fprintf(stderr, "a throwing model compiled\n");
      return 1;
    } catch (const samba::Error& e) {
      if (!std::strstr(e.what(), "layer 3 is missing")) {
        std::fprintf(stderr, "unexpected message: %s\n", e.what());
        return 1;
      }
      std::printf("a throwing model is reported: %s\n", e.what());
    }
    std::remove("cpp_classifier.pef");
    std::remove("cpp_classifier.pef.log");
    std::puts("train_classifier: ok");
    return 0;
  } catch (const samba::Error& e) {
    std::fprintf(stderr, "samba error: %s\n", e.what());
    return 1;
  }
}
