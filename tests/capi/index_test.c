/* SambaTensor.__getitem__ / __setitem__ through C: basic items give views,
 * a tensor or list item gathers, writes broadcast the value. */
#include "capi_test_util.h"

static void* data_of(samba_tensor* t) {
  void* p = NULL;
  CHECK_OK(samba_tensor_data(t, &p));
  return p;
}

/* x = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]] as float32. */
static samba_tensor* arange_3x4(void) {
  const int64_t shape[] = {3, 4};
  float v[12];
  int i;
  for (i = 0; i < 12; ++i) v[i] = (float)i;
  return make_f32(v, shape, 2);
}

static samba_tensor* index_get(samba_tensor* x, samba_index* idx) {
  samba_tensor* out = NULL;
  CHECK_OK(samba_tensor_index(x, idx, &out));
  samba_index_release(idx);
  return out;
}

static samba_index* new_index(void) {
  samba_index* idx = NULL;
  CHECK_OK(samba_index_create(&idx));
  return idx;
}

static void test_basic_items_are_views(void) {
  samba_tensor* x = arange_3x4();
  const char* base = (const char*)data_of(x);
  samba_tensor* r;
  samba_index* idx;
  /* x[1] */
  {
    const int64_t s[] = {4};
    const double w[] = {4, 5, 6, 7};
    r = index_get(x, index_of_int(1));
    CHECK(data_of(r) == base + 4 * sizeof(float));
    CHECK_TENSOR(r, s, w, 0);
    samba_tensor_release(r);
  }
  /* x[-1, -2] is a 0-dim view */
  {
    const int64_t* dims = NULL;
    size_t rank = 9;
    double v = 0;
    idx = new_index();
    CHECK_OK(samba_index_add_int(idx, -1));
    CHECK_OK(samba_index_add_int(idx, -2));
    r = index_get(x, idx);
    CHECK_OK(samba_tensor_shape(r, &dims, &rank));
    CHECK(rank == 0);
    CHECK_OK(samba_tensor_item(r, &v));
    CHECK(v == 10);
    samba_tensor_release(r);
  }
  /* x[:, 2] (the seed's example) */
  {
    const int64_t s[] = {3};
    const double w[] = {2, 6, 10};
    idx = new_index();
    CHECK_OK(samba_index_add_slice(idx, 0, 0, 1, SAMBA_SLICE_NO_START | SAMBA_SLICE_NO_STOP));
    CHECK_OK(samba_index_add_int(idx, 2));
    r = index_get(x, idx);
    CHECK(data_of(r) == base + 2 * sizeof(float));
    CHECK_TENSOR(r, s, w, 0);
    samba_tensor_release(r);
  }
  /* x[1:, ::2] and x[-2:100, 1:-1]: Python bounds, clamped */
  {
    const int64_t s[] = {2, 2};
    const double w[] = {4, 6, 8, 10};
    const double w2[] = {5, 6, 9, 10};
    idx = new_index();
    CHECK_OK(samba_index_add_slice(idx, 1, 0, 1, SAMBA_SLICE_NO_STOP));
    CHECK_OK(samba_index_add_slice(idx, 0, 0, 2, SAMBA_SLICE_NO_START | SAMBA_SLICE_NO_STOP));
    r = index_get(x, idx);
    CHECK(data_of(r) == base + 4 * sizeof(float));
    CHECK_TENSOR(r, s, w, 0);
    samba_tensor_release(r);
    idx = new_index();
    CHECK_OK(samba_index_add_slice(idx, -2, 100, 1, 0));
    CHECK_OK(samba_index_add_slice(idx, 1, -1, 1, 0));
    r = index_get(x, idx);
    CHECK_TENSOR(r, s, w2, 0);
    samba_tensor_release(r);
  }
  /* An empty slice x[2:1] has size 0 along that dim. */
  {
    const int64_t* dims = NULL;
    size_t rank = 0;
    idx = new_index();
    CHECK_OK(samba_index_add_slice(idx, 2, 1, 1, 0));
    r = index_get(x, idx);
    CHECK_OK(samba_tensor_shape(r, &dims, &rank));
    CHECK(rank == 2 && dims[0] == 0 && dims[1] == 4);
    samba_tensor_release(r);
  }
  /* x[None, ..., 3] -> shape [1, 3] */
  {
    const int64_t s[] = {1, 3};
    const double w[] = {3, 7, 11};
    idx = new_index();
    CHECK_OK(samba_index_add_none(idx));
    CHECK_OK(samba_index_add_ellipsis(idx));
    CHECK_OK(samba_index_add_int(idx, 3));
    r = index_get(x, idx);
    CHECK(data_of(r) == base + 3 * sizeof(float));
    CHECK_TENSOR(r, s, w, 0);
    samba_tensor_release(r);
  }
  /* x[..., None] -> [3, 4, 1]; an empty index is the whole tensor. */
  {
    const int64_t* dims = NULL;
    size_t rank = 0;
    idx = new_index();
    CHECK_OK(samba_index_add_ellipsis(idx));
    CHECK_OK(samba_index_add_none(idx));
    r = index_get(x, idx);
    CHECK_OK(samba_tensor_shape(r, &dims, &rank));
    CHECK(rank == 3 && dims[0] == 3 && dims[1] == 4 && dims[2] == 1);
    samba_tensor_release(r);
    r = index_get(x, new_index());
    CHECK_OK(samba_tensor_shape(r, &dims, &rank));
    CHECK(rank == 2 && dims[0] == 3 && dims[1] == 4 && data_of(r) == base && r != x);
    samba_tensor_release(r);
  }
  /* Writes through a view are seen by x. */
  {
    const float v = 100;
    r = index_get(x, index_of_int(2));
    idx = index_of_int(0);
    CHECK_OK(samba_tensor_index_put_scalar(r, idx, v));
    samba_index_release(idx);
    samba_tensor_release(r);
    CHECK(((const float*)data_of(x))[8] == 100);
  }
  samba_tensor_release(x);
}

static void test_gathers(void) {
  samba_tensor* x = arange_3x4();
  samba_tensor* r;
  samba_index* idx;
  /* x[None, :, index_tensor] with a float index tensor, as in the seed. */
  {
    const int64_t s1[] = {2};
    const float where[] = {0, 2};
    const int64_t s[] = {1, 3, 2};
    const double w[] = {0, 2, 4, 6, 8, 10};
    samba_tensor* it = make_f32(where, s1, 1);
    idx = new_index();
    CHECK_OK(samba_index_add_none(idx));
    CHECK_OK(samba_index_add_slice(idx, 0, 0, 1, SAMBA_SLICE_NO_START | SAMBA_SLICE_NO_STOP));
    CHECK_OK(samba_index_add_tensor(idx, it));
    samba_tensor_release(it); /* the index retains it */
    r = index_get(x, idx);
    CHECK(data_of(r) != data_of(x));
    CHECK_TENSOR(r, s, w, 0);
    samba_tensor_release(r);
  }
  /* x[[2, -3, 2]] with repeats and a negative position */
  {
    const int64_t pos[] = {2, -3, 2};
    const int64_t s[] = {3, 4};
    const double w[] = {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11};
    idx = new_index();
    CHECK_OK(samba_index_add_list(idx, pos, 3));
    r = index_get(x, idx);
    CHECK_TENSOR(r, s, w, 0);
    samba_tensor_release(r);
  }
  /* x[1, [3, 0]]: the integer is a select first, as in PyTorch */
  {
    const int64_t pos[] = {3, 0};
    const int64_t s[] = {2};
    const double w[] = {7, 4};
    idx = new_index();
    CHECK_OK(samba_index_add_int(idx, 1));
    CHECK_OK(samba_index_add_list(idx, pos, 2));
    r = index_get(x, idx);
    CHECK_TENSOR(r, s, w, 0);
    samba_tensor_release(r);
  }
  /* An int32 index tensor and a bool mask on the last dim via ellipsis */
  {
    const int64_t s4[] = {4};
    const int64_t s[] = {3, 2};
    const double w[] = {1, 3, 5, 7, 9, 11};
    samba_tensor* mask = NULL;
    samba_tensor* i32 = NULL;
    uint8_t m[4] = {0, 1, 0, 1};
    const int32_t p[] = {1, 3};
    const int64_t s2[] = {2};
    CHECK_OK(samba_tensor_create(SAMBA_BOOL, s4, 1, &mask));
    CHECK_OK(samba_tensor_copy_from(mask, m, sizeof m));
    idx = new_index();
    CHECK_OK(samba_index_add_ellipsis(idx));
    CHECK_OK(samba_index_add_tensor(idx, mask));
    r = index_get(x, idx);
    CHECK_TENSOR(r, s, w, 0);
    samba_tensor_release(r);
    CHECK_OK(samba_tensor_create(SAMBA_INT32, s2, 1, &i32));
    CHECK_OK(samba_tensor_copy_from(i32, p, sizeof p));
    idx = new_index();
    CHECK_OK(samba_index_add_slice(idx, 0, 0, 1, SAMBA_SLICE_NO_START | SAMBA_SLICE_NO_STOP));
    CHECK_OK(samba_index_add_tensor(idx, i32));
    r = index_get(x, idx);
    CHECK_TENSOR(r, s, w, 0);
    samba_tensor_release(r);
    samba_tensor_release(i32);
    samba_tensor_release(mask);
  }
  /* A 0-dim index tensor acts like an integer (a view). */
  {
    samba_tensor* two = NULL;
    const int64_t s[] = {4};
    const double w[] = {8, 9, 10, 11};
    CHECK_OK(samba_scalar_int(2, &two));
    idx = new_index();
    CHECK_OK(samba_index_add_tensor(idx, two));
    r = index_get(x, idx);
    CHECK(data_of(r) == (const char*)data_of(x) + 8 * sizeof(float));
    CHECK_TENSOR(r, s, w, 0);
    samba_tensor_release(r);
    samba_tensor_release(two);
  }
  /* An empty list gives an empty dim. */
  {
    const int64_t* dims = NULL;
    size_t rank = 0;
    idx = new_index();
    CHECK_OK(samba_index_add_list(idx, NULL, 0));
    r = index_get(x, idx);
    CHECK_OK(samba_tensor_shape(r, &dims, &rank));
    CHECK(rank == 2 && dims[0] == 0 && dims[1] == 4);
    samba_tensor_release(r);
  }
  samba_tensor_release(x);
}

static void test_setitem(void) {
  const int64_t shape[] = {2, 3};
  samba_tensor* t = NULL;
  samba_index* idx;
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, 2, &t));
  /* t[:, 2] = ones(2) (the seed's example) */
  {
    const int64_t s2[] = {2};
    const float ones[] = {1, 1};
    const double w[] = {0, 0, 1, 0, 0, 1};
    samba_tensor* v = make_f32(ones, s2, 1);
    idx = new_index();
    CHECK_OK(samba_index_add_slice(idx, 0, 0, 1, SAMBA_SLICE_NO_START | SAMBA_SLICE_NO_STOP));
    CHECK_OK(samba_index_add_int(idx, 2));
    CHECK_OK(samba_tensor_index_put(t, idx, v));
    samba_index_release(idx);
    samba_tensor_release(v);
    CHECK_TENSOR(t, shape, w, 0);
  }
  /* t[None, :, index_tensor] = 2 * ones(1, 2, 2) (the seed's example) */
  {
    const int64_t s1[] = {2};
    const float where[] = {0, 2};
    const int64_t s3[] = {1, 2, 2};
    const float twos[] = {2, 2, 2, 2};
    const double w[] = {2, 0, 2, 2, 0, 2};
    samba_tensor* it = make_f32(where, s1, 1);
    samba_tensor* v = make_f32(twos, s3, 3);
    idx = new_index();
    CHECK_OK(samba_index_add_none(idx));
    CHECK_OK(samba_index_add_slice(idx, 0, 0, 1, SAMBA_SLICE_NO_START | SAMBA_SLICE_NO_STOP));
    CHECK_OK(samba_index_add_tensor(idx, it));
    CHECK_OK(samba_tensor_index_put(t, idx, v));
    samba_index_release(idx);
    samba_tensor_release(v);
    samba_tensor_release(it);
    CHECK_TENSOR(t, shape, w, 0);
  }
  /* t[1] = 7 (a scalar), t[0, [1]] = value broadcast from shape [1, 1, 1] */
  {
    const double w[] = {2, -4, 2, 7, 7, 7};
    const int64_t pos[] = {1};
    const int64_t s111[] = {1, 1, 1};
    const float m4[] = {-4};
    samba_tensor* v = make_f32(m4, s111, 3);
    idx = index_of_int(1);
    CHECK_OK(samba_tensor_index_put_scalar(t, idx, 7));
    samba_index_release(idx);
    idx = index_of_int(0);
    CHECK_OK(samba_index_add_list(idx, pos, 1));
    CHECK_OK(samba_tensor_index_put(t, idx, v));
    samba_index_release(idx);
    samba_tensor_release(v);
    CHECK_TENSOR(t, shape, w, 0);
  }
  /* A row broadcast over a list of rows, into an int32 tensor (converted). */
  {
    const int64_t s3[] = {3};
    const float row[] = {1.9f, 2.0f, -3.5f};
    const int64_t pos[] = {1, 0};
    const double w[] = {1, 2, -3, 1, 2, -3};
    samba_tensor* ti = NULL;
    samba_tensor* v = make_f32(row, s3, 1);
    CHECK_OK(samba_tensor_create(SAMBA_INT32, shape, 2, &ti));
    idx = new_index();
    CHECK_OK(samba_index_add_list(idx, pos, 2));
    CHECK_OK(samba_tensor_index_put(ti, idx, v));
    samba_index_release(idx);
    CHECK_TENSOR(ti, shape, w, 0);
    samba_tensor_release(v);
    samba_tensor_release(ti);
  }
  /* Writing a view of t into t reads the values from before the write. */
  {
    const double w[] = {2, 2, -4, 7, 7, 7};
    samba_tensor* src = NULL;
    samba_index* head = new_index();
    CHECK_OK(samba_index_add_int(head, 0));
    CHECK_OK(samba_index_add_slice(head, 0, 2, 1, 0));
    CHECK_OK(samba_tensor_index(t, head, &src)); /* [2, -4] */
    idx = index_of_int(0);
    CHECK_OK(samba_index_add_slice(idx, 1, 0, 1, SAMBA_SLICE_NO_STOP));
    CHECK_OK(samba_tensor_index_put(t, idx, src));
    samba_index_release(idx);
    samba_index_release(head);
    samba_tensor_release(src);
    CHECK_TENSOR(t, shape, w, 0);
  }
  samba_tensor_release(t);
}

static void test_gradient_through_index(void) {
  const int64_t shape[] = {4};
  const float v[] = {1, 2, 3, 4};
  const int64_t pos[] = {3, 0, 3};
  samba_tensor* x = make_f32(v, shape, 1);
  samba_tensor* g = NULL;
  samba_tensor* picked = NULL;
  samba_tensor* sliced = NULL;
  samba_tensor* a = NULL;
  samba_tensor* s = NULL;
  samba_index* idx = new_index();
  const double want[] = {1, 1, 1, 2 + 1};
  CHECK_OK(samba_tensor_set_requires_grad(x, 1));
  CHECK_OK(samba_index_add_list(idx, pos, 3));
  CHECK_OK(samba_tensor_index(x, idx, &picked));
  samba_index_release(idx);
  idx = new_index();
  CHECK_OK(samba_index_add_slice(idx, 1, 0, 1, SAMBA_SLICE_NO_STOP));
  CHECK_OK(samba_tensor_index(x, idx, &sliced));
  samba_index_release(idx);
  /* sum(x[[3, 0, 3]]) + sum(x[1:]): d/dx = [1, 1, 1, 3] */
  CHECK_OK(samba_sum(NULL, picked, NULL, 0, 0, &a));
  CHECK_OK(samba_sum(NULL, sliced, NULL, 0, 0, &s));
  {
    samba_tensor* total = NULL;
    CHECK_OK(samba_add(NULL, a, s, &total));
    CHECK_OK(samba_tensor_backward(total, NULL, 0));
    samba_tensor_release(total);
  }
  CHECK_OK(samba_tensor_grad(x, &g));
  CHECK(g != NULL);
  CHECK_TENSOR(g, shape, want, 0);
  /* Writing into a tensor that requires grad is refused, and x is unchanged. */
  idx = index_of_int(0);
  CHECK_FAILS(samba_tensor_index_put_scalar(x, idx, 5), SAMBA_ERR_INVALID_STATE, "requires grad");
  samba_index_release(idx);
  samba_tensor_release(a);
  samba_tensor_release(s);
  samba_tensor_release(picked);
  samba_tensor_release(sliced);
  samba_tensor_release(x);
}

int main(void) {
  test_basic_items_are_views();
  test_gathers();
  test_setitem();
  test_gradient_through_index();
  printf("index_test: all checks passed\n");
  return 0;
}
