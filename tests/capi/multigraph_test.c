/* Multigraph: a training graph and an inference graph sharing their weights,
 * compiled into one PEF, loaded with init_multigraph_runtime, re-traced with
 * trace_multigraph and run by call ranges; and init_output_grads. */
#include "capi_test_util.h"

typedef struct {
  samba_tensor* w;
  int with_loss;
} Net;

static samba_status model(void* user, samba_tensor* const* in, size_t n_in, samba_tensor** out, size_t cap,
                          size_t* n_out) {
  Net* m = (Net*)user;
  samba_tensor* h = NULL;
  samba_status st;
  (void)cap;
  if ((st = samba_linear(NULL, in[0], m->w, NULL, &h)) != SAMBA_OK) return st;
  if (m->with_loss && n_in == 2) {
    st = samba_cross_entropy(NULL, h, in[1], &out[0]);
    samba_tensor_release(h);
    if (st != SAMBA_OK) return st;
  } else {
    out[0] = h;
  }
  *n_out = 1;
  return SAMBA_OK;
}

/* Runs `ro` and checks the device value of `w` did not move. */
static void check_run_keeps(samba_session* s, samba_tensor* w, samba_tensor** in, size_t n_in,
                            const samba_run_options* ro) {
  samba_tensor *w0 = NULL, *w1 = NULL, *outs[2] = {NULL, NULL};
  size_t n = 0;
  int64_t k = 0, j;
  double *a, *b;
  CHECK_OK(samba_tensor_sn_data(s, w, &w0));
  CHECK_OK(samba_session_run(s, in, n_in, NULL, 0, ro, outs, 2, &n));
  CHECK(n == 1);
  samba_tensor_release(outs[0]);
  CHECK_OK(samba_tensor_sn_data(s, w, &w1));
  a = values_of(w0, &k);
  b = values_of(w1, &k);
  for (j = 0; j < k; ++j) CHECK_NEAR(a[j], b[j], 0);
  free(a);
  free(b);
  samba_tensor_release(w0);
  samba_tensor_release(w1);
}

int main(void) {
  const int64_t s_w[2] = {3, 4}, s_x[2] = {5, 4}, s_y[1] = {5};
  const int64_t labels[5] = {0, 1, 2, 1, 0};
  float xs[20];
  Net train = {NULL, 1}, infer = {NULL, 0};
  samba_session* s = NULL;
  samba_optimizer* opt = NULL;
  samba_compile_options *co = NULL, *inf = NULL;
  samba_run_options* ro = NULL;
  samba_graph *g_train = NULL, *g_infer = NULL;
  samba_tensor *x, *y, *in[2], *traced = NULL, *outs[2] = {NULL, NULL};
  samba_attrs* hp = NULL;
  size_t n = 0, i;
  double before, after;

  for (i = 0; i < 20; ++i) xs[i] = (float)sin(0.4 * (double)i);
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s_w, 2, &train.w));
  {
    float w[12];
    for (i = 0; i < 12; ++i) w[i] = (float)(0.1 * (double)i - 0.5);
    CHECK_OK(samba_tensor_copy_from(train.w, w, sizeof w));
  }
  CHECK_OK(samba_tensor_set_name(train.w, "shared.weight"));
  CHECK_OK(samba_tensor_set_requires_grad(train.w, 1));
  infer.w = train.w;
  x = make_f32(xs, s_x, 2);
  y = make_i64(labels, s_y, 1);
  CHECK_OK(samba_tensor_set_name(x, "x"));
  CHECK_OK(samba_tensor_set_name(y, "y"));
  in[0] = x;
  in[1] = y;

  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_attrs_create(&hp));
  CHECK_OK(samba_attrs_set_float(hp, "lr", 1.0));
  CHECK_OK(samba_optimizer_create("sgd", hp, &opt));
  CHECK_OK(samba_optimizer_add_param_group(opt, &train.w, 1, NULL));
  CHECK_OK(samba_compile_options_create(&inf));
  CHECK_OK(samba_compile_options_set_inference(inf, 1));
  CHECK_OK(samba_graph_create("train", model, &train, in, 2, &opt, 1, NULL, &g_train));
  CHECK_OK(samba_graph_create("infer", model, &infer, in, 1, NULL, 0, inf, &g_infer));
  CHECK_OK(samba_session_add_graph(s, g_train, 0));
  CHECK_OK(samba_session_add_graph(s, g_infer, 0));
  CHECK_OK(samba_compile_options_create(&co));
  CHECK_OK(samba_compile_options_set_name(co, "two_graphs"));
  CHECK_OK(samba_compile_options_set_pef_path(co, "capi_multigraph.pef"));
  CHECK_OK(samba_session_compile_multigraph(s, co));

  CHECK_OK(samba_session_init_multigraph_runtime(s, "capi_multigraph.pef", 1));
  CHECK_OK(samba_session_trace_multigraph(s, g_infer, &traced, 1, &n));
  CHECK(n == 1);
  CHECK_FAILS(samba_session_trace_multigraph(s, g_train, NULL, 0, &n), SAMBA_ERR_OUT_OF_RANGE, "holds 0");

  /* Calls 0..2 are train's FWD, BCKWD, OPT; call 3 is infer's FWD. */
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_OK(samba_run_options_set_call_range(ro, 3, 4));
  CHECK_OK(samba_session_run(s, in, 1, &traced, 1, ro, outs, 2, &n));
  CHECK(n == 1);
  CHECK(samba_tensor_item(outs[0], &before) == SAMBA_ERR_INVALID_ARGUMENT); /* not a scalar */
  {
    int64_t k = 0;
    double* v = values_of(outs[0], &k);
    before = v[0];
    free(v);
  }
  samba_tensor_release(outs[0]);
  CHECK_OK(samba_run_options_set_call_range(ro, 0, 3));
  CHECK_OK(samba_session_run(s, in, 2, NULL, 0, ro, outs, 2, &n));
  samba_tensor_release(outs[0]);
  CHECK_OK(samba_run_options_set_call_range(ro, 3, 4));
  CHECK_OK(samba_session_run(s, in, 1, &traced, 1, ro, outs, 2, &n));
  {
    int64_t k = 0;
    double* v = values_of(outs[0], &k);
    after = v[0];
    free(v);
  }
  samba_tensor_release(outs[0]);
  CHECK(after != before); /* the inference graph sees the trained weight */

  /* A multigraph run names its graph: without one it is refused, and the
   * inference graph's run leaves the weights as they were. */
  {
    samba_run_options* by_graph = NULL;
    CHECK_OK(samba_run_options_create(&by_graph));
    CHECK_FAILS(samba_session_run(s, in, 2, NULL, 0, by_graph, outs, 2, &n), SAMBA_ERR_INVALID_ARGUMENT,
                "graph_name");
    CHECK_OK(samba_run_options_set_graph_name(by_graph, "nope"));
    CHECK_FAILS(samba_session_run(s, in, 1, NULL, 0, by_graph, outs, 2, &n), SAMBA_ERR_NOT_FOUND, "nope");
    CHECK_OK(samba_run_options_set_graph_name(by_graph, "infer"));
    check_run_keeps(s, train.w, in, 1, by_graph);
    samba_run_options_release(by_graph);
  }

  /* init_output_grads: zero the loss gradient, and training stops moving. */
  {
    const char* loss_name = NULL;
    CHECK_OK(samba_session_name_at(s, SAMBA_NAMES_OUTPUTS, 0, &loss_name));
    CHECK_FAILS(samba_session_init_output_grads(s, (const char* const[]){"nope"}, 1, NULL, NULL, 0),
                SAMBA_ERR_NOT_FOUND, "nope");
    CHECK_OK(samba_session_init_output_grads(s, &loss_name, 1, NULL, NULL, 0));
    CHECK_OK(samba_run_options_set_call_range(ro, 0, 3));
    check_run_keeps(s, train.w, in, 2, ro);
  }

  samba_tensor_release(traced);
  samba_run_options_release(ro);
  samba_compile_options_release(co);
  samba_compile_options_release(inf);
  samba_graph_release(g_train);
  samba_graph_release(g_infer);
  samba_optimizer_release(opt);
  samba_attrs_release(hp);
  samba_session_release(s);
  samba_tensor_release(x);
  samba_tensor_release(y);
  samba_tensor_release(train.w);
  remove("capi_multigraph.pef");
  remove("capi_multigraph.pef.log");
  printf("multigraph_test: ok\n");
  return 0;
}
