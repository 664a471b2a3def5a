/* Micro-batched training run with section_types FWD, BCKWD, OPT (the
 * modeling guide's loop, which names no ZEROGRAD): without gradient
 * accumulation backward overwrites the gradients, so the weights after
 * several steps are those of the same steps on the whole batch. */
#include "capi_test_util.h"

/* The weight after `steps` steps, on batches of 6 split into micro-batches of `micro` (0: none). */
static double* trained_weight(int64_t micro, int steps, int64_t* k) {
  const int64_t s_w[2] = {3, 4}, s_b[1] = {3}, s_x[2] = {6, 4}, s_y[1] = {6};
  const int64_t labels[6] = {0, 1, 2, 2, 1, 0};
  const char* types[3] = {"FWD", "BCKWD", "OPT"};
  float xs[24], ws[12], bs[3] = {0, 0, 0};
  LinearNet net;
  samba_session* s = NULL;
  samba_attrs* hp = NULL;
  samba_optimizer* opt = NULL;
  samba_compile_options* co = NULL;
  samba_run_options* ro = NULL;
  samba_tensor *x, *y, *in[2], *params[2], *traced = NULL, *dev = NULL, *loss = NULL;
  size_t n = 0, i;
  double* values;
  int step;

  for (i = 0; i < 24; ++i) xs[i] = (float)sin(0.7 * (double)i);
  for (i = 0; i < 12; ++i) ws[i] = (float)(0.05 * (double)i - 0.3);
  net.w = make_f32(ws, s_w, 2);
  net.b = make_f32(bs, s_b, 1);
  CHECK_OK(samba_tensor_set_name(net.w, "fc.weight"));
  CHECK_OK(samba_tensor_set_name(net.b, "fc.bias"));
  CHECK_OK(samba_tensor_set_requires_grad(net.w, 1));
  CHECK_OK(samba_tensor_set_requires_grad(net.b, 1));
  x = make_f32(xs, s_x, 2);
  y = make_i64(labels, s_y, 1);
  CHECK_OK(samba_tensor_set_name(x, "x"));
  CHECK_OK(samba_tensor_set_name(y, "y"));
  in[0] = x;
  in[1] = y;
  params[0] = net.w;
  params[1] = net.b;

  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_attrs_create(&hp));
  CHECK_OK(samba_attrs_set_float(hp, "lr", 0.5));
  CHECK_OK(samba_optimizer_create("SGD", hp, &opt));
  CHECK_OK(samba_optimizer_add_param_group(opt, params, 2, NULL));
  CHECK_OK(samba_compile_options_create(&co));
  CHECK_OK(samba_compile_options_set_pef_path(co, "capi_micro_batch_sections.pef"));
  if (micro) {
    CHECK_OK(samba_compile_options_set_batch_size(co, 6));
    CHECK_OK(samba_compile_options_set_micro_batch_size(co, micro));
  }
  CHECK_OK(samba_session_compile(s, linear_loss_model, &net, in, 2, &opt, 1, co));
  CHECK_OK(samba_session_trace_graph(s, linear_loss_model, &net, in, 2, &opt, 1, "capi_micro_batch_sections.pef", NULL,
                                     &traced, 1, &n));
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_OK(samba_run_options_set_section_types(ro, types, 3));
  for (step = 0; step < steps; ++step) {
    CHECK_OK(samba_session_run(s, in, 2, NULL, 0, ro, &loss, 1, &n));
    samba_tensor_release(loss);
  }
  CHECK_OK(samba_tensor_sn_data(s, net.w, &dev));
  values = values_of(dev, k);

  samba_tensor_release(dev);
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
  remove("capi_micro_batch_sections.pef");
  remove("capi_micro_batch_sections.pef.log");
  return values;
}

int main(void) {
  int64_t k = 0, j;
  double* whole = trained_weight(0, 5, &k);
  double* micro = trained_weight(2, 5, &k);
  for (j = 0; j < k; ++j) CHECK_NEAR(micro[j], whole[j], 1e-5);
  free(whole);
  free(micro);
  printf("micro_batch_sections_test: ok\n");
  return 0;
}
