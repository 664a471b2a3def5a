// Writes the valid seeds of the fuzz corpora into DIR (tests/fuzz/corpus,
// through make_corpus.sh): PEFs of the models of fuzz_models.h compiled with
// different options (optimizers, micro-batches, inference, opt level,
// mapping, several graphs) into DIR/pef_run_fuzz and DIR/pef_fuzz, and
// checkpoints of the convolutional model into DIR/checkpoint_fuzz. Every
// file is named valid-*: the corpus replay fails when one is refused.
#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz_models.h"

namespace fs = std::filesystem;
using namespace samba::fuzz;

namespace {

struct Compile {
  const char* name;
  void (*build)(FuzzModel&);
  const char* optimizer;  // nullptr: inference
  std::vector<std::pair<const char*, double>> hyper;
  int64_t batch = 0, micro = 0;
  int32_t opt_level = 1;
  const char* mapping = "section";
  bool grad_accumulation = false;
};

samba_compile_options* options(const Compile& c, const std::string& path) {
  samba_compile_options* co = nullptr;
  samba_compile_options_create(&co);
  samba_compile_options_set_name(co, c.name);
  samba_compile_options_set_pef_path(co, path.c_str());
  samba_compile_options_set_write_log(co, 0);
  samba_compile_options_set_opt_level(co, c.opt_level);
  samba_compile_options_set_mapping(co, c.mapping);
  samba_compile_options_set_inference(co, c.optimizer == nullptr);
  samba_compile_options_set_grad_accumulation(co, c.grad_accumulation);
  if (c.batch) samba_compile_options_set_batch_size(co, c.batch);
  if (c.micro) samba_compile_options_set_micro_batch_size(co, c.micro);
  return co;
}

void write_pef(samba_session* s, const Compile& c, const fs::path& dir) {
  FuzzModel m;
  c.build(m);
  samba_optimizer* opt = c.optimizer ? optimizer(c.optimizer, m, c.hyper) : nullptr;
  const std::string path = (dir / (std::string("valid-") + c.name + ".pef")).string();
  samba_compile_options* co = options(c, path);
  must(samba_session_compile(s, m.fn, &m, m.inputs.data(), m.inputs.size(), &opt, opt ? 1 : 0, co), c.name);
  samba_compile_options_release(co);
  samba_optimizer_release(opt);
}

// Two graphs in one PEF: the linear model's training step and its inference.
void write_multigraph(samba_session* s, const fs::path& dir) {
  FuzzModel m;
  build_linear(m);
  samba_optimizer* opt = optimizer("sgd", m, {{"lr", 0.1}});
  samba_compile_options *train = nullptr, *eval = nullptr, *program = nullptr;
  samba_compile_options_create(&train);
  samba_compile_options_create(&eval);
  samba_compile_options_set_inference(eval, 1);
  samba_graph *g1 = nullptr, *g2 = nullptr;
  must(samba_graph_create("train", m.fn, &m, m.inputs.data(), m.inputs.size(), &opt, 1, train, &g1), "graph");
  must(samba_graph_create("eval", m.fn, &m, m.inputs.data(), m.inputs.size(), nullptr, 0, eval, &g2), "graph");
  must(samba_session_add_graph(s, g1, 0), "add_graph");
  must(samba_session_add_graph(s, g2, 0), "add_graph");
  const std::string path = (dir / "valid-multigraph.pef").string();
  samba_compile_options_create(&program);
  samba_compile_options_set_name(program, "multigraph");
  samba_compile_options_set_pef_path(program, path.c_str());
  samba_compile_options_set_write_log(program, 0);
  must(samba_session_compile_multigraph(s, program), "compile_multigraph");
  for (auto* o : {train, eval, program}) samba_compile_options_release(o);
  samba_graph_release(g1);
  samba_graph_release(g2);
  samba_optimizer_release(opt);
}

// Checkpoints of the convolutional model: before training (every kind),
// and after two steps (every kind; parameters only).
void write_checkpoints(const fs::path& dir, const fs::path& scratch) {
  samba_session* s = nullptr;
  must(samba_session_create(nullptr, &s), "session");
  FuzzModel m;
  const std::string pef = (scratch / "conv_adamw.pef").string();
  compile_conv_adamw(s, m, pef);
  must(samba_session_load_pef(s, pef.c_str()), "load_pef");
  const samba_transfer_kinds all = SAMBA_TRANSFER_PARAMETERS | SAMBA_TRANSFER_BUFFERS | SAMBA_TRANSFER_OPTIMIZER_STATE;
  must(samba_session_save_checkpoint(s, (dir / "valid-initial.ckpt").c_str(), all), "save");
  for (int step = 0; step < 2; ++step) {
    samba_tensor* loss = nullptr;
    size_t n = 0;
    must(samba_session_run(s, m.inputs.data(), m.inputs.size(), nullptr, 0, nullptr, &loss, 1, &n), "run");
    samba_tensor_release(loss);
  }
  must(samba_session_save_checkpoint(s, (dir / "valid-trained.ckpt").c_str(), all), "save");
  must(samba_session_save_checkpoint(s, (dir / "valid-parameters.ckpt").c_str(), SAMBA_TRANSFER_PARAMETERS), "save");
  samba_session_release(s);
  fs::remove(pef);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seed_writer CORPUS_DIR\n");
    return 2;
  }
  const fs::path root = argv[1];
  const fs::path run_dir = root / "pef_run_fuzz", parse_dir = root / "pef_fuzz", ckpt_dir = root / "checkpoint_fuzz";
  for (const auto& d : {run_dir, parse_dir, ckpt_dir}) fs::create_directories(d);
  samba_session* s = nullptr;
  must(samba_session_create(nullptr, &s), "session");
  const Compile compiles[] = {
      {"linear-sgd", build_linear, "sgd", {{"lr", 0.1}, {"momentum", 0.9}}, 4},
      {"mlp-adamw-micro", build_mlp, "adamw", {{"lr", 0.01}, {"max_grad_norm", 1.0}}, 4, 2, 1, "section", true},
      {"mlp-inference-o0", build_mlp, nullptr, {}, 0, 0, 0},
      {"conv-adamw-spatial", build_conv, "adamw", {{"lr", 0.01}}, 0, 0, 1, "spatial"},
  };
  for (const auto& c : compiles) write_pef(s, c, run_dir);
  write_multigraph(s, run_dir);
  samba_session_release(s);
  // The parse-only target starts from the same files.
  for (const auto& e : fs::directory_iterator(run_dir))
    fs::copy_file(e.path(), parse_dir / e.path().filename(), fs::copy_options::overwrite_existing);
  write_checkpoints(ckpt_dir, fs::temp_directory_path());
  std::printf("fuzz_seed_writer: seeds written under %s\n", root.c_str());
  return 0;
}
