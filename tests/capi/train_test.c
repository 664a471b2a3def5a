/* Training through the C ABI: compile with SGD, trace_graph, run steps;
 * device tensors (sn_data, sn_grad, cpu, rdu, to_cpu), argins, checkpoints
 * (round trip, refusal of a damaged file), profiles and measurements. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdlib.h>

#include "capi_test_util.h"

static double run_step(samba_session* s, samba_tensor** in, samba_run_options* ro) {
  samba_tensor* loss = NULL;
  size_t n = 0;
  double v = 0;
  CHECK_OK(samba_session_run(s, in, 2, NULL, 0, ro, &loss, 1, &n));
  CHECK(n == 1);
  CHECK_OK(samba_tensor_item(loss, &v));
  samba_tensor_release(loss);
  return v;
}


int main(void) {
  const int64_t s_w[2] = {3, 4}, s_b[1] = {3}, s_x[2] = {6, 4}, s_y[1] = {6};
  const int64_t labels[6] = {0, 1, 2, 2, 1, 0};
  float xs[24];
  LinearNet net;
  samba_session* s = NULL;
  samba_compile_options* co = NULL;
  samba_optimizer* opt = NULL;
  samba_attrs* hp = NULL;
  samba_run_options* ro = NULL;
  samba_tensor *x, *y, *in[2], *traced = NULL, *dev = NULL, *zeros = NULL;
  size_t n = 0, i;
  double first, last = 0, lr = 0;
  const char* name = NULL;
  int step;

  for (i = 0; i < 24; ++i) xs[i] = (float)cos(0.9 * (double)i);
  net.w = named_param("fc.weight", s_w, 2);
  net.b = named_param("fc.bias", s_b, 1);
  x = make_f32(xs, s_x, 2);
  y = make_i64(labels, s_y, 1);
  CHECK_OK(samba_tensor_set_name(x, "x"));
  CHECK_OK(samba_tensor_set_name(y, "y"));
  in[0] = x;
  in[1] = y;

  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_attrs_create(&hp));
  CHECK_OK(samba_attrs_set_float(hp, "lr", 0.5));
  CHECK_OK(samba_attrs_set_float(hp, "momentum", 0.9));
  CHECK_OK(samba_optimizer_create("SGD", hp, &opt));
  {
    samba_tensor* params[2];
    params[0] = net.w;
    params[1] = net.b;
    CHECK_OK(samba_optimizer_add_param_group(opt, params, 2, NULL));
    CHECK_FAILS(samba_optimizer_add_param_group(opt, params, 1, NULL), SAMBA_ERR_INVALID_ARGUMENT,
                "already in a parameter group");
  }
  CHECK_OK(samba_compile_options_create(&co));
  CHECK_OK(samba_compile_options_set_pef_path(co, "capi_train.pef"));
  CHECK_OK(samba_session_compile(s, linear_loss_model, &net, in, 2, &opt, 1, co));
  CHECK_OK(samba_session_trace_graph(s, linear_loss_model, &net, in, 2, &opt, 1, "capi_train.pef", NULL, &traced, 1, &n));
  CHECK(n == 1);

  /* The PEF's names: weights and the optimizer's argins. */
  CHECK_OK(samba_session_name_count(s, SAMBA_NAMES_WEIGHTS, &n));
  CHECK(n == 2);
  CHECK_OK(samba_session_name_count(s, SAMBA_NAMES_ARGINS, &n));
  CHECK(n == 4); /* lr, momentum, dampening, weight_decay */
  CHECK_OK(samba_session_name_at(s, SAMBA_NAMES_ARGINS, 0, &name));
  CHECK(strcmp(name, "lr") == 0);
  CHECK_OK(samba_session_argin(s, "lr", &lr));
  CHECK_NEAR(lr, 0.5, 0);
  CHECK_FAILS(samba_session_argin(s, "nope", &lr), SAMBA_ERR_NOT_FOUND, "nope");

  /* Training lowers the loss. */
  CHECK_OK(samba_run_options_create(&ro));
  first = run_step(s, in, ro);
  for (step = 0; step < 30; ++step) last = run_step(s, in, ro);
  CHECK(last < 0.5 * first);

  /* sn_grad, cpu(): the host tensor takes the device's values and gradient. */
  CHECK_OK(samba_tensor_sn_grad(s, net.w, &dev));
  samba_tensor_release(dev);
  CHECK_OK(samba_tensor_cpu(s, net.w));
  {
    samba_tensor* g = NULL;
    CHECK_OK(samba_tensor_grad(net.w, &g));
    CHECK(g != NULL);
  }
  CHECK_OK(samba_session_to_cpu(s, SAMBA_TRANSFER_PARAMETERS | SAMBA_TRANSFER_OPTIMIZER_STATE));
  CHECK_OK(samba_session_get_samba_tensor_by_name(s, "fc.weight.momentum_buffer", &dev));
  samba_tensor_release(dev);
  CHECK_FAILS(samba_session_to_cpu(s, 64), SAMBA_ERR_INVALID_ARGUMENT, "SAMBA_TRANSFER_PARAMETERS");

  /* Checkpoints: save, clobber the device weights, load them back. */
  CHECK_OK(samba_session_save_checkpoint(s, "capi_train.ckpt", SAMBA_TRANSFER_PARAMETERS));
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s_w, 2, &zeros));
  CHECK_OK(samba_tensor_set_sn_data(s, net.w, zeros));
  CHECK_OK(samba_session_load_checkpoint(s, "capi_train.ckpt", SAMBA_TRANSFER_PARAMETERS, 1));
  CHECK_OK(samba_tensor_sn_data(s, net.w, &dev));
  {
    int64_t k = 0, k2 = 0, j;
    double *a = values_of(dev, &k), *b = values_of(net.w, &k2);
    for (j = 0; j < k; ++j) CHECK_NEAR(a[j], b[j], 0);
    free(a);
    free(b);
  }
  samba_tensor_release(dev);
  {
    /* A damaged checkpoint is refused and changes nothing. */
    FILE* f = fopen("capi_train.ckpt", "r+b");
    CHECK(f != NULL);
    fseek(f, 100, SEEK_SET);
    fputc(0x5A, f);
    fclose(f);
    CHECK_OK(samba_tensor_set_sn_data(s, net.w, zeros));
    CHECK(samba_session_load_checkpoint(s, "capi_train.ckpt", SAMBA_TRANSFER_PARAMETERS, 1) ==
          SAMBA_ERR_CORRUPT_FILE);
    CHECK(strstr(samba_last_error_message(), "capi_train.ckpt") != NULL);
    CHECK_OK(samba_tensor_sn_data(s, net.w, &dev));
    {
      int64_t k = 0, j;
      double* a = values_of(dev, &k);
      for (j = 0; j < k; ++j) CHECK_NEAR(a[j], 0, 0);
      free(a);
    }
    samba_tensor_release(dev);
    CHECK_OK(samba_tensor_rdu(s, net.w)); /* the host still has the trained values */
  }

  /* A Samba profile of a run: a Chrome trace with the seed's event names. */
  CHECK_OK(samba_session_start_profile(s));
  CHECK_FAILS(samba_session_start_profile(s), SAMBA_ERR_INVALID_STATE, "already");
  run_step(s, in, ro);
  CHECK_OK(samba_session_end_profile(s, "capi_train.trace.json"));
  CHECK(file_contains("capi_train.trace.json", "\"traceEvents\""));
  CHECK(file_contains("capi_train.trace.json", "SAMBA_SESSION_RUN"));
  CHECK(file_contains("capi_train.trace.json", "PyRT_RUN"));
  CHECK(file_contains("capi_train.trace.json", "linear_0"));
  /* Kernel events carry what each kernel loads and stores, and its flops. */
  CHECK(file_contains("capi_train.trace.json", "\"args\":{\"bytes\":"));
  CHECK(file_contains("capi_train.trace.json", "\"flops\":"));
  /* The runtime profile, when ENABLE_RUNTIME_PERF asks for it. */
  CHECK(setenv("ENABLE_RUNTIME_PERF", "SUMMARY", 1) == 0);
  CHECK_OK(samba_session_start_runtime_profile(s, 1));
  run_step(s, in, ro);
  CHECK_OK(samba_session_end_runtime_profile(s, "capi_train.perf.log"));
  CHECK(file_contains("capi_train.perf.log", "PyRT_RUN"));
  /* Per-kernel byte rates beside the machine's memcpy bandwidth. */
  CHECK(file_contains("capi_train.perf.log", "memcpy bandwidth "));
  CHECK(file_contains("capi_train.perf.log", "GB/s memcpy %"));

  /* Measurements of whole runs and of each section. */
  {
    samba_perf_report r, sections[4];
    size_t k;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    CHECK_OK(samba_session_measure_performance(s, in, 2, NULL, 5, 1, &r));
    CHECK(r.iterations == 5 && r.batch_size == 6 && r.samples_per_second > 0);
    CHECK(r.latency_p50_ms > 0 && r.latency_p99_ms >= r.latency_p50_ms && r.latency_max_ms >= r.latency_p99_ms);
    for (k = 0; k < 4; ++k) {
      memset(&sections[k], 0, sizeof sections[k]);
      sections[k].struct_size = sizeof sections[k];
    }
    CHECK_FAILS(samba_session_measure_sections(s, in, 2, 3, 0, sections, 2, &n), SAMBA_ERR_OUT_OF_RANGE, "holds 2");
    CHECK(n == 3);
    CHECK_OK(samba_session_measure_sections(s, in, 2, 3, 0, sections, 4, &n));
    CHECK(n == 3 && sections[1].section_id >= 0 && sections[2].latency_mean_ms > 0);
    r.struct_size = 4;
    CHECK_FAILS(samba_session_measure_performance(s, in, 2, NULL, 5, 1, &r), SAMBA_ERR_INVALID_ARGUMENT,
                "struct_size");
  }

  samba_tensor_release(zeros);
  samba_tensor_release(traced);
  samba_run_options_release(ro);
  samba_compile_options_release(co);
  samba_optimizer_release(opt);
  samba_attrs_release(hp);
  samba_session_release(s);
  samba_tensor_release(x);
  samba_tensor_release(y);
  samba_tensor_release(net.w);
  samba_tensor_release(net.b);
  remove("capi_train.pef");
  remove("capi_train.pef.log");
  remove("capi_train.ckpt");
  remove("capi_train.trace.json");
  remove("capi_train.perf.log");
  printf("train_test: ok\n");
  return 0;
}
