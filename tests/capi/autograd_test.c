/* Eager autograd driven from C: programs run op by op, backward fills the
 * leaves' gradients, which are checked against central finite differences
 * computed here in C. */
#include "capi_test_util.h"

enum { kRows = 3, kCols = 4 };

/* y = sum(tanh(x * w + b)), x [3, 4], w [4] and b [1] broadcast. */
static samba_tensor* tanh_program(samba_tensor* x, samba_tensor* w, samba_tensor* b) {
  samba_tensor* xw = NULL;
  samba_tensor* z = NULL;
  samba_tensor* t = NULL;
  samba_tensor* y = NULL;
  CHECK_OK(samba_mul(NULL, x, w, &xw));
  CHECK_OK(samba_add(NULL, xw, b, &z));
  CHECK_OK(samba_tanh(NULL, z, &t));
  CHECK_OK(samba_sum(NULL, t, NULL, 0, 0, &y));
  samba_tensor_release(xw);
  samba_tensor_release(z);
  samba_tensor_release(t);
  return y;
}

typedef samba_tensor* (*program_fn)(samba_tensor** leaves);

static double evaluate(program_fn f, samba_tensor** leaves) {
  double v = 0;
  samba_tensor* y = f(leaves);
  CHECK_OK(samba_tensor_item(y, &v));
  samba_tensor_release(y);
  return v;
}

/* Compares the .grad of leaves[which] (float64) with central differences of
 * f, perturbing the leaf's elements in place through its data pointer. */
static void check_gradient(program_fn f, samba_tensor** leaves, int which, double eps, double tol) {
  samba_tensor* g = NULL;
  void* raw = NULL;
  double* data;
  double* grad;
  int64_t n = 0, i;
  CHECK_OK(samba_tensor_grad(leaves[which], &g));
  CHECK(g != NULL);
  grad = values_of(g, &n);
  CHECK_OK(samba_tensor_data(leaves[which], &raw));
  data = (double*)raw;
  for (i = 0; i < n; ++i) {
    const double keep = data[i];
    double up, down;
    data[i] = keep + eps;
    up = evaluate(f, leaves);
    data[i] = keep - eps;
    down = evaluate(f, leaves);
    data[i] = keep;
    if (!(fabs((up - down) / (2 * eps) - grad[i]) <= tol)) {
      fprintf(stderr, "leaf %d element %lld: backward gave %.10g, finite differences %.10g\n",
              which, (long long)i, grad[i], (up - down) / (2 * eps));
      exit(1);
    }
  }
  free(grad);
}

static samba_tensor* tanh_leaves(samba_tensor** l) { return tanh_program(l[0], l[1], l[2]); }

static void test_tanh_program(void) {
  const int64_t sx[] = {kRows, kCols};
  const int64_t sw[] = {kCols};
  const int64_t sb[] = {1};
  double x[kRows * kCols], w[kCols], b[1] = {0.1};
  samba_tensor* leaves[3];
  samba_tensor* y;
  int i, j;
  for (i = 0; i < kRows * kCols; ++i) x[i] = 0.3 * sin(1.7 * i) + 0.05 * i;
  for (j = 0; j < kCols; ++j) w[j] = 0.5 - 0.3 * j;
  leaves[0] = make_f64(x, sx, 2);
  leaves[1] = make_f64(w, sw, 1);
  leaves[2] = make_f64(b, sb, 1);
  for (i = 0; i < 3; ++i) CHECK_OK(samba_tensor_set_requires_grad(leaves[i], 1));

  y = tanh_leaves(leaves);
  {
    int32_t rg = 0;
    CHECK_OK(samba_tensor_requires_grad(y, &rg));
    CHECK(rg == 1);
  }
  CHECK_OK(samba_tensor_backward(y, NULL, 1)); /* retain for a second pass */

  /* Analytic gradient of w, from the closed form, as an independent check. */
  {
    samba_tensor* g = NULL;
    double* got;
    int64_t n = 0;
    CHECK_OK(samba_tensor_grad(leaves[1], &g));
    got = values_of(g, &n);
    CHECK(n == kCols);
    for (j = 0; j < kCols; ++j) {
      double want = 0;
      for (i = 0; i < kRows; ++i) {
        const double t = tanh(x[i * kCols + j] * w[j] + b[0]);
        want += (1 - t * t) * x[i * kCols + j];
      }
      CHECK_NEAR(got[j], want, 1e-12);
    }
    free(got);
  }
  for (i = 0; i < 3; ++i) check_gradient(tanh_leaves, leaves, i, 1e-6, 1e-7);

  /* A second backward through the retained graph accumulates: grads double. */
  {
    samba_tensor* g = NULL;
    double* before;
    double* after;
    int64_t n = 0, k;
    CHECK_OK(samba_tensor_grad(leaves[2], &g));
    before = values_of(g, &n);
    CHECK_OK(samba_tensor_backward(y, NULL, 0));
    CHECK_OK(samba_tensor_grad(leaves[2], &g));
    after = values_of(g, &n);
    for (k = 0; k < n; ++k) CHECK_NEAR(after[k], 2 * before[k], 1e-12);
    free(before);
    free(after);
  }
  /* Without retain_graph the history is gone. */
  CHECK_FAILS(samba_tensor_backward(y, NULL, 0), SAMBA_ERR_INVALID_STATE, "retain_graph");
  samba_tensor_release(y);

  /* Clearing a grad and backward again gives one pass's worth; a tensor
   * without requires_grad gets no gradient. */
  {
    samba_tensor* g = NULL;
    CHECK_OK(samba_tensor_set_grad(leaves[0], NULL));
    CHECK_OK(samba_tensor_set_requires_grad(leaves[2], 0));
    CHECK_OK(samba_tensor_set_grad(leaves[2], NULL));
    y = tanh_leaves(leaves);
    CHECK_OK(samba_tensor_backward(y, NULL, 0));
    CHECK_OK(samba_tensor_grad(leaves[2], &g));
    CHECK(g == NULL);
    samba_tensor_release(y);
    CHECK_OK(samba_tensor_set_grad(leaves[1], NULL));
    check_gradient(tanh_leaves, leaves, 0, 1e-6, 1e-7);
  }
  for (i = 0; i < 3; ++i) samba_tensor_release(leaves[i]);
}

/* A two-layer classifier: cross_entropy(linear(relu(linear(x, w1, b1)), w2, b2), t). */
static samba_tensor* g_target;

static samba_tensor* mlp_leaves(samba_tensor** l) {
  samba_tensor* h = NULL;
  samba_tensor* a = NULL;
  samba_tensor* logits = NULL;
  samba_tensor* loss = NULL;
  CHECK_OK(samba_linear(NULL, l[0], l[1], l[2], &h));
  CHECK_OK(samba_relu(NULL, h, &a));
  CHECK_OK(samba_linear(NULL, a, l[3], l[4], &logits));
  CHECK_OK(samba_cross_entropy(NULL, logits, g_target, &loss));
  samba_tensor_release(h);
  samba_tensor_release(a);
  samba_tensor_release(logits);
  return loss;
}

static void test_mlp_program(void) {
  const int64_t sx[] = {4, 3}, sw1[] = {5, 3}, sb1[] = {5}, sw2[] = {2, 5}, sb2[] = {2}, st[] = {4};
  const int64_t target[] = {0, 1, 1, 0};
  double x[12], w1[15], b1[5], w2[10], b2[2];
  samba_tensor* leaves[5];
  samba_tensor* loss;
  int i;
  for (i = 0; i < 12; ++i) x[i] = cos(0.9 * i);
  for (i = 0; i < 15; ++i) w1[i] = 0.4 * sin(1.3 * i + 0.2);
  for (i = 0; i < 5; ++i) b1[i] = 0.1 * i - 0.15;
  for (i = 0; i < 10; ++i) w2[i] = 0.5 * cos(0.7 * i);
  b2[0] = 0.05;
  b2[1] = -0.05;
  leaves[0] = make_f64(x, sx, 2);
  leaves[1] = make_f64(w1, sw1, 2);
  leaves[2] = make_f64(b1, sb1, 1);
  leaves[3] = make_f64(w2, sw2, 2);
  leaves[4] = make_f64(b2, sb2, 1);
  g_target = make_i64(target, st, 1);
  for (i = 1; i < 5; ++i) CHECK_OK(samba_tensor_set_requires_grad(leaves[i], 1));
  loss = mlp_leaves(leaves);
  CHECK_OK(samba_tensor_backward(loss, NULL, 0));
  samba_tensor_release(loss);
  {
    samba_tensor* g = (samba_tensor*)g_target;
    CHECK_OK(samba_tensor_grad(leaves[0], &g)); /* x did not require grad */
    CHECK(g == NULL);
  }
  for (i = 1; i < 5; ++i) check_gradient(mlp_leaves, leaves, i, 1e-6, 1e-7);
  for (i = 0; i < 5; ++i) samba_tensor_release(leaves[i]);
  samba_tensor_release(g_target);
}

/* softmax, mean, sigmoid, sub, div, matmul, an index, clone, T and contiguous in one
 * program: gradients flow through every one of them. */
static samba_tensor* mixed_leaves(samba_tensor** l) {
  samba_tensor *m = NULL, *sm = NULL, *sg = NULL, *d = NULL, *q = NULL, *row = NULL, *f = NULL,
               *r = NULL;
  samba_index* idx = NULL;
  const int64_t pick[] = {1, 0, 1};
  CHECK_OK(samba_matmul(NULL, l[0], l[1], &m)); /* [2, 3] */
  CHECK_OK(samba_softmax(NULL, m, 1, &sm));
  CHECK_OK(samba_sigmoid(NULL, l[0], &sg)); /* [2, 2] */
  CHECK_OK(samba_index_create(&idx));
  CHECK_OK(samba_index_add_slice(idx, 0, 0, 1, SAMBA_SLICE_NO_START | SAMBA_SLICE_NO_STOP));
  CHECK_OK(samba_index_add_list(idx, pick, 3));
  CHECK_OK(samba_tensor_index(sg, idx, &row)); /* [2, 3] */
  CHECK_OK(samba_sub(NULL, sm, row, &d));
  CHECK_OK(samba_div(NULL, d, l[2], &q)); /* l[2] is [3] */
  CHECK_OK(samba_tensor_clone(q, &f));
  CHECK_OK(samba_tensor_t(f, &r)); /* [3, 2], strided */
  samba_tensor_release(f);
  CHECK_OK(samba_tensor_contiguous(r, &f));
  samba_tensor_release(r);
  r = f;
  CHECK_OK(samba_mul(NULL, r, r, &f));
  samba_tensor_release(r);
  CHECK_OK(samba_mean(NULL, f, NULL, 0, 0, &r));
  samba_index_release(idx);
  samba_tensor_release(m);
  samba_tensor_release(sm);
  samba_tensor_release(sg);
  samba_tensor_release(row);
  samba_tensor_release(d);
  samba_tensor_release(q);
  samba_tensor_release(f);
  return r;
}

static void test_mixed_program(void) {
  const int64_t sa[] = {2, 2}, sb[] = {2, 3}, sc[] = {3};
  const double a[] = {0.3, -0.2, 0.5, 0.1}, b[] = {1, -1, 0.5, 0.2, 0.3, -0.4},
               c[] = {1.5, -2, 0.8};
  samba_tensor* leaves[3];
  samba_tensor* y;
  int i;
  leaves[0] = make_f64(a, sa, 2);
  leaves[1] = make_f64(b, sb, 2);
  leaves[2] = make_f64(c, sc, 1);
  for (i = 0; i < 3; ++i) CHECK_OK(samba_tensor_set_requires_grad(leaves[i], 1));
  y = mixed_leaves(leaves);
  CHECK_OK(samba_tensor_backward(y, NULL, 0));
  samba_tensor_release(y);
  for (i = 0; i < 3; ++i) check_gradient(mixed_leaves, leaves, i, 1e-6, 1e-7);
  for (i = 0; i < 3; ++i) samba_tensor_release(leaves[i]);
}

/* backward with an explicit gradient for a non-scalar output. */
static void test_explicit_gradient(void) {
  const int64_t s[] = {3};
  const double x[] = {1, 2, 3}, gv[] = {0.5, -1, 2};
  samba_tensor* tx = make_f64(x, s, 1);
  samba_tensor* g = make_f64(gv, s, 1);
  samba_tensor* y = NULL;
  samba_tensor* grad = NULL;
  const double want[] = {2 * 1 * 0.5, 2 * 2 * -1.0, 2 * 3 * 2.0};
  CHECK_OK(samba_tensor_set_requires_grad(tx, 1));
  CHECK_OK(samba_mul(NULL, tx, tx, &y));
  CHECK_FAILS(samba_tensor_backward(y, NULL, 0), SAMBA_ERR_INVALID_ARGUMENT,
              "gradient is required");
  CHECK_OK(samba_tensor_backward(y, g, 0));
  CHECK_OK(samba_tensor_grad(tx, &grad));
  CHECK_TENSOR(grad, s, want, 1e-12);
  samba_tensor_release(y);
  samba_tensor_release(g);
  samba_tensor_release(tx);
}

int main(void) {
  test_tanh_program();
  test_mlp_program();
  test_mixed_program();
  test_explicit_gradient();
  printf("autograd_test: all checks passed\n");
  return 0;
}
