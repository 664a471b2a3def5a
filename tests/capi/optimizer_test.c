/* Optimizers through the C ABI, checked against hand computation on
 * loss = sum(w * x), whose gradient is x: SGD's max_grad_norm (compiled in a
 * GRADNORM section and eager), runs of only OPT or ZEROGRAD with no outputs
 * requested, AdamW's hyperparameter names (the same at creation and at run
 * time; `betas` still accepted), and the schema the optimizers read. */
#include <stdint.h>

#include "capi_test_util.h"

#define N 4

static const float kX[N] = {3, 0, -4, 0}; /* |x| = 5 */
static const float kW0[N] = {0.5f, -1, 2, 0.25f};

static samba_status model(void* user, samba_tensor* const* in, size_t n_in, samba_tensor** out, size_t cap,
                          size_t* n_out) {
  samba_tensor* w = (samba_tensor*)user;
  samba_tensor* wx = NULL;
  samba_status st;
  if (n_in != 1 || cap < 1) return SAMBA_ERR_INVALID_ARGUMENT;
  if ((st = samba_mul(NULL, w, in[0], &wx)) != SAMBA_OK) return st;
  st = samba_sum(NULL, wx, NULL, 0, 0, &out[0]);
  samba_tensor_release(wx);
  if (st == SAMBA_OK) *n_out = 1;
  return st;
}

static samba_tensor* param(const char* name) {
  const int64_t shape[1] = {N};
  samba_tensor* w = make_f32(kW0, shape, 1);
  CHECK_OK(samba_tensor_set_name(w, name));
  CHECK_OK(samba_tensor_set_requires_grad(w, 1));
  return w;
}

static samba_tensor* input(void) {
  const int64_t shape[1] = {N};
  samba_tensor* x = make_f32(kX, shape, 1);
  CHECK_OK(samba_tensor_set_name(x, "x"));
  return x;
}

/* The scale clip_grad_norm_ applies to a gradient of norm 5. */
static double clip_coef(double max_norm) {
  const double c = max_norm / (5.0 + 1e-6);
  return c < 1 ? c : 1;
}

/* w[i] must equal kW0[i] - shift * kX[i]. */
static void check_weight(samba_tensor* w, double shift) {
  int64_t n = 0, i;
  double* v = values_of(w, &n);
  CHECK(n == N);
  for (i = 0; i < N; ++i) CHECK_NEAR(v[i], kW0[i] - shift * kX[i], 1e-6);
  free(v);
}

static void check_device_weight(samba_session* s, samba_tensor* w, double shift) {
  samba_tensor* dev = NULL;
  CHECK_OK(samba_tensor_sn_data(s, w, &dev));
  check_weight(dev, shift);
  samba_tensor_release(dev);
}

static samba_optimizer* sgd(double lr, double max_grad_norm, samba_tensor* w) {
  samba_attrs* hp = NULL;
  samba_optimizer* opt = NULL;
  CHECK_OK(samba_attrs_create(&hp));
  CHECK_OK(samba_attrs_set_float(hp, "lr", lr));
  CHECK_OK(samba_attrs_set_float(hp, "max_grad_norm", max_grad_norm));
  CHECK_OK(samba_optimizer_create("sgd", hp, &opt));
  samba_attrs_release(hp);
  CHECK_OK(samba_optimizer_add_param_group(opt, &w, 1, NULL));
  return opt;
}

static int has_name(samba_session* s, int32_t list, const char* want) {
  size_t n = 0, i;
  const char* name = NULL;
  CHECK_OK(samba_session_name_count(s, list, &n));
  for (i = 0; i < n; ++i) {
    CHECK_OK(samba_session_name_at(s, list, i, &name));
    if (strcmp(name, want) == 0) return 1;
  }
  return 0;
}

/* A session with `opt` compiled for the model over w and x, loaded. */
static samba_session* compile(samba_optimizer* opt, samba_tensor* w, samba_tensor* x, const char* pef,
                              int32_t grad_accumulation) {
  samba_session* s = NULL;
  samba_compile_options* co = NULL;
  samba_tensor* loss = NULL;
  size_t n = 0;
  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_compile_options_create(&co));
  CHECK_OK(samba_compile_options_set_pef_path(co, pef));
  CHECK_OK(samba_compile_options_set_grad_accumulation(co, grad_accumulation));
  CHECK_OK(samba_session_compile(s, model, w, &x, 1, &opt, 1, co));
  CHECK_OK(samba_session_trace_graph(s, model, w, &x, 1, &opt, 1, pef, NULL, &loss, 1, &n));
  CHECK(n == 1);
  samba_tensor_release(loss);
  samba_compile_options_release(co);
  return s;
}

static void release_all(samba_session* s, samba_optimizer* opt, samba_tensor* w, samba_tensor* x) {
  samba_optimizer_release(opt);
  samba_session_release(s);
  samba_tensor_release(w);
  samba_tensor_release(x);
}

/* Runs the sections of `type` alone, asking for no outputs. */
static void run_only(samba_session* s, const char* type) {
  samba_run_options* ro = NULL;
  size_t n = 99;
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_OK(samba_run_options_set_section_types(ro, &type, 1));
  CHECK_OK(samba_session_run(s, NULL, 0, NULL, 0, ro, NULL, 0, &n));
  CHECK(n == 0);
  samba_run_options_release(ro);
}

static void compiled_sgd_clips_and_runs_opt_alone(void) {
  samba_tensor *w = param("w"), *x = input(), *loss = NULL;
  samba_optimizer* opt = sgd(0.1, 0.5, w);
  samba_session* s = compile(opt, w, x, "capi_optimizer_sgd.pef", 0);
  samba_run_options* ro = NULL;
  size_t n = 0;
  double v = 0;
  const double step = 0.1 * clip_coef(0.5);

  CHECK(has_name(s, SAMBA_NAMES_SECTION_TYPES, "GRADNORM"));
  CHECK(has_name(s, SAMBA_NAMES_ARGINS, "max_grad_norm"));
  CHECK_OK(samba_session_argin(s, "max_grad_norm", &v));
  CHECK_NEAR(v, 0.5, 0);

  /* A whole step: the gradient x (norm 5) is clipped to norm 0.5. */
  CHECK_OK(samba_session_run(s, &x, 1, NULL, 0, NULL, &loss, 1, &n));
  CHECK(n == 1);
  check_device_weight(s, w, step);
  samba_tensor_release(loss);

  /* OPT alone, no outputs requested: applies the kept (clipped) gradient again. */
  run_only(s, "OPT");
  check_device_weight(s, w, 2 * step);

  /* max_grad_norm is an argin: above the norm, nothing is clipped. */
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_OK(samba_run_options_set_hyperparam(ro, "max_grad_norm", 100));
  CHECK_OK(samba_session_run(s, &x, 1, NULL, 0, ro, &loss, 1, &n));
  check_device_weight(s, w, 2 * step + 0.1);
  samba_tensor_release(loss);
  /* A value outside the schema's range is refused, and the run changes nothing. */
  CHECK_OK(samba_run_options_set_hyperparam(ro, "lr", -0.1));
  CHECK_FAILS(samba_session_run(s, &x, 1, NULL, 0, ro, &loss, 1, &n), SAMBA_ERR_INVALID_ARGUMENT,
              "argin 'lr' must be >= 0");
  check_device_weight(s, w, 2 * step + 0.1);
  CHECK_FAILS(samba_session_set_argin(s, "max_grad_norm", 0), SAMBA_ERR_INVALID_ARGUMENT, "> 0");
  CHECK_OK(samba_session_argin(s, "max_grad_norm", &v));
  CHECK_NEAR(v, 100, 0);
  samba_run_options_release(ro);
  release_all(s, opt, w, x);
}

static void zerograd_alone_clears_the_gradient(void) {
  samba_tensor *w = param("wz"), *x = input(), *loss = NULL, *g = NULL;
  samba_optimizer* opt = sgd(0.1, 10, w);
  samba_session* s = compile(opt, w, x, "capi_optimizer_zerograd.pef", 1);
  size_t n = 0;
  int64_t k = 0, i;
  double* v;

  CHECK(has_name(s, SAMBA_NAMES_SECTION_TYPES, "ZEROGRAD"));
  CHECK_OK(samba_session_run(s, &x, 1, NULL, 0, NULL, &loss, 1, &n));
  samba_tensor_release(loss);
  CHECK_OK(samba_tensor_sn_grad(s, w, &g));
  v = values_of(g, &k);
  CHECK(k == N && v[0] == kX[0]);
  free(v);
  samba_tensor_release(g);

  run_only(s, "ZEROGRAD");
  CHECK_OK(samba_tensor_sn_grad(s, w, &g));
  v = values_of(g, &k);
  for (i = 0; i < k; ++i) CHECK(v[i] == 0);
  free(v);
  samba_tensor_release(g);
  release_all(s, opt, w, x);
}

static void eager_sgd_clips(void) {
  samba_tensor *w = param("we"), *x = input(), *loss = NULL;
  samba_optimizer* opt = sgd(0.1, 2, w);
  size_t n = 0;

  CHECK_OK(model(w, &x, 1, &loss, 1, &n));
  CHECK_OK(samba_tensor_backward(loss, NULL, 0));
  CHECK_OK(samba_optimizer_step(NULL, opt));
  check_weight(w, 0.1 * clip_coef(2));
  samba_tensor_release(loss);
  samba_optimizer_release(opt);
  samba_tensor_release(w);
  samba_tensor_release(x);
}

static void adamw_names_match_at_creation_and_run_time(void) {
  samba_tensor *w = param("wa"), *x = input(), *loss = NULL;
  samba_attrs* hp = NULL;
  samba_optimizer *opt = NULL, *old = NULL;
  samba_session* s = NULL;
  samba_run_options* ro = NULL;
  const double betas[2] = {0.5, 0.75};
  size_t n = 0;
  double v = 0;

  CHECK_OK(samba_attrs_create(&hp));
  CHECK_OK(samba_attrs_set_float(hp, "beta1", 0.8));
  CHECK_OK(samba_attrs_set_float(hp, "beta2", 0.99));
  CHECK_OK(samba_optimizer_create("adamw", hp, &opt));
  CHECK_OK(samba_optimizer_add_param_group(opt, &w, 1, NULL));
  CHECK_OK(samba_attrs_set_float(hp, "beta1", 1.5));
  CHECK_FAILS(samba_optimizer_create("adamw", hp, &old), SAMBA_ERR_INVALID_ARGUMENT, "'beta1' must be in [0, 1)");
  /* Deprecated spelling, still accepted. */
  samba_attrs_release(hp);
  CHECK_OK(samba_attrs_create(&hp));
  CHECK_OK(samba_attrs_set_floats(hp, "betas", betas, 2));
  CHECK_OK(samba_optimizer_create("adamw", hp, &old));
  samba_optimizer_release(old);
  /* max_grad_norm belongs to the optimizer, not to a group. */
  samba_attrs_release(hp);
  CHECK_OK(samba_attrs_create(&hp));
  CHECK_OK(samba_attrs_set_float(hp, "max_grad_norm", 1));
  CHECK_FAILS(samba_optimizer_add_param_group(opt, &x, 1, hp), SAMBA_ERR_INVALID_ARGUMENT, "max_grad_norm");
  samba_attrs_release(hp);

  s = compile(opt, w, x, "capi_optimizer_adamw.pef", 0);
  CHECK(!has_name(s, SAMBA_NAMES_SECTION_TYPES, "GRADNORM"));
  CHECK_OK(samba_session_argin(s, "beta1", &v));
  CHECK_NEAR(v, 0.8, 0);
  CHECK_OK(samba_session_argin(s, "beta2", &v));
  CHECK_NEAR(v, 0.99, 0);
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_OK(samba_run_options_set_hyperparam(ro, "beta1", 0.7));
  CHECK_OK(samba_session_run(s, &x, 1, NULL, 0, ro, &loss, 1, &n));
  samba_tensor_release(loss);
  CHECK_OK(samba_session_argin(s, "beta1", &v));
  CHECK_NEAR(v, 0.7, 0);
  samba_run_options_release(ro);
  release_all(s, opt, w, x);
}

static void schemas_mark_the_argins(void) {
  const char* json = NULL;
  CHECK_OK(samba_optimizer_schema_json("SGD", &json));
  CHECK(strstr(json, "\"name\":\"max_grad_norm\""));
  CHECK(strstr(json, "\"argin\":true"));
  CHECK_OK(samba_optimizer_schema_json("adamw", &json));
  CHECK(strstr(json, "\"name\":\"beta1\"") && !strstr(json, "betas"));
  CHECK_FAILS(samba_optimizer_schema_json("adam", &json), SAMBA_ERR_NOT_FOUND, "'adam'");
  CHECK_FAILS(samba_optimizer_schema_json(NULL, &json), SAMBA_ERR_NULL_POINTER, "kind");
  CHECK_OK(samba_op_schema_json("sgd_update", &json));
  CHECK(strstr(json, "\"argin\":true") && strstr(json, "\"min_open\":false"));
  CHECK_OK(samba_op_schema_json("relu", &json));
  CHECK(!strstr(json, "\"argin\":true"));
}

int main(void) {
  compiled_sgd_clips_and_runs_opt_alone();
  zerograd_alone_clears_the_gradient();
  eager_sgd_clips();
  adamw_names_match_at_creation_and_run_time();
  schemas_mark_the_argins();
  printf("optimizer_test: ok\n");
  return 0;
}
