/* Tensors through the C ABI: creation, borrowing and adopting caller memory,
 * getters, copies, names, item, gradients as handles, clear_data. */
#include "capi_test_util.h"

static int g_deleted;
static void* g_deleted_ptr;
static void* g_deleted_user;

static void count_deleter(void* data, void* user_data) {
  ++g_deleted;
  g_deleted_ptr = data;
  g_deleted_user = user_data;
  free(data);
}

static void test_version_and_dtypes(void) {
  samba_dtype d = -1, p = -1;
  int i;
  CHECK(strcmp(samba_version(), "0.1.0") == 0);
  CHECK(samba_version_number() ==
        SAMBA_VERSION_MAJOR * 10000 + SAMBA_VERSION_MINOR * 100 + SAMBA_VERSION_PATCH);
  CHECK(strcmp(samba_status_name(SAMBA_ERR_SHAPE_MISMATCH), "SAMBA_ERR_SHAPE_MISMATCH") == 0);
  CHECK(strcmp(samba_status_name(999), "unknown status") == 0);
  for (i = 0; i < 10; ++i) {
    CHECK(samba_dtype_name(i) != NULL);
    CHECK_OK(samba_dtype_from_name(samba_dtype_name(i), &d));
    CHECK(d == i);
  }
  CHECK(samba_dtype_size(SAMBA_BFLOAT16) == 2 && samba_dtype_size(SAMBA_INT64) == 8 &&
        samba_dtype_size(SAMBA_BOOL) == 1 && samba_dtype_size(42) == 0);
  CHECK_OK(samba_dtype_from_name("long", &d));
  CHECK(d == SAMBA_INT64);
  CHECK_OK(samba_promote_types(SAMBA_BFLOAT16, SAMBA_FLOAT16, &p));
  CHECK(p == SAMBA_FLOAT32);
  CHECK_OK(samba_promote_types(SAMBA_INT8, SAMBA_UINT8, &p));
  CHECK(p == SAMBA_INT16);
}

static void test_create_and_getters(void) {
  const int64_t shape[] = {2, 3, 4};
  samba_tensor* t = NULL;
  const int64_t* dims = NULL;
  const int64_t* strides = NULL;
  size_t rank = 0, es = 0, nbytes = 0;
  int64_t numel = 0, dim = 0;
  int32_t contiguous = 0, floating = -1;
  samba_dtype dt = -1;
  void* data = NULL;
  int i;
  CHECK_OK(samba_tensor_create(SAMBA_INT16, shape, 3, &t));
  CHECK_OK(samba_tensor_ndim(t, &rank));
  CHECK(rank == 3);
  CHECK_OK(samba_tensor_dim(t, &dim)); /* deprecated, still exported */
  CHECK(dim == 3);
  CHECK_OK(samba_tensor_shape(t, &dims, &rank));
  CHECK(rank == 3 && dims[0] == 2 && dims[1] == 3 && dims[2] == 4);
  CHECK_OK(samba_tensor_strides(t, &strides, &rank));
  CHECK(rank == 3 && strides[0] == 12 && strides[1] == 4 && strides[2] == 1);
  CHECK_OK(samba_tensor_dtype(t, &dt));
  CHECK(dt == SAMBA_INT16);
  CHECK_OK(samba_tensor_numel(t, &numel));
  CHECK(numel == 24);
  CHECK_OK(samba_tensor_element_size(t, &es));
  CHECK(es == 2);
  CHECK_OK(samba_tensor_nbytes(t, &nbytes));
  CHECK(nbytes == 48);
  CHECK_OK(samba_tensor_is_contiguous(t, &contiguous));
  CHECK(contiguous == 1);
  CHECK_OK(samba_tensor_is_floating_point(t, &floating));
  CHECK(floating == 0);
  CHECK_OK(samba_tensor_data(t, &data));
  CHECK(data != NULL);
  for (i = 0; i < 24; ++i) CHECK(((const int16_t*)data)[i] == 0); /* create zero-fills */
  samba_tensor_release(t);

  /* Every dtype, and a 0-dim tensor with a NULL shape. */
  for (i = 0; i < 10; ++i) {
    CHECK_OK(samba_tensor_create(i, NULL, 0, &t));
    CHECK_OK(samba_tensor_is_floating_point(t, &floating));
    CHECK(floating == (i <= SAMBA_FLOAT64));
    CHECK_OK(samba_tensor_numel(t, &numel));
    CHECK(numel == 1);
    CHECK_OK(samba_tensor_nbytes(t, &nbytes));
    CHECK(nbytes == samba_dtype_size(i));
    samba_tensor_release(t);
  }
  /* A zero-size tensor. */
  {
    const int64_t empty[] = {3, 0};
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, empty, 2, &t));
    CHECK_OK(samba_tensor_numel(t, &numel));
    CHECK(numel == 0);
    CHECK_OK(samba_tensor_copy_from(t, NULL, 0));
    samba_tensor_release(t);
  }
}

static void test_copy_and_item(void) {
  const int64_t shape[] = {2, 2};
  const float src[] = {1.5f, -2.0f, 3.25f, 4.0f};
  float dst[4] = {0};
  samba_tensor* t = make_f32(src, shape, 2);
  samba_tensor* s = NULL;
  samba_tensor* i = NULL;
  double v = 0;
  int64_t iv = 0;
  CHECK_OK(samba_tensor_copy_to(t, dst, sizeof dst));
  CHECK(memcmp(src, dst, sizeof dst) == 0);
  CHECK_OK(samba_scalar_float(2.5, &s));
  CHECK_OK(samba_tensor_item(s, &v));
  CHECK(v == 2.5);
  CHECK_OK(samba_scalar_int(-7, &i));
  CHECK_OK(samba_tensor_item_int(i, &iv));
  CHECK(iv == -7);
  CHECK_OK(samba_tensor_item(i, &v));
  CHECK(v == -7.0);
  {
    samba_dtype dt;
    CHECK_OK(samba_tensor_dtype(s, &dt));
    CHECK(dt == SAMBA_FLOAT64);
    CHECK_OK(samba_tensor_dtype(i, &dt));
    CHECK(dt == SAMBA_INT64);
  }
  /* A wrapped scalar promotes like a Python number: int8 + int stays int8. */
  {
    const int64_t n[] = {2};
    samba_tensor* i8 = NULL;
    samba_tensor* sum = NULL;
    samba_dtype dt;
    CHECK_OK(samba_tensor_create(SAMBA_INT8, n, 1, &i8));
    CHECK_OK(samba_add(NULL, i8, i, &sum));
    CHECK_OK(samba_tensor_dtype(sum, &dt));
    CHECK(dt == SAMBA_INT8);
    samba_tensor_release(sum);
    samba_tensor_release(i8);
  }
  samba_tensor_release(s);
  samba_tensor_release(i);
  samba_tensor_release(t);
}

static void test_wrap_borrows(void) {
  float buf[6] = {0, 1, 2, 3, 4, 5};
  const int64_t shape[] = {2, 3};
  const int64_t tshape[] = {3, 2};
  const int64_t tstrides[] = {1, 3};
  samba_tensor* t = NULL;
  samba_tensor* tt = NULL;
  void* data = NULL;
  int32_t contiguous = 1;
  float out[6];
  CHECK_OK(samba_tensor_wrap(buf, SAMBA_FLOAT32, shape, 2, NULL, &t));
  CHECK_OK(samba_tensor_data(t, &data));
  CHECK(data == (void*)buf);
  buf[4] = 40; /* caller writes are seen by the tensor */
  CHECK_OK(samba_tensor_copy_to(t, out, sizeof out));
  CHECK(out[4] == 40);
  /* A transposed view of the same memory, described by strides. */
  CHECK_OK(samba_tensor_wrap(buf, SAMBA_FLOAT32, tshape, 2, tstrides, &tt));
  CHECK_OK(samba_tensor_is_contiguous(tt, &contiguous));
  CHECK(contiguous == 0);
  CHECK_OK(samba_tensor_copy_to(tt, out, sizeof out));
  CHECK(out[0] == 0 && out[1] == 3 && out[2] == 1 && out[3] == 40 && out[4] == 2 && out[5] == 5);
  /* copy_from honours the strides. */
  {
    const float src[6] = {10, 11, 12, 13, 14, 15};
    CHECK_OK(samba_tensor_copy_from(tt, src, sizeof src));
    CHECK(buf[0] == 10 && buf[3] == 11 && buf[1] == 12 && buf[4] == 13 && buf[2] == 14 &&
          buf[5] == 15);
  }
  samba_tensor_release(tt);
  samba_tensor_release(t);
}

static void test_adopt_deleter_once(void) {
  const int64_t shape[] = {4};
  int user = 0;
  samba_tensor* t = NULL;
  samba_tensor* view = NULL;
  float* mem = (float*)malloc(4 * sizeof(float));
  samba_index* idx = NULL;
  CHECK(mem != NULL);
  g_deleted = 0;
  CHECK_OK(samba_tensor_adopt(mem, SAMBA_FLOAT32, shape, 1, NULL, count_deleter, &user, &t));
  /* A view keeps the adopted memory alive after the tensor is released. */
  CHECK_OK(samba_index_create(&idx));
  CHECK_OK(samba_index_add_slice(idx, 1, 0, 1, SAMBA_SLICE_NO_STOP));
  CHECK_OK(samba_tensor_index(t, idx, &view));
  samba_index_release(idx);
  CHECK_OK(samba_tensor_retain(t));
  samba_tensor_release(t);
  samba_tensor_release(t);
  CHECK(g_deleted == 0);
  samba_tensor_release(view);
  CHECK(g_deleted == 1 && g_deleted_ptr == (void*)mem && g_deleted_user == (void*)&user);

  /* On failure the deleter is not called: the caller still owns the memory. */
  {
    const int64_t bad[] = {-1};
    float* keep = (float*)malloc(sizeof(float));
    g_deleted = 0;
    t = (samba_tensor*)&user;
    CHECK_FAILS(samba_tensor_adopt(keep, SAMBA_FLOAT32, bad, 1, NULL, count_deleter, NULL, &t),
                SAMBA_ERR_INVALID_ARGUMENT, "negative");
    CHECK(t == NULL);
    CHECK_FAILS(samba_tensor_adopt(keep, 77, shape, 1, NULL, count_deleter, NULL, &t),
                SAMBA_ERR_INVALID_ARGUMENT, "dtype");
    CHECK(g_deleted == 0);
    free(keep);
  }
  /* A NULL deleter is allowed (nothing to do at the end). */
  {
    static float fixed[4];
    CHECK_OK(samba_tensor_adopt(fixed, SAMBA_FLOAT32, shape, 1, NULL, NULL, NULL, &t));
    samba_tensor_release(t);
  }
  /* clear_data releases the adopted memory once no view needs it. */
  mem = (float*)malloc(4 * sizeof(float));
  g_deleted = 0;
  CHECK_OK(samba_tensor_adopt(mem, SAMBA_FLOAT32, shape, 1, NULL, count_deleter, NULL, &t));
  CHECK_OK(samba_tensor_clear_data(t));
  CHECK(g_deleted == 1);
  samba_tensor_release(t);
  CHECK(g_deleted == 1);
}

static void test_names(void) {
  samba_tensor* t = NULL;
  const char* s = NULL;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, NULL, 0, &t));
  CHECK_OK(samba_tensor_name(t, &s));
  CHECK(strcmp(s, "") == 0);
  CHECK_OK(samba_tensor_set_name(t, "t0"));
  CHECK_OK(samba_tensor_name(t, &s));
  CHECK(strcmp(s, "t0") == 0);
  /* The region name defaults to the sn_name. */
  CHECK_OK(samba_tensor_region_name(t, &s));
  CHECK(strcmp(s, "t0") == 0);
  CHECK_OK(samba_tensor_set_region_name(t, "t1_other"));
  CHECK_OK(samba_tensor_region_name(t, &s));
  CHECK(strcmp(s, "t1_other") == 0);
  CHECK_OK(samba_tensor_name(t, &s));
  CHECK(strcmp(s, "t0") == 0);
  samba_tensor_release(t);
}

static void test_grad_handles(void) {
  const int64_t shape[] = {2};
  const float ones[] = {1, 1};
  samba_tensor* t = make_f32(ones, shape, 1);
  samba_tensor* g = make_f32(ones, shape, 1);
  samba_tensor* got = NULL;
  int32_t rg = -1;
  CHECK_OK(samba_tensor_requires_grad(t, &rg));
  CHECK(rg == 0);
  CHECK_OK(samba_tensor_set_requires_grad(t, 1));
  CHECK_OK(samba_tensor_requires_grad(t, &rg));
  CHECK(rg == 1);
  CHECK_OK(samba_tensor_grad(t, &got));
  CHECK(got == NULL);
  CHECK_OK(samba_tensor_set_grad(t, g));
  CHECK_OK(samba_tensor_grad(t, &got));
  CHECK(got == g);         /* retained, not copied */
  samba_tensor_release(g); /* t still holds it */
  {
    double v = 0;
    samba_index* idx = index_of_int(1);
    samba_tensor* e = NULL;
    CHECK_OK(samba_tensor_index(got, idx, &e));
    CHECK_OK(samba_tensor_item(e, &v));
    CHECK(v == 1.0);
    samba_tensor_release(e);
    samba_index_release(idx);
  }
  CHECK_OK(samba_tensor_set_grad(t, NULL));
  CHECK_OK(samba_tensor_grad(t, &got));
  CHECK(got == NULL);
  CHECK_OK(samba_tensor_set_requires_grad(t, 0));
  samba_tensor_release(t);
}

static void test_clear_data(void) {
  const int64_t shape[] = {2, 3};
  samba_tensor* t = NULL;
  const int64_t* dims = NULL;
  size_t rank = 0;
  const char* name = NULL;
  void* data = (void*)&rank;
  float buf[6];
  samba_dtype dt = -1;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, 2, &t));
  CHECK_OK(samba_tensor_set_name(t, "w"));
  CHECK_OK(samba_tensor_clear_data(t));
  CHECK_OK(samba_tensor_clear_data(t)); /* clearing twice is fine */
  CHECK_OK(samba_tensor_shape(t, &dims, &rank));
  CHECK(rank == 2 && dims[0] == 2 && dims[1] == 3);
  CHECK_OK(samba_tensor_dtype(t, &dt));
  CHECK(dt == SAMBA_FLOAT32);
  CHECK_OK(samba_tensor_name(t, &name));
  CHECK(strcmp(name, "w") == 0);
  CHECK_FAILS(samba_tensor_data(t, &data), SAMBA_ERR_INVALID_STATE, "cleared");
  CHECK(data == NULL);
  CHECK_FAILS(samba_tensor_copy_to(t, buf, sizeof buf), SAMBA_ERR_INVALID_STATE, "cleared");
  CHECK_FAILS(samba_tensor_copy_from(t, buf, sizeof buf), SAMBA_ERR_INVALID_STATE, "cleared");
  {
    samba_tensor* s = NULL;
    samba_tensor* out = (samba_tensor*)&rank;
    CHECK_OK(samba_scalar_float(1.0, &s));
    CHECK_FAILS(samba_add(NULL, t, s, &out), SAMBA_ERR_INVALID_STATE, "no data");
    CHECK(out == NULL);
    samba_tensor_release(s);
  }
  samba_tensor_release(t);
}

static void test_sessions(void) {
  samba_session_options* opts = NULL;
  samba_session* s = NULL;
  int32_t n = 0;
  CHECK_OK(samba_session_options_create(&opts));
  CHECK_OK(samba_session_options_set_num_threads(opts, 2));
  CHECK_OK(samba_session_options_set_seed(opts, 7));
  CHECK_OK(samba_session_create(opts, &s));
  samba_session_options_release(opts);
  CHECK_OK(samba_session_num_threads(s, &n));
  CHECK(n == 2);
  CHECK_OK(samba_session_set_seed(s, 9));
  samba_session_release(s);
  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_session_num_threads(s, &n));
  CHECK(n >= 1);
  samba_session_release(s);
  samba_session_release(NULL);
  samba_session_options_release(NULL);
  samba_tensor_release(NULL);
  samba_attrs_release(NULL);
  samba_index_release(NULL);
}

int main(void) {
  test_version_and_dtypes();
  test_create_and_getters();
  test_copy_and_item();
  test_wrap_borrows();
  test_adopt_deleter_once();
  test_names();
  test_grad_handles();
  test_clear_data();
  test_sessions();
  printf("tensor_test: all checks passed\n");
  return 0;
}
