/* Bad input for conversions, new tensors, views, indexing and the typed op
 * shorthands: status, a message naming the problem, NULL out-parameters,
 * and tensors unchanged after a failed write. */
#include "capi_test_util.h"

static int g_marker;
#define NOT_NULL ((samba_tensor*)(void*)&g_marker)

static void test_metadata(void) {
  const int64_t shape[] = {2};
  samba_tensor* t = NULL;
  int64_t d = 0;
  size_t n = 0;
  int32_t f = 0;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, 1, &t));
  CHECK_FAILS(samba_tensor_dim(NULL, &d), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_dim(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_nbytes(NULL, &n), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_nbytes(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_is_floating_point(NULL, &f), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_is_floating_point(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_clear_data(NULL), SAMBA_ERR_NULL_POINTER, "'t'");
  samba_tensor_release(t);
}

typedef samba_status (*shorthand_fn)(samba_tensor*, samba_tensor**);

static void test_conversions(void) {
  const int64_t shape[] = {2};
  const shorthand_fn shorthands[] = {samba_tensor_bfloat16, samba_tensor_float, samba_tensor_int,
                                     samba_tensor_long,     samba_tensor_short, samba_tensor_bool};
  samba_tensor* t = NULL;
  samba_tensor* out = NOT_NULL;
  size_t i;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, 1, &t));
  CHECK_FAILS(samba_tensor_to(t, 10, &out), SAMBA_ERR_INVALID_ARGUMENT,
              "dtype 10 is not a dtype code");
  CHECK(out == NULL);
  out = NOT_NULL;
  CHECK_FAILS(samba_tensor_to(NULL, SAMBA_INT8, &out), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(out == NULL);
  CHECK_FAILS(samba_tensor_to(t, SAMBA_INT8, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  out = NOT_NULL;
  CHECK_FAILS(samba_tensor_type_as(t, NULL, &out), SAMBA_ERR_NULL_POINTER, "'other'");
  CHECK(out == NULL);
  CHECK_FAILS(samba_tensor_type_as(NULL, t, &out), SAMBA_ERR_NULL_POINTER, "'t'");
  for (i = 0; i < COUNT_OF(shorthands); ++i) {
    out = NOT_NULL;
    CHECK_FAILS(shorthands[i](NULL, &out), SAMBA_ERR_NULL_POINTER, "'t'");
    CHECK(out == NULL);
    CHECK_FAILS(shorthands[i](t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  }
  /* Converting a tensor without data. */
  CHECK_OK(samba_tensor_clear_data(t));
  out = NOT_NULL;
  CHECK_FAILS(samba_tensor_long(t, &out), SAMBA_ERR_INVALID_STATE, "no data");
  CHECK(out == NULL);
  out = NOT_NULL;
  CHECK_FAILS(samba_tensor_clone(t, &out), SAMBA_ERR_INVALID_STATE, "no data");
  CHECK(out == NULL);
  samba_tensor_release(t);
}

typedef samba_status (*new_fn)(const samba_tensor*, const int64_t*, size_t, samba_dtype, int32_t,
                               samba_tensor**);

static samba_status new_full_7(const samba_tensor* t, const int64_t* s, size_t n, samba_dtype d,
                               int32_t rg, samba_tensor** out) {
  return samba_tensor_new_full(t, s, n, 7.0, d, rg, out);
}

static void test_new_tensors(void) {
  const new_fn fns[] = {samba_tensor_new_empty, samba_tensor_new_zeros, samba_tensor_new_ones,
                        new_full_7};
  const int64_t ok[] = {2, 3};
  const int64_t negative[] = {2, -1};
  const int64_t huge[] = {(int64_t)1 << 40, (int64_t)1 << 40};
  const int64_t rank17[17] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  samba_tensor* like = NULL;
  samba_tensor* out = NOT_NULL;
  size_t i;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, NULL, 0, &like));
  for (i = 0; i < COUNT_OF(fns); ++i) {
    out = NOT_NULL;
    CHECK_FAILS(fns[i](NULL, ok, 2, SAMBA_DTYPE_SAME, 0, &out), SAMBA_ERR_NULL_POINTER, "'t'");
    CHECK(out == NULL);
    CHECK_FAILS(fns[i](like, ok, 2, SAMBA_DTYPE_SAME, 0, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
    out = NOT_NULL;
    CHECK_FAILS(fns[i](like, ok, 2, 99, 0, &out), SAMBA_ERR_INVALID_ARGUMENT,
                "dtype 99 is not a dtype code");
    CHECK(out == NULL);
    CHECK_FAILS(fns[i](like, ok, 2, -2, 0, &out), SAMBA_ERR_INVALID_ARGUMENT, "not a dtype code");
    CHECK_FAILS(fns[i](like, negative, 2, SAMBA_DTYPE_SAME, 0, &out), SAMBA_ERR_INVALID_ARGUMENT,
                "negative dimension");
    CHECK_FAILS(fns[i](like, huge, 2, SAMBA_DTYPE_SAME, 0, &out), SAMBA_ERR_OUT_OF_RANGE,
                "64 bits");
    CHECK_FAILS(fns[i](like, rank17, 17, SAMBA_DTYPE_SAME, 0, &out), SAMBA_ERR_INVALID_ARGUMENT,
                "rank 17");
    CHECK_FAILS(fns[i](like, NULL, 2, SAMBA_DTYPE_SAME, 0, &out), SAMBA_ERR_NULL_POINTER,
                "'shape'");
    CHECK_FAILS(fns[i](like, ok, 2, SAMBA_INT32, 1, &out), SAMBA_ERR_DTYPE_MISMATCH, "int32");
    CHECK(out == NULL);
  }
  /* Fill values an integer dtype cannot hold. */
  CHECK_FAILS(samba_tensor_new_full(like, ok, 2, 300.0, SAMBA_INT8, 0, &out),
              SAMBA_ERR_OUT_OF_RANGE, "does not fit dtype int8");
  CHECK_FAILS(samba_tensor_new_full(like, ok, 2, NAN, SAMBA_INT64, 0, &out), SAMBA_ERR_OUT_OF_RANGE,
              "does not fit");
  CHECK_FAILS(samba_tensor_new_full(like, ok, 2, -1.0, SAMBA_UINT8, 0, &out),
              SAMBA_ERR_OUT_OF_RANGE, "uint8");
  CHECK_FAILS(samba_tensor_new_full(like, ok, 2, 9223372036854775808.0, SAMBA_INT64, 0, &out),
              SAMBA_ERR_OUT_OF_RANGE, "int64");
  CHECK(out == NULL);
  /* ... while floats take anything. */
  CHECK_OK(samba_tensor_new_full(like, ok, 2, INFINITY, SAMBA_DTYPE_SAME, 0, &out));
  samba_tensor_release(out);
  samba_tensor_release(like);
}

static void test_layouts(void) {
  const int64_t shape[] = {2, 3};
  samba_tensor* t = NULL;
  samba_tensor* tt = NULL;
  samba_tensor* like = NULL;
  samba_tensor* out = NOT_NULL;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, 2, &t));
  /* reshape */
  {
    const int64_t four[] = {4, -1};
    const int64_t two_infer[] = {-1, -1};
    const int64_t minus2[] = {-2, -3};
    const int64_t rank17[17] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 6};
    CHECK_FAILS(samba_tensor_reshape(t, four, 2, &out), SAMBA_ERR_SHAPE_MISMATCH, "cannot reshape");
    CHECK(out == NULL);
    CHECK_FAILS(samba_tensor_reshape(t, two_infer, 2, &out), SAMBA_ERR_INVALID_ARGUMENT,
                "more than one -1");
    CHECK_FAILS(samba_tensor_reshape(t, minus2, 2, &out), SAMBA_ERR_INVALID_ARGUMENT,
                "negative size");
    CHECK_FAILS(samba_tensor_reshape(t, rank17, 17, &out), SAMBA_ERR_INVALID_ARGUMENT,
                "17 entries");
    CHECK_FAILS(samba_tensor_reshape(t, NULL, 1, &out), SAMBA_ERR_NULL_POINTER, "'shape'");
    CHECK_FAILS(samba_tensor_reshape(NULL, four, 2, &out), SAMBA_ERR_NULL_POINTER, "'t'");
    CHECK_FAILS(samba_tensor_reshape(t, four, 2, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  }
  /* permute */
  {
    const int64_t repeated[] = {0, 0};
    const int64_t too_far[] = {0, 2};
    const int64_t one[] = {0};
    out = NOT_NULL;
    CHECK_FAILS(samba_tensor_permute(t, repeated, 2, &out), SAMBA_ERR_INVALID_ARGUMENT, "permute");
    CHECK(out == NULL);
    CHECK_FAILS(samba_tensor_permute(t, too_far, 2, &out), SAMBA_ERR_OUT_OF_RANGE,
                "dim 2 is out of range");
    CHECK_FAILS(samba_tensor_permute(t, one, 1, &out), SAMBA_ERR_INVALID_ARGUMENT, "has 2");
    CHECK_FAILS(samba_tensor_permute(t, NULL, 2, &out), SAMBA_ERR_NULL_POINTER, "'dims'");
    CHECK_FAILS(samba_tensor_permute(NULL, one, 1, &out), SAMBA_ERR_NULL_POINTER, "'t'");
    CHECK_FAILS(samba_tensor_permute(t, one, 1, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  }
  /* view_as */
  {
    const int64_t five[] = {5};
    const int64_t six[] = {6};
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, five, 1, &like));
    out = NOT_NULL;
    CHECK_FAILS(samba_tensor_view_as(t, like, &out), SAMBA_ERR_SHAPE_MISMATCH,
                "cannot be viewed as shape [5]");
    CHECK(out == NULL);
    samba_tensor_release(like);
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, six, 1, &like));
    CHECK_OK(samba_tensor_t(t, &tt));
    CHECK_FAILS(samba_tensor_view_as(tt, like, &out), SAMBA_ERR_INVALID_ARGUMENT, "without a copy");
    CHECK_FAILS(samba_tensor_view_as(NULL, like, &out), SAMBA_ERR_NULL_POINTER, "'t'");
    CHECK_FAILS(samba_tensor_view_as(t, NULL, &out), SAMBA_ERR_NULL_POINTER, "'other'");
    CHECK_FAILS(samba_tensor_view_as(t, like, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
    samba_tensor_release(like);
  }
  /* T, contiguous, clone, detach */
  out = NOT_NULL;
  CHECK_FAILS(samba_tensor_t(NULL, &out), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(out == NULL);
  CHECK_FAILS(samba_tensor_t(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  out = NOT_NULL;
  CHECK_FAILS(samba_tensor_contiguous(NULL, &out), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(out == NULL);
  CHECK_FAILS(samba_tensor_contiguous(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  out = NOT_NULL;
  CHECK_FAILS(samba_tensor_clone(NULL, &out), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(out == NULL);
  CHECK_FAILS(samba_tensor_clone(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  out = NOT_NULL;
  CHECK_FAILS(samba_tensor_detach(NULL, &out), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(out == NULL);
  CHECK_FAILS(samba_tensor_detach(t, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  /* A strided view without data cannot be made contiguous. */
  CHECK_OK(samba_tensor_clear_data(tt));
  CHECK_FAILS(samba_tensor_contiguous(tt, &out), SAMBA_ERR_INVALID_STATE, "no data");
  samba_tensor_release(tt);
  samba_tensor_release(t);
}

static void test_index_builder(void) {
  const int64_t s2[] = {2, 2};
  const int64_t one[] = {1};
  samba_index* idx = (samba_index*)(void*)&g_marker;
  samba_tensor* m = NULL;
  samba_tensor* v = NULL;
  CHECK_FAILS(samba_index_create(NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_index_add_int(NULL, 1), SAMBA_ERR_NULL_POINTER, "'idx'");
  CHECK_FAILS(samba_index_add_slice(NULL, 0, 1, 1, 0), SAMBA_ERR_NULL_POINTER, "'idx'");
  CHECK_FAILS(samba_index_add_none(NULL), SAMBA_ERR_NULL_POINTER, "'idx'");
  CHECK_FAILS(samba_index_add_ellipsis(NULL), SAMBA_ERR_NULL_POINTER, "'idx'");
  CHECK_FAILS(samba_index_add_tensor(NULL, NULL), SAMBA_ERR_NULL_POINTER, "'idx'");
  CHECK_FAILS(samba_index_add_list(NULL, one, 1), SAMBA_ERR_NULL_POINTER, "'idx'");
  CHECK_OK(samba_index_create(&idx));
  CHECK_FAILS(samba_index_add_slice(idx, 0, 1, 0, 0), SAMBA_ERR_INVALID_ARGUMENT,
              "step cannot be zero");
  CHECK_FAILS(samba_index_add_slice(idx, 0, 1, -1, 0), SAMBA_ERR_UNSUPPORTED, "negative");
  CHECK_FAILS(samba_index_add_slice(idx, 0, 1, 1, 4u), SAMBA_ERR_INVALID_ARGUMENT, "unknown bits");
  CHECK_OK(samba_index_add_ellipsis(idx));
  CHECK_FAILS(samba_index_add_ellipsis(idx), SAMBA_ERR_INVALID_ARGUMENT, "only one ellipsis");
  CHECK_FAILS(samba_index_add_tensor(idx, NULL), SAMBA_ERR_NULL_POINTER, "'index'");
  CHECK_FAILS(samba_index_add_list(idx, NULL, 2), SAMBA_ERR_NULL_POINTER, "'values'");
  CHECK_OK(samba_tensor_create(SAMBA_INT64, s2, 2, &m));
  CHECK_FAILS(samba_index_add_tensor(idx, m), SAMBA_ERR_UNSUPPORTED, "has 2 dims");
  samba_tensor_release(m);
  CHECK_OK(samba_tensor_create(SAMBA_BOOL, NULL, 0, &m));
  CHECK_FAILS(samba_index_add_tensor(idx, m), SAMBA_ERR_UNSUPPORTED, "0-dim bool");
  samba_tensor_release(m);
  /* Only one tensor or list per expression. */
  CHECK_OK(samba_tensor_create(SAMBA_INT64, one, 1, &v));
  CHECK_OK(samba_index_add_list(idx, one, 1));
  CHECK_FAILS(samba_index_add_list(idx, one, 1), SAMBA_ERR_UNSUPPORTED, "only one tensor or list");
  CHECK_FAILS(samba_index_add_tensor(idx, v), SAMBA_ERR_UNSUPPORTED, "only one tensor or list");
  samba_tensor_release(v);
  samba_index_release(idx);
}

static samba_index* index_list(const int64_t* values, size_t n) {
  samba_index* idx = NULL;
  CHECK_OK(samba_index_create(&idx));
  CHECK_OK(samba_index_add_list(idx, values, n));
  return idx;
}

static void test_index_use(void) {
  const int64_t shape[] = {2, 3};
  const float v[] = {1, 2, 3, 4, 5, 6};
  const double unchanged[] = {1, 2, 3, 4, 5, 6};
  samba_tensor* t = make_f32(v, shape, 2);
  samba_tensor* out = NOT_NULL;
  samba_index* idx;
  /* NULLs */
  idx = index_of_int(0);
  CHECK_FAILS(samba_tensor_index(NULL, idx, &out), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK(out == NULL);
  CHECK_FAILS(samba_tensor_index(t, NULL, &out), SAMBA_ERR_NULL_POINTER, "'idx'");
  CHECK_FAILS(samba_tensor_index(t, idx, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_tensor_index_put(NULL, idx, t), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_index_put(t, NULL, t), SAMBA_ERR_NULL_POINTER, "'idx'");
  CHECK_FAILS(samba_tensor_index_put(t, idx, NULL), SAMBA_ERR_NULL_POINTER, "'value'");
  CHECK_FAILS(samba_tensor_index_put_scalar(NULL, idx, 1), SAMBA_ERR_NULL_POINTER, "'t'");
  CHECK_FAILS(samba_tensor_index_put_scalar(t, NULL, 1), SAMBA_ERR_NULL_POINTER, "'idx'");
  samba_index_release(idx);
  /* Integers out of range, too many indices. */
  idx = index_of_int(2);
  out = NOT_NULL;
  CHECK_FAILS(samba_tensor_index(t, idx, &out), SAMBA_ERR_OUT_OF_RANGE, "index 2 is out of range");
  CHECK(out == NULL);
  CHECK_FAILS(samba_tensor_index_put_scalar(t, idx, 0), SAMBA_ERR_OUT_OF_RANGE, "out of range");
  samba_index_release(idx);
  idx = index_of_int(-3);
  CHECK_FAILS(samba_tensor_index(t, idx, &out), SAMBA_ERR_OUT_OF_RANGE, "index -3");
  CHECK_OK(samba_index_add_int(idx, 0));
  CHECK_OK(samba_index_add_int(idx, 0));
  CHECK_FAILS(samba_tensor_index(t, idx, &out), SAMBA_ERR_OUT_OF_RANGE, "too many indices");
  samba_index_release(idx);
  /* List positions out of range: nothing is written. */
  {
    const int64_t far[] = {0, 5};
    const int64_t neg[] = {-3};
    idx = index_list(far, 2);
    CHECK_FAILS(samba_tensor_index(t, idx, &out), SAMBA_ERR_OUT_OF_RANGE, "index 5");
    CHECK_FAILS(samba_tensor_index_put_scalar(t, idx, 9), SAMBA_ERR_OUT_OF_RANGE, "index 5");
    CHECK_TENSOR(t, shape, unchanged, 0);
    samba_index_release(idx);
    idx = index_list(neg, 1);
    CHECK_FAILS(samba_tensor_index(t, idx, &out), SAMBA_ERR_OUT_OF_RANGE, "index -3");
    samba_index_release(idx);
  }
  /* Index tensors: non-integer floats, and a mask of the wrong length. */
  {
    const int64_t s1[] = {1};
    const int64_t s3[] = {3};
    const float half[] = {0.5f};
    uint8_t mask3[3] = {1, 0, 1};
    samba_tensor* fi = make_f32(half, s1, 1);
    samba_tensor* bm = NULL;
    idx = NULL;
    CHECK_OK(samba_index_create(&idx));
    CHECK_OK(samba_index_add_tensor(idx, fi));
    CHECK_FAILS(samba_tensor_index(t, idx, &out), SAMBA_ERR_INVALID_ARGUMENT, "whole numbers");
    samba_index_release(idx);
    CHECK_OK(samba_tensor_create(SAMBA_BOOL, s3, 1, &bm));
    CHECK_OK(samba_tensor_copy_from(bm, mask3, sizeof mask3));
    CHECK_OK(samba_index_create(&idx));
    CHECK_OK(samba_index_add_tensor(idx, bm));
    CHECK_FAILS(samba_tensor_index(t, idx, &out), SAMBA_ERR_SHAPE_MISMATCH, "mask of length 3");
    CHECK_FAILS(samba_tensor_index_put_scalar(t, idx, 1), SAMBA_ERR_SHAPE_MISMATCH, "mask");
    samba_index_release(idx);
    samba_tensor_release(bm);
    samba_tensor_release(fi);
  }
  /* Values that do not broadcast; t is unchanged. */
  {
    const int64_t s2[] = {2};
    const int64_t s23[] = {2, 3};
    const int64_t s213[] = {2, 1, 3};
    const int64_t rows[] = {0, 1};
    samba_tensor* two = NULL;
    samba_tensor* bad = NULL;
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s2, 1, &two));
    idx = index_of_int(0); /* t[0] has shape [3] */
    CHECK_FAILS(samba_tensor_index_put(t, idx, two), SAMBA_ERR_SHAPE_MISMATCH, "broadcast");
    samba_index_release(idx);
    idx = index_list(rows, 2); /* t[[0, 1]] has shape [2, 3] */
    CHECK_FAILS(samba_tensor_index_put(t, idx, two), SAMBA_ERR_SHAPE_MISMATCH, "broadcast");
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s213, 3, &bad));
    CHECK_FAILS(samba_tensor_index_put(t, idx, bad), SAMBA_ERR_SHAPE_MISMATCH, "[2, 1, 3]");
    samba_tensor_release(bad);
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s23, 2, &bad));
    CHECK_OK(samba_tensor_clear_data(bad));
    CHECK_FAILS(samba_tensor_index_put(t, idx, bad), SAMBA_ERR_INVALID_STATE, "no data");
    samba_tensor_release(bad);
    samba_index_release(idx);
    samba_tensor_release(two);
    CHECK_TENSOR(t, shape, unchanged, 0);
  }
  /* A scalar an integer tensor cannot hold. */
  {
    samba_tensor* ti = NULL;
    CHECK_OK(samba_tensor_create(SAMBA_INT16, shape, 2, &ti));
    idx = index_of_int(0);
    CHECK_FAILS(samba_tensor_index_put_scalar(ti, idx, 40000), SAMBA_ERR_OUT_OF_RANGE, "int16");
    CHECK_FAILS(samba_tensor_index_put_scalar(ti, idx, NAN), SAMBA_ERR_OUT_OF_RANGE,
                "does not fit");
    samba_index_release(idx);
    samba_tensor_release(ti);
  }
  /* No writes into a tensor without data or one that requires grad. */
  {
    samba_tensor* c = NULL;
    idx = index_of_int(0);
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, 2, &c));
    CHECK_OK(samba_tensor_clear_data(c));
    CHECK_FAILS(samba_tensor_index_put_scalar(c, idx, 1), SAMBA_ERR_INVALID_STATE, "cleared");
    CHECK_FAILS(samba_tensor_index(c, idx, &out), SAMBA_ERR_INVALID_STATE, "no data");
    samba_tensor_release(c);
    CHECK_OK(samba_tensor_set_requires_grad(t, 1));
    CHECK_FAILS(samba_tensor_index_put_scalar(t, idx, 1), SAMBA_ERR_INVALID_STATE, "requires grad");
    samba_index_release(idx);
    CHECK_TENSOR(t, shape, unchanged, 0);
  }
  /* Indexing a 0-dim tensor with an integer. */
  {
    samba_tensor* s = NULL;
    CHECK_OK(samba_scalar_float(1.0, &s));
    idx = index_of_int(0);
    CHECK_FAILS(samba_tensor_index(s, idx, &out), SAMBA_ERR_OUT_OF_RANGE, "too many indices");
    samba_index_release(idx);
    samba_tensor_release(s);
  }
  samba_tensor_release(t);
}

typedef samba_status (*binary_fn)(samba_session*, samba_tensor*, samba_tensor*, samba_tensor**);
typedef samba_status (*unary_fn)(samba_session*, samba_tensor*, samba_tensor**);

static void test_typed_ops(void) {
  const binary_fn binary[] = {samba_add, samba_sub, samba_mul, samba_div, samba_matmul};
  const unary_fn unary[] = {samba_relu, samba_sigmoid, samba_tanh};
  const int64_t s23[] = {2, 3};
  const int64_t s4[] = {4};
  samba_tensor* a = NULL;
  samba_tensor* b = NULL;
  samba_tensor* out = NOT_NULL;
  size_t i;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s23, 2, &a));
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s4, 1, &b));
  for (i = 0; i < COUNT_OF(binary); ++i) {
    out = NOT_NULL;
    CHECK_FAILS(binary[i](NULL, NULL, b, &out), SAMBA_ERR_NULL_POINTER, "'a'");
    CHECK(out == NULL);
    CHECK_FAILS(binary[i](NULL, a, NULL, &out), SAMBA_ERR_NULL_POINTER, "'b'");
    CHECK_FAILS(binary[i](NULL, a, b, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
    out = NOT_NULL;
    CHECK_FAILS(binary[i](NULL, a, b, &out), SAMBA_ERR_SHAPE_MISMATCH, "[4]");
    CHECK(out == NULL);
  }
  for (i = 0; i < COUNT_OF(unary); ++i) {
    out = NOT_NULL;
    CHECK_FAILS(unary[i](NULL, NULL, &out), SAMBA_ERR_NULL_POINTER, "'x'");
    CHECK(out == NULL);
    CHECK_FAILS(unary[i](NULL, a, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  }
  /* linear */
  CHECK_FAILS(samba_linear(NULL, NULL, a, NULL, &out), SAMBA_ERR_NULL_POINTER, "'x'");
  CHECK_FAILS(samba_linear(NULL, a, NULL, NULL, &out), SAMBA_ERR_NULL_POINTER, "'weight'");
  CHECK_FAILS(samba_linear(NULL, a, a, NULL, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  CHECK_FAILS(samba_linear(NULL, b, a, NULL, &out), SAMBA_ERR_SHAPE_MISMATCH, "linear");
  CHECK(out == NULL);
  /* reductions */
  {
    const int64_t far[] = {2};
    const int64_t twice[] = {1, 1};
    CHECK_FAILS(samba_sum(NULL, NULL, NULL, 0, 0, &out), SAMBA_ERR_NULL_POINTER, "'x'");
    CHECK_FAILS(samba_sum(NULL, a, NULL, 1, 0, &out), SAMBA_ERR_NULL_POINTER, "'dims'");
    CHECK_FAILS(samba_sum(NULL, a, far, 1, 0, &out), SAMBA_ERR_OUT_OF_RANGE,
                "dim 2 is out of range");
    CHECK_FAILS(samba_sum(NULL, a, twice, 2, 0, &out), SAMBA_ERR_INVALID_ARGUMENT,
                "more than once");
    CHECK_FAILS(samba_sum(NULL, a, NULL, 0, 0, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
    CHECK_FAILS(samba_mean(NULL, NULL, NULL, 0, 0, &out), SAMBA_ERR_NULL_POINTER, "'x'");
    CHECK_FAILS(samba_mean(NULL, a, far, 1, 1, &out), SAMBA_ERR_OUT_OF_RANGE, "dim 2");
    CHECK_FAILS(samba_mean(NULL, a, NULL, 0, 0, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
    CHECK(out == NULL);
  }
  /* softmax */
  CHECK_FAILS(samba_softmax(NULL, NULL, 0, &out), SAMBA_ERR_NULL_POINTER, "'x'");
  CHECK_FAILS(samba_softmax(NULL, a, 2, &out), SAMBA_ERR_OUT_OF_RANGE, "dim 2");
  CHECK_FAILS(samba_softmax(NULL, a, -3, &out), SAMBA_ERR_OUT_OF_RANGE, "dim -3");
  CHECK_FAILS(samba_softmax(NULL, a, 0, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
  {
    samba_tensor* ti = NULL;
    CHECK_OK(samba_tensor_create(SAMBA_INT32, s23, 2, &ti));
    CHECK_FAILS(samba_softmax(NULL, ti, 0, &out), SAMBA_ERR_DTYPE_MISMATCH, "int32");
    samba_tensor_release(ti);
  }
  /* cross_entropy */
  {
    const int64_t s3[] = {3};
    samba_tensor* target = NULL;
    CHECK_FAILS(samba_cross_entropy(NULL, NULL, a, &out), SAMBA_ERR_NULL_POINTER, "'input'");
    CHECK_FAILS(samba_cross_entropy(NULL, a, NULL, &out), SAMBA_ERR_NULL_POINTER, "'target'");
    CHECK_FAILS(samba_cross_entropy(NULL, a, a, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
    CHECK_OK(samba_tensor_create(SAMBA_INT64, s3, 1, &target));
    CHECK_FAILS(samba_cross_entropy(NULL, a, target, &out), SAMBA_ERR_SHAPE_MISMATCH,
                "cross_entropy");
    CHECK(out == NULL);
    samba_tensor_release(target);
  }
  samba_tensor_release(a);
  samba_tensor_release(b);
}

int main(void) {
  test_metadata();
  test_conversions();
  test_new_tensors();
  test_layouts();
  test_index_builder();
  test_index_use();
  test_typed_ops();
  printf("bad_input_views_test: all checks passed\n");
  return 0;
}
