/* Run-time arguments (optimizer hyperparameters, dropout rates and seeds)
 * are refused the same way on every path: samba_session_set_argin, a run's
 * hyperparameters, tracing, eager op calls and optimizer creation. A refused
 * call changes nothing: the argin keeps its value, *n_outputs is untouched
 * (the output array holds NULLs, samba.h's rule for out-parameters), the
 * weights and the dropout step stay as they were (a twin session that never
 * saw the refused calls draws the same masks). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "capi_test_util.h"

#define PEF "capi_argin_check.pef"

static const float kX[8] = {0.5f, -1, 2, 0.25f, 1, 1.5f, -0.5f, 3};
static const int64_t kXShape[2] = {2, 4};

typedef struct {
  LinearNet net;
  double p;
} Model;

/* loss = cross_entropy(linear(dropout(x, p, seed = 7))). */
static samba_status dropout_model(void* user, samba_tensor* const* in, size_t n_in,
                                  samba_tensor** out, size_t cap, size_t* n_out) {
  samba_tensor* dropped = NULL;
  samba_tensor* args[2];
  samba_status st;
  if (n_in != 2) return SAMBA_ERR_INVALID_ARGUMENT;
  if ((st = samba_dropout(NULL, in[0], ((Model*)user)->p, 1, 7, 0, &dropped)) != SAMBA_OK)
    return st;
  args[0] = dropped;
  args[1] = in[1];
  st = linear_loss_model(user, args, 2, out, cap, n_out);
  samba_tensor_release(dropped);
  return st;
}

static samba_tensor* input_x(void) {
  samba_tensor* x = make_f32(kX, kXShape, 2);
  CHECK_OK(samba_tensor_set_name(x, "x"));
  return x;
}

static samba_tensor* labels(const int64_t* values) {
  const int64_t shape[1] = {2};
  samba_tensor* y = make_i64(values, shape, 1);
  CHECK_OK(samba_tensor_set_name(y, "y"));
  return y;
}

static samba_optimizer* sgd(samba_tensor** params) {
  samba_attrs* hp = NULL;
  samba_optimizer* opt = NULL;
  CHECK_OK(samba_attrs_create(&hp));
  CHECK_OK(samba_attrs_set_float(hp, "lr", 0.1));
  CHECK_OK(samba_optimizer_create("sgd", hp, &opt));
  samba_attrs_release(hp);
  CHECK_OK(samba_optimizer_add_param_group(opt, params, 2, NULL));
  return opt;
}

/* A session with the model compiled (once, to PEF) and loaded. */
static samba_session* open_session(Model* m, samba_tensor** in, samba_optimizer* opt, int compile) {
  samba_session* s = NULL;
  samba_tensor* loss = NULL;
  size_t n = 0;
  CHECK_OK(samba_session_create(NULL, &s));
  if (compile) {
    samba_compile_options* co = NULL;
    CHECK_OK(samba_compile_options_create(&co));
    CHECK_OK(samba_compile_options_set_pef_path(co, PEF));
    CHECK_OK(samba_session_compile(s, dropout_model, m, in, 2, &opt, 1, co));
    samba_compile_options_release(co);
  }
  CHECK_OK(samba_session_trace_graph(s, dropout_model, m, in, 2, &opt, 1, PEF, NULL, &loss, 1, &n));
  samba_tensor_release(loss);
  return s;
}

static const char* name_of(samba_session* s, samba_names_kind kind) {
  size_t n = 0;
  const char* name = NULL;
  CHECK_OK(samba_session_name_count(s, kind, &n));
  CHECK(n == 1);
  CHECK_OK(samba_session_name_at(s, kind, 0, &name));
  return name;
}

static double argin(samba_session* s, const char* name) {
  double v = 0;
  CHECK_OK(samba_session_argin(s, name, &v));
  return v;
}

/* The device weight's values; the caller frees. */
static double* device_weight(samba_session* s, samba_tensor* w) {
  samba_tensor* dev = NULL;
  int64_t n = 0;
  double* v;
  CHECK_OK(samba_tensor_sn_data(s, w, &dev));
  v = values_of(dev, &n);
  samba_tensor_release(dev);
  return v;
}

/* `value` for argin `name` is refused by set_argin and by a run, with
 * `keyword` in both messages, and neither changes anything. */
static void refused_on_every_run_path(samba_session* s, samba_tensor** in, samba_tensor* w,
                                      const char* name, double value, const char* keyword) {
  const double before = argin(s, name);
  double* w_before = device_weight(s, w);
  double* w_after;
  samba_run_options* ro = NULL;
  samba_tensor* sentinel = input_x();
  samba_tensor* outs[1];
  size_t n = 77;

  CHECK_FAILS(samba_session_set_argin(s, name, value), SAMBA_ERR_INVALID_ARGUMENT, keyword);
  CHECK(argin(s, name) == before);

  outs[0] = sentinel;
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_OK(samba_run_options_set_hyperparam(ro, name, value));
  CHECK_FAILS(samba_session_run(s, in, 2, NULL, 0, ro, outs, 1, &n), SAMBA_ERR_INVALID_ARGUMENT,
              keyword);
  CHECK(n == 77 && outs[0] == NULL); /* out-parameters are NULL after a failure */
  CHECK(argin(s, name) == before);
  w_after = device_weight(s, w);
  CHECK(memcmp(w_before, w_after, 12 * sizeof(double)) == 0);
  samba_run_options_release(ro);
  samba_tensor_release(sentinel);
  free(w_before);
  free(w_after);
}

/* An accepted boundary value reads back as given. */
static void accepted(samba_session* s, const char* name, double value) {
  const double before = argin(s, name);
  CHECK_OK(samba_session_set_argin(s, name, value));
  CHECK(argin(s, name) == value);
  CHECK_OK(samba_session_set_argin(s, name, before));
}

/* The FWD outputs of one run: the logits after dropout are in the loss. */
static double forward_loss(samba_session* s, samba_tensor** in) {
  samba_run_options* ro = NULL;
  samba_tensor* loss = NULL;
  const char* fwd = "FWD";
  size_t n = 0;
  int64_t k = 0;
  double* v;
  double out;
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_OK(samba_run_options_set_section_types(ro, &fwd, 1));
  CHECK_OK(samba_session_run(s, in, 2, NULL, 0, ro, &loss, 1, &n));
  v = values_of(loss, &k);
  out = v[0];
  free(v);
  samba_tensor_release(loss);
  samba_run_options_release(ro);
  return out;
}

static void run_paths(void) {
  const int64_t good[2] = {0, 2}, bad[2] = {0, 7};
  const int64_t wshape[2] = {3, 4}, bshape[1] = {3};
  Model m;
  samba_tensor* in[2];
  samba_tensor* bad_in[2];
  samba_tensor* params[2];
  samba_optimizer* opt;
  samba_session *s, *twin;
  samba_run_options* ro = NULL;
  samba_tensor* out = NULL;
  const char *rate, *seed;
  size_t n = 77;
  double first, second;

  m.net.w = named_param("fc.weight", wshape, 2);
  m.net.b = named_param("fc.bias", bshape, 1);
  m.p = 0.5;
  params[0] = m.net.w;
  params[1] = m.net.b;
  in[0] = input_x();
  in[1] = labels(good);
  opt = sgd(params);
  s = open_session(&m, in, opt, 1);
  rate = name_of(s, SAMBA_NAMES_DROPOUT_RATE_ARGINS);
  seed = name_of(s, SAMBA_NAMES_DROPOUT_SEED_ARGINS);
  CHECK(argin(s, rate) == 0.5 && argin(s, seed) == 7);

  refused_on_every_run_path(s, in, m.net.w, "lr", NAN, "argin 'lr' must be >= 0, got nan");
  refused_on_every_run_path(s, in, m.net.w, "lr", INFINITY, "argin 'lr' must be >= 0");
  refused_on_every_run_path(s, in, m.net.w, "lr", -1, "argin 'lr' must be >= 0, got -1");
  refused_on_every_run_path(s, in, m.net.w, rate, 5, "must be in [0, 1], got 5");
  refused_on_every_run_path(s, in, m.net.w, rate, NAN, "must be in [0, 1], got nan");
  refused_on_every_run_path(s, in, m.net.w, rate, -0.25, "must be in [0, 1]");
  refused_on_every_run_path(s, in, m.net.w, seed, 1e300,
                            "must be an integer in [-2^63, 2^63), got 1e+300");
  refused_on_every_run_path(s, in, m.net.w, seed, 0.5, "must be an integer");
  refused_on_every_run_path(s, in, m.net.w, seed, NAN, "must be an integer");
  refused_on_every_run_path(s, in, m.net.w, seed, 9223372036854775808.0, "must be an integer");
  accepted(s, "lr", 0);
  accepted(s, rate, 1); /* as torch: p = 1 zeroes everything */
  accepted(s, rate, 0);
  accepted(s, seed, -9223372036854775808.0);
  accepted(s, seed, -1);

  /* A run that fails while running (a class index of 7 for 3 classes)
   * gives back the argins it set. */
  bad_in[0] = in[0];
  bad_in[1] = labels(bad);
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_OK(samba_run_options_set_hyperparam(ro, "lr", 0.5));
  CHECK_OK(samba_run_options_set_hyperparam(ro, rate, 0.25));
  CHECK(samba_session_run(s, bad_in, 2, NULL, 0, ro, &out, 1, &n) != SAMBA_OK);
  CHECK(n == 77 && out == NULL);
  CHECK(argin(s, "lr") == 0.1 && argin(s, rate) == 0.5);
  samba_run_options_release(ro);
  samba_tensor_release(bad_in[1]);

  /* Tracing refuses the same values: a model with p = 5 does not compile. */
  {
    samba_session* c = NULL;
    samba_compile_options* co = NULL;
    Model bad_model = m;
    bad_model.p = 5;
    CHECK_OK(samba_session_create(NULL, &c));
    CHECK_OK(samba_compile_options_create(&co));
    CHECK_OK(samba_compile_options_set_pef_path(co, "capi_argin_check_bad.pef"));
    CHECK_FAILS(samba_session_compile(c, dropout_model, &bad_model, in, 2, &opt, 1, co),
                SAMBA_ERR_INVALID_ARGUMENT, "must be in [0, 1], got 5");
    samba_compile_options_release(co);
    samba_session_release(c);
  }

  /* None of the failed runs took a dropout step: a session that never saw
   * them draws the same masks on its first run (its device input y must be
   * the good one again). */
  twin = open_session(&m, in, opt, 0);
  first = forward_loss(s, in);
  CHECK(first == forward_loss(twin, in));
  second = forward_loss(s, in);
  CHECK(second == forward_loss(twin, in));
  CHECK(first != second); /* each step draws a new mask */

  samba_session_release(twin);
  samba_session_release(s);
  samba_optimizer_release(opt);
  samba_tensor_release(in[0]);
  samba_tensor_release(in[1]);
  samba_tensor_release(m.net.w);
  samba_tensor_release(m.net.b);
}

/* Eager calls and optimizer creation refuse the same values, in the same
 * words, and accept the same boundaries. */
static void eager_paths(void) {
  samba_tensor* x = input_x();
  samba_tensor *out = NULL, *a = NULL, *b = NULL;
  samba_attrs* at = NULL;
  samba_optimizer* opt = NULL;
  size_t n = 0;
  int64_t k = 0, i;
  double *va, *vb;

  CHECK_FAILS(samba_dropout(NULL, x, 5, 1, 7, 0, &out), SAMBA_ERR_INVALID_ARGUMENT,
              "must be in [0, 1], got 5");
  CHECK_FAILS(samba_dropout(NULL, x, NAN, 1, 7, 0, &out), SAMBA_ERR_INVALID_ARGUMENT,
              "must be in [0, 1], got nan");
  CHECK(out == NULL);
  CHECK_OK(samba_dropout(NULL, x, 1, 1, 7, 0, &out));
  va = values_of(out, &k);
  for (i = 0; i < k; ++i) CHECK(va[i] == 0);
  free(va);
  samba_tensor_release(out);

  /* A seed given as a float: refused unless it is an int64, then the same
   * mask as the int. */
  CHECK_OK(samba_attrs_create(&at));
  CHECK_OK(samba_attrs_set_float(at, "seed", 1e300));
  CHECK_FAILS(samba_op_call(NULL, "dropout", &x, 1, at, &a, 1, &n), SAMBA_ERR_INVALID_ARGUMENT,
              "must be an integer in [-2^63, 2^63), got 1e+300");
  CHECK_OK(samba_attrs_set_float(at, "seed", 11));
  CHECK_OK(samba_op_call(NULL, "dropout", &x, 1, at, &a, 1, &n));
  CHECK_OK(samba_dropout(NULL, x, 0.5, 1, 11, 0, &b));
  va = values_of(a, &k);
  vb = values_of(b, &k);
  CHECK(memcmp(va, vb, (size_t)k * sizeof(double)) == 0);
  free(va);
  free(vb);
  samba_tensor_release(a);
  samba_tensor_release(b);
  samba_attrs_release(at);

  CHECK_OK(samba_attrs_create(&at));
  CHECK_OK(samba_attrs_set_float(at, "lr", NAN));
  CHECK_FAILS(samba_optimizer_create("sgd", at, &opt), SAMBA_ERR_INVALID_ARGUMENT,
              "'lr' must be >= 0, got nan");
  CHECK_OK(samba_attrs_set_float(at, "lr", 0.1));
  CHECK_OK(samba_attrs_set_float(at, "max_grad_norm", INFINITY));
  CHECK_FAILS(samba_optimizer_create("sgd", at, &opt), SAMBA_ERR_INVALID_ARGUMENT,
              "'max_grad_norm' must be > 0");
  CHECK(opt == NULL);
  samba_attrs_release(at);
  samba_tensor_release(x);
}

int main(void) {
  run_paths();
  eager_paths();
  return 0;
}
