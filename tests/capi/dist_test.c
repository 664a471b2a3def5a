/* Data parallel outside mpirun (include/samba/dist.h): a plain process is
 * rank 0 of 1; the data-parallel compile option and its PEF fields; what a
 * data-parallel run does without a job (and in a build without MPI). The
 * job-wide behaviour runs under mpirun: tests/mpi. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdlib.h>

#include "capi_test_util.h"


int main(void) {
  int32_t available = -1, rank = -1, world = -1, distributed = -1;
  LinearNet net;
  samba_session* s = NULL;
  samba_compile_options* co = NULL;
  samba_optimizer* opt = NULL;
  samba_run_options* ro = NULL;
  samba_trace_options* to = NULL;
  samba_tensor *x, *y, *in[2], *traced = NULL, *loss = NULL, *gathered = NULL;
  const char* wname = "fc.weight";
  size_t n = 0;

  /* A plain process. */
  CHECK_OK(samba_dist_available(&available));
  CHECK(available == 0 || available == 1);
  CHECK_OK(samba_dist_rank(&rank));
  CHECK_OK(samba_dist_world_size(&world));
  CHECK_OK(samba_dist_is_distributed(&distributed));
  CHECK(rank == 0 && world == 1 && distributed == 0);
  CHECK_FAILS(samba_dist_rank(NULL), SAMBA_ERR_NULL_POINTER, "out");
  CHECK_FAILS(samba_dist_set_timeout_ms(0), SAMBA_ERR_INVALID_ARGUMENT, "positive");
  CHECK_OK(samba_dist_set_timeout_ms(5000));
  CHECK_OK(samba_dist_abort(1, "nothing to end in a plain process"));
  CHECK_OK(samba_dist_finalize());
  if (!available)
    CHECK_FAILS(samba_dist_init(), SAMBA_ERR_UNSUPPORTED, "built without MPI: install libopenmpi-dev");

  linear_classifier(&net, in);
  x = in[0];
  y = in[1];
  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_optimizer_create("sgd", NULL, &opt));
  {
    samba_tensor* params[2];
    params[0] = net.w;
    params[1] = net.b;
    CHECK_OK(samba_optimizer_add_param_group(opt, params, 2, NULL));
  }

  /* The compile option. */
  CHECK_OK(samba_compile_options_create(&co));
  CHECK_FAILS(samba_compile_options_set_data_parallel(co, -1, 0), SAMBA_ERR_INVALID_ARGUMENT, "world size");
  CHECK_FAILS(samba_compile_options_set_data_parallel(co, 2, -5), SAMBA_ERR_INVALID_ARGUMENT, "bucket size");
  CHECK_OK(samba_compile_options_set_data_parallel(co, 2, 0));
  CHECK_OK(samba_compile_options_set_pef_path(co, "capi_dist.pef"));
  CHECK_OK(samba_compile_options_set_inference(co, 1));
  CHECK_FAILS(samba_session_compile(s, linear_loss_model, &net, in, 2, NULL, 0, co), SAMBA_ERR_INVALID_ARGUMENT,
              "inference");
  CHECK_OK(samba_compile_options_set_inference(co, 0));
  CHECK_OK(samba_session_compile(s, linear_loss_model, &net, in, 2, &opt, 1, co));
  CHECK(file_contains("capi_dist.pef.log", "== data parallel =="));
  CHECK(file_contains("capi_dist.pef.log", "world size 2, REDUCE 'model_REDUCE'"));
  CHECK(file_contains("capi_dist.pef.log", "gradients: fc.weight.grad, fc.bias.grad") ||
        file_contains("capi_dist.pef.log", "gradients: fc.bias.grad, fc.weight.grad"));

  /* Modes. */
  CHECK_OK(samba_trace_options_create(&to));
  CHECK_FAILS(samba_trace_options_set_data_parallel_mode(to, "fastest"), SAMBA_ERR_INVALID_ARGUMENT, "inorder");
  CHECK_OK(samba_trace_options_set_data_parallel_mode(to, "optimal"));
  CHECK_OK(samba_session_trace_graph(s, linear_loss_model, &net, in, 2, &opt, 1, "capi_dist.pef", to, &traced, 1,
                                     &n));
  CHECK_OK(samba_run_options_create(&ro));
  CHECK_FAILS(samba_run_options_set_data_parallel(ro, 1, 1, "fastest"), SAMBA_ERR_INVALID_ARGUMENT, "normal");

  /* Without data_parallel the PEF trains as one replica (REDUCE does
   * nothing); with it, a plain process has no job to reduce over. */
  CHECK_OK(samba_session_run(s, in, 2, NULL, 0, ro, &loss, 1, &n));
  samba_tensor_release(loss);
  loss = NULL;
  CHECK_OK(samba_run_options_set_data_parallel(ro, 1, 0, "inorder"));
  if (available)
    CHECK_FAILS(samba_session_run(s, in, 2, NULL, 0, ro, &loss, 1, &n), SAMBA_ERR_INVALID_STATE, "mpirun");
  else
    CHECK_FAILS(samba_session_run(s, in, 2, NULL, 0, ro, &loss, 1, &n), SAMBA_ERR_UNSUPPORTED,
                "built without MPI");
  CHECK(loss == NULL);

  /* Broadcast and gather in a plain process: nothing to send, own values. */
  CHECK_OK(samba_session_broadcast(s, SAMBA_TRANSFER_PARAMETERS | SAMBA_TRANSFER_OPTIMIZER_STATE, 0));
  CHECK_FAILS(samba_session_broadcast(s, 64, 0), SAMBA_ERR_INVALID_ARGUMENT, "SAMBA_TRANSFER_PARAMETERS");
  CHECK_OK(samba_session_gather_tensors_by_name(s, &wname, 1, &gathered));
  CHECK(gathered != NULL);
  samba_tensor_release(gathered);

  samba_tensor_release(traced);
  samba_run_options_release(ro);
  samba_trace_options_release(to);
  samba_compile_options_release(co);
  samba_optimizer_release(opt);
  samba_tensor_release(x);
  samba_tensor_release(y);
  samba_tensor_release(net.w);
  samba_tensor_release(net.b);
  samba_session_release(s);
  printf("dist_test: ok\n");
  return 0;
}
