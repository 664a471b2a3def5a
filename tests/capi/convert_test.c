/* SambaTensor's conversion and layout methods through C: to/type_as and the
 * dtype shorthands, new_*, reshape, permute, view_as, T, contiguous, clone,
 * detach. */
#include "capi_test_util.h"

static void* data_of(samba_tensor* t) {
  void* p = NULL;
  CHECK_OK(samba_tensor_data(t, &p));
  return p;
}

static samba_dtype dtype_of(const samba_tensor* t) {
  samba_dtype d = -1;
  CHECK_OK(samba_tensor_dtype(t, &d));
  return d;
}

static void test_to_and_shorthands(void) {
  const int64_t shape[] = {4};
  const float v[] = {1.75f, -2.5f, 3.0f, 0.0f};
  samba_tensor* x = make_f32(v, shape, 1);
  samba_tensor* y = NULL;
  /* Same dtype: the tensor itself, as in PyTorch. */
  CHECK_OK(samba_tensor_to(x, SAMBA_FLOAT32, &y));
  CHECK(y == x);
  samba_tensor_release(y);
  CHECK_OK(samba_tensor_float(x, &y));
  CHECK(y == x);
  samba_tensor_release(y);
  /* Conversions truncate toward zero into integers, as a C cast does. */
  {
    const int64_t want_shape[] = {4};
    const double want_int[] = {1, -2, 3, 0};
    const double want_bool[] = {1, 1, 1, 0};
    const double want_f[] = {1.75, -2.5, 3.0, 0.0};
    CHECK_OK(samba_tensor_int(x, &y));
    CHECK(y != x && dtype_of(y) == SAMBA_INT32 && data_of(y) != data_of(x));
    CHECK_TENSOR(y, want_shape, want_int, 0);
    samba_tensor_release(y);
    CHECK_OK(samba_tensor_long(x, &y));
    CHECK(dtype_of(y) == SAMBA_INT64);
    CHECK_TENSOR(y, want_shape, want_int, 0);
    samba_tensor_release(y);
    CHECK_OK(samba_tensor_short(x, &y));
    CHECK(dtype_of(y) == SAMBA_INT16);
    CHECK_TENSOR(y, want_shape, want_int, 0);
    samba_tensor_release(y);
    CHECK_OK(samba_tensor_bool(x, &y));
    CHECK(dtype_of(y) == SAMBA_BOOL);
    CHECK_TENSOR(y, want_shape, want_bool, 0);
    samba_tensor_release(y);
    CHECK_OK(samba_tensor_bfloat16(x, &y));
    CHECK(dtype_of(y) == SAMBA_BFLOAT16);
    CHECK_TENSOR(y, want_shape, want_f, 0); /* all exactly representable in bf16 */
    samba_tensor_release(y);
    CHECK_OK(samba_tensor_to(x, SAMBA_FLOAT16, &y));
    CHECK(dtype_of(y) == SAMBA_FLOAT16);
    CHECK_TENSOR(y, want_shape, want_f, 0);
    samba_tensor_release(y);
  }
  /* bf16 rounds to 8 bits of mantissa: 1 + 2^-9 rounds to 1. */
  {
    const int64_t one[] = {1};
    const float fine[] = {1.001953125f};
    const double want[] = {1.0};
    samba_tensor* f = make_f32(fine, one, 1);
    CHECK_OK(samba_tensor_bfloat16(f, &y));
    CHECK_TENSOR(y, one, want, 0);
    samba_tensor_release(y);
    samba_tensor_release(f);
  }
  /* type_as takes the other tensor's dtype. */
  {
    samba_tensor* other = NULL;
    CHECK_OK(samba_scalar_int(3, &other));
    CHECK_OK(samba_tensor_type_as(x, other, &y));
    CHECK(dtype_of(y) == SAMBA_INT64);
    samba_tensor_release(y);
    samba_tensor_release(other);
  }
  samba_tensor_release(x);
}

static void test_to_has_gradient(void) {
  const int64_t shape[] = {3};
  const float v[] = {1, 2, 3};
  samba_tensor* x = make_f32(v, shape, 1);
  samba_tensor* d = NULL;
  samba_tensor* s = NULL;
  samba_tensor* g = NULL;
  const double want[] = {1, 1, 1};
  CHECK_OK(samba_tensor_set_requires_grad(x, 1));
  CHECK_OK(samba_tensor_to(x, SAMBA_FLOAT64, &d));
  CHECK_OK(samba_sum(NULL, d, NULL, 0, 0, &s));
  CHECK_OK(samba_tensor_backward(s, NULL, 0));
  CHECK_OK(samba_tensor_grad(x, &g));
  CHECK(g != NULL && dtype_of(g) == SAMBA_FLOAT32);
  CHECK_TENSOR(g, shape, want, 0);
  samba_tensor_release(s);
  samba_tensor_release(d);
  samba_tensor_release(x);
}

static void test_new_tensors(void) {
  const int64_t shape[] = {2, 3};
  samba_tensor* like = NULL;
  samba_tensor* t = NULL;
  int32_t rg = -1;
  CHECK_OK(samba_tensor_create(SAMBA_BFLOAT16, NULL, 0, &like));
  {
    const double zeros[] = {0, 0, 0, 0, 0, 0};
    const double ones[] = {1, 1, 1, 1, 1, 1};
    const double fives[] = {5, 5, 5, 5, 5, 5};
    const double trunc[] = {-3, -3, -3, -3, -3, -3};
    CHECK_OK(samba_tensor_new_zeros(like, shape, 2, SAMBA_DTYPE_SAME, 0, &t));
    CHECK(dtype_of(t) == SAMBA_BFLOAT16);
    CHECK_TENSOR(t, shape, zeros, 0);
    samba_tensor_release(t);
    CHECK_OK(samba_tensor_new_ones(like, shape, 2, SAMBA_DTYPE_SAME, 0, &t));
    CHECK(dtype_of(t) == SAMBA_BFLOAT16);
    CHECK_TENSOR(t, shape, ones, 0);
    samba_tensor_release(t);
    CHECK_OK(samba_tensor_new_full(like, shape, 2, 5.0, SAMBA_DTYPE_SAME, 0, &t));
    CHECK_TENSOR(t, shape, fives, 0);
    samba_tensor_release(t);
    CHECK_OK(samba_tensor_new_full(like, shape, 2, -3.7, SAMBA_INT8, 0, &t));
    CHECK(dtype_of(t) == SAMBA_INT8);
    CHECK_TENSOR(t, shape, trunc, 0);
    samba_tensor_release(t);
    CHECK_OK(samba_tensor_new_full(like, shape, 2, 0.5, SAMBA_BOOL, 0, &t));
    CHECK_TENSOR(t, shape, ones, 0);
    samba_tensor_release(t);
  }
  CHECK_OK(samba_tensor_new_empty(like, shape, 2, SAMBA_FLOAT64, 1, &t));
  CHECK(dtype_of(t) == SAMBA_FLOAT64);
  CHECK_OK(samba_tensor_requires_grad(t, &rg));
  CHECK(rg == 1);
  samba_tensor_release(t);
  CHECK_OK(samba_tensor_new_ones(like, NULL, 0, SAMBA_INT32, 0, &t));
  {
    int64_t v = 0;
    CHECK_OK(samba_tensor_item_int(t, &v));
    CHECK(v == 1);
  }
  samba_tensor_release(t);
  samba_tensor_release(like);
}

static void test_views(void) {
  const int64_t shape[] = {2, 3};
  const float v[] = {0, 1, 2, 3, 4, 5};
  samba_tensor* x = make_f32(v, shape, 2);
  samba_tensor* r = NULL;
  samba_tensor* t = NULL;
  samba_tensor* c = NULL;
  const int64_t* strides = NULL;
  size_t rank = 0;
  int32_t contiguous = -1;
  /* reshape of a contiguous tensor is a view; -1 is inferred. */
  {
    const int64_t req[] = {3, -1};
    const int64_t want_shape[] = {3, 2};
    const double want[] = {0, 1, 2, 3, 4, 5};
    CHECK_OK(samba_tensor_reshape(x, req, 2, &r));
    CHECK(data_of(r) == data_of(x));
    CHECK_TENSOR(r, want_shape, want, 0);
  }
  /* T of a matrix is its transpose: a strided view of the same data. */
  {
    const int64_t want_shape[] = {3, 2};
    const double want[] = {0, 3, 1, 4, 2, 5};
    CHECK_OK(samba_tensor_reverse_dims(x, &t));
    CHECK(data_of(t) == data_of(x));
    CHECK_OK(samba_tensor_strides(t, &strides, &rank));
    CHECK(rank == 2 && strides[0] == 1 && strides[1] == 3);
    CHECK_TENSOR(t, want_shape, want, 0);
    CHECK_OK(samba_tensor_is_contiguous(t, &contiguous));
    CHECK(contiguous == 0);
    /* contiguous copies a strided view and returns a contiguous one as is. */
    CHECK_OK(samba_tensor_contiguous(t, &c));
    CHECK(c != t && data_of(c) != data_of(x));
    CHECK_OK(samba_tensor_is_contiguous(c, &contiguous));
    CHECK(contiguous == 1);
    CHECK_TENSOR(c, want_shape, want, 0);
    samba_tensor_release(c);
    CHECK_OK(samba_tensor_contiguous(x, &c));
    CHECK(c == x);
    samba_tensor_release(c);
  }
  /* view_as works on contiguous data and refuses a strided view. */
  {
    const int64_t six[] = {6};
    samba_tensor* like = NULL;
    samba_tensor* out = (samba_tensor*)x;
    CHECK_OK(samba_tensor_create(SAMBA_INT8, six, 1, &like));
    CHECK_OK(samba_tensor_view_as(x, like, &c));
    CHECK(data_of(c) == data_of(x) && dtype_of(c) == SAMBA_FLOAT32);
    samba_tensor_release(c);
    CHECK_FAILS(samba_tensor_view_as(t, like, &out), SAMBA_ERR_INVALID_ARGUMENT, "without a copy");
    CHECK(out == NULL);
    samba_tensor_release(like);
  }
  /* T reverses every dim of a 3-D tensor, and leaves a vector as it is. */
  {
    const int64_t s3[] = {2, 3, 4};
    const int64_t s1[] = {5};
    const int64_t* dims = NULL;
    samba_tensor* x3 = NULL;
    samba_tensor* x1 = NULL;
    samba_tensor* o = NULL;
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s3, 3, &x3));
    CHECK_OK(samba_tensor_reverse_dims(x3, &o));
    CHECK_OK(samba_tensor_shape(o, &dims, &rank));
    CHECK(rank == 3 && dims[0] == 4 && dims[1] == 3 && dims[2] == 2);
    samba_tensor_release(o);
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s1, 1, &x1));
    CHECK_OK(samba_tensor_reverse_dims(x1, &o));
    CHECK_OK(samba_tensor_shape(o, &dims, &rank));
    CHECK(rank == 1 && dims[0] == 5 && data_of(o) == data_of(x1));
    samba_tensor_release(o);
    /* The deprecated samba_tensor_t stays the same function. */
    CHECK_OK(samba_tensor_t(x3, &o));
    CHECK_OK(samba_tensor_shape(o, &dims, &rank));
    CHECK(rank == 3 && dims[0] == 4 && dims[1] == 3 && dims[2] == 2);
    samba_tensor_release(o);
    /* permute with negative dims. */
    {
      const int64_t perm[] = {-1, 0, 1};
      CHECK_OK(samba_tensor_permute(x3, perm, 3, &o));
      CHECK_OK(samba_tensor_shape(o, &dims, &rank));
      CHECK(rank == 3 && dims[0] == 4 && dims[1] == 2 && dims[2] == 3);
      CHECK_OK(samba_tensor_strides(o, &strides, &rank));
      CHECK(strides[0] == 1 && strides[1] == 12 && strides[2] == 4);
      samba_tensor_release(o);
    }
    samba_tensor_release(x1);
    samba_tensor_release(x3);
  }
  /* reshape of a strided view copies. */
  {
    const int64_t req[] = {6};
    const int64_t want_shape[] = {6};
    const double want[] = {0, 3, 1, 4, 2, 5};
    samba_tensor* flat = NULL;
    CHECK_OK(samba_tensor_reshape(t, req, 1, &flat));
    CHECK(data_of(flat) != data_of(x));
    CHECK_TENSOR(flat, want_shape, want, 0);
    samba_tensor_release(flat);
  }
  samba_tensor_release(t);
  samba_tensor_release(r);
  samba_tensor_release(x);
}

static void test_clone_and_detach(void) {
  const int64_t shape[] = {3};
  const float v[] = {1, 2, 3};
  samba_tensor* x = make_f32(v, shape, 1);
  samba_tensor* c = NULL;
  samba_tensor* d = NULL;
  int32_t rg = -1;
  const char* name = NULL;
  CHECK_OK(samba_tensor_set_name(x, "x"));
  CHECK_OK(samba_tensor_set_requires_grad(x, 1));
  CHECK_OK(samba_tensor_clone(x, &c));
  CHECK(c != x && data_of(c) != data_of(x));
  CHECK_OK(samba_tensor_name(c, &name));
  CHECK(strcmp(name, "") == 0);
  CHECK_OK(samba_tensor_requires_grad(c, &rg));
  CHECK(rg == 1); /* computed from x, so it carries history */
  {
    const double want[] = {1, 2, 3};
    CHECK_TENSOR(c, shape, want, 0);
  }
  /* Gradients flow through clone. */
  {
    samba_tensor* two = NULL;
    samba_tensor* m = NULL;
    samba_tensor* s = NULL;
    samba_tensor* g = NULL;
    const double want[] = {2, 2, 2};
    CHECK_OK(samba_scalar_float(2.0, &two));
    CHECK_OK(samba_mul(NULL, c, two, &m));
    CHECK_OK(samba_sum(NULL, m, NULL, 0, 0, &s));
    CHECK_OK(samba_tensor_backward(s, NULL, 0));
    CHECK_OK(samba_tensor_grad(x, &g));
    CHECK(g != NULL);
    CHECK_TENSOR(g, shape, want, 0);
    samba_tensor_release(s);
    samba_tensor_release(m);
    samba_tensor_release(two);
  }
  /* detach shares data and drops history. */
  CHECK_OK(samba_tensor_detach(x, &d));
  CHECK(data_of(d) == data_of(x));
  CHECK_OK(samba_tensor_requires_grad(d, &rg));
  CHECK(rg == 0);
  {
    const float nine[] = {9, 9, 9};
    const double want[] = {9, 9, 9};
    CHECK_OK(samba_tensor_copy_from(d, nine, sizeof nine));
    CHECK_TENSOR(x, shape, want, 0);
  }
  samba_tensor_release(d);
  samba_tensor_release(c);
  samba_tensor_release(x);
}

int main(void) {
  test_to_and_shorthands();
  test_to_has_gradient();
  test_new_tensors();
  test_views();
  test_clone_and_detach();
  printf("convert_test: all checks passed\n");
  return 0;
}
