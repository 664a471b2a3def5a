/* Pinned memory and the loader through the C ABI: enable/disable/query,
 * fast_access moving engine-owned memory into the pinned pool (values kept,
 * caller memory left alone), the pool's statistics and reuse, is_fast_access
 * by name; the loader's batches in order (pinned, named), end of data, its
 * limit, reset, a producer error reaching the consumer with its message, a
 * timeout that returns instead of hanging, and release mid-epoch. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <time.h>

#include "capi_test_util.h"

static void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

typedef struct {
  int64_t fail_at;  /* -1: never */
  int64_t end_at;   /* batches before the end */
  long delay_ms;    /* per batch */
  int destroyed;
  int64_t produced;
} Producer;

static samba_status produce(void* user, int64_t index, samba_tensor** out, size_t n, int32_t* end) {
  Producer* p = (Producer*)user;
  const int64_t shape[1] = {4};
  int64_t labels[4];
  float xs[4];
  int k;
  if (n != 2) return SAMBA_ERR_INVALID_ARGUMENT;
  if (p->delay_ms) sleep_ms(p->delay_ms);
  if (index == p->fail_at) {
    samba_set_error_message(SAMBA_ERR_IO, "cannot read shard 3");
    return SAMBA_ERR_IO;
  }
  if (index >= p->end_at) {
    *end = 1;
    return SAMBA_OK;
  }
  for (k = 0; k < 4; ++k) {
    xs[k] = (float)(index * 10 + k);
    labels[k] = index;
  }
  out[0] = make_f32(xs, shape, 1);
  out[1] = make_i64(labels, shape, 1);
  p->produced++;
  return SAMBA_OK;
}

/* out = sum(x * w): a model whose input is named "x". */
static samba_status model(void* user, samba_tensor* const* in, size_t n_in, samba_tensor** out, size_t cap,
                          size_t* n_out) {
  samba_tensor* prod = NULL;
  samba_status st;
  if (n_in != 2 || cap < 1) return SAMBA_ERR_INVALID_ARGUMENT;
  if ((st = samba_mul(NULL, in[0], (samba_tensor*)user, &prod)) != SAMBA_OK) return st;
  st = samba_sum(NULL, prod, NULL, 0, 0, &out[0]);
  samba_tensor_release(prod);
  if (st == SAMBA_OK) *n_out = 1;
  return st;
}

/* Runs the loaded PEF on a batch; returns the output. */
static double run_batch(samba_session* s, samba_tensor** batch) {
  samba_tensor* out = NULL;
  size_t n = 0;
  double v = 0;
  CHECK_OK(samba_session_run(s, batch, 2, NULL, 0, NULL, &out, 1, &n));
  CHECK_OK(samba_tensor_item(out, &v));
  samba_tensor_release(out);
  return v;
}

static void on_destroy(void* user) { ((Producer*)user)->destroyed++; }

static samba_loader* make_loader(Producer* p, int64_t timeout_ms, int64_t limit) {
  const char* names[2] = {"x", "y"};
  samba_loader_options* o = NULL;
  samba_loader* l = NULL;
  CHECK_OK(samba_loader_options_create(&o));
  CHECK_OK(samba_loader_options_set_max_prefetch(o, 2));
  CHECK_OK(samba_loader_options_set_timeout_ms(o, timeout_ms));
  CHECK_OK(samba_loader_options_set_num_batches(o, limit));
  CHECK_OK(samba_loader_create(names, 2, produce, p, on_destroy, o, &l));
  samba_loader_options_release(o);
  return l;
}

int main(void) {
  samba_session* s = NULL;
  samba_pinned_stats st, st2;
  samba_tensor *t = NULL, *b[2];
  int32_t flag = -1, end = -1;
  void *before = NULL, *after = NULL;
  float vals[1024], buf[8];
  const int64_t shape[1] = {1024};
  size_t i;
  int64_t k;

  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_session_use_pinned_memory(s, &flag));
  CHECK(flag == 0);
  CHECK_OK(samba_session_enable_pinned_memory(s));
  CHECK_OK(samba_session_use_pinned_memory(s, &flag));
  CHECK(flag == 1);

  memset(&st, 0, sizeof st);
  CHECK_FAILS(samba_pinned_memory_stats(&st), SAMBA_ERR_INVALID_ARGUMENT, "struct_size");
  st.struct_size = sizeof st;
  CHECK_OK(samba_pinned_memory_stats(&st));

  /* fast_access moves engine-owned memory into the pool, values intact. */
  for (i = 0; i < 1024; ++i) vals[i] = (float)i * 0.5f;
  t = make_f32(vals, shape, 1);
  CHECK_OK(samba_tensor_set_name(t, "x"));
  CHECK_OK(samba_tensor_data(t, &before));
  CHECK_OK(samba_tensor_set_fast_access(s, t, 1));
  CHECK_OK(samba_tensor_fast_access(t, &flag));
  CHECK(flag == 1);
  CHECK_OK(samba_tensor_data(t, &after));
  CHECK(before != after);
  CHECK(memcmp(after, vals, sizeof vals) == 0);
  CHECK_OK(samba_session_is_fast_access(s, "x", &flag));
  CHECK(flag == 1);
  CHECK_OK(samba_session_is_fast_access(s, "nobody", &flag));
  CHECK(flag == 0);
  st2.struct_size = sizeof st2;
  CHECK_OK(samba_pinned_memory_stats(&st2));
  CHECK(st2.bytes_in_use >= st.bytes_in_use + sizeof vals);
  CHECK(st2.bytes_reserved >= st2.bytes_in_use);
  CHECK_OK(samba_tensor_reusable(t, &flag));
  CHECK(flag == 1);
  samba_tensor_release(t);
  /* The freed block serves the next request of its size: a hit. */
  t = make_f32(vals, shape, 1);
  CHECK_OK(samba_tensor_set_fast_access(s, t, 1));
  CHECK_OK(samba_pinned_memory_stats(&st));
  CHECK(st.hits >= st2.hits + 1);
  samba_tensor_release(t);

  /* Caller memory stays where it is. */
  CHECK_OK(samba_tensor_wrap(vals, SAMBA_FLOAT32, shape, 1, NULL, &t));
  CHECK_OK(samba_tensor_set_fast_access(s, t, 1));
  CHECK_OK(samba_tensor_data(t, &after));
  CHECK(after == (void*)vals);
  samba_tensor_release(t);
  CHECK_OK(samba_session_set_fast_access(s, "out_grad", 1));
  CHECK_OK(samba_session_is_fast_access(s, "out_grad", &flag));
  CHECK(flag == 1);
  CHECK_OK(samba_session_disable_pinned_memory(s));

  /* The loader: batches in order, pinned and named, then the end. */
  {
    Producer p = {-1, 5, 0, 0, 0};
    samba_loader* l = make_loader(&p, 10000, -1);
    const char* name = NULL;
    CHECK_FAILS(samba_loader_next(l, b, 1, &end), SAMBA_ERR_INVALID_ARGUMENT, "holds 1");
    for (k = 0; k < 5; ++k) {
      CHECK_OK(samba_loader_next(l, b, 2, &end));
      CHECK(end == 0);
      CHECK_OK(samba_tensor_copy_to(b[0], buf, 4 * sizeof(float)));
      CHECK(buf[0] == (float)(k * 10) && buf[3] == (float)(k * 10 + 3));
      CHECK_OK(samba_tensor_name(b[1], &name));
      CHECK(strcmp(name, "y") == 0);
      CHECK_OK(samba_tensor_fast_access(b[0], &flag));
      CHECK(flag == 1);
      samba_tensor_release(b[0]);
      samba_tensor_release(b[1]);
    }
    CHECK_OK(samba_loader_next(l, b, 2, &end));
    CHECK(end == 1);
    CHECK_OK(samba_loader_next(l, b, 2, &end));
    CHECK(end == 1);
    /* A new epoch starts at batch 0 again. */
    CHECK_OK(samba_loader_reset(l));
    CHECK_OK(samba_loader_next(l, b, 2, &end));
    CHECK_OK(samba_tensor_copy_to(b[0], buf, 4 * sizeof(float)));
    CHECK(end == 0 && buf[0] == 0.0f);
    samba_tensor_release(b[0]);
    samba_tensor_release(b[1]);
    samba_loader_release(l);
    CHECK(p.destroyed == 1);
  }

  /* A batch limit ends the epoch early. */
  {
    Producer p = {-1, 100, 0, 0, 0};
    samba_loader* l = make_loader(&p, 10000, 2);
    for (k = 0; k < 2; ++k) {
      CHECK_OK(samba_loader_next(l, b, 2, &end));
      CHECK(end == 0);
      samba_tensor_release(b[0]);
      samba_tensor_release(b[1]);
    }
    CHECK_OK(samba_loader_next(l, b, 2, &end));
    CHECK(end == 1);
    samba_loader_release(l);
  }

  /* A producer error reaches the consumer with its message, after the
   * batches made before it, and again on later calls. */
  {
    Producer p = {2, 100, 0, 0, 0};
    samba_loader* l = make_loader(&p, 10000, -1);
    for (k = 0; k < 2; ++k) {
      CHECK_OK(samba_loader_next(l, b, 2, &end));
      samba_tensor_release(b[0]);
      samba_tensor_release(b[1]);
    }
    CHECK_FAILS(samba_loader_next(l, b, 2, &end), SAMBA_ERR_IO, "cannot read shard 3");
    CHECK_FAILS(samba_loader_next(l, b, 2, &end), SAMBA_ERR_IO, "batch 2");
    samba_loader_release(l);
  }

  /* A slow producer: a timeout, then the batch once it is ready. */
  {
    Producer p = {-1, 100, 300, 0, 0};
    samba_loader* l = make_loader(&p, 50, -1);
    CHECK_FAILS(samba_loader_next(l, b, 2, &end), SAMBA_ERR_TIMEOUT, "50 ms");
    sleep_ms(400);
    CHECK_OK(samba_loader_next(l, b, 2, &end));
    CHECK(end == 0);
    samba_tensor_release(b[0]);
    samba_tensor_release(b[1]);
    /* Released while the producer is mid-batch: joins and frees all. */
    samba_loader_release(l);
    CHECK(p.destroyed == 1);
    CHECK(p.produced <= 4); /* at most two ahead, one in flight */
  }

  /* Bad arguments. */
  {
    const char* dup[2] = {"x", "x"};
    samba_loader* l = NULL;
    Producer p = {-1, 1, 0, 0, 0};
    samba_loader_options* o = NULL;
    CHECK_FAILS(samba_loader_create(dup, 2, produce, &p, NULL, NULL, &l), SAMBA_ERR_INVALID_ARGUMENT, "twice");
    CHECK_FAILS(samba_loader_create(dup, 0, produce, &p, NULL, NULL, &l), SAMBA_ERR_INVALID_ARGUMENT, "no tensor");
    CHECK_FAILS(samba_loader_create(dup, 1, NULL, &p, NULL, NULL, &l), SAMBA_ERR_NULL_POINTER, "produce");
    CHECK(l == NULL);
    CHECK_OK(samba_loader_options_create(&o));
    CHECK_FAILS(samba_loader_options_set_max_prefetch(o, 0), SAMBA_ERR_INVALID_ARGUMENT, "max_prefetch");
    CHECK_FAILS(samba_loader_options_set_timeout_ms(o, 0), SAMBA_ERR_INVALID_ARGUMENT, "timeout");
    samba_loader_options_release(o);
    samba_loader_release(NULL);
  }

  /* Runs fed by the loader, with pinned memory: trace_graph marks the
   * inputs fast access; staged and direct transfers give the same results. */
  {
    const int64_t shape[1] = {4};
    const float wv[4] = {1, 2, 3, 4}, xv[4] = {0, 0, 0, 0};
    const int64_t yv[4] = {0, 0, 0, 0};
    samba_tensor *w = make_f32(wv, shape, 1), *x = make_f32(xv, shape, 1), *y = make_i64(yv, shape, 1);
    samba_tensor* in[2];
    samba_compile_options* co = NULL;
    samba_tensor* out = NULL;
    size_t n = 0;
    Producer p = {-1, 3, 0, 0, 0};
    samba_loader* l;
    in[0] = x;
    in[1] = y;
    CHECK_OK(samba_tensor_set_name(w, "w"));
    CHECK_OK(samba_tensor_set_name(x, "x"));
    CHECK_OK(samba_tensor_set_name(y, "y"));
    CHECK_OK(samba_compile_options_create(&co));
    CHECK_OK(samba_compile_options_set_pef_path(co, "capi_pinned.pef"));
    CHECK_OK(samba_compile_options_set_inference(co, 1));
    CHECK_OK(samba_session_compile(s, model, w, in, 2, NULL, 0, co));
    CHECK_OK(samba_session_enable_pinned_memory(s));
    CHECK_OK(samba_session_trace_graph(s, model, w, in, 2, NULL, 0, "capi_pinned.pef", NULL, &out, 1, &n));
    samba_tensor_release(out);
    CHECK_OK(samba_tensor_fast_access(x, &flag));
    CHECK(flag == 1);
    CHECK_OK(samba_session_is_fast_access(s, "y", &flag));
    CHECK(flag == 1);
    l = make_loader(&p, 10000, -1);
    for (k = 0;; ++k) {
      double staged, direct;
      CHECK_OK(samba_loader_next(l, b, 2, &end));
      if (end) break;
      direct = run_batch(s, b);
      /* The same values from pageable memory go through staging blocks. */
      {
        samba_tensor* copy = NULL;
        samba_tensor* pageable[2];
        CHECK_OK(samba_tensor_clone(b[0], &copy));
        CHECK_OK(samba_tensor_set_name(copy, "x"));
        CHECK_OK(samba_tensor_fast_access(copy, &flag));
        CHECK(flag == 0);
        pageable[0] = copy;
        pageable[1] = b[1];
        staged = run_batch(s, pageable);
        samba_tensor_release(copy);
      }
      CHECK_NEAR(direct, 1 * (k * 10) + 2 * (k * 10 + 1) + 3 * (k * 10 + 2) + 4 * (k * 10 + 3), 1e-3);
      CHECK(staged == direct);
      samba_tensor_release(b[0]);
      samba_tensor_release(b[1]);
    }
    CHECK(k == 3);
    samba_loader_release(l);
    samba_compile_options_release(co);
    samba_tensor_release(w);
    samba_tensor_release(x);
    samba_tensor_release(y);
    remove("capi_pinned.pef");
    remove("capi_pinned.pef.log");
  }

  samba_session_release(s);
  puts("pinned_loader_test: ok");
  return 0;
}
