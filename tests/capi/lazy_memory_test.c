/* A model whose parameters total 4 GiB compiles in lazy parameter mode (with
 * SGD, so its gradients and momentum are planned too) while the process's
 * peak resident memory stays under 100 MiB: compiling never materializes. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>

#include "capi_test_util.h"

/* SAMBA_ASAN, SAMBA_TSAN: plain preprocessor, so C includes it too. */
#include "../../engine/core/sanitizers.h"

#define LAYERS 8

typedef struct {
  samba_tensor* w[LAYERS];
} Net;

static samba_status model(void* user, samba_tensor* const* in, size_t n_in, samba_tensor** out, size_t cap,
                          size_t* n_out) {
  Net* net = (Net*)user;
  samba_tensor* h = in[0];
  samba_status st = SAMBA_OK;
  int i;
  if (n_in != 1 || cap < 1) return SAMBA_ERR_INVALID_ARGUMENT;
  samba_tensor_retain(h);
  for (i = 0; i < LAYERS && st == SAMBA_OK; ++i) {
    samba_tensor* next = NULL;
    st = samba_linear(NULL, h, net->w[i], NULL, &next);
    samba_tensor_release(h);
    h = next;
  }
  if (st == SAMBA_OK) st = samba_sum(NULL, h, NULL, 0, 0, &out[0]);
  samba_tensor_release(h);
  if (st == SAMBA_OK) *n_out = 1;
  return st;
}

/* Peak resident set (VmHWM) in KiB, or -1. */
static long peak_rss_kb(void) {
  char line[256];
  long kb = -1;
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0) kb = strtol(line + 6, NULL, 10);
  fclose(f);
  return kb;
}

int main(void) {
  const int64_t wide = 16384, narrow = 8192, xs[2] = {2, 8192};
  samba_session* s = NULL;
  samba_materializer* m = NULL;
  samba_optimizer* opt = NULL;
  samba_compile_options* co = NULL;
  samba_tensor* x = NULL;
  Net net;
  int64_t total = 0;
  long peak;
  int i;

  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_session_enable_lazy_param(s, NULL));
  CHECK_OK(samba_materializer_create("linear_weight", NULL, &m));
  for (i = 0; i < LAYERS; ++i) {
    int64_t shape[2];
    char name[32];
    shape[0] = i % 2 == 0 ? wide : narrow;
    shape[1] = i % 2 == 0 ? narrow : wide;
    snprintf(name, sizeof name, "layer%d.weight", i);
    CHECK_OK(samba_session_create_parameter(s, name, SAMBA_FLOAT32, shape, 2, m, &net.w[i]));
    total += shape[0] * shape[1] * 4;
  }
  CHECK(total == (int64_t)4 << 30);
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, xs, 2, &x));
  CHECK_OK(samba_tensor_set_name(x, "x"));
  CHECK_OK(samba_optimizer_create("SGD", NULL, &opt));
  CHECK_OK(samba_optimizer_add_param_group(opt, net.w, LAYERS, NULL));
  CHECK_OK(samba_compile_options_create(&co));
  CHECK_OK(samba_compile_options_set_pef_path(co, "capi_lazy_memory.pef"));
  CHECK_OK(samba_session_compile(s, model, &net, &x, 1, &opt, 1, co));

  for (i = 0; i < LAYERS; ++i) {
    int32_t has = 1;
    CHECK_OK(samba_tensor_has_data(net.w[i], &has));
    CHECK(has == 0);
  }
  peak = peak_rss_kb();
  printf("lazy_memory_test: 4 GiB of parameters compiled with a peak RSS of %.1f MiB\n", (double)peak / 1024.0);
#if SAMBA_ASAN || SAMBA_TSAN
  /* The sanitizer's shadow memory and quarantine count towards the RSS, and
     so does the instrumented library's code. */
  CHECK(peak > 0);
#else
  CHECK(peak > 0 && peak < 100 * 1024);
#endif

  for (i = 0; i < LAYERS; ++i) samba_tensor_release(net.w[i]);
  samba_tensor_release(x);
  samba_optimizer_release(opt);
  samba_compile_options_release(co);
  samba_materializer_release(m);
  samba_session_release(s);
  remove("capi_lazy_memory.pef");
  remove("capi_lazy_memory.pef.log");
  puts("lazy_memory_test: ok");
  return 0;
}
