// The small models the fuzz seeds are compiled from, through the C ABI. The
// seed writer compiles them all; checkpoint_fuzz compiles the convolutional
// one and loads the checkpoints of the seed corpus into it, so both must
// build it the same way (names, shapes, dtypes).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "samba.h"

namespace samba::fuzz {

inline void must(samba_status st, const char* what) {
  if (st == SAMBA_OK) return;
  std::fprintf(stderr, "fuzz model: %s failed: %s: %s\n", what, samba_status_name(st), samba_last_error_message());
  std::abort();
}

// A float32 tensor named `name` with values 0.3 sin(1.3 i + salt).
inline samba_tensor* tensor_f32(const char* name, std::vector<int64_t> shape, bool trainable, double salt = 0) {
  samba_tensor* t = nullptr;
  int64_t n = 0;
  float* v = nullptr;
  must(samba_tensor_create(SAMBA_FLOAT32, shape.data(), shape.size(), &t), "samba_tensor_create");
  samba_tensor_numel(t, &n);
  samba_tensor_data(t, reinterpret_cast<void**>(&v));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(0.3 * std::sin(1.3 * static_cast<double>(i) + salt));
  must(samba_tensor_set_name(t, name), "samba_tensor_set_name");
  if (trainable) must(samba_tensor_set_requires_grad(t, 1), "samba_tensor_set_requires_grad");
  return t;
}

inline samba_tensor* labels(const char* name, int64_t n, int64_t classes) {
  samba_tensor* t = nullptr;
  int64_t* v = nullptr;
  must(samba_tensor_create(SAMBA_INT64, &n, 1, &t), "samba_tensor_create");
  samba_tensor_data(t, reinterpret_cast<void**>(&v));
  for (int64_t i = 0; i < n; ++i) v[i] = i % classes;
  must(samba_tensor_set_name(t, name), "samba_tensor_set_name");
  return t;
}

// One-output op call; attrs may be null.
inline samba_status call(const char* op, std::vector<samba_tensor*> in, const samba_attrs* attrs, samba_tensor** out) {
  size_t n = 0;
  return samba_op_call(nullptr, op, in.data(), in.size(), attrs, out, 1, &n);
}

// A model: its parameters and buffers (held here), example inputs and the
// callback that builds the graph. Tensors are released with the model.
struct FuzzModel {
  std::vector<samba_tensor*> params;
  std::vector<samba_tensor*> buffers;
  std::vector<samba_tensor*> inputs;
  samba_model_fn fn = nullptr;
  FuzzModel() = default;
  FuzzModel(const FuzzModel&) = delete;
  FuzzModel& operator=(const FuzzModel&) = delete;
  ~FuzzModel() {
    for (auto* v : {&params, &buffers, &inputs})
      for (samba_tensor* t : *v) samba_tensor_release(t);
  }
};

#define SAMBA_FUZZ_STEP(expr)                   \
  do {                                          \
    const samba_status st_ = (expr);            \
    if (st_ != SAMBA_OK) return st_;            \
  } while (0)

// x [4, 4] -> linear(3) -> cross-entropy against y [4].
inline samba_status linear_forward(void* user, samba_tensor* const* in, size_t, samba_tensor** out, size_t,
                                   size_t* n_out) {
  auto* m = static_cast<FuzzModel*>(user);
  samba_tensor* logits = nullptr;
  SAMBA_FUZZ_STEP(samba_linear(nullptr, in[0], m->params[0], m->params[1], &logits));
  const samba_status st = samba_cross_entropy(nullptr, logits, in[1], &out[0]);
  samba_tensor_release(logits);
  *n_out = st == SAMBA_OK ? 1 : 0;
  return st;
}

inline void build_linear(FuzzModel& m) {
  m.params = {tensor_f32("fc.weight", {3, 4}, true), tensor_f32("fc.bias", {3}, true, 1)};
  m.inputs = {tensor_f32("x", {4, 4}, false, 2), labels("y", 4, 3)};
  m.fn = linear_forward;
}

// x [4, 6] -> linear(8) -> layer_norm -> relu -> dropout(0.25) -> linear(3)
// -> cross-entropy against y [4].
inline samba_status mlp_forward(void* user, samba_tensor* const* in, size_t, samba_tensor** out, size_t,
                                size_t* n_out) {
  auto* m = static_cast<FuzzModel*>(user);
  samba_tensor *h = nullptr, *n = nullptr, *r = nullptr, *d = nullptr, *logits = nullptr;
  samba_attrs *ln = nullptr, *drop = nullptr;
  const int64_t normalized[1] = {8};
  samba_attrs_create(&ln);
  samba_attrs_set_ints(ln, "normalized_shape", normalized, 1);
  samba_attrs_create(&drop);
  samba_attrs_set_float(drop, "p", 0.25);
  samba_status st = samba_linear(nullptr, in[0], m->params[0], m->params[1], &h);
  if (st == SAMBA_OK) st = call("layer_norm", {h, m->params[2], m->params[3]}, ln, &n);
  if (st == SAMBA_OK) st = samba_relu(nullptr, n, &r);
  if (st == SAMBA_OK) st = call("dropout", {r}, drop, &d);
  if (st == SAMBA_OK) st = samba_linear(nullptr, d, m->params[4], m->params[5], &logits);
  if (st == SAMBA_OK) st = samba_cross_entropy(nullptr, logits, in[1], &out[0]);
  for (samba_tensor* t : {h, n, r, d, logits}) samba_tensor_release(t);
  samba_attrs_release(ln);
  samba_attrs_release(drop);
  *n_out = st == SAMBA_OK ? 1 : 0;
  return st;
}

inline void build_mlp(FuzzModel& m) {
  m.params = {tensor_f32("fc1.weight", {8, 6}, true),    tensor_f32("fc1.bias", {8}, true, 1),
              tensor_f32("ln.weight", {8}, true, 2),     tensor_f32("ln.bias", {8}, true, 3),
              tensor_f32("fc2.weight", {3, 8}, true, 4), tensor_f32("fc2.bias", {3}, true, 5)};
  m.inputs = {tensor_f32("x", {4, 6}, false, 6), labels("y", 4, 3)};
  m.fn = mlp_forward;
}

// x [2, 1, 6, 6] -> conv2d(2, 3x3) -> batch_norm (running statistics:
// buffers) -> relu -> max_pool2d(2) -> flatten -> linear(3) -> cross-entropy.
inline samba_status conv_forward(void* user, samba_tensor* const* in, size_t, samba_tensor** out, size_t,
                                 size_t* n_out) {
  auto* m = static_cast<FuzzModel*>(user);
  samba_tensor *c = nullptr, *b = nullptr, *r = nullptr, *p = nullptr, *f = nullptr, *logits = nullptr;
  samba_attrs *pool = nullptr, *flat = nullptr;
  const int64_t window[2] = {2, 2};
  samba_attrs_create(&pool);
  samba_attrs_set_ints(pool, "kernel_size", window, 2);
  samba_attrs_create(&flat);
  samba_attrs_set_int(flat, "start_dim", 1);
  samba_status st = call("conv2d", {in[0], m->params[0], m->params[1]}, nullptr, &c);
  if (st == SAMBA_OK)
    st = call("batch_norm", {c, m->params[2], m->params[3], m->buffers[0], m->buffers[1]}, nullptr, &b);
  if (st == SAMBA_OK) st = samba_relu(nullptr, b, &r);
  if (st == SAMBA_OK) st = call("max_pool2d", {r}, pool, &p);
  if (st == SAMBA_OK) st = call("flatten", {p}, flat, &f);
  if (st == SAMBA_OK) st = samba_linear(nullptr, f, m->params[4], m->params[5], &logits);
  if (st == SAMBA_OK) st = samba_cross_entropy(nullptr, logits, in[1], &out[0]);
  for (samba_tensor* t : {c, b, r, p, f, logits}) samba_tensor_release(t);
  samba_attrs_release(pool);
  samba_attrs_release(flat);
  *n_out = st == SAMBA_OK ? 1 : 0;
  return st;
}

inline void build_conv(FuzzModel& m) {
  m.params = {tensor_f32("conv.weight", {2, 1, 3, 3}, true), tensor_f32("conv.bias", {2}, true, 1),
              tensor_f32("bn.weight", {2}, true, 2),         tensor_f32("bn.bias", {2}, true, 3),
              tensor_f32("fc.weight", {3, 8}, true, 4),      tensor_f32("fc.bias", {3}, true, 5)};
  m.buffers = {tensor_f32("bn.running_mean", {2}, false, 6), tensor_f32("bn.running_var", {2}, false, 7)};
  // A variance is positive.
  float* v = nullptr;
  samba_tensor_data(m.buffers[1], reinterpret_cast<void**>(&v));
  for (int i = 0; i < 2; ++i) v[i] = 1.0f + static_cast<float>(i);
  m.inputs = {tensor_f32("x", {2, 1, 6, 6}, false, 8), labels("y", 2, 3)};
  m.fn = conv_forward;
}

// An optimizer of `kind` over every parameter of m, with hyperparameters
// given as name/value pairs.
inline samba_optimizer* optimizer(const char* kind, FuzzModel& m,
                                  std::vector<std::pair<const char*, double>> hyper) {
  samba_attrs* a = nullptr;
  samba_optimizer* opt = nullptr;
  samba_attrs_create(&a);
  for (const auto& [name, value] : hyper) samba_attrs_set_float(a, name, value);
  must(samba_optimizer_create(kind, a, &opt), "samba_optimizer_create");
  must(samba_optimizer_add_param_group(opt, m.params.data(), m.params.size(), nullptr), "add_param_group");
  samba_attrs_release(a);
  return opt;
}

// Compiles the convolutional model with AdamW (parameters, buffers and
// optimizer state: every kind a checkpoint holds) to `pef_path`.
inline void compile_conv_adamw(samba_session* s, FuzzModel& m, const std::string& pef_path) {
  build_conv(m);
  samba_optimizer* opt = optimizer("adamw", m, {{"lr", 0.01}});
  samba_compile_options* co = nullptr;
  samba_compile_options_create(&co);
  samba_compile_options_set_name(co, "conv_adamw");
  samba_compile_options_set_pef_path(co, pef_path.c_str());
  samba_compile_options_set_write_log(co, 0);
  must(samba_session_compile(s, m.fn, &m, m.inputs.data(), m.inputs.size(), &opt, 1, co), "compile conv");
  samba_compile_options_release(co);
  samba_optimizer_release(opt);
}

}  // namespace samba::fuzz
