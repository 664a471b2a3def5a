/* Compile a model through the C ABI, load the PEF, run it, and compare with
 * the same model computed eagerly; plus the run options and their errors. */
#include <stdint.h>

#include "capi_test_util.h"

#define BATCH 4
#define IN 5
#define HIDDEN 6
#define CLASSES 3

typedef struct {
  samba_tensor *w1, *b1, *w2, *b2;
} Model;

/* logits = linear(tanh(linear(x, w1, b1)), w2, b2); loss = cross_entropy. */
static samba_status forward(void* user, samba_tensor* const* in, size_t n_in, samba_tensor** out,
                            size_t cap, size_t* n_out) {
  Model* m = (Model*)user;
  samba_tensor *h = NULL, *a = NULL, *logits = NULL, *loss = NULL;
  samba_status st;
  if (n_in != 2 || cap < 2) return SAMBA_ERR_INVALID_ARGUMENT;
  if ((st = samba_linear(NULL, in[0], m->w1, m->b1, &h)) != SAMBA_OK) return st;
  st = samba_tanh(NULL, h, &a);
  samba_tensor_release(h);
  if (st != SAMBA_OK) return st;
  st = samba_linear(NULL, a, m->w2, m->b2, &logits);
  samba_tensor_release(a);
  if (st != SAMBA_OK) return st;
  if ((st = samba_cross_entropy(NULL, logits, in[1], &loss)) != SAMBA_OK) {
    samba_tensor_release(logits);
    return st;
  }
  out[0] = loss;
  out[1] = logits;
  *n_out = 2;
  return SAMBA_OK;
}

static samba_tensor* param(const char* name, const int64_t* shape, size_t ndim, double scale) {
  samba_tensor* t = NULL;
  int64_t n = 0, i;
  float* v;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, ndim, &t));
  CHECK_OK(samba_tensor_numel(t, &n));
  v = (float*)malloc((size_t)n * sizeof(float));
  for (i = 0; i < n; ++i) v[i] = (float)(scale * sin(0.7 * (double)i + (double)ndim));
  CHECK_OK(samba_tensor_copy_from(t, v, (size_t)n * sizeof(float)));
  free(v);
  CHECK_OK(samba_tensor_set_name(t, name));
  CHECK_OK(samba_tensor_set_requires_grad(t, 1));
  return t;
}

static void eager_logits(Model* m, samba_tensor* x, samba_tensor* y, double* loss, double* logits) {
  samba_tensor* in[2];
  samba_tensor* out[2] = {NULL, NULL};
  size_t n = 0;
  int64_t count = 0;
  double* v;
  in[0] = x;
  in[1] = y;
  CHECK_OK(forward(m, in, 2, out, 2, &n));
  CHECK_OK(samba_tensor_item(out[0], loss));
  v = values_of(out[1], &count);
  memcpy(logits, v, (size_t)count * sizeof(double));
  free(v);
  samba_tensor_release(out[0]);
  samba_tensor_release(out[1]);
}

int main(void) {
  const int64_t s_w1[2] = {HIDDEN, IN}, s_b1[1] = {HIDDEN}, s_w2[2] = {CLASSES, HIDDEN}, s_b2[1] = {CLASSES};
  const int64_t s_x[2] = {BATCH, IN}, s_y[1] = {BATCH};
  const int64_t labels[BATCH] = {0, 2, 1, 2};
  float xs[BATCH * IN];
  Model m;
  samba_session* s = NULL;
  samba_compile_options* co = NULL;
  samba_run_options* ro = NULL;
  samba_tensor *x, *y, *in[2], *outs[4] = {NULL, NULL, NULL, NULL};
  samba_tensor* traced[2] = {NULL, NULL};
  double want_loss, want_logits[BATCH * CLASSES], got_loss;
  size_t n = 0, count = 0, i;
  const char* name = NULL;
  int32_t tracing = 1;
  const char* fwd = "fwd";
  const char* bogus = "NOPE";

  for (i = 0; i < BATCH * IN; ++i) xs[i] = (float)cos(0.3 * (double)i);
  m.w1 = param("gemm1.weight", s_w1, 2, 0.4);
  m.b1 = param("gemm1.bias", s_b1, 1, 0.1);
  m.w2 = param("gemm2.weight", s_w2, 2, 0.5);
  m.b2 = param("gemm2.bias", s_b2, 1, 0.2);
  x = make_f32(xs, s_x, 2);
  y = make_i64(labels, s_y, 1);
  CHECK_OK(samba_tensor_set_name(x, "image"));
  CHECK_OK(samba_tensor_set_name(y, "label"));
  in[0] = x;
  in[1] = y;
  eager_logits(&m, x, y, &want_loss, want_logits);

  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_session_is_tracing(s, &tracing));
  CHECK(tracing == 0);

  /* An inference compile: one FWD section. */
  CHECK_OK(samba_compile_options_create(&co));
  CHECK_OK(samba_compile_options_set_name(co, "capi_logreg"));
  CHECK_OK(samba_compile_options_set_pef_path(co, "capi_logreg_infer.pef"));
  CHECK_OK(samba_compile_options_set_inference(co, 1));
  CHECK_OK(samba_compile_options_add_metadata(co, "purpose", "test"));
  CHECK_OK(samba_session_compile(s, forward, &m, in, 2, NULL, 0, co));

  /* Loading without a callback is enough for inference. */
  CHECK_OK(samba_session_load_pef(s, "capi_logreg_infer.pef"));
  CHECK_OK(samba_session_name_count(s, SAMBA_NAMES_SECTION_TYPES, &count));
  CHECK(count == 1);
  CHECK_OK(samba_session_name_at(s, SAMBA_NAMES_SECTION_TYPES, 0, &name));
  CHECK(strcmp(name, "FWD") == 0);
  CHECK_OK(samba_session_name_count(s, SAMBA_NAMES_WEIGHTS, &count));
  CHECK(count == 4);
  CHECK_OK(samba_session_name_count(s, SAMBA_NAMES_OUTPUTS, &count));
  CHECK(count == 2);

  CHECK_OK(samba_session_run(s, in, 2, NULL, 0, NULL, outs, 4, &n));
  CHECK(n == 2);
  CHECK_OK(samba_tensor_item(outs[0], &got_loss));
  CHECK_NEAR(got_loss, want_loss, 1e-5);
  {
    int64_t k = 0, j;
    double* v = values_of(outs[1], &k);
    CHECK(k == BATCH * CLASSES);
    for (j = 0; j < k; ++j) CHECK_NEAR(v[j], want_logits[j], 1e-5);
    free(v);
  }
  samba_tensor_release(outs[0]);
  samba_tensor_release(outs[1]);
  outs[0] = outs[1] = NULL;

  /* trace_graph re-traces the model, checks it against the PEF and returns
   * the traced outputs, which select what a run returns. */
  CHECK_OK(samba_session_trace_graph(s, forward, &m, in, 2, NULL, 0, "capi_logreg_infer.pef", NULL, traced, 2,
                                     &n));
  CHECK(n == 2);
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_OK(samba_run_options_set_section_types(ro, &fwd, 1));
  CHECK_OK(samba_session_run(s, in, 2, &traced[1], 1, ro, outs, 4, &n));
  CHECK(n == 1);
  {
    int64_t k = 0, j;
    double* v = values_of(outs[0], &k);
    for (j = 0; j < k; ++j) CHECK_NEAR(v[j], want_logits[j], 1e-5);
    free(v);
  }
  samba_tensor_release(outs[0]);
  outs[0] = NULL;

  /* Bad run arguments are refused with messages, and a failed run leaves
   * *n_outputs as it was (only a too-small capacity sets it). */
  CHECK_OK(samba_run_options_set_section_types(ro, &bogus, 1));
  n = 77;
  CHECK_FAILS(samba_session_run(s, in, 2, NULL, 0, ro, outs, 4, &n), SAMBA_ERR_NOT_FOUND, "NOPE");
  CHECK(n == 77);
  CHECK_OK(samba_run_options_set_section_types(ro, &fwd, 1));
  {
    const int32_t ids[1] = {0};
    CHECK_OK(samba_run_options_set_section_ids(ro, ids, 1));
    CHECK_FAILS(samba_session_run(s, in, 2, NULL, 0, ro, outs, 4, &n), SAMBA_ERR_INVALID_ARGUMENT, "not both");
    CHECK_OK(samba_run_options_set_section_types(ro, NULL, 0));
  }
  CHECK_OK(samba_run_options_set_hyperparam(ro, "lr", 0.5));
  CHECK_FAILS(samba_session_run(s, in, 2, NULL, 0, ro, outs, 4, &n), SAMBA_ERR_NOT_FOUND, "no argin 'lr'");
  CHECK_OK(samba_run_options_clear_hyperparams(ro));
  CHECK_FAILS(samba_session_run(s, in, 2, NULL, 0, ro, outs, 1, &n), SAMBA_ERR_OUT_OF_RANGE, "holds 1");
  CHECK(n == 2);
  CHECK(outs[0] == NULL);
  CHECK_OK(samba_run_options_set_data_parallel(ro, 1, 0, "normal"));
  /* A PEF compiled without data parallel: recompile (tests/capi/dist_test.c, tests/mpi). */
  CHECK_FAILS(samba_session_run(s, in, 2, NULL, 0, ro, outs, 4, &n), SAMBA_ERR_INVALID_ARGUMENT,
              "recompile with --data-parallel");
  CHECK_OK(samba_run_options_set_data_parallel(ro, 0, 0, "normal"));
  {
    const int64_t s_bad[2] = {BATCH + 1, IN};
    samba_tensor* bad = NULL;
    samba_tensor* bad_in[2];
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s_bad, 2, &bad));
    CHECK_OK(samba_tensor_set_name(bad, "image"));
    bad_in[0] = bad;
    bad_in[1] = y;
    n = 77;
    CHECK_FAILS(samba_session_run(s, bad_in, 2, NULL, 0, ro, outs, 4, &n), SAMBA_ERR_SHAPE_MISMATCH, "image");
    CHECK(n == 77);
    samba_tensor_release(bad);
  }
  CHECK_FAILS(samba_session_load_pef(s, "no_such_file.pef"), SAMBA_ERR_IO, "no_such_file.pef");

  /* Device tensors: sn_data of a weight equals its host values. */
  {
    samba_tensor* dev = NULL;
    int64_t k = 0, k2 = 0, j;
    double *a, *b;
    CHECK_OK(samba_tensor_sn_data(s, m.w2, &dev));
    a = values_of(dev, &k);
    b = values_of(m.w2, &k2);
    CHECK(k == k2);
    for (j = 0; j < k; ++j) CHECK_NEAR(a[j], b[j], 0);
    free(a);
    free(b);
    samba_tensor_release(dev);
    CHECK_FAILS(samba_tensor_sn_grad(s, m.w2, &dev), SAMBA_ERR_NOT_FOUND, "no gradient");
  }

  samba_tensor_release(traced[0]);
  samba_tensor_release(traced[1]);
  samba_run_options_release(ro);
  samba_compile_options_release(co);
  samba_session_release(s);
  samba_tensor_release(x);
  samba_tensor_release(y);
  samba_tensor_release(m.w1);
  samba_tensor_release(m.b1);
  samba_tensor_release(m.w2);
  samba_tensor_release(m.b2);
  if (!getenv("KEEP_PEF")) remove("capi_logreg_infer.pef");
  if (!getenv("KEEP_PEF")) remove("capi_logreg_infer.pef.log");
  printf("compile_run_test: ok\n");
  return 0;
}
