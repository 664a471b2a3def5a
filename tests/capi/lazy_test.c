/* Lazy parameters through the C ABI: enable/disable/query, placeholders
 * without data, the same values lazily or eagerly and for any init_threads,
 * materialize_ and on-demand materialization, custom materializers (values,
 * destroy, failure leaves the placeholder), compile without materializing,
 * trace_graph materializing on the device, a PEF materializing its own
 * parameters, and the session's random streams. */
#include <stdint.h>

#include "capi_test_util.h"

static const int64_t kShape[2] = {64, 48};
#define N (64 * 48)

static samba_tensor* param(samba_session* s, const char* name, samba_materializer* m) {
  samba_tensor* t = NULL;
  CHECK_OK(samba_session_create_parameter(s, name, SAMBA_FLOAT32, kShape, 2, m, &t));
  return t;
}

static void values(samba_tensor* t, float* out) { CHECK_OK(samba_tensor_copy_to(t, out, sizeof(float) * N)); }

static int destroyed = 0;
static void on_destroy(void* user) { destroyed += *(int*)user; }

/* Fills with 1000 + normal(0, 1) from the tensor's stream. */
static samba_status custom_fill(void* user, samba_tensor* out, const samba_rng_stream* rng) {
  (void)user;
  return samba_rng_stream_normal(rng, out, 1000.0, 1.0);
}

static samba_status failing_fill(void* user, samba_tensor* out, const samba_rng_stream* rng) {
  (void)user;
  (void)out;
  (void)rng;
  samba_set_error_message(SAMBA_ERR_IO, "weights file missing");
  return SAMBA_ERR_IO;
}

typedef struct {
  samba_tensor* w;
} Net;

static samba_status model(void* user, samba_tensor* const* in, size_t n_in, samba_tensor** out, size_t cap,
                          size_t* n_out) {
  Net* net = (Net*)user;
  samba_tensor* h = NULL;
  samba_status st;
  if (n_in != 1 || cap < 1) return SAMBA_ERR_INVALID_ARGUMENT;
  if ((st = samba_linear(NULL, in[0], net->w, NULL, &h)) != SAMBA_OK) return st;
  st = samba_sum(NULL, h, NULL, 0, 0, &out[0]);
  samba_tensor_release(h);
  if (st == SAMBA_OK) *n_out = 1;
  return st;
}

int main(void) {
  static float a[N], b[N], c[N];
  samba_session* s = NULL;
  samba_lazy_param_options* lo = NULL;
  samba_materializer *ku = NULL, *custom = NULL, *bad = NULL, *got = NULL;
  samba_tensor *w, *w2;
  int32_t flag = -1;
  const char* kind = NULL;
  int one = 1, threads[4] = {1, 2, 3, 8};
  size_t i, k;
  uint64_t seed0, st0, seed1, st1;

  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_session_use_lazy_param(s, &flag));
  CHECK(flag == 0);
  CHECK_OK(samba_materializer_create("kaiming_uniform", NULL, &ku));
  CHECK_OK(samba_materializer_kind(ku, &kind));
  CHECK(strcmp(kind, "kaiming_uniform") == 0);
  CHECK_FAILS(samba_materializer_create("glorot", NULL, &bad), SAMBA_ERR_NOT_FOUND, "glorot");
  CHECK(bad == NULL);

  /* Eager: materialized at once. */
  w = param(s, "fc.weight", ku);
  CHECK_OK(samba_tensor_has_data(w, &flag));
  CHECK(flag == 1);
  values(w, a);
  {
    /* kaiming_uniform(a=0, leaky_relu): bound = sqrt(2) * sqrt(3 / fan_in). */
    const double bound = sqrt(2.0) * sqrt(3.0 / 48.0);
    double mx = 0;
    for (i = 0; i < N; ++i) mx = fabs(a[i]) > mx ? fabs(a[i]) : mx;
    CHECK(mx <= bound && mx > 0.95 * bound);
  }
  samba_tensor_release(w);

  /* Lazy, for any init_threads: a placeholder with the same values. */
  CHECK_OK(samba_lazy_param_options_create(&lo));
  CHECK_FAILS(samba_lazy_param_options_set_init_threads(lo, 0), SAMBA_ERR_INVALID_ARGUMENT, "init_threads");
  CHECK_FAILS(samba_lazy_param_options_set_bf16_rounding(lo, 7), SAMBA_ERR_INVALID_ARGUMENT, "rounding");
  for (k = 0; k < 4; ++k) {
    CHECK_OK(samba_lazy_param_options_set_init_threads(lo, threads[k]));
    CHECK_OK(samba_session_enable_lazy_param(s, lo));
    CHECK_OK(samba_session_use_lazy_param(s, &flag));
    CHECK(flag == 1);
    w = param(s, "fc.weight", ku);
    CHECK_OK(samba_tensor_has_data(w, &flag));
    CHECK(flag == 0);
    CHECK_OK(samba_tensor_materializer(w, &got));
    CHECK_OK(samba_materializer_kind(got, &kind));
    CHECK(strcmp(kind, "kaiming_uniform") == 0);
    samba_materializer_release(got);
    if (k % 2 == 0) {
      CHECK_OK(samba_tensor_materialize_(w));
      CHECK_OK(samba_tensor_materialize_(w)); /* a no-op the second time */
    }
    values(w, b); /* reading materializes on demand */
    CHECK(memcmp(a, b, sizeof a) == 0);
    samba_tensor_release(w);
  }

  /* Random draws made before change nothing. */
  {
    samba_attrs* at = NULL;
    samba_tensor* r = NULL;
    size_t nr = 0;
    uint64_t sd, sm;
    int j;
    CHECK_OK(samba_attrs_create(&at));
    CHECK_OK(samba_attrs_set_ints(at, "shape", kShape, 2));
    for (j = 0; j < 3; ++j) {
      CHECK_OK(samba_session_random_stream(s, &sd, &sm));
      CHECK_OK(samba_attrs_set_int(at, "seed", (int64_t)sd));
      CHECK_OK(samba_attrs_set_int(at, "offset", (int64_t)sm));
      CHECK_OK(samba_op_call(s, "randn", NULL, 0, at, &r, 1, &nr));
      samba_tensor_release(r);
    }
    samba_attrs_release(at);
    w = param(s, "fc.weight", ku);
    values(w, b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    samba_tensor_release(w);
  }

  /* Another name is another stream; another seed other values. */
  w = param(s, "fc2.weight", ku);
  values(w, b);
  CHECK(memcmp(a, b, sizeof a) != 0);
  samba_tensor_release(w);
  CHECK_OK(samba_lazy_param_options_set_seed(lo, 99));
  CHECK_OK(samba_session_enable_lazy_param(s, lo));
  w = param(s, "fc.weight", ku);
  values(w, b);
  CHECK(memcmp(a, b, sizeof a) != 0);
  samba_tensor_release(w);

  /* Inverse transform sampling changes normal draws, not uniform ones. */
  {
    samba_materializer* nm = NULL;
    CHECK_OK(samba_materializer_create("normal", NULL, &nm));
    w = param(s, "n", nm);
    values(w, b);
    CHECK_OK(samba_lazy_param_options_set_inverse_transform_sampling(lo, 1));
    CHECK_OK(samba_session_enable_lazy_param(s, lo));
    w2 = param(s, "n", nm);
    values(w2, c);
    CHECK(memcmp(b, c, sizeof b) != 0);
    samba_tensor_release(w);
    samba_tensor_release(w2);
    samba_materializer_release(nm);
  }

  /* Custom materializers: values from the tensor's stream; destroy once. */
  CHECK_OK(samba_materializer_create_custom(custom_fill, &one, on_destroy, &custom));
  samba_materializer_release(custom);
  CHECK(destroyed == 1);
  destroyed = 0;
  {
    int weight = 1;
    CHECK_OK(samba_materializer_create_custom(custom_fill, &weight, on_destroy, &custom));
    w = param(s, "custom.weight", custom);
    CHECK_OK(samba_materializer_kind(custom, &kind));
    CHECK(strcmp(kind, "custom") == 0);
    samba_materializer_release(custom);
    CHECK(destroyed == 0); /* the tensor still holds it */
    values(w, b);
    {
      double mean = 0;
      for (i = 0; i < N; ++i) mean += b[i];
      CHECK_NEAR(mean / N, 1000.0, 0.1);
    }
    samba_tensor_release(w);
    CHECK(destroyed == 1);
  }
  CHECK_OK(samba_materializer_create_custom(failing_fill, NULL, NULL, &bad));
  w = param(s, "broken", bad);
  CHECK_FAILS(samba_tensor_materialize_(w), SAMBA_ERR_IO, "weights file missing");
  CHECK_OK(samba_tensor_has_data(w, &flag));
  CHECK(flag == 0); /* still a placeholder */
  samba_tensor_release(w);
  samba_materializer_release(bad);
  CHECK_FAILS(samba_materializer_create_custom(NULL, NULL, NULL, &bad), SAMBA_ERR_NULL_POINTER, "fn");

  /* Parameters the shape cannot take are refused when created. */
  {
    const int64_t vec[1] = {5};
    samba_tensor* v = NULL;
    CHECK_FAILS(samba_session_create_parameter(s, "v", SAMBA_FLOAT32, vec, 1, ku, &v),
                SAMBA_ERR_INVALID_ARGUMENT, "kaiming_uniform");
    CHECK_FAILS(samba_session_create_parameter(s, "i", SAMBA_INT32, kShape, 2, ku, &v), SAMBA_ERR_DTYPE_MISMATCH,
                "floating");
    CHECK(v == NULL);
  }

  /* Compile never materializes; trace_graph materializes on the device with
   * the values the host would get; a PEF loaded alone materializes its own. */
  {
    const int64_t xs[2] = {4, 48};
    samba_tensor *x = NULL, *dev = NULL, *out = NULL;
    samba_compile_options* co = NULL;
    samba_trace_options* to = NULL;
    size_t n = 0;
    Net net;
    samba_session* s2 = NULL;
    CHECK_OK(samba_lazy_param_options_set_seed(lo, 5));
    CHECK_OK(samba_lazy_param_options_set_inverse_transform_sampling(lo, 0));
    CHECK_OK(samba_session_enable_lazy_param(s, lo));
    net.w = param(s, "fc.weight", ku);
    CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, xs, 2, &x));
    CHECK_OK(samba_tensor_set_name(x, "x"));
    CHECK_OK(samba_compile_options_create(&co));
    CHECK_OK(samba_compile_options_set_pef_path(co, "capi_lazy.pef"));
    CHECK_OK(samba_compile_options_set_inference(co, 1));
    CHECK_OK(samba_session_compile(s, model, &net, &x, 1, NULL, 0, co));
    CHECK_OK(samba_tensor_has_data(net.w, &flag));
    CHECK(flag == 0);
    CHECK_OK(samba_session_trace_graph(s, model, &net, &x, 1, NULL, 0, "capi_lazy.pef", NULL, &out, 1, &n));
    samba_tensor_release(out);
    CHECK_OK(samba_tensor_has_data(net.w, &flag));
    CHECK(flag == 0); /* materialized on the device only */
    CHECK_OK(samba_tensor_sn_data(s, net.w, &dev));
    values(dev, b);
    samba_tensor_release(dev);
    values(net.w, c); /* now on the host too */
    CHECK(memcmp(b, c, sizeof b) == 0);

    /* Another session loads the PEF alone, with the same lazy seed. */
    CHECK_OK(samba_session_create(NULL, &s2));
    CHECK_OK(samba_session_enable_lazy_param(s2, lo));
    CHECK_OK(samba_session_load_pef(s2, "capi_lazy.pef"));
    CHECK_OK(samba_tensor_sn_data(s2, net.w, &dev));
    values(dev, a);
    samba_tensor_release(dev);
    CHECK(memcmp(a, c, sizeof a) == 0);
    samba_session_release(s2);

    samba_tensor_release(net.w);

    /* A parameter with values and a materializer: the PEF embeds the values. */
    CHECK_OK(samba_session_disable_lazy_param(s));
    net.w = param(s, "fc.weight", ku);
    CHECK_OK(samba_session_compile(s, model, &net, &x, 1, NULL, 0, co));
    CHECK_OK(samba_session_trace_graph(s, model, &net, &x, 1, NULL, 0, "capi_lazy.pef", NULL, &out, 1, &n));
    samba_tensor_release(out);
    CHECK_OK(samba_tensor_sn_data(s, net.w, &dev));
    values(dev, a);
    samba_tensor_release(dev);
    values(net.w, b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    samba_tensor_release(net.w);
    samba_tensor_release(x);
    samba_compile_options_release(co);
    samba_trace_options_release(to);
  }

  /* Random streams: new at each draw, repeated after a reset. */
  CHECK_OK(samba_session_reset_random_generator(s));
  CHECK_OK(samba_session_random_stream(s, &seed0, &st0));
  CHECK(st0 == 0);
  CHECK_OK(samba_session_random_stream(s, &seed1, &st1));
  CHECK(seed0 == seed1 && st1 == st0 + 1);
  CHECK_OK(samba_session_reset_random_generator(s));
  CHECK_OK(samba_session_random_stream(s, &seed1, &st1));
  CHECK(st1 == st0);

  CHECK_OK(samba_session_disable_lazy_param(s));
  CHECK_OK(samba_session_use_lazy_param(s, &flag));
  CHECK(flag == 0);
  samba_lazy_param_options_release(lo);
  samba_materializer_release(ku);
  samba_materializer_release(NULL);
  samba_session_release(s);
  remove("capi_lazy.pef");
  remove("capi_lazy.pef.log");
  puts("lazy_test: ok");
  return 0;
}
