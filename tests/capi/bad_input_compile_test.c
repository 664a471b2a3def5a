/* Bad input to the compile, load and run functions of samba.h: every call
 * returns an error status with a message naming the problem, leaves
 * out-parameters NULL, and leaks nothing (the ASan build checks). */
#include "capi_test_util.h"

typedef struct {
  samba_tensor* w;
  int fail_with;    /* a status the callback returns */
  int wrong_shape;  /* trace something else than what was compiled */
} Net;

static samba_status model(void* user, samba_tensor* const* in, size_t n_in, samba_tensor** out, size_t cap,
                          size_t* n_out) {
  Net* m = (Net*)user;
  samba_tensor* h = NULL;
  samba_status st;
  (void)n_in;
  (void)cap;
  if (m->fail_with) return m->fail_with;
  if ((st = samba_linear(NULL, in[0], m->w, NULL, &h)) != SAMBA_OK) return st;
  if (m->wrong_shape) {
    samba_tensor* r = NULL;
    st = samba_relu(NULL, h, &r);
    samba_tensor_release(h);
    if (st != SAMBA_OK) return st;
    h = r;
  }
  out[0] = h;
  *n_out = 1;
  return SAMBA_OK;
}

/* A callback that reports an output it did not write. */
static samba_status lying_model(void* user, samba_tensor* const* in, size_t n_in, samba_tensor** out, size_t cap,
                                size_t* n_out) {
  (void)user;
  (void)in;
  (void)n_in;
  (void)out;
  (void)cap;
  *n_out = 1;
  return SAMBA_OK;
}

int main(void) {
  const int64_t s_w[2] = {2, 3}, s_x[2] = {4, 3};
  Net net = {NULL, 0, 0};
  samba_session* s = NULL;
  samba_compile_options* co = NULL;
  samba_trace_options* to = NULL;
  samba_run_options* ro = NULL;
  samba_optimizer* opt = NULL;
  samba_graph* g = NULL;
  samba_tensor *x = NULL, *plain = NULL, *out = NULL;
  samba_attrs* bad = NULL;
  size_t n = 7;
  const char* name = "x";

  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s_w, 2, &net.w));
  CHECK_OK(samba_tensor_set_name(net.w, "w"));
  CHECK_OK(samba_tensor_set_requires_grad(net.w, 1));
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s_x, 2, &x));
  CHECK_OK(samba_tensor_set_name(x, "x"));
  CHECK_OK(samba_tensor_create(SAMBA_FLOAT32, s_x, 2, &plain));
  CHECK_OK(samba_session_create(NULL, &s));

  /* Options objects. */
  CHECK_FAILS(samba_compile_options_create(NULL), SAMBA_ERR_NULL_POINTER, "out");
  CHECK_OK(samba_compile_options_create(&co));
  CHECK_FAILS(samba_compile_options_set_name(NULL, "m"), SAMBA_ERR_NULL_POINTER, "opts");
  CHECK_FAILS(samba_compile_options_set_name(co, ""), SAMBA_ERR_INVALID_ARGUMENT, "empty");
  CHECK_FAILS(samba_compile_options_set_pef_path(co, NULL), SAMBA_ERR_NULL_POINTER, "path");
  CHECK_FAILS(samba_compile_options_set_opt_level(co, 2), SAMBA_ERR_INVALID_ARGUMENT, "level 2");
  CHECK_FAILS(samba_compile_options_set_batch_size(co, -1), SAMBA_ERR_INVALID_ARGUMENT, "negative");
  CHECK_FAILS(samba_compile_options_set_micro_batch_size(co, -3), SAMBA_ERR_INVALID_ARGUMENT, "negative");
  CHECK_FAILS(samba_compile_options_set_mapping(co, "diagonal"), SAMBA_ERR_INVALID_ARGUMENT, "diagonal");
  CHECK_FAILS(samba_compile_options_set_mixed_precision(co, "fp16"), SAMBA_ERR_INVALID_ARGUMENT,
              "'fp16' is not supported; expected 'none' or 'bf16'");
  CHECK_FAILS(samba_compile_options_set_mixed_precision(co, "mp4"), SAMBA_ERR_INVALID_ARGUMENT, "mp4");
  CHECK_FAILS(samba_compile_options_set_mixed_precision(co, NULL), SAMBA_ERR_NULL_POINTER, "mode");
  CHECK_FAILS(samba_compile_options_set_mixed_precision(NULL, "bf16"), SAMBA_ERR_NULL_POINTER, "opts");
  CHECK_FAILS(samba_compile_options_set_loss_indices(co, NULL, 2), SAMBA_ERR_NULL_POINTER, "indices");
  CHECK_FAILS(samba_compile_options_set_output_grad(co, 0, 9, NULL), SAMBA_ERR_INVALID_ARGUMENT, "mode 9");
  CHECK_FAILS(samba_compile_options_set_output_grad(co, 0, SAMBA_OUTPUT_GRAD_CUSTOM, NULL), SAMBA_ERR_NULL_POINTER,
              "values");
  CHECK_FAILS(samba_compile_options_add_metadata(co, "", "v"), SAMBA_ERR_INVALID_ARGUMENT, "empty");
  CHECK_FAILS(samba_trace_options_create(NULL), SAMBA_ERR_NULL_POINTER, "out");
  CHECK_OK(samba_trace_options_create(&to));
  CHECK_FAILS(samba_trace_options_set_data_parallel_mode(to, "sideways"), SAMBA_ERR_INVALID_ARGUMENT, "sideways");
  CHECK_OK(samba_trace_options_set_data_parallel_mode(to, "optimal"));
  CHECK_FAILS(samba_trace_options_set_custom_grad(to, "out", NULL), SAMBA_ERR_NULL_POINTER, "values");
  CHECK_FAILS(samba_run_options_create(NULL), SAMBA_ERR_NULL_POINTER, "out");
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_FAILS(samba_run_options_set_section_types(ro, NULL, 1), SAMBA_ERR_NULL_POINTER, "types");
  CHECK_FAILS(samba_run_options_set_call_range(ro, -2, 0), SAMBA_ERR_INVALID_ARGUMENT, "-1");
  CHECK_FAILS(samba_run_options_set_hyperparam(ro, NULL, 1), SAMBA_ERR_NULL_POINTER, "name");

  /* Optimizers. */
  CHECK_FAILS(samba_optimizer_create(NULL, NULL, &opt), SAMBA_ERR_NULL_POINTER, "kind");
  CHECK(opt == NULL);
  CHECK_FAILS(samba_optimizer_create("adam", NULL, &opt), SAMBA_ERR_NOT_FOUND, "'adam'");
  CHECK_OK(samba_attrs_create(&bad));
  CHECK_OK(samba_attrs_set_float(bad, "lr", -1));
  CHECK_FAILS(samba_optimizer_create("sgd", bad, &opt), SAMBA_ERR_INVALID_ARGUMENT, "'lr' must be >= 0");
  CHECK_OK(samba_attrs_set_float(bad, "lr", 0.1));
  CHECK_OK(samba_attrs_set_float(bad, "betas", 0.5));
  CHECK_FAILS(samba_optimizer_create("sgd", bad, &opt), SAMBA_ERR_NOT_FOUND, "betas");
  CHECK_OK(samba_optimizer_create("adamw", NULL, &opt));
  CHECK_FAILS(samba_optimizer_add_param_group(opt, &plain, 1, NULL), SAMBA_ERR_INVALID_ARGUMENT,
              "not a trainable parameter");
  CHECK_FAILS(samba_optimizer_add_param_group(opt, NULL, 1, NULL), SAMBA_ERR_NULL_POINTER, "params");
  CHECK_FAILS(samba_optimizer_step(NULL, NULL), SAMBA_ERR_NULL_POINTER, "opt");

  /* Compiling. */
  CHECK_FAILS(samba_session_compile(NULL, model, &net, &x, 1, NULL, 0, co), SAMBA_ERR_NULL_POINTER, "session");
  CHECK_FAILS(samba_session_compile(s, NULL, &net, &x, 1, NULL, 0, co), SAMBA_ERR_NULL_POINTER, "model");
  CHECK_FAILS(samba_session_compile(s, model, &net, NULL, 1, NULL, 0, co), SAMBA_ERR_NULL_POINTER, "inputs");
  net.fail_with = SAMBA_ERR_SHAPE_MISMATCH;
  CHECK_FAILS(samba_session_compile(s, model, &net, &x, 1, NULL, 0, co), SAMBA_ERR_SHAPE_MISMATCH,
              "model callback returned");
  net.fail_with = 0;
  CHECK_FAILS(samba_session_compile(s, lying_model, NULL, &x, 1, NULL, 0, co), SAMBA_ERR_NULL_POINTER,
              "reported 1 outputs but wrote 0");
  CHECK_OK(samba_compile_options_set_inference(co, 0));
  CHECK_OK(samba_tensor_set_requires_grad(net.w, 0));
  CHECK_FAILS(samba_session_compile(s, model, &net, &x, 1, NULL, 0, co), SAMBA_ERR_INVALID_ARGUMENT,
              "nothing to train");
  CHECK_OK(samba_tensor_set_requires_grad(net.w, 1));
  CHECK_OK(samba_compile_options_set_pef_path(co, "/nonexistent-dir/x.pef"));
  CHECK(samba_session_compile(s, model, &net, &x, 1, NULL, 0, co) == SAMBA_ERR_IO);
  CHECK(strstr(samba_last_error_message(), "/nonexistent-dir/x.pef") != NULL);
  CHECK_OK(samba_compile_options_set_pef_path(co, "capi_bad.pef"));
  CHECK_OK(samba_compile_options_set_inference(co, 1));
  CHECK_OK(samba_session_compile(s, model, &net, &x, 1, NULL, 0, co));
  CHECK_FAILS(samba_session_is_tracing(s, NULL), SAMBA_ERR_NULL_POINTER, "out");

  /* Multigraph. */
  CHECK_FAILS(samba_graph_create(NULL, model, &net, &x, 1, NULL, 0, NULL, &g), SAMBA_ERR_NULL_POINTER, "name");
  CHECK(g == NULL);
  CHECK_FAILS(samba_graph_create("", model, &net, &x, 1, NULL, 0, NULL, &g), SAMBA_ERR_INVALID_ARGUMENT, "empty");
  CHECK_FAILS(samba_session_compile_multigraph(s, co), SAMBA_ERR_INVALID_STATE, "no graph");
  CHECK_OK(samba_graph_create("g1", model, &net, &x, 1, NULL, 0, co, &g));
  CHECK_OK(samba_session_add_graph(s, g, 0));
  CHECK_FAILS(samba_session_add_graph(s, g, 0), SAMBA_ERR_INVALID_ARGUMENT, "'g1' was already added");
  CHECK_OK(samba_session_add_graph(s, g, 1));
  CHECK_OK(samba_session_graph_count(s, &n));
  CHECK(n == 1);
  CHECK_FAILS(samba_session_add_graph(s, NULL, 0), SAMBA_ERR_NULL_POINTER, "graph");

  /* Loading and running. */
  CHECK_FAILS(samba_session_run(s, &x, 1, NULL, 0, ro, &out, 1, &n), SAMBA_ERR_INVALID_STATE, "no PEF is loaded");
  CHECK(out == NULL);
  CHECK_FAILS(samba_session_name_count(s, SAMBA_NAMES_WEIGHTS, &n), SAMBA_ERR_INVALID_STATE, "no PEF");
  CHECK_FAILS(samba_session_load_pef(s, NULL), SAMBA_ERR_NULL_POINTER, "path");
  CHECK_FAILS(samba_session_load_pef(s, "capi_bad.c"), SAMBA_ERR_IO, "capi_bad.c");
  {
    FILE* f = fopen("capi_garbage.pef", "wb");
    CHECK(f != NULL);
    fputs("this is not a PEF file at all, just some text long enough", f);
    fclose(f);
    CHECK(samba_session_load_pef(s, "capi_garbage.pef") == SAMBA_ERR_CORRUPT_FILE);
    remove("capi_garbage.pef");
  }
  net.wrong_shape = 1;
  CHECK_FAILS(samba_session_trace_graph(s, model, &net, &x, 1, NULL, 0, "capi_bad.pef", to, &out, 1, &n),
              SAMBA_ERR_INVALID_ARGUMENT, "relu");
  net.wrong_shape = 0;
  CHECK_FAILS(samba_session_trace_graph(s, model, &net, &x, 1, NULL, 0, "capi_bad.pef", to, NULL, 1, &n),
              SAMBA_ERR_NULL_POINTER, "outputs");
  /* No room for the model's output: refused as the header says, and *n_outputs stays 0. */
  n = 7;
  CHECK_FAILS(samba_session_trace_graph(s, model, &net, &x, 1, NULL, 0, "capi_bad.pef", to, NULL, 0, &n),
              SAMBA_ERR_OUT_OF_RANGE, "`outputs` holds 0");
  CHECK(n == 0);
  CHECK_OK(samba_session_load_pef(s, "capi_bad.pef"));
  CHECK_FAILS(samba_session_name_count(s, 99, &n), SAMBA_ERR_INVALID_ARGUMENT, "kind 99");
  CHECK_FAILS(samba_session_name_at(s, SAMBA_NAMES_WEIGHTS, 5, &name), SAMBA_ERR_OUT_OF_RANGE, "out of range");
  CHECK(name == NULL);
  CHECK_FAILS(samba_session_set_argin(s, "lr", 1), SAMBA_ERR_NOT_FOUND, "no argin 'lr'");
  CHECK_FAILS(samba_session_argin(s, "lr", NULL), SAMBA_ERR_NULL_POINTER, "out");
  CHECK_FAILS(samba_tensor_sn_data(s, plain, &out), SAMBA_ERR_NOT_FOUND, "no tensor named ''");
  CHECK_FAILS(samba_tensor_sn_grad(s, net.w, &out), SAMBA_ERR_NOT_FOUND, "no gradient");
  CHECK_FAILS(samba_tensor_set_sn_data(s, net.w, x), SAMBA_ERR_SHAPE_MISMATCH, "shape");
  CHECK_FAILS(samba_session_get_tensors_by_name(s, &name, 1, NULL), SAMBA_ERR_NULL_POINTER, "outputs");
  {
    const char* unknown = "unknown";
    samba_tensor* got = NULL;
    CHECK_FAILS(samba_session_get_tensors_by_name(s, &unknown, 1, &got), SAMBA_ERR_NOT_FOUND, "unknown");
    CHECK(got == NULL);
  }
  CHECK_FAILS(samba_session_get_samba_tensor_by_name(s, "nope", &out), SAMBA_ERR_NOT_FOUND, "nope");
  CHECK_FAILS(samba_session_update_tensor(s, NULL, x), SAMBA_ERR_NULL_POINTER, "name");
  CHECK_FAILS(samba_session_load_checkpoint(s, "missing.ckpt", SAMBA_TRANSFER_PARAMETERS, 1), SAMBA_ERR_IO,
              "missing.ckpt");
  CHECK_FAILS(samba_session_save_checkpoint(s, NULL, SAMBA_TRANSFER_PARAMETERS), SAMBA_ERR_NULL_POINTER, "path");
  CHECK_FAILS(samba_session_end_profile(NULL, NULL), SAMBA_ERR_NULL_POINTER, "session");
  {
    samba_perf_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    CHECK_FAILS(samba_session_measure_performance(s, &x, 1, NULL, 0, 0, &r), SAMBA_ERR_INVALID_ARGUMENT,
                "iterations");
    CHECK_FAILS(samba_session_measure_performance(s, &x, 1, NULL, 1, 0, NULL), SAMBA_ERR_NULL_POINTER, "out");
  }
  name = "x";
  CHECK_OK(samba_run_options_set_section_types(ro, &name, 1));
  CHECK_FAILS(samba_session_run(s, &x, 1, NULL, 0, ro, &out, 1, &n), SAMBA_ERR_NOT_FOUND, "unknown section type 'x'");
  CHECK_OK(samba_session_unload(s));
  CHECK_OK(samba_session_unload(s));

  samba_attrs_release(bad);
  samba_graph_release(g);
  samba_optimizer_release(opt);
  samba_run_options_release(ro);
  samba_trace_options_release(to);
  samba_compile_options_release(co);
  samba_session_release(s);
  samba_tensor_release(x);
  samba_tensor_release(plain);
  samba_tensor_release(net.w);
  samba_compile_options_release(NULL);
  samba_run_options_release(NULL);
  samba_trace_options_release(NULL);
  samba_optimizer_release(NULL);
  samba_graph_release(NULL);
  remove("capi_bad.pef");
  remove("capi_bad.pef.log");
  printf("bad_input_compile_test: ok\n");
  return 0;
}
