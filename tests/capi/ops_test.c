/* Ops through C: the generic samba_op_call, the typed shorthands (checked
 * against values computed by hand or by plain C loops), sessions, and the
 * schema introspection bindings are generated from. */
#include "capi_test_util.h"

static samba_tensor* scalar(double v) {
  samba_tensor* s = NULL;
  CHECK_OK(samba_scalar_float(v, &s));
  return s;
}

static void test_generic_call(void) {
  const int64_t s23[] = {2, 3};
  const int64_t s3[] = {3};
  const float a[] = {1, 2, 3, 4, 5, 6};
  const float b[] = {10, 20, 30};
  samba_tensor* ta = make_f32(a, s23, 2);
  samba_tensor* tb = make_f32(b, s3, 1);
  samba_tensor* in[2];
  samba_tensor* out[3] = {NULL, NULL, NULL};
  samba_attrs* attrs = NULL;
  size_t n = 99;
  const double want[] = {21, 42, 63, 24, 45, 66};
  in[0] = ta;
  in[1] = tb;
  CHECK_OK(samba_attrs_create(&attrs));
  CHECK_OK(samba_attrs_set_float(attrs, "alpha", 2.0));
  CHECK_OK(samba_op_call(NULL, "add", in, 2, attrs, out, 3, &n));
  CHECK(n == 1 && out[0] != NULL && out[1] == NULL);
  CHECK_TENSOR(out[0], s23, want, 0);
  samba_tensor_release(out[0]);
  /* An int for a float attribute is converted; replacing a value works. */
  CHECK_OK(samba_attrs_set_int(attrs, "alpha", -1));
  CHECK_OK(samba_op_call(NULL, "add", in, 2, attrs, out, 1, &n));
  {
    const double w[] = {-9, -18, -27, -6, -15, -24};
    CHECK_TENSOR(out[0], s23, w, 0);
  }
  samba_tensor_release(out[0]);
  samba_attrs_release(attrs);

  /* Variadic outputs: split into chunks of 1 along dim 0. */
  CHECK_OK(samba_attrs_create(&attrs));
  CHECK_OK(samba_attrs_set_int(attrs, "split_size", 1));
  CHECK_OK(samba_attrs_set_int(attrs, "dim", 0));
  CHECK_OK(samba_op_call(NULL, "split", in, 1, attrs, out, 3, &n));
  CHECK(n == 2);
  {
    const int64_t s13[] = {1, 3};
    const double r0[] = {1, 2, 3};
    const double r1[] = {4, 5, 6};
    CHECK_TENSOR(out[0], s13, r0, 0);
    CHECK_TENSOR(out[1], s13, r1, 0);
  }
  samba_tensor_release(out[0]);
  samba_tensor_release(out[1]);
  /* Too little room: OUT_OF_RANGE, and n says how many are needed. */
  n = 0;
  out[0] = ta;
  CHECK_FAILS(samba_op_call(NULL, "split", in, 1, attrs, out, 1, &n), SAMBA_ERR_OUT_OF_RANGE,
              "room for 1");
  CHECK(n == 2 && out[0] == NULL);
  samba_attrs_release(attrs);

  /* Other attribute kinds: ints, bool, dtype, string. */
  CHECK_OK(samba_attrs_create(&attrs));
  {
    const int64_t dims[] = {1};
    const int64_t s21[] = {2, 1};
    const double w[] = {6, 15};
    CHECK_OK(samba_attrs_set_ints(attrs, "dim", dims, 1));
    CHECK_OK(samba_attrs_set_bool(attrs, "keepdim", 1));
    CHECK_OK(samba_attrs_set_dtype(attrs, "dtype", SAMBA_FLOAT64));
    CHECK_OK(samba_op_call(NULL, "sum", in, 1, attrs, out, 1, &n));
    {
      samba_dtype dt = -1;
      CHECK_OK(samba_tensor_dtype(out[0], &dt));
      CHECK(dt == SAMBA_FLOAT64);
    }
    CHECK_TENSOR(out[0], s21, w, 0);
    samba_tensor_release(out[0]);
  }
  samba_attrs_release(attrs);
  CHECK_OK(samba_attrs_create(&attrs));
  {
    const double w[] = {0, 0, 1, 1, 1, 2};
    const double two = 2.0;
    CHECK_OK(samba_attrs_set_string(attrs, "rounding_mode", "floor"));
    in[1] = scalar(3.0);
    CHECK_OK(samba_op_call(NULL, "div", in, 2, attrs, out, 1, &n));
    CHECK_TENSOR(out[0], s23, w, 0);
    samba_tensor_release(out[0]);
    samba_tensor_release(in[1]);
    samba_attrs_release(attrs);
    /* floats attribute */
    CHECK_OK(samba_attrs_create(&attrs));
    CHECK_OK(samba_attrs_set_floats(attrs, "unused", &two, 1));
    samba_attrs_release(attrs);
  }
  samba_tensor_release(tb);
  samba_tensor_release(ta);
}

static void test_arithmetic(samba_session* s) {
  const int64_t s23[] = {2, 3};
  const int64_t s3[] = {3};
  const float a[] = {1, -2, 3, 4, 5, -6};
  const float b[] = {2, 4, -8};
  samba_tensor* ta = make_f32(a, s23, 2);
  samba_tensor* tb = make_f32(b, s3, 1);
  samba_tensor* r = NULL;
  double want[6];
  int i;
  CHECK_OK(samba_add(s, ta, tb, &r));
  for (i = 0; i < 6; ++i) want[i] = a[i] + b[i % 3];
  CHECK_TENSOR(r, s23, want, 0);
  samba_tensor_release(r);
  CHECK_OK(samba_sub(s, ta, tb, &r));
  for (i = 0; i < 6; ++i) want[i] = a[i] - b[i % 3];
  CHECK_TENSOR(r, s23, want, 0);
  samba_tensor_release(r);
  CHECK_OK(samba_mul(s, ta, tb, &r));
  for (i = 0; i < 6; ++i) want[i] = a[i] * b[i % 3];
  CHECK_TENSOR(r, s23, want, 0);
  samba_tensor_release(r);
  CHECK_OK(samba_div(s, ta, tb, &r));
  for (i = 0; i < 6; ++i) want[i] = (double)a[i] / b[i % 3];
  CHECK_TENSOR(r, s23, want, 1e-6);
  samba_tensor_release(r);
  /* Integer true division gives floats, as in PyTorch. */
  {
    const int64_t iv[] = {7, -7};
    const int64_t s2[] = {2};
    const double w[] = {3.5, -3.5};
    samba_tensor* ti = make_i64(iv, s2, 1);
    samba_tensor* two = NULL;
    samba_dtype dt = -1;
    CHECK_OK(samba_scalar_int(2, &two));
    CHECK_OK(samba_div(s, ti, two, &r));
    CHECK_OK(samba_tensor_dtype(r, &dt));
    CHECK(dt == SAMBA_FLOAT32);
    CHECK_TENSOR(r, s2, w, 0);
    samba_tensor_release(r);
    samba_tensor_release(two);
    samba_tensor_release(ti);
  }
  /* Unary activations. */
  CHECK_OK(samba_relu(s, ta, &r));
  for (i = 0; i < 6; ++i) want[i] = a[i] > 0 ? a[i] : 0;
  CHECK_TENSOR(r, s23, want, 0);
  samba_tensor_release(r);
  CHECK_OK(samba_sigmoid(s, ta, &r));
  for (i = 0; i < 6; ++i) want[i] = 1.0 / (1.0 + exp(-a[i]));
  CHECK_TENSOR(r, s23, want, 1e-6);
  samba_tensor_release(r);
  CHECK_OK(samba_tanh(s, ta, &r));
  for (i = 0; i < 6; ++i) want[i] = tanh(a[i]);
  CHECK_TENSOR(r, s23, want, 1e-6);
  samba_tensor_release(r);
  samba_tensor_release(tb);
  samba_tensor_release(ta);
}

static void test_contractions(samba_session* s) {
  const int64_t s23[] = {2, 3};
  const int64_t s43[] = {4, 3};
  const int64_t s4[] = {4};
  const int64_t s24[] = {2, 4};
  const float x[] = {1, 2, 3, 4, 5, 6};
  const float w[] = {1, 0, -1, 2, 1, 0, 0, 0, 1, -1, 2, 0.5f};
  const float b[] = {0.5f, -1, 2, 0};
  samba_tensor* tx = make_f32(x, s23, 2);
  samba_tensor* tw = make_f32(w, s43, 2);
  samba_tensor* tb = make_f32(b, s4, 1);
  samba_tensor* wt = NULL;
  samba_tensor* r = NULL;
  double want[8], want_bias[8];
  int i, j, k;
  for (i = 0; i < 2; ++i)
    for (j = 0; j < 4; ++j) {
      double acc = 0;
      for (k = 0; k < 3; ++k) acc += (double)x[i * 3 + k] * w[j * 3 + k];
      want[i * 4 + j] = acc;
      want_bias[i * 4 + j] = acc + b[j];
    }
  /* matmul(x, W^T) on a transposed (strided) view. */
  CHECK_OK(samba_tensor_t(tw, &wt));
  CHECK_OK(samba_matmul(s, tx, wt, &r));
  CHECK_TENSOR(r, s24, want, 1e-5);
  samba_tensor_release(r);
  CHECK_OK(samba_linear(s, tx, tw, NULL, &r));
  CHECK_TENSOR(r, s24, want, 1e-5);
  samba_tensor_release(r);
  CHECK_OK(samba_linear(s, tx, tw, tb, &r));
  CHECK_TENSOR(r, s24, want_bias, 1e-5);
  samba_tensor_release(r);
  samba_tensor_release(wt);
  samba_tensor_release(tb);
  samba_tensor_release(tw);
  samba_tensor_release(tx);
}

static void test_reductions_and_losses(samba_session* s) {
  const int64_t s23[] = {2, 3};
  const float x[] = {1, 2, 3, 4, 5, 7};
  samba_tensor* tx = make_f32(x, s23, 2);
  samba_tensor* r = NULL;
  {
    const int64_t s0[] = {0};
    const double w[] = {22};
    CHECK_OK(samba_sum(s, tx, NULL, 0, 0, &r));
    check_tensor_at(__FILE__, __LINE__, r, s0, 0, w, 1, 0);
    samba_tensor_release(r);
  }
  {
    const int64_t dims[] = {-1};
    const int64_t s21[] = {2, 1};
    const int64_t s2[] = {2};
    const double w[] = {6, 16};
    const double m[] = {2, 16.0 / 3};
    CHECK_OK(samba_sum(s, tx, dims, 1, 1, &r));
    CHECK_TENSOR(r, s21, w, 0);
    samba_tensor_release(r);
    CHECK_OK(samba_mean(s, tx, dims, 1, 0, &r));
    CHECK_TENSOR(r, s2, m, 1e-6);
    samba_tensor_release(r);
  }
  {
    const int64_t s0[] = {0};
    const double w[] = {22.0 / 6};
    CHECK_OK(samba_mean(s, tx, NULL, 0, 0, &r));
    check_tensor_at(__FILE__, __LINE__, r, s0, 0, w, 1, 1e-6);
    samba_tensor_release(r);
  }
  /* softmax along each dim against a plain C computation. */
  {
    double want[6];
    int i, j;
    for (i = 0; i < 2; ++i) {
      double z = 0;
      for (j = 0; j < 3; ++j) z += exp(x[i * 3 + j]);
      for (j = 0; j < 3; ++j) want[i * 3 + j] = exp(x[i * 3 + j]) / z;
    }
    CHECK_OK(samba_softmax(s, tx, -1, &r));
    CHECK_TENSOR(r, s23, want, 1e-6);
    samba_tensor_release(r);
    for (j = 0; j < 3; ++j) {
      double z = exp(x[j]) + exp(x[3 + j]);
      want[j] = exp(x[j]) / z;
      want[3 + j] = exp(x[3 + j]) / z;
    }
    CHECK_OK(samba_softmax(s, tx, 0, &r));
    CHECK_TENSOR(r, s23, want, 1e-6);
    samba_tensor_release(r);
  }
  /* cross entropy: mean over rows of logsumexp(row) - row[target]. */
  {
    const int64_t s2[] = {2};
    const int64_t s0[] = {0};
    const int64_t target[] = {2, 0};
    samba_tensor* tt = make_i64(target, s2, 1);
    double want = 0;
    int i;
    for (i = 0; i < 2; ++i) {
      double z = exp(x[i * 3]) + exp(x[i * 3 + 1]) + exp(x[i * 3 + 2]);
      want += log(z) - x[i * 3 + target[i]];
    }
    want /= 2;
    CHECK_OK(samba_cross_entropy(s, tx, tt, &r));
    check_tensor_at(__FILE__, __LINE__, r, s0, 0, &want, 1, 1e-6);
    samba_tensor_release(r);
    samba_tensor_release(tt);
  }
  samba_tensor_release(tx);
}

/* Big enough that the elementwise loops split across the session's threads. */
static void test_parallel_session(void) {
  enum { kN = 1 << 18 };
  const int64_t shape[] = {kN};
  samba_session_options* opts = NULL;
  samba_session* s = NULL;
  samba_tensor* a = NULL;
  samba_tensor* r = NULL;
  samba_tensor* total = NULL;
  float* v = (float*)malloc(kN * sizeof(float));
  double sum = 0, got = 0;
  int i;
  CHECK(v != NULL);
  for (i = 0; i < kN; ++i) v[i] = (float)(i % 7) - 3.0f;
  for (i = 0; i < kN; ++i) sum += 2.0 * v[i];
  CHECK_OK(samba_session_options_create(&opts));
  CHECK_OK(samba_session_options_set_num_threads(opts, 2));
  CHECK_OK(samba_session_create(opts, &s));
  samba_session_options_release(opts);
  a = make_f32(v, shape, 1);
  CHECK_OK(samba_add(s, a, a, &r));
  CHECK_OK(samba_sum(s, r, NULL, 0, 0, &total));
  CHECK_OK(samba_tensor_item(total, &got));
  CHECK_NEAR(got, sum, 1e-3);
  samba_tensor_release(total);
  samba_tensor_release(r);
  samba_tensor_release(a);
  samba_session_release(s);
  free(v);
}

static void test_schema_introspection(void) {
  size_t n = samba_op_count(), i;
  const char* prev = "";
  const char* name = NULL;
  const char* json = NULL;
  char key[160];
  CHECK(n > 20);
  for (i = 0; i < n; ++i) {
    CHECK_OK(samba_op_name(i, &name));
    CHECK(name != NULL && strcmp(prev, name) < 0); /* sorted, no duplicates */
    CHECK_OK(samba_op_schema_json(name, &json));
    snprintf(key, sizeof key, "\"name\":\"%s\"", name);
    CHECK(strstr(json, key) != NULL);
    CHECK(strstr(json, "\"inputs\":") && strstr(json, "\"outputs\":") &&
          strstr(json, "\"attrs\":"));
    prev = name;
  }
  CHECK_OK(samba_op_schema_json("add", &json));
  CHECK(strstr(json, "\"name\":\"alpha\"") && strstr(json, "\"type\":\"float\"") &&
        strstr(json, "\"fusion\":\"elementwise\"") && strstr(json, "\"signature\":\"add(a, b, *"));
  {
    const char* again = NULL;
    CHECK_OK(samba_op_schema_json("add", &again));
    CHECK(again == json); /* static for the life of the process */
  }
  CHECK_OK(samba_op_schema_json("linear", &json));
  CHECK(strstr(json, "\"optional\":true"));
}

int main(void) {
  samba_session* s = NULL;
  test_generic_call();
  test_arithmetic(NULL);
  test_contractions(NULL);
  test_reductions_and_losses(NULL);
  CHECK_OK(samba_session_create(NULL, &s));
  test_arithmetic(s);
  test_contractions(s);
  test_reductions_and_losses(s);
  samba_session_release(s);
  test_parallel_session();
  test_schema_introspection();
  printf("ops_test: all checks passed\n");
  return 0;
}
