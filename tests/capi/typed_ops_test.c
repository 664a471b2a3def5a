/* The typed op functions generated from the registry (samba/ops_generated.h):
 * each gives what samba_op_call of its op gives with the same attributes,
 * follows samba_op_call's error rules, and every registry op has one. */
#include "capi_test_util.h"

/* Both tensors have the same shape and bit-for-bit the same values. */
static void check_same(samba_tensor* got, samba_tensor* want) {
  const int64_t *gd = NULL, *wd = NULL;
  size_t gr = 0, wr = 0;
  int64_t gn = 0, wn = 0, i;
  double *g, *w;
  CHECK(got != NULL && want != NULL);
  CHECK_OK(samba_tensor_shape(got, &gd, &gr));
  CHECK_OK(samba_tensor_shape(want, &wd, &wr));
  CHECK(gr == wr && (gr == 0 || memcmp(gd, wd, gr * sizeof(int64_t)) == 0));
  g = values_of(got, &gn);
  w = values_of(want, &wn);
  CHECK(gn == wn);
  for (i = 0; i < gn; ++i) CHECK_NEAR(g[i], w[i], 0.0);
  free(g);
  free(w);
}

/* samba_op_call of `name` with one output. */
static samba_tensor* op1(const char* name, samba_tensor** in, size_t n, samba_attrs* attrs) {
  samba_tensor* out = NULL;
  size_t n_out = 0;
  CHECK_OK(samba_op_call(NULL, name, in, n, attrs, &out, 1, &n_out));
  CHECK(n_out == 1);
  return out;
}

/* Checks `typed`, a typed function's result, against samba_op_call of `name`
 * on `in` with `attrs`; releases typed and attrs. */
static void check_against_op_call(samba_tensor* typed, const char* name, samba_tensor** in,
                                  size_t n, samba_attrs* attrs) {
  samba_tensor* want = op1(name, in, n, attrs);
  check_same(typed, want);
  samba_tensor_release(want);
  samba_tensor_release(typed);
  samba_attrs_release(attrs);
}

static samba_tensor* ramp(const int64_t* shape, size_t ndim, double scale) {
  samba_tensor* t = NULL;
  float* data = NULL;
  int64_t n = 0, i;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, ndim, &t));
  CHECK_OK(samba_tensor_numel(t, &n));
  CHECK_OK(samba_tensor_data(t, (void**)&data));
  for (i = 0; i < n; ++i) data[i] = (float)(scale * (double)((i * 7) % 11 - 5));
  return t;
}

static void test_conv2d(samba_session* s) {
  const int64_t xs[] = {2, 2, 6, 5}, ws[] = {3, 2, 3, 3}, bs[] = {3};
  const int64_t stride[] = {2, 1}, padding[] = {1, 2}, ones[] = {1, 1};
  samba_tensor *x = ramp(xs, 4, 0.5), *w = ramp(ws, 4, 0.25), *b = ramp(bs, 1, 1.0);
  samba_tensor *typed = NULL, *defaults = NULL, *explicit_ones = NULL, *in[3];
  samba_attrs* a = NULL;
  in[0] = x;
  in[1] = w;
  in[2] = b;
  CHECK_OK(samba_conv2d(s, x, w, b, stride, 2, padding, 2, NULL, 0, 1, &typed));
  CHECK_OK(samba_attrs_create(&a));
  CHECK_OK(samba_attrs_set_ints(a, "stride", stride, 2));
  CHECK_OK(samba_attrs_set_ints(a, "padding", padding, 2));
  check_against_op_call(typed, "conv2d", in, 3, a);
  /* NULL lists take the schema's defaults; a NULL bias is no bias. */
  CHECK_OK(samba_conv2d(s, x, w, NULL, NULL, 0, NULL, 0, NULL, 0, 1, &defaults));
  CHECK_OK(samba_conv2d(s, x, w, NULL, ones, 2, (const int64_t[]){0, 0}, 2, ones, 2, 1,
                        &explicit_ones));
  check_same(defaults, explicit_ones);
  samba_tensor_release(defaults);
  samba_tensor_release(explicit_ones);
  samba_tensor_release(x);
  samba_tensor_release(w);
  samba_tensor_release(b);
}

static void test_linear_and_elementwise(samba_session* s) {
  const int64_t xs[] = {4, 3}, ws[] = {5, 3}, bs[] = {5};
  samba_tensor *x = ramp(xs, 2, 0.3), *w = ramp(ws, 2, 0.2), *b = ramp(bs, 1, 0.1);
  samba_tensor *typed = NULL, *row = NULL, *in[3];
  samba_attrs* a = NULL;
  in[0] = x;
  in[1] = w;
  in[2] = b;
  /* linear has a hand-written samba_linear; every attribute is in _v2. */
  CHECK_OK(samba_linear_v2(s, x, w, b, "relu", &typed));
  CHECK_OK(samba_attrs_create(&a));
  CHECK_OK(samba_attrs_set_string(a, "activation", "relu"));
  check_against_op_call(typed, "linear", in, 3, a);

  /* An elementwise op with a float attribute. */
  CHECK_OK(samba_leaky_relu(s, x, 0.25, &typed));
  CHECK_OK(samba_attrs_create(&a));
  CHECK_OK(samba_attrs_set_float(a, "negative_slope", 0.25));
  check_against_op_call(typed, "leaky_relu", in, 1, a);

  /* A binary one with broadcasting and alpha: [4, 3] - 2 * [5, 3][0]. */
  CHECK_OK(samba_select(s, w, 0, 0, &row));
  CHECK_OK(samba_sub_v2(s, x, row, 2.0, &typed));
  CHECK_OK(samba_attrs_create(&a));
  CHECK_OK(samba_attrs_set_float(a, "alpha", 2.0));
  in[1] = row;
  check_against_op_call(typed, "sub", in, 2, a);
  samba_tensor_release(row);
  samba_tensor_release(x);
  samba_tensor_release(w);
  samba_tensor_release(b);
}

static void test_reduction(samba_session* s) {
  const int64_t xs[] = {3, 4, 2}, dims[] = {0, 2};
  const samba_dtype f64 = SAMBA_FLOAT64;
  samba_tensor *x = ramp(xs, 3, 0.5), *typed = NULL;
  samba_attrs* a = NULL;
  samba_dtype dt = SAMBA_FLOAT32;
  CHECK_OK(samba_sum_v2(s, x, dims, 2, 1, &f64, &typed));
  CHECK_OK(samba_tensor_dtype(typed, &dt));
  CHECK(dt == SAMBA_FLOAT64);
  CHECK_OK(samba_attrs_create(&a));
  CHECK_OK(samba_attrs_set_ints(a, "dim", dims, 2));
  CHECK_OK(samba_attrs_set_bool(a, "keepdim", 1));
  CHECK_OK(samba_attrs_set_dtype(a, "dtype", SAMBA_FLOAT64));
  check_against_op_call(typed, "sum", &x, 1, a);
  /* An optional list left NULL is not given: every dim is reduced. */
  CHECK_OK(samba_var(s, x, NULL, 0, 0, 0, &typed));
  CHECK_OK(samba_attrs_create(&a));
  CHECK_OK(samba_attrs_set_int(a, "correction", 0));
  check_against_op_call(typed, "var", &x, 1, a);
  samba_tensor_release(x);
}

static void test_several_outputs(samba_session* s) {
  const int64_t xs[] = {4, 6}, ws[] = {6}, norm[] = {6}, sections[] = {1, 3};
  samba_tensor *x = ramp(xs, 2, 0.3), *g = ramp(xs, 2, 0.1), *w = ramp(ws, 1, 0.2);
  samba_tensor *dx = NULL, *dw = NULL, *db = NULL, *want[3] = {NULL, NULL, NULL}, *in[3];
  samba_tensor *pieces[3] = {NULL, NULL, NULL}, *want_pieces[3] = {NULL, NULL, NULL};
  samba_attrs* a = NULL;
  size_t n = 0, i;
  in[0] = g;
  in[1] = x;
  in[2] = w;
  CHECK_OK(samba_layer_norm_backward(s, g, x, w, norm, 1, 1e-5, &dx, &dw, &db));
  CHECK_OK(samba_attrs_create(&a));
  CHECK_OK(samba_attrs_set_ints(a, "normalized_shape", norm, 1));
  CHECK_OK(samba_op_call(NULL, "layer_norm_backward", in, 3, a, want, 3, &n));
  CHECK(n == 3);
  check_same(dx, want[0]);
  check_same(dw, want[1]);
  check_same(db, want[2]);
  samba_attrs_release(a);

  /* An op whose output count inference decides: split into 1 + 3 rows. */
  CHECK_FAILS(samba_split(s, x, NULL, sections, 2, 0, pieces, 1, &n), SAMBA_ERR_OUT_OF_RANGE,
              "room for 1");
  CHECK(n == 2 && pieces[0] == NULL);
  CHECK_OK(samba_split(s, x, NULL, sections, 2, 0, pieces, 3, &n));
  CHECK(n == 2);
  CHECK_OK(samba_attrs_create(&a));
  CHECK_OK(samba_attrs_set_ints(a, "sections", sections, 2));
  CHECK_OK(samba_op_call(NULL, "split", &x, 1, a, want_pieces, 3, &n));
  CHECK(n == 2);
  for (i = 0; i < 2; ++i) check_same(pieces[i], want_pieces[i]);
  samba_attrs_release(a);
  for (i = 0; i < 3; ++i) {
    samba_tensor_release(want[i]);
    samba_tensor_release(pieces[i]);
    samba_tensor_release(want_pieces[i]);
  }
  samba_tensor_release(dx);
  samba_tensor_release(dw);
  samba_tensor_release(db);

  /* An in-place op has no out-parameter. */
  CHECK_OK(samba_zero_(s, x));
  {
    int64_t numel = 0, k;
    double* v = values_of(x, &numel);
    for (k = 0; k < numel; ++k) CHECK(v[k] == 0.0);
    free(v);
  }
  samba_tensor_release(x);
  samba_tensor_release(g);
  samba_tensor_release(w);
}

static void test_errors(samba_session* s) {
  const int64_t xs[] = {2, 3};
  samba_tensor *x = ramp(xs, 2, 1.0), *out = x;
  CHECK_FAILS(samba_leaky_relu(s, NULL, 0.1, &out), SAMBA_ERR_NULL_POINTER, "'x'");
  CHECK(out == NULL);
  CHECK_FAILS(samba_leaky_relu(s, x, 0.1, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  out = x;
  CHECK_FAILS(samba_sum_v2(s, x, NULL, 2, 0, NULL, &out), SAMBA_ERR_NULL_POINTER, "'dim'");
  CHECK(out == NULL);
  CHECK_FAILS(samba_sum_v2(s, x, (const int64_t[]){5}, 1, 0, NULL, &out), SAMBA_ERR_OUT_OF_RANGE,
              "dim");
  CHECK_FAILS(samba_cast(s, x, (samba_dtype)99, &out), SAMBA_ERR_INVALID_ARGUMENT, "dtype");
  CHECK_FAILS(samba_mse_loss(s, x, x, "bogus", &out), SAMBA_ERR_INVALID_ARGUMENT, "bogus");
  CHECK(out == NULL);
  samba_tensor_release(x);
}

/* Every registry op has a typed function: samba_<op> (generated, or the
 * hand-written one of ops.h) or samba_<op>_v2. */
static char* read_text(const char* path) {
  FILE* f = fopen(path, "rb");
  long n;
  char* text;
  CHECK(f != NULL);
  CHECK(fseek(f, 0, SEEK_END) == 0);
  n = ftell(f);
  CHECK(n > 0 && fseek(f, 0, SEEK_SET) == 0);
  text = (char*)malloc((size_t)n + 1);
  CHECK(text != NULL && fread(text, 1, (size_t)n, f) == (size_t)n);
  text[n] = '\0';
  fclose(f);
  return text;
}

static int declares(const char* text, const char* fn) {
  char needle[160];
  snprintf(needle, sizeof needle, " %s(", fn);
  return strstr(text, needle) != NULL;
}

static void test_every_op_has_a_function(void) {
  char* generated = read_text(SAMBA_TYPED_OPS_HEADER);
  char* hand_written = read_text(SAMBA_OPS_HEADER);
  size_t i, n = samba_op_count();
  CHECK(n > 100);
  for (i = 0; i < n; ++i) {
    const char* name = NULL;
    char fn[128], fn_v2[140];
    CHECK_OK(samba_op_name(i, &name));
    snprintf(fn, sizeof fn, "samba_%s", name);
    snprintf(fn_v2, sizeof fn_v2, "samba_%s_v2", name);
    if (!declares(generated, fn) && !declares(generated, fn_v2) && !declares(hand_written, fn)) {
      fprintf(stderr, "op '%s' has no typed function (%s)\n", name, fn);
      exit(1);
    }
  }
  free(generated);
  free(hand_written);
}

int main(void) {
  samba_session* s = NULL;
  CHECK_OK(samba_session_create(NULL, &s));
  test_conv2d(s);
  test_conv2d(NULL);
  test_linear_and_elementwise(s);
  test_reduction(s);
  test_several_outputs(s);
  test_errors(s);
  test_every_op_has_a_function();
  samba_session_release(s);
  printf("typed ops: ok\n");
  return 0;
}
