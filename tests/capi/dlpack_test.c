/* DLPack import and export: no copies, every dtype, ownership handed over
 * exactly once. */
#include <dlpack/dlpack.h>

#include "capi_test_util.h"

/* A producer: owns its shape/strides/data and counts deleter calls. */
typedef struct {
  DLManagedTensor managed;
  int64_t shape[4];
  int64_t strides[4];
  void* data;
  int* deleted;
} Producer;

static void producer_delete(DLManagedTensor* self) {
  Producer* p = (Producer*)self->manager_ctx;
  ++*p->deleted;
  free(p->data);
  free(p);
}

static Producer* produce(uint8_t code, uint8_t bits, int ndim, const int64_t* shape, size_t nbytes,
                         int* deleted) {
  Producer* p = (Producer*)calloc(1, sizeof(Producer));
  int i;
  CHECK(p != NULL);
  p->data = calloc(1, nbytes ? nbytes : 1);
  CHECK(p->data != NULL);
  p->deleted = deleted;
  for (i = 0; i < ndim; ++i) p->shape[i] = shape[i];
  p->managed.dl_tensor.data = p->data;
  p->managed.dl_tensor.device.device_type = kDLCPU;
  p->managed.dl_tensor.device.device_id = 0;
  p->managed.dl_tensor.ndim = ndim;
  p->managed.dl_tensor.dtype.code = code;
  p->managed.dl_tensor.dtype.bits = bits;
  p->managed.dl_tensor.dtype.lanes = 1;
  p->managed.dl_tensor.shape = p->shape;
  p->managed.dl_tensor.strides = NULL;
  p->managed.dl_tensor.byte_offset = 0;
  p->managed.manager_ctx = p;
  p->managed.deleter = producer_delete;
  return p;
}

static void* data_of(samba_tensor* t) {
  void* p = NULL;
  CHECK_OK(samba_tensor_data(t, &p));
  return p;
}

static void test_round_trip_without_copy(void) {
  const int64_t shape[] = {2, 3};
  const float v[] = {1, 2, 3, 4, 5, 6};
  samba_tensor* x = make_f32(v, shape, 2);
  samba_tensor* back = NULL;
  DLManagedTensor* m = NULL;
  void* original = data_of(x);
  CHECK_OK(samba_tensor_to_dlpack(x, &m));
  CHECK(m != NULL && m->deleter != NULL);
  CHECK(m->dl_tensor.data == data_of(x) && m->dl_tensor.byte_offset == 0);
  CHECK(m->dl_tensor.device.device_type == kDLCPU && m->dl_tensor.ndim == 2);
  CHECK(m->dl_tensor.dtype.code == kDLFloat && m->dl_tensor.dtype.bits == 32 &&
        m->dl_tensor.dtype.lanes == 1);
  CHECK(m->dl_tensor.shape[0] == 2 && m->dl_tensor.shape[1] == 3);
  CHECK(m->dl_tensor.strides[0] == 3 && m->dl_tensor.strides[1] == 1);
  /* The export keeps the data alive after the tensor is released. */
  samba_tensor_release(x);
  CHECK(((const float*)m->dl_tensor.data)[5] == 6);
  CHECK_OK(samba_tensor_from_dlpack(m, &back)); /* takes m over */
  CHECK(data_of(back) == original);
  {
    const double want[] = {1, 2, 3, 4, 5, 6};
    CHECK_TENSOR(back, shape, want, 0);
  }
  samba_tensor_release(back);

  /* A strided view exports its strides, and comes back the same. */
  {
    const int64_t* strides = NULL;
    size_t rank = 0;
    samba_tensor* t = NULL;
    x = make_f32(v, shape, 2);
    CHECK_OK(samba_tensor_t(x, &t));
    CHECK_OK(samba_tensor_to_dlpack(t, &m));
    CHECK(m->dl_tensor.shape[0] == 3 && m->dl_tensor.strides[0] == 1 &&
          m->dl_tensor.strides[1] == 3);
    CHECK_OK(samba_tensor_from_dlpack(m, &back));
    CHECK(data_of(back) == data_of(x));
    CHECK_OK(samba_tensor_strides(back, &strides, &rank));
    CHECK(rank == 2 && strides[0] == 1 && strides[1] == 3);
    samba_tensor_release(back);
    samba_tensor_release(t);
    samba_tensor_release(x);
  }
  /* A consumer that only calls the deleter. */
  x = make_f32(v, shape, 2);
  CHECK_OK(samba_tensor_to_dlpack(x, &m));
  m->deleter(m);
  samba_tensor_release(x);
}

static void test_import_from_a_producer(void) {
  int deleted = 0;
  const int64_t shape[] = {2, 2};
  Producer* p = produce(kDLFloat, 64, 2, shape, 4 * sizeof(double), &deleted);
  samba_tensor* t = NULL;
  samba_tensor* view = NULL;
  double* d = (double*)p->data;
  d[0] = 1.5;
  d[3] = -2;
  CHECK_OK(samba_tensor_from_dlpack(&p->managed, &t));
  CHECK(data_of(t) == (void*)d);
  {
    const double want[] = {1.5, 0, 0, -2};
    CHECK_TENSOR(t, shape, want, 0);
  }
  /* A view outlives the tensor; the deleter runs once, with the last one. */
  {
    samba_index* idx = index_of_int(1);
    CHECK_OK(samba_tensor_index(t, idx, &view));
    samba_index_release(idx);
  }
  samba_tensor_release(t);
  CHECK(deleted == 0);
  samba_tensor_release(view);
  CHECK(deleted == 1);

  /* byte_offset and explicit (transposed) strides are honoured. */
  {
    int64_t* buf;
    const int64_t s3[] = {3, 2};
    deleted = 0;
    p = produce(kDLInt, 64, 2, s3, 7 * sizeof(int64_t), &deleted);
    buf = (int64_t*)p->data;
    buf[0] = 99;
    buf[1] = 10;
    buf[2] = 11;
    buf[3] = 12;
    buf[4] = 13;
    buf[5] = 14;
    buf[6] = 15;
    p->strides[0] = 1;
    p->strides[1] = 3;
    p->managed.dl_tensor.strides = p->strides;
    p->managed.dl_tensor.byte_offset = sizeof(int64_t);
    CHECK_OK(samba_tensor_from_dlpack(&p->managed, &t));
    {
      const double want[] = {10, 13, 11, 14, 12, 15};
      CHECK_TENSOR(t, s3, want, 0);
    }
    samba_tensor_release(t);
    CHECK(deleted == 1);
  }
}

static void test_every_dtype(void) {
  static const struct {
    uint8_t code, bits;
    samba_dtype dtype;
  } kMap[] = {
      {kDLFloat, 32, SAMBA_FLOAT32}, {kDLBfloat, 16, SAMBA_BFLOAT16},
      {kDLFloat, 16, SAMBA_FLOAT16}, {kDLFloat, 64, SAMBA_FLOAT64},
      {kDLInt, 64, SAMBA_INT64},     {kDLInt, 32, SAMBA_INT32},
      {kDLInt, 16, SAMBA_INT16},     {kDLInt, 8, SAMBA_INT8},
      {kDLUInt, 8, SAMBA_UINT8},     {6 /* kDLBool */, 8, SAMBA_BOOL},
  };
  const int64_t shape[] = {3};
  size_t i;
  for (i = 0; i < COUNT_OF(kMap); ++i) {
    int deleted = 0;
    samba_tensor* t = NULL;
    samba_tensor* x = NULL;
    samba_dtype dt = -1;
    DLManagedTensor* m = NULL;
    Producer* p = produce(kMap[i].code, kMap[i].bits, 1, shape, 3 * 8, &deleted);
    CHECK_OK(samba_tensor_from_dlpack(&p->managed, &t));
    CHECK_OK(samba_tensor_dtype(t, &dt));
    CHECK(dt == kMap[i].dtype);
    samba_tensor_release(t);
    CHECK(deleted == 1);
    /* and back out */
    CHECK_OK(samba_tensor_create(kMap[i].dtype, shape, 1, &x));
    CHECK_OK(samba_tensor_to_dlpack(x, &m));
    CHECK(m->dl_tensor.dtype.code == kMap[i].code && m->dl_tensor.dtype.bits == kMap[i].bits &&
          m->dl_tensor.dtype.lanes == 1);
    m->deleter(m);
    samba_tensor_release(x);
  }
  /* A 1-bit unsigned integer from an older producer is bool too. */
  {
    int deleted = 0;
    samba_tensor* t = NULL;
    samba_dtype dt = -1;
    Producer* p = produce(kDLUInt, 1, 1, shape, 3, &deleted);
    CHECK_OK(samba_tensor_from_dlpack(&p->managed, &t));
    CHECK_OK(samba_tensor_dtype(t, &dt));
    CHECK(dt == SAMBA_BOOL);
    samba_tensor_release(t);
  }
  /* 0-dim and zero-size tensors. */
  {
    int deleted = 0;
    samba_tensor* t = NULL;
    const int64_t empty[] = {0, 5};
    Producer* p = produce(kDLFloat, 32, 0, NULL, 4, &deleted);
    p->managed.dl_tensor.shape = NULL;
    CHECK_OK(samba_tensor_from_dlpack(&p->managed, &t));
    samba_tensor_release(t);
    p = produce(kDLFloat, 32, 2, empty, 0, &deleted);
    CHECK_OK(samba_tensor_from_dlpack(&p->managed, &t));
    samba_tensor_release(t);
    CHECK(deleted == 2);
  }
}

static void test_refusals_leave_ownership(void) {
  int deleted = 0;
  const int64_t shape[] = {2};
  samba_tensor* t = NULL;
  Producer* p = produce(kDLFloat, 32, 1, shape, 8, &deleted);
  samba_tensor* sentinel = (samba_tensor*)p;

  p->managed.dl_tensor.device.device_type = kDLCUDA;
  t = sentinel;
  CHECK_FAILS(samba_tensor_from_dlpack(&p->managed, &t), SAMBA_ERR_UNSUPPORTED, "kDLCPU");
  CHECK(t == NULL);
  p->managed.dl_tensor.device.device_type = kDLCPU;

  p->managed.dl_tensor.dtype.code = kDLComplex;
  CHECK_FAILS(samba_tensor_from_dlpack(&p->managed, &t), SAMBA_ERR_UNSUPPORTED, "dtype");
  p->managed.dl_tensor.dtype.code = kDLFloat;
  p->managed.dl_tensor.dtype.bits = 8;
  CHECK_FAILS(samba_tensor_from_dlpack(&p->managed, &t), SAMBA_ERR_UNSUPPORTED, "bits 8");
  p->managed.dl_tensor.dtype.bits = 32;
  p->managed.dl_tensor.dtype.lanes = 4;
  CHECK_FAILS(samba_tensor_from_dlpack(&p->managed, &t), SAMBA_ERR_UNSUPPORTED, "lanes 4");
  p->managed.dl_tensor.dtype.lanes = 1;

  p->strides[0] = -1;
  p->managed.dl_tensor.strides = p->strides;
  CHECK_FAILS(samba_tensor_from_dlpack(&p->managed, &t), SAMBA_ERR_UNSUPPORTED, "negative stride");
  p->managed.dl_tensor.strides = NULL;

  p->managed.dl_tensor.ndim = -1;
  CHECK_FAILS(samba_tensor_from_dlpack(&p->managed, &t), SAMBA_ERR_INVALID_ARGUMENT, "ndim -1");
  p->managed.dl_tensor.ndim = 1;

  p->shape[0] = -2;
  CHECK_FAILS(samba_tensor_from_dlpack(&p->managed, &t), SAMBA_ERR_INVALID_ARGUMENT, "negative");
  p->shape[0] = 2;

  p->managed.dl_tensor.byte_offset = 2;
  CHECK_FAILS(samba_tensor_from_dlpack(&p->managed, &t), SAMBA_ERR_INVALID_ARGUMENT, "aligned");
  p->managed.dl_tensor.byte_offset = 0;

  p->managed.dl_tensor.data = NULL;
  CHECK_FAILS(samba_tensor_from_dlpack(&p->managed, &t), SAMBA_ERR_NULL_POINTER, "data");
  p->managed.dl_tensor.data = p->data;

  {
    const int64_t huge[] = {(int64_t)1 << 40, (int64_t)1 << 40};
    p->managed.dl_tensor.ndim = 2;
    p->shape[0] = huge[0];
    p->shape[1] = huge[1];
    CHECK_FAILS(samba_tensor_from_dlpack(&p->managed, &t), SAMBA_ERR_OUT_OF_RANGE, "64 bits");
    p->managed.dl_tensor.ndim = 1;
    p->shape[0] = 2;
  }
  CHECK_FAILS(samba_tensor_from_dlpack(NULL, &t), SAMBA_ERR_NULL_POINTER, "managed");
  CHECK_FAILS(samba_tensor_from_dlpack(&p->managed, NULL), SAMBA_ERR_NULL_POINTER, "out");
  CHECK(deleted == 0); /* no refusal took ownership */
  CHECK(t == NULL);
  p->managed.deleter(&p->managed);
  CHECK(deleted == 1);

  /* Export refusals. */
  {
    DLManagedTensor* m = (DLManagedTensor*)&deleted;
    samba_tensor* x = NULL;
    CHECK_FAILS(samba_tensor_to_dlpack(NULL, &m), SAMBA_ERR_NULL_POINTER, "'t'");
    CHECK(m == NULL);
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, shape, 1, &x));
    CHECK_FAILS(samba_tensor_to_dlpack(x, NULL), SAMBA_ERR_NULL_POINTER, "'out'");
    CHECK_OK(samba_tensor_clear_data(x));
    m = (DLManagedTensor*)&deleted;
    CHECK_FAILS(samba_tensor_to_dlpack(x, &m), SAMBA_ERR_INVALID_STATE, "no data");
    CHECK(m == NULL);
    samba_tensor_release(x);
  }
}

int main(void) {
  test_round_trip_without_copy();
  test_import_from_a_producer();
  test_every_dtype();
  test_refusals_leave_ownership();
  printf("dlpack_test: all checks passed\n");
  return 0;
}
