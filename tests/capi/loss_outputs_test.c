/* The loss-output contract (include/samba/compile.h,
 * samba_compile_options_set_loss_indices): which model outputs backward
 * starts from, and from which gradient, with and without loss_indices.
 * tests/python/test_loss_outputs.py checks the same three cases in Python. */
#include <stdint.h>
#include <stdlib.h>

#include "capi_test_util.h"

/* What the model returns. */
enum { LOSS_AND_LOGITS, LOSS_ONLY, LOGITS_ONLY, SUM_OF_LOGITS };

typedef struct {
  samba_tensor *w, *b;
  int returns;
} Net;

static samba_status model(void* user, samba_tensor* const* in, size_t n_in, samba_tensor** out,
                          size_t cap, size_t* n_out) {
  Net* m = (Net*)user;
  samba_tensor *logits = NULL, *loss = NULL;
  samba_status st;
  if (n_in != 2 || cap < 2) return SAMBA_ERR_INVALID_ARGUMENT;
  if ((st = samba_linear(NULL, in[0], m->w, m->b, &logits)) != SAMBA_OK) return st;
  if (m->returns == LOGITS_ONLY) {
    out[0] = logits;
    *n_out = 1;
    return SAMBA_OK;
  }
  if (m->returns == SUM_OF_LOGITS)
    st = samba_sum(NULL, logits, NULL, 0, 0, &loss);
  else
    st = samba_cross_entropy(NULL, logits, in[1], &loss);
  if (st != SAMBA_OK) {
    samba_tensor_release(logits);
    return st;
  }
  out[0] = loss;
  *n_out = 1;
  if (m->returns == LOSS_AND_LOGITS)
    out[(*n_out)++] = logits;
  else
    samba_tensor_release(logits);
  return SAMBA_OK;
}

static int warnings = 0;
static char warned[1024];

static void count_warnings(void* user, int32_t level, const char* message) {
  (void)user;
  if (level != SAMBA_LOG_WARNING) return;
  ++warnings;
  strncpy(warned, message, sizeof warned - 1);
}

/* One training step (no optimizer) of `net`; writes the gradients of w (12
 * values) then b (3) to grads, and, when the model returns the logits as
 * output 1, the gradient that output started from to logits_grad (18). */
static void step_gradients(Net* net, samba_tensor** in, const int64_t* loss_indices, size_t n_loss,
                           double* grads, double* logits_grad) {
  samba_session* s = NULL;
  samba_compile_options* co = NULL;
  samba_run_options* ro = NULL;
  samba_tensor *traced[2] = {NULL, NULL}, *outs[2], *g = NULL;
  size_t n = 0, i;
  int64_t k = 0;
  double* v;
  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_compile_options_create(&co));
  CHECK_OK(samba_compile_options_set_pef_path(co, "capi_loss_outputs.pef"));
  if (n_loss) CHECK_OK(samba_compile_options_set_loss_indices(co, loss_indices, n_loss));
  CHECK_OK(samba_session_compile(s, model, net, in, 2, NULL, 0, co));
  CHECK_OK(samba_session_trace_graph(s, model, net, in, 2, NULL, 0, "capi_loss_outputs.pef", NULL,
                                     traced, 2, &n));
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_OK(samba_session_run(s, in, 2, NULL, 0, ro, outs, 2, &n));
  for (i = 0; i < n; ++i) samba_tensor_release(outs[i]);

  CHECK_OK(samba_tensor_sn_grad(s, net->w, &g));
  v = values_of(g, &k);
  CHECK(k == 12);
  memcpy(grads, v, 12 * sizeof(double));
  free(v);
  samba_tensor_release(g);
  CHECK_OK(samba_tensor_sn_grad(s, net->b, &g));
  v = values_of(g, &k);
  CHECK(k == 3);
  memcpy(grads + 12, v, 3 * sizeof(double));
  free(v);
  samba_tensor_release(g);

  if (logits_grad) {
    const char* out_name = NULL;
    char grad_name[256];
    const char* names[1];
    CHECK_OK(samba_session_name_at(s, SAMBA_NAMES_OUTPUTS, 1, &out_name));
    snprintf(grad_name, sizeof grad_name, "%s.grad", out_name);
    names[0] = grad_name;
    CHECK_OK(samba_session_get_tensors_by_name(s, names, 1, &g));
    v = values_of(g, &k);
    CHECK(k == 18);
    memcpy(logits_grad, v, 18 * sizeof(double));
    free(v);
    samba_tensor_release(g);
  }
  for (i = 0; i < 2; ++i) samba_tensor_release(traced[i]);
  samba_run_options_release(ro);
  samba_compile_options_release(co);
  samba_session_release(s);
}

static void check_same(const double* got, const double* want, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) CHECK_NEAR(got[i], want[i], 1e-5);
}

int main(void) {
  const int64_t s_w[2] = {3, 4}, s_b[1] = {3}, s_x[2] = {6, 4}, s_y[1] = {6};
  const int64_t labels[6] = {0, 1, 2, 2, 1, 0}, first_only[1] = {0};
  float xs[24];
  double loss_grads[15], grads[15], logits_grad[18], sum_grads[15];
  Net net;
  samba_tensor* in[2];
  size_t i;

  for (i = 0; i < 24; ++i) xs[i] = (float)cos(0.9 * (double)i);
  net.w = named_param("fc.weight", s_w, 2);
  net.b = named_param("fc.bias", s_b, 1);
  in[0] = make_f32(xs, s_x, 2);
  in[1] = make_i64(labels, s_y, 1);
  CHECK_OK(samba_tensor_set_name(in[0], "x"));
  CHECK_OK(samba_tensor_set_name(in[1], "y"));
  CHECK_OK(samba_set_log_sink(count_warnings, NULL));

  net.returns = LOSS_ONLY;
  step_gradients(&net, in, NULL, 0, loss_grads, NULL);
  CHECK(warnings == 0);

  /* (loss, logits) without loss_indices: the scalar is the loss, the logits
   * start from a zero gradient, quietly. */
  net.returns = LOSS_AND_LOGITS;
  step_gradients(&net, in, NULL, 0, grads, logits_grad);
  CHECK(warnings == 0);
  check_same(grads, loss_grads, 15);
  for (i = 0; i < 18; ++i) CHECK_NEAR(logits_grad[i], 0, 0);

  /* loss_indices {0}: only the loss is differentiated. */
  step_gradients(&net, in, first_only, 1, grads, NULL);
  CHECK(warnings == 0);
  check_same(grads, loss_grads, 15);

  /* Only a non-scalar output: it is the loss (as if its sum were), with a
   * warning naming it and its shape and pointing to loss_indices. */
  net.returns = SUM_OF_LOGITS;
  step_gradients(&net, in, NULL, 0, sum_grads, NULL);
  CHECK(warnings == 0);
  net.returns = LOGITS_ONLY;
  step_gradients(&net, in, NULL, 0, grads, NULL);
  CHECK(warnings == 1);
  CHECK(strstr(warned, "output 0") != NULL && strstr(warned, "[6, 3]") != NULL &&
        strstr(warned, "loss_indices") != NULL);
  check_same(grads, sum_grads, 15);

  CHECK_OK(samba_set_log_sink(NULL, NULL));
  samba_tensor_release(in[0]);
  samba_tensor_release(in[1]);
  samba_tensor_release(net.w);
  samba_tensor_release(net.b);
  printf("loss_outputs_test: ok\n");
  return 0;
}
