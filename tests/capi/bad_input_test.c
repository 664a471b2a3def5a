/* Bad input for the core of the C ABI (errors, dtypes, sessions, tensors,
 * attributes, op calls, schemas): every failure returns its status, a
 * message naming the problem, and NULL out-parameters. Conversions, views,
 * indexing and the typed ops are in bad_input_views_test.c; DLPack in
 * dlpack_test.c. */
#include "capi_test_util.h"

/* A non-NULL value to preset out-parameters with, so the tests see them
 * cleared. */
static int g_marker;
#define NOT_NULL ((void*)&g_marker)

static void test_errors_and_dtypes(void) {
  samba_dtype d = 3;
  CHECK(strcmp(samba_status_name(-1), "unknown status") == 0);
  CHECK(strcmp(samba_status_name(16), "unknown status") == 0);
  CHECK(samba_dtype_name(-1) == NULL && samba_dtype_name(10) == NULL);
  CHECK(samba_dtype_size(-1) == 0 && samba_dtype_size(10) == 0);
  CHECK_FAILS(samba_dtype_from_name(NULL, &d), SAMBA_ERR_NULL_POINTER, "'name'");
  CHECK_FAILS(samba_dtype_from_name("float", NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_dtype_from_name("float33", &d), SAMBA_ERR_INVALID_ARGUMENT,
              "unknown dtype name 'float33'");
  CHECK(d == 3); /* plain values are left unchanged */
  CHECK_FAILS(samba_promote_types(10, SAMBA_FLOAT32, &d), SAMBA_ERR_INVALID_ARGUMENT,
              "not a dtype code");
  CHECK_FAILS(samba_promote_types(SAMBA_FLOAT32, -3, &d), SAMBA_ERR_INVALID_ARGUMENT, "b -3");
  CHECK_FAILS(samba_promote_types(SAMBA_FLOAT32, SAMBA_INT8, NULL), SAMBA_ERR_NULL_POINTER,
              "'out'");
  CHECK(samba_last_error_code() == SAMBA_ERR_NULL_POINTER);
  /* The message names the function that failed. */
  CHECK(strstr(samba_last_error_message(), "samba_promote_types") != NULL);
}

static void test_sessions(void) {
  samba_session_options* opts = (samba_session_options*)NOT_NULL;
  samba_session* s = (samba_session*)NOT_NULL;
  int32_t n = 0;
  CHECK_FAILS(samba_session_options_create(NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_session_options_set_num_threads(NULL, 2), SAMBA_ERR_NULL_POINTER, "'opts'");
  CHECK_FAILS(samba_session_options_set_seed(NULL, 2), SAMBA_ERR_NULL_POINTER, "'opts'");
  CHECK_OK(samba_session_options_create(&opts));
  CHECK_FAILS(samba_session_options_set_num_threads(opts, 5000), SAMBA_ERR_INVALID_ARGUMENT,
              "too many");
  CHECK_FAILS(samba_session_create(opts, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  samba_session_options_release(opts);
  CHECK_FAILS(samba_session_num_threads(NULL, &n), SAMBA_ERR_NULL_POINTER, "'session'");
  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_FAILS(samba_session_num_threads(s, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_session_set_seed(NULL, 1), SAMBA_ERR_NULL_POINTER, "'session'");
  samba_session_release(s);
}

static void test_tensor_creation(void) {
  const int64_t ok[] = {2, 3};
  const int64_t negative[] = {2, -3};
  const int64_t huge[] = {(int64_t)1 << 40, (int64_t)1 << 40};
  const int64_t big_bytes[] = {(int64_t)1 << 31, (int64_t)1 << 31};
  const int64_t rank17[17] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  samba_tensor* t = (samba_tensor*)NOT_NULL;
  float buf[6];

  CHECK_FAILS(samba_tensor_create(SAMBA_FLOAT32, ok, 2, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_create(42, ok, 2, &t), SAMBA_ERR_INVALID_ARGUMENT,
              "dtype 42 is not a dtype code");
  CHECK(t == NULL);
  t = (samba_tensor*)NOT_NULL;
  CHECK_FAILS(samba_tensor_create(-1, ok, 2, &t), SAMBA_ERR_INVALID_ARGUMENT, "not a dtype code");
  CHECK(t == NULL);
  CHECK_FAILS(samba_tensor_create(SAMBA_FLOAT32, negative, 2, &t), SAMBA_ERR_INVALID_ARGUMENT,
              "negative dimension");
  CHECK_FAILS(samba_tensor_create(SAMBA_FLOAT32, huge, 2, &t), SAMBA_ERR_OUT_OF_RANGE, "64 bits");
  CHECK(t == NULL);
  CHECK_FAILS(samba_tensor_create(SAMBA_FLOAT32, big_bytes, 2, &t), SAMBA_ERR_OUT_OF_RANGE,
              "overflows");
  CHECK_FAILS(samba_tensor_create(SAMBA_FLOAT32, rank17, 17, &t), SAMBA_ERR_INVALID_ARGUMENT,
              "rank 17");
  CHECK_FAILS(samba_tensor_create(SAMBA_FLOAT32, NULL, 2, &t), SAMBA_ERR_NULL_POINTER, "'shape'");
  CHECK(t == NULL);

  /* wrap */
  t = (samba_tensor*)NOT_NULL;
  CHECK_FAILS(samba_tensor_wrap(NULL, SAMBA_FLOAT32, ok, 2, NULL, &t), SAMBA_ERR_NULL_POINTER,
              "'data'");
  CHECK(t == NULL);
  CHECK_FAILS(samba_tensor_wrap(buf, SAMBA_FLOAT32, ok, 2, NULL, NULL), SAMBA_ERR_NULL_POINTER,
              "'out'");
  CHECK_FAILS(samba_tensor_wrap(buf, 11, ok, 2, NULL, &t), SAMBA_ERR_INVALID_ARGUMENT,
              "dtype code");
  CHECK_FAILS(samba_tensor_wrap(buf, SAMBA_FLOAT32, huge, 2, NULL, &t), SAMBA_ERR_OUT_OF_RANGE,
              "64 bits");
  CHECK_FAILS(samba_tensor_wrap(buf, SAMBA_FLOAT32, negative, 2, NULL, &t),
              SAMBA_ERR_INVALID_ARGUMENT, "negative");
  {
    const int64_t neg_strides[] = {3, -1};
    const int64_t far_strides[] = {(int64_t)1 << 62, 1};
    CHECK_FAILS(samba_tensor_wrap(buf, SAMBA_FLOAT32, ok, 2, neg_strides, &t),
                SAMBA_ERR_INVALID_ARGUMENT, "stride -1 of dim 1 is negative");
    CHECK_FAILS(samba_tensor_wrap(buf, SAMBA_FLOAT32, ok, 2, far_strides, &t),
                SAMBA_ERR_OUT_OF_RANGE, "strides");
  }
  CHECK(t == NULL);
  /* A zero-size tensor may wrap NULL. */
  {
    const int64_t empty[] = {0, 3};
    CHECK_OK(samba_tensor_wrap(NULL, SAMBA_FLOAT32, empty, 2, NULL, &t));
    samba_tensor_release(t);
  }
  /* adopt: see tensor_test.c for the deleter; the argument checks here. */
  t = (samba_tensor*)NOT_NULL;
  CHECK_FAILS(samba_tensor_adopt(NULL, SAMBA_FLOAT32, ok, 2, NULL, NULL, NULL, &t),
              SAMBA_ERR_NULL_POINTER, "'data'");
  CHECK(t == NULL);
  CHECK_FAILS(samba_tensor_adopt(buf, SAMBA_FLOAT32, huge, 2, NULL, NULL, NULL, &t),
              SAMBA_ERR_OUT_OF_RANGE, "64 bits");
  CHECK_FAILS(samba_tensor_adopt(buf, SAMBA_FLOAT32, ok, 2, NULL, NULL, NULL, NULL),
              SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_scalar_float(1.0, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_scalar_int(1, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_retain(NULL), SAMBA_ERR_NULL_POINTER, "'t'");
}

static void test_tensor_getters(void) {
  const int64_t shape[] = {2, 3};
  samba_tensor* t = NULL;
  const int64_t* dims = (const int64_t*)NOT_NULL;
  size_t n = 0;
  int64_t i64 = 0;
  int32_t i32 = 0;
  samba_dtype dt = 0;
  double v = 0;
  void* data = NOT_NULL;
  const char* s = (const char*)NOT_NULL;
  float buf[6];
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, 2, &t));

  CHECK_FAILS(samba_tensor_ndim(NULL, &n), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_ndim(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_shape(NULL, &dims, &n), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(dims == NULL);
  CHECK_FAILS(samba_tensor_shape(t, NULL, &n), SAMBA_ERR_NULL_POINTER, "'dims'");
  CHECK_FAILS(samba_tensor_shape(t, &dims, NULL), SAMBA_ERR_NULL_POINTER, "'ndim'");
  dims = (const int64_t*)NOT_NULL;
  CHECK_FAILS(samba_tensor_strides(NULL, &dims, &n), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(dims == NULL);
  CHECK_FAILS(samba_tensor_strides(t, NULL, &n), SAMBA_ERR_NULL_POINTER, "'strides'");
  CHECK_FAILS(samba_tensor_strides(t, &dims, NULL), SAMBA_ERR_NULL_POINTER, "'ndim'");
  CHECK_FAILS(samba_tensor_dtype(NULL, &dt), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_dtype(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_numel(NULL, &i64), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_numel(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_element_size(NULL, &n), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_element_size(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_is_contiguous(NULL, &i32), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_is_contiguous(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_data(NULL, &data), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(data == NULL);
  CHECK_FAILS(samba_tensor_data(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");

  /* copies */
  CHECK_FAILS(samba_tensor_copy_from(NULL, buf, sizeof buf), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_copy_from(t, NULL, sizeof buf), SAMBA_ERR_NULL_POINTER, "'src'");
  CHECK_FAILS(samba_tensor_copy_from(t, buf, sizeof buf - 1), SAMBA_ERR_INVALID_ARGUMENT,
              "holds 24 bytes");
  CHECK_FAILS(samba_tensor_copy_to(NULL, buf, sizeof buf), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_copy_to(t, NULL, sizeof buf), SAMBA_ERR_NULL_POINTER, "'dst'");
  CHECK_FAILS(samba_tensor_copy_to(t, buf, 4), SAMBA_ERR_INVALID_ARGUMENT, "nbytes = 4");

  /* item needs exactly one element */
  CHECK_FAILS(samba_tensor_item(t, &v), SAMBA_ERR_INVALID_ARGUMENT, "expected exactly one");
  CHECK_FAILS(samba_tensor_item_int(t, &i64), SAMBA_ERR_INVALID_ARGUMENT, "6 elements");
  CHECK_FAILS(samba_tensor_item(NULL, &v), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_item(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_item_int(NULL, &i64), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_item_int(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");

  /* names */
  CHECK_FAILS(samba_tensor_name(NULL, &s), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(s == NULL);
  CHECK_FAILS(samba_tensor_name(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_set_name(NULL, "x"), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_set_name(t, NULL), SAMBA_ERR_NULL_POINTER, "'name'");
  s = (const char*)NOT_NULL;
  CHECK_FAILS(samba_tensor_region_name(NULL, &s), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(s == NULL);
  CHECK_FAILS(samba_tensor_region_name(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_set_region_name(NULL, "r"), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_set_region_name(t, NULL), SAMBA_ERR_NULL_POINTER, "'name'");
  samba_tensor_release(t);
}

static void test_autograd_misuse(void) {
  const int64_t shape[] = {2};
  const int64_t other[] = {3};
  const float v[] = {1, 2};
  samba_tensor* t = make_f32(v, shape, 1);
  samba_tensor* ti = NULL;
  samba_tensor* g = (samba_tensor*)NOT_NULL;
  samba_tensor* wrong = NULL;
  samba_tensor* y = NULL;
  int32_t rg = 0;
  CHECK_FAILS(samba_tensor_requires_grad(NULL, &rg), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_requires_grad(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_set_requires_grad(NULL, 1), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_OK(samba_tensor_create(SAMBA_INT32, shape, 1, &ti));
  CHECK_FAILS(samba_tensor_set_requires_grad(ti, 1), SAMBA_ERR_DTYPE_MISMATCH, "int32");
  CHECK_FAILS(samba_tensor_grad(NULL, &g), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(g == NULL);
  CHECK_FAILS(samba_tensor_grad(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_set_grad(NULL, NULL), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, other, 1, &wrong));
  CHECK_FAILS(samba_tensor_set_grad(t, wrong), SAMBA_ERR_SHAPE_MISMATCH, "[3]");
  samba_tensor_release(wrong);
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT64, shape, 1, &wrong));
  CHECK_FAILS(samba_tensor_set_grad(t, wrong), SAMBA_ERR_DTYPE_MISMATCH, "float64");
  CHECK_FAILS(samba_tensor_set_grad(t, t), SAMBA_ERR_INVALID_ARGUMENT, "its own grad");
  /* backward */
  CHECK_FAILS(samba_tensor_backward(NULL, NULL, 0), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_backward(t, NULL, 0), SAMBA_ERR_INVALID_STATE, "does not require grad");
  CHECK_OK(samba_tensor_set_requires_grad(t, 1));
  CHECK_OK(samba_mul(NULL, t, t, &y));
  CHECK_FAILS(samba_tensor_backward(y, NULL, 0), SAMBA_ERR_INVALID_ARGUMENT,
              "gradient is required");
  {
    samba_tensor* g3 = NULL;
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, other, 1, &g3));
    CHECK_FAILS(samba_tensor_backward(y, g3, 0), SAMBA_ERR_SHAPE_MISMATCH, "does not match");
    samba_tensor_release(g3);
  }
  /* requires_grad can only be cleared on a leaf. */
  CHECK_FAILS(samba_tensor_set_requires_grad(y, 0), SAMBA_ERR_INVALID_STATE, "'mul'");
  samba_tensor_release(y);
  samba_tensor_release(wrong);
  samba_tensor_release(ti);
  samba_tensor_release(t);
}

static void test_attrs(void) {
  samba_attrs* a = (samba_attrs*)NOT_NULL;
  const int64_t iv[] = {1};
  const double fv[] = {1};
  CHECK_FAILS(samba_attrs_create(NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_attrs_set_int(NULL, "x", 1), SAMBA_ERR_NULL_POINTER, "'attrs'");
  CHECK_FAILS(samba_attrs_set_float(NULL, "x", 1), SAMBA_ERR_NULL_POINTER, "'attrs'");
  CHECK_FAILS(samba_attrs_set_bool(NULL, "x", 1), SAMBA_ERR_NULL_POINTER, "'attrs'");
  CHECK_FAILS(samba_attrs_set_string(NULL, "x", "y"), SAMBA_ERR_NULL_POINTER, "'attrs'");
  CHECK_FAILS(samba_attrs_set_ints(NULL, "x", iv, 1), SAMBA_ERR_NULL_POINTER, "'attrs'");
  CHECK_FAILS(samba_attrs_set_floats(NULL, "x", fv, 1), SAMBA_ERR_NULL_POINTER, "'attrs'");
  CHECK_FAILS(samba_attrs_set_dtype(NULL, "x", SAMBA_FLOAT32), SAMBA_ERR_NULL_POINTER, "'attrs'");
  CHECK_OK(samba_attrs_create(&a));
  CHECK_FAILS(samba_attrs_set_int(a, NULL, 1), SAMBA_ERR_NULL_POINTER, "'name'");
  CHECK_FAILS(samba_attrs_set_float(a, NULL, 1), SAMBA_ERR_NULL_POINTER, "'name'");
  CHECK_FAILS(samba_attrs_set_bool(a, NULL, 1), SAMBA_ERR_NULL_POINTER, "'name'");
  CHECK_FAILS(samba_attrs_set_string(a, NULL, "y"), SAMBA_ERR_NULL_POINTER, "'name'");
  CHECK_FAILS(samba_attrs_set_string(a, "x", NULL), SAMBA_ERR_NULL_POINTER, "'value'");
  CHECK_FAILS(samba_attrs_set_ints(a, NULL, iv, 1), SAMBA_ERR_NULL_POINTER, "'name'");
  CHECK_FAILS(samba_attrs_set_ints(a, "x", NULL, 2), SAMBA_ERR_NULL_POINTER, "'values'");
  CHECK_FAILS(samba_attrs_set_floats(a, NULL, fv, 1), SAMBA_ERR_NULL_POINTER, "'name'");
  CHECK_FAILS(samba_attrs_set_floats(a, "x", NULL, 2), SAMBA_ERR_NULL_POINTER, "'values'");
  CHECK_FAILS(samba_attrs_set_dtype(a, NULL, SAMBA_FLOAT32), SAMBA_ERR_NULL_POINTER, "'name'");
  CHECK_FAILS(samba_attrs_set_dtype(a, "dtype", 12), SAMBA_ERR_INVALID_ARGUMENT,
              "12 is not a dtype code");
  CHECK_OK(samba_attrs_set_ints(a, "empty", NULL, 0)); /* an empty list needs no array */
  samba_attrs_release(a);
}

static void test_op_calls(void) {
  const int64_t s23[] = {2, 3};
  const int64_t s4[] = {4};
  samba_tensor* a = NULL;
  samba_tensor* b4 = NULL;
  samba_tensor* in[3];
  samba_tensor* out[2];
  samba_attrs* attrs = NULL;
  size_t n = 7;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s23, 2, &a));
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s4, 1, &b4));
  in[0] = in[1] = in[2] = a;

  out[0] = out[1] = (samba_tensor*)NOT_NULL;
  CHECK_FAILS(samba_op_call(NULL, NULL, in, 1, NULL, out, 2, &n), SAMBA_ERR_NULL_POINTER, "'name'");
  CHECK(out[0] == NULL && out[1] == NULL && n == 0);
  CHECK_FAILS(samba_op_call(NULL, "relu", in, 1, NULL, out, 2, NULL), SAMBA_ERR_NULL_POINTER,
              "'n_outputs'");
  CHECK_FAILS(samba_op_call(NULL, "relu", NULL, 1, NULL, out, 2, &n), SAMBA_ERR_NULL_POINTER,
              "'inputs'");
  CHECK_FAILS(samba_op_call(NULL, "relu", in, 1, NULL, NULL, 2, &n), SAMBA_ERR_NULL_POINTER,
              "'outputs'");
  /* unknown op names, with a suggestion when one is close */
  n = 7;
  CHECK_FAILS(samba_op_call(NULL, "reluu", in, 1, NULL, out, 2, &n), SAMBA_ERR_NOT_FOUND,
              "unknown op 'reluu'");
  CHECK(strstr(samba_last_error_message(), "did you mean 'relu'") != NULL);
  CHECK(n == 0 && out[0] == NULL);
  CHECK_FAILS(samba_op_call(NULL, "no_such_op_at_all", in, 1, NULL, out, 2, &n),
              SAMBA_ERR_NOT_FOUND, "no_such_op_at_all");
  /* unknown attribute names, listing the real ones */
  CHECK_OK(samba_attrs_create(&attrs));
  CHECK_OK(samba_attrs_set_float(attrs, "alpah", 2.0));
  CHECK_FAILS(samba_op_call(NULL, "add", in, 2, attrs, out, 2, &n), SAMBA_ERR_NOT_FOUND,
              "no attribute 'alpah'");
  CHECK(strstr(samba_last_error_message(), "alpha") != NULL);
  samba_attrs_release(attrs);
  /* wrong attribute type */
  CHECK_OK(samba_attrs_create(&attrs));
  CHECK_OK(samba_attrs_set_string(attrs, "alpha", "two"));
  CHECK_FAILS(samba_op_call(NULL, "add", in, 2, attrs, out, 2, &n), SAMBA_ERR_INVALID_ARGUMENT,
              "'alpha' expects float");
  samba_attrs_release(attrs);
  CHECK_OK(samba_attrs_create(&attrs));
  CHECK_OK(samba_attrs_set_float(attrs, "shape", 1.5));
  CHECK_FAILS(samba_op_call(NULL, "reshape", in, 1, attrs, out, 2, &n), SAMBA_ERR_INVALID_ARGUMENT,
              "'shape' expects ints");
  samba_attrs_release(attrs);
  /* a missing required attribute */
  CHECK_FAILS(samba_op_call(NULL, "reshape", in, 1, NULL, out, 2, &n), SAMBA_ERR_INVALID_ARGUMENT,
              "requires attribute 'shape'");
  /* wrong input count, and a missing required input */
  CHECK_FAILS(samba_op_call(NULL, "add", in, 1, NULL, out, 2, &n), SAMBA_ERR_INVALID_ARGUMENT,
              "takes 2");
  CHECK_FAILS(samba_op_call(NULL, "add", in, 3, NULL, out, 2, &n), SAMBA_ERR_INVALID_ARGUMENT,
              "got 3");
  in[1] = NULL;
  CHECK_FAILS(samba_op_call(NULL, "add", in, 2, NULL, out, 2, &n), SAMBA_ERR_NULL_POINTER,
              "input 'b' (#1) is missing");
  /* mismatched shapes */
  in[1] = b4;
  CHECK_FAILS(samba_op_call(NULL, "add", in, 2, NULL, out, 2, &n), SAMBA_ERR_SHAPE_MISMATCH,
              "broadcast");
  CHECK(out[0] == NULL);
  /* too small an output array: zero capacity */
  in[1] = a;
  n = 0;
  CHECK_FAILS(samba_op_call(NULL, "add", in, 2, NULL, NULL, 0, &n), SAMBA_ERR_OUT_OF_RANGE,
              "room for 0");
  CHECK(n == 1);

  /* schema introspection */
  {
    const char* s = (const char*)NOT_NULL;
    CHECK_FAILS(samba_op_name(samba_op_count(), &s), SAMBA_ERR_OUT_OF_RANGE, "out of range");
    CHECK(s == NULL);
    CHECK_FAILS(samba_op_name(0, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
    s = (const char*)NOT_NULL;
    CHECK_FAILS(samba_op_schema_json("nope", &s), SAMBA_ERR_NOT_FOUND, "unknown op 'nope'");
    CHECK(s == NULL);
    CHECK_FAILS(samba_op_schema_json(NULL, &s), SAMBA_ERR_NULL_POINTER, "'name'");
    CHECK_FAILS(samba_op_schema_json("add", NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  }
  samba_tensor_release(a);
  samba_tensor_release(b4);
}

/* The last error belongs to the calling thread and survives successes. */
static void test_error_state(void) {
  samba_tensor* t = NULL;
  CHECK_FAILS(samba_tensor_retain(NULL), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, NULL, 0, &t));
  CHECK(samba_last_error_code() == SAMBA_ERR_NULL_POINTER);
  CHECK(strstr(samba_last_error_message(), "samba_tensor_retain") != NULL);
  samba_tensor_release(t);
}

int main(void) {
  test_errors_and_dtypes();
  test_sessions();
  test_tensor_creation();
  test_tensor_getters();
  test_autograd_misuse();
  test_attrs();
  test_op_calls();
  test_error_state();
  printf("bad_input_test: all checks passed\n");
  return 0;
}
