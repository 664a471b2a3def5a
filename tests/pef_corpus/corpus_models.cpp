#include "tests/pef_corpus/corpus_models.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "samba.h"

namespace samba::testing {
namespace {

void ok(samba_status st, const std::string& what) {
  if (st != SAMBA_OK) throw std::runtime_error(fmt::format("{}: {}", what, samba_last_error_message()));
}

// Owns the C handles a model is built from.
struct Handles {
  std::vector<samba_tensor*> tensors;
  ~Handles() {
    for (samba_tensor* t : tensors) samba_tensor_release(t);
  }
  samba_tensor* add(samba_dtype dtype, std::vector<int64_t> shape, const char* name, bool param) {
    samba_tensor* t = nullptr;
    ok(samba_tensor_create(dtype, shape.data(), shape.size(), &t), name);
    tensors.push_back(t);
    ok(samba_tensor_set_name(t, name), name);
    if (param) {
      int64_t n = 0;
      float* v = nullptr;
      ok(samba_tensor_numel(t, &n), name);
      ok(samba_tensor_data(t, reinterpret_cast<void**>(&v)), name);
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(0.3 * std::sin(1.3 * static_cast<double>(i)));
      ok(samba_tensor_set_requires_grad(t, 1), name);
    }
    return t;
  }
};

// The tensors a model callback closes over: its parameters in order.
struct Params {
  std::vector<samba_tensor*> p;
};

// Releases `t` when the scope ends (the callback's intermediates).
struct Temp {
  samba_tensor* t = nullptr;
  ~Temp() { samba_tensor_release(t); }
};

samba_status linear_loss(void* user, samba_tensor* const* in, size_t, samba_tensor** out, size_t, size_t* n_out) {
  auto& m = *static_cast<Params*>(user);
  Temp logits;
  samba_status st = samba_linear(nullptr, in[0], m.p[0], m.p[1], &logits.t);
  if (st == SAMBA_OK) st = samba_cross_entropy(nullptr, logits.t, in[1], &out[0]);
  if (st == SAMBA_OK) *n_out = 1;
  return st;
}

samba_status conv_loss(void* user, samba_tensor* const* in, size_t, samba_tensor** out, size_t, size_t* n_out) {
  auto& m = *static_cast<Params*>(user);
  const int64_t one[2] = {1, 1}, zero[2] = {0, 0}, two[2] = {2, 2};
  Temp conv, relu, pool, flat, logits;
  samba_status st = samba_conv2d(nullptr, in[0], m.p[0], m.p[1], one, 2, zero, 2, one, 2, 1, &conv.t);
  if (st == SAMBA_OK) st = samba_relu(nullptr, conv.t, &relu.t);
  if (st == SAMBA_OK) st = samba_max_pool2d(nullptr, relu.t, two, 2, two, 2, zero, 2, one, 2, 0, &pool.t);
  if (st == SAMBA_OK) st = samba_flatten(nullptr, pool.t, 1, -1, &flat.t);
  if (st == SAMBA_OK) st = samba_linear(nullptr, flat.t, m.p[2], m.p[3], &logits.t);
  if (st == SAMBA_OK) st = samba_cross_entropy(nullptr, logits.t, in[1], &out[0]);
  if (st == SAMBA_OK) *n_out = 1;
  return st;
}

samba_status dropout_loss(void* user, samba_tensor* const* in, size_t, samba_tensor** out, size_t, size_t* n_out) {
  auto& m = *static_cast<Params*>(user);
  Temp hidden, dropped, logits;
  samba_status st = samba_linear(nullptr, in[0], m.p[0], m.p[1], &hidden.t);
  if (st == SAMBA_OK) st = samba_dropout(nullptr, hidden.t, 0.5, 1, 7, 0, &dropped.t);
  if (st == SAMBA_OK) st = samba_linear(nullptr, dropped.t, m.p[2], m.p[3], &logits.t);
  if (st == SAMBA_OK) st = samba_cross_entropy(nullptr, logits.t, in[1], &out[0]);
  if (st == SAMBA_OK) *n_out = 1;
  return st;
}

samba_status mlp(void* user, samba_tensor* const* in, size_t, samba_tensor** out, size_t, size_t* n_out) {
  auto& m = *static_cast<Params*>(user);
  Temp hidden, relu;
  samba_status st = samba_linear(nullptr, in[0], m.p[0], m.p[1], &hidden.t);
  if (st == SAMBA_OK) st = samba_relu(nullptr, hidden.t, &relu.t);
  if (st == SAMBA_OK) st = samba_linear(nullptr, relu.t, m.p[2], m.p[3], &out[0]);
  if (st == SAMBA_OK) *n_out = 1;
  return st;
}

struct Recipe {
  const char* name;
  samba_model_fn fn;
  std::vector<std::vector<int64_t>> params;  // shapes, named p0, p1, ...
  std::vector<int64_t> x_shape;
  int64_t labels;        // 0: no label input
  const char* optimizer;  // nullptr: an inference compile
  int64_t micro_batch;    // 0: none
};

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> compile(const Recipe& r, const std::string& dir) {
  Handles h;
  Params params;
  for (size_t i = 0; i < r.params.size(); ++i)
    params.p.push_back(h.add(SAMBA_FLOAT32, r.params[i], fmt::format("p{}", i).c_str(), true));
  std::vector<samba_tensor*> inputs{h.add(SAMBA_FLOAT32, r.x_shape, "x", false)};
  if (r.labels) inputs.push_back(h.add(SAMBA_INT64, {r.labels}, "y", false));

  samba_session* s = nullptr;
  samba_compile_options* co = nullptr;
  samba_attrs* hp = nullptr;
  samba_optimizer* opt = nullptr;
  const std::string path = fmt::format("{}/{}.pef", dir, r.name);
  samba_status st = samba_session_create(nullptr, &s);
  if (st == SAMBA_OK) st = samba_compile_options_create(&co);
  if (st == SAMBA_OK) st = samba_compile_options_set_pef_path(co, path.c_str());
  if (st == SAMBA_OK) st = samba_compile_options_set_write_log(co, 0);
  if (st == SAMBA_OK && !r.optimizer) st = samba_compile_options_set_inference(co, 1);
  if (st == SAMBA_OK && r.micro_batch) st = samba_compile_options_set_batch_size(co, r.x_shape[0]);
  if (st == SAMBA_OK && r.micro_batch) st = samba_compile_options_set_micro_batch_size(co, r.micro_batch);
  if (st == SAMBA_OK && r.optimizer) st = samba_attrs_create(&hp);
  if (st == SAMBA_OK && r.optimizer) st = samba_attrs_set_float(hp, "lr", 0.1);
  if (st == SAMBA_OK && r.optimizer) st = samba_optimizer_create(r.optimizer, hp, &opt);
  if (st == SAMBA_OK && r.optimizer)
    st = samba_optimizer_add_param_group(opt, params.p.data(), params.p.size(), nullptr);
  if (st == SAMBA_OK)
    st = samba_session_compile(s, r.fn, &params, inputs.data(), inputs.size(), opt ? &opt : nullptr, opt ? 1 : 0, co);
  std::string message = st == SAMBA_OK ? "" : samba_last_error_message();
  samba_optimizer_release(opt);
  samba_attrs_release(hp);
  samba_compile_options_release(co);
  samba_session_release(s);
  if (st != SAMBA_OK) throw std::runtime_error(fmt::format("compiling {}: {}", r.name, message));
  return read_all(path);
}

}  // namespace

std::vector<CorpusModel> compile_corpus_models(const std::string& dir) {
  const Recipe recipes[] = {
      {"linear_adamw", linear_loss, {{3, 4}, {3}}, {4, 4}, 4, "adamw", 0},
      {"conv_sgd", conv_loss, {{2, 1, 3, 3}, {2}, {3, 2}, {3}}, {2, 1, 4, 4}, 2, "sgd", 0},
      {"dropout_micro", dropout_loss, {{5, 4}, {5}, {3, 5}, {3}}, {6, 4}, 6, "sgd", 2},
      {"mlp_inference", mlp, {{5, 3}, {5}, {2, 5}, {2}}, {4, 3}, 0, nullptr, 0},
  };
  std::vector<CorpusModel> out;
  for (const Recipe& r : recipes) out.push_back({r.name, compile(r, dir)});
  return out;
}

}  // namespace samba::testing
