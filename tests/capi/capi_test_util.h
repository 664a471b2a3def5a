/* Tiny assertion kit shared by the plain-C tests of samba.h. Every failed
 * check prints where it failed and the library's last error, then exits. */
#ifndef SAMBA_CAPI_TEST_UTIL_H
#define SAMBA_CAPI_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "samba.h"

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, __LINE__, #cond, \
              samba_last_error_message());                                                     \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

/* The call must succeed. */
#define CHECK_OK(expr)                                                          \
  do {                                                                          \
    samba_status check_status_ = (expr);                                        \
    if (check_status_ != SAMBA_OK) {                                            \
      fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr, \
              samba_status_name(check_status_), samba_last_error_message());    \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

/* The call must fail with `code`, and the error message must contain
 * `keyword` (which names the problem). */
#define CHECK_FAILS(expr, code, keyword)                                                 \
  do {                                                                                   \
    samba_status check_status_ = (expr);                                                 \
    const char* check_msg_ = samba_last_error_message();                                 \
    if (check_status_ != (code) || samba_last_error_code() != (code) || !check_msg_ ||   \
        !*check_msg_ || !strstr(check_msg_, (keyword))) {                                \
      fprintf(stderr,                                                                    \
              "%s:%d: %s returned %s (expected %s) with message \"%s\" (expected it to " \
              "mention \"%s\")\n",                                                       \
              __FILE__, __LINE__, #expr, samba_status_name(check_status_),               \
              samba_status_name(code), check_msg_ ? check_msg_ : "(null)", (keyword));   \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                              \
  do {                                                                                     \
    double check_a_ = (double)(a), check_b_ = (double)(b);                                 \
    if (!(fabs(check_a_ - check_b_) <= (tol))) {                                           \
      fprintf(stderr, "%s:%d: %s = %.10g, expected %s = %.10g (tolerance %g)\n", __FILE__, \
              __LINE__, #a, check_a_, #b, check_b_, (double)(tol));                        \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* A float32 tensor of `shape` holding `values` (numel of them). */
/* A linear layer and a cross-entropy loss: the model callback of the tests
 * that train one layer (inputs x and class labels y; one output, the loss). */
typedef struct {
  samba_tensor *w, *b;
} LinearNet;

static inline samba_status linear_loss_model(void* user, samba_tensor* const* in, size_t n_in,
                                             samba_tensor** out, size_t cap, size_t* n_out) {
  LinearNet* m = (LinearNet*)user;
  samba_tensor* logits = NULL;
  samba_status st;
  if (n_in != 2 || cap < 1) return SAMBA_ERR_INVALID_ARGUMENT;
  if ((st = samba_linear(NULL, in[0], m->w, m->b, &logits)) != SAMBA_OK) return st;
  st = samba_cross_entropy(NULL, logits, in[1], &out[0]);
  samba_tensor_release(logits);
  if (st == SAMBA_OK) *n_out = 1;
  return st;
}

/* Whether the file at `path` contains `needle` (0 when it cannot be read). */
static inline int file_contains(const char* path, const char* needle) {
  FILE* f = fopen(path, "rb");
  char* buf;
  long size;
  int found;
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = (char*)malloc((size_t)size + 1);
  CHECK(fread(buf, 1, (size_t)size, f) == (size_t)size);
  buf[size] = '\0';
  fclose(f);
  found = strstr(buf, needle) != NULL;
  free(buf);
  return found;
}

static inline samba_tensor* make_f32(const float* values, const int64_t* shape, size_t ndim) {
  samba_tensor* t = NULL;
  int64_t n = 0;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, ndim, &t));
  CHECK_OK(samba_tensor_numel(t, &n));
  CHECK_OK(samba_tensor_copy_from(t, values, (size_t)n * sizeof(float)));
  return t;
}

static inline samba_tensor* make_f64(const double* values, const int64_t* shape, size_t ndim) {
  samba_tensor* t = NULL;
  int64_t n = 0;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT64, shape, ndim, &t));
  CHECK_OK(samba_tensor_numel(t, &n));
  CHECK_OK(samba_tensor_copy_from(t, values, (size_t)n * sizeof(double)));
  return t;
}

static inline samba_tensor* make_i64(const int64_t* values, const int64_t* shape, size_t ndim) {
  samba_tensor* t = NULL;
  int64_t n = 0;
  CHECK_OK(samba_tensor_create(SAMBA_INT64, shape, ndim, &t));
  CHECK_OK(samba_tensor_numel(t, &n));
  CHECK_OK(samba_tensor_copy_from(t, values, (size_t)n * sizeof(int64_t)));
  return t;
}

/* A trainable float32 parameter named `name`, with fixed values that
 * differ per element (0.3 sin(1.3 i + ndim)). */
static inline samba_tensor* named_param(const char* name, const int64_t* shape, size_t ndim) {
  samba_tensor* t = NULL;
  int64_t n = 0, i;
  float* v;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, ndim, &t));
  CHECK_OK(samba_tensor_numel(t, &n));
  CHECK_OK(samba_tensor_data(t, (void**)&v));
  for (i = 0; i < n; ++i) v[i] = (float)(0.3 * sin(1.3 * (double)i + (double)ndim));
  CHECK_OK(samba_tensor_set_name(t, name));
  CHECK_OK(samba_tensor_set_requires_grad(t, 1));
  return t;
}

/* The tensor's values converted to double, in C order; the caller frees. */
static inline double* values_of(samba_tensor* t, int64_t* n) {
  samba_tensor* d = NULL;
  double* out;
  CHECK_OK(samba_tensor_to(t, SAMBA_FLOAT64, &d));
  CHECK_OK(samba_tensor_numel(d, n));
  out = (double*)malloc((size_t)(*n > 0 ? *n : 1) * sizeof(double));
  CHECK(out != NULL);
  CHECK_OK(samba_tensor_copy_to(d, out, (size_t)*n * sizeof(double)));
  samba_tensor_release(d);
  return out;
}

/* Checks shape and values (converted to double) against `want`. */
#define CHECK_TENSOR(t, want_shape, want_values, tol)                                         \
  check_tensor_at(__FILE__, __LINE__, (t), (want_shape), COUNT_OF(want_shape), (want_values), \
                  COUNT_OF(want_values), (tol))

static inline void check_tensor_at(const char* file, int line, samba_tensor* t,
                                   const int64_t* shape, size_t ndim, const double* want, size_t n,
                                   double tol) {
  const int64_t* dims = NULL;
  size_t rank = 0, i;
  int64_t numel = 0;
  double* got;
  CHECK_OK(samba_tensor_shape(t, &dims, &rank));
  if (rank != ndim || (ndim && memcmp(dims, shape, ndim * sizeof(int64_t)) != 0)) {
    fprintf(stderr, "%s:%d: tensor has rank %zu shape [", file, line, rank);
    for (i = 0; i < rank; ++i) fprintf(stderr, "%s%lld", i ? ", " : "", (long long)dims[i]);
    fprintf(stderr, "], expected rank %zu\n", ndim);
    exit(1);
  }
  got = values_of(t, &numel);
  if ((size_t)numel != n) {
    fprintf(stderr, "%s:%d: tensor has %lld elements, expected %zu\n", file, line, (long long)numel,
            n);
    exit(1);
  }
  for (i = 0; i < n; ++i) {
    if (!(fabs(got[i] - want[i]) <= tol)) {
      fprintf(stderr, "%s:%d: element %zu is %.10g, expected %.10g\n", file, line, i, got[i],
              want[i]);
      exit(1);
    }
  }
  free(got);
}

/* A single-dim index expression helper: x[i]. */
static inline samba_index* index_of_int(int64_t i) {
  samba_index* idx = NULL;
  CHECK_OK(samba_index_create(&idx));
  CHECK_OK(samba_index_add_int(idx, i));
  return idx;
}

/* The classifier train_test trains: fc.weight [3,4], fc.bias [3] (named
 * parameters) and a batch of 6: in[0] = x [6,4], in[1] = y [6] (labels). */
static inline void linear_classifier(LinearNet* net, samba_tensor** in) {
  const int64_t s_w[2] = {3, 4}, s_b[1] = {3}, s_x[2] = {6, 4}, s_y[1] = {6};
  const int64_t labels[6] = {0, 1, 2, 2, 1, 0};
  float xs[24];
  int i;
  for (i = 0; i < 24; ++i) xs[i] = (float)cos(0.9 * (double)i);
  net->w = named_param("fc.weight", s_w, 2);
  net->b = named_param("fc.bias", s_b, 1);
  in[0] = make_f32(xs, s_x, 2);
  in[1] = make_i64(labels, s_y, 1);
  CHECK_OK(samba_tensor_set_name(in[0], "x"));
  CHECK_OK(samba_tensor_set_name(in[1], "y"));
}

#endif /* SAMBA_CAPI_TEST_UTIL_H */
