// What the data-parallel test programs share: checks that end the job with a
// message naming the rank, and the two models (an MLP with a residual block,
// as the seed's ResFFNLogReg, and a small conv net) built through the C ABI.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "samba.h"

inline int g_rank = 0;

#define DP_CHECK(cond)                                                                    \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "rank %d: %s:%d: check failed: %s (last error: %s)\n", g_rank, \
                   __FILE__, __LINE__, #cond, samba_last_error_message());                \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)
#define DP_OK(call) DP_CHECK((call) == SAMBA_OK)
// `call` must fail with `code` and a message containing `needle`.
#define DP_FAILS(call, code, needle)                                                              \
  do {                                                                                            \
    const samba_status st_ = (call);                                                              \
    if (st_ != (code) || !std::strstr(samba_last_error_message(), needle)) {                      \
      std::fprintf(stderr, "rank %d: %s:%d: %s gave %s '%s'; expected %s with '%s'\n", g_rank,    \
                   __FILE__, __LINE__, #call, samba_status_name(st_), samba_last_error_message(), \
                   samba_status_name(code), needle);                                              \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

// A float32 tensor named `name`, values from `seed` (a rank's own seed makes
// each rank start differently, as random initialization would).
inline samba_tensor* tensor_of(const char* name, std::vector<int64_t> shape, double seed,
                               bool param) {
  samba_tensor* t = nullptr;
  DP_OK(samba_tensor_create(SAMBA_FLOAT32, shape.data(), shape.size(), &t));
  int64_t n = 0;
  DP_OK(samba_tensor_numel(t, &n));
  float* v = nullptr;
  DP_OK(samba_tensor_data(t, reinterpret_cast<void**>(&v)));
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(0.4 * std::sin(0.77 * static_cast<double>(i) + seed));
  DP_OK(samba_tensor_set_name(t, name));
  if (param) DP_OK(samba_tensor_set_requires_grad(t, 1));
  return t;
}

inline std::vector<float> values_of(samba_tensor* t) {
  int64_t n = 0;
  DP_OK(samba_tensor_numel(t, &n));
  std::vector<float> v(static_cast<size_t>(n));
  DP_OK(samba_tensor_copy_to(t, v.data(), v.size() * sizeof(float)));
  return v;
}

struct Model {
  bool conv = false;
  std::vector<samba_tensor*> params;
};

inline samba_status model_fn(void* user, samba_tensor* const* in, size_t n_in, samba_tensor** out,
                             size_t cap, size_t* n_out) {
  auto* m = static_cast<Model*>(user);
  if (n_in != 2 || cap < 1) return SAMBA_ERR_INVALID_ARGUMENT;
  std::vector<samba_tensor*> tmp;
  auto keep = [&](samba_tensor* t) {
    tmp.push_back(t);
    return t;
  };
  samba_tensor* h = nullptr;
  samba_status st = SAMBA_OK;
  if (m->conv) {
    const int64_t one[2] = {1, 1};
    samba_tensor *c = nullptr, *r = nullptr, *f = nullptr;
    if ((st = samba_conv2d(nullptr, in[0], m->params[0], m->params[1], one, 2, one, 2, one, 2, 1,
                           &c)))
      return st;
    keep(c);
    if ((st = samba_relu(nullptr, c, &r))) return st;
    keep(r);
    if ((st = samba_flatten(nullptr, r, 1, -1, &f))) return st;
    keep(f);
    if ((st = samba_linear(nullptr, f, m->params[2], m->params[3], &h))) return st;
  } else {
    // ResFFN: relu(x W0 + b0) -> + relu(h W1 + b1) -> logits
    samba_tensor *a = nullptr, *ra = nullptr, *b = nullptr, *rb = nullptr, *s = nullptr;
    if ((st = samba_linear(nullptr, in[0], m->params[0], m->params[1], &a))) return st;
    keep(a);
    if ((st = samba_relu(nullptr, a, &ra))) return st;
    keep(ra);
    if ((st = samba_linear(nullptr, ra, m->params[2], m->params[3], &b))) return st;
    keep(b);
    if ((st = samba_relu(nullptr, b, &rb))) return st;
    keep(rb);
    if ((st = samba_add(nullptr, ra, rb, &s))) return st;
    keep(s);
    if ((st = samba_linear(nullptr, s, m->params[4], m->params[5], &h))) return st;
  }
  keep(h);
  st = samba_cross_entropy(nullptr, h, in[1], &out[0]);
  for (samba_tensor* t : tmp) samba_tensor_release(t);
  if (st == SAMBA_OK) *n_out = 1;
  return st;
}

// The model's parameters, from `seed`; `hidden` changes the MLP's program.
inline Model make_model(bool conv, double seed, int64_t hidden = 32) {
  Model m;
  m.conv = conv;
  if (conv) {
    m.params = {tensor_of("conv.weight", {4, 1, 3, 3}, seed, true),
                tensor_of("conv.bias", {4}, seed + 1, true),
                tensor_of("fc.weight", {3, 4 * 8 * 8}, seed + 2, true),
                tensor_of("fc.bias", {3}, seed + 3, true)};
  } else {
    m.params = {tensor_of("fc0.weight", {hidden, 16}, seed, true),
                tensor_of("fc0.bias", {hidden}, seed + 1, true),
                tensor_of("fc1.weight", {hidden, hidden}, seed + 2, true),
                tensor_of("fc1.bias", {hidden}, seed + 3, true),
                tensor_of("head.weight", {3, hidden}, seed + 4, true),
                tensor_of("head.bias", {3}, seed + 5, true)};
  }
  return m;
}

// Rows [first, first + batch) of the global data set of step `step`.
inline void batch_of(bool conv, int64_t step, int64_t first, int64_t batch, samba_tensor** x,
                     samba_tensor** y) {
  std::vector<int64_t> shape =
      conv ? std::vector<int64_t>{batch, 1, 8, 8} : std::vector<int64_t>{batch, 16};
  const int64_t row = conv ? 64 : 16;
  DP_OK(samba_tensor_create(SAMBA_FLOAT32, shape.data(), shape.size(), x));
  float* xv = nullptr;
  DP_OK(samba_tensor_data(*x, reinterpret_cast<void**>(&xv)));
  const int64_t ys[1] = {batch};
  DP_OK(samba_tensor_create(SAMBA_INT64, ys, 1, y));
  int64_t* yv = nullptr;
  DP_OK(samba_tensor_data(*y, reinterpret_cast<void**>(&yv)));
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t g = first + i;
    for (int64_t j = 0; j < row; ++j)
      xv[i * row + j] = static_cast<float>(
          std::cos(0.31 * static_cast<double>(g * row + j) + 0.17 * static_cast<double>(step)));
    yv[i] = (g * 7 + step) % 3;
  }
  DP_OK(samba_tensor_set_name(*x, "x"));
  DP_OK(samba_tensor_set_name(*y, "y"));
}
