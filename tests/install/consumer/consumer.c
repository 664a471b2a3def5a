/* A program outside the Samba tree: it sees only the installed samba.h and
 * library. It checks that header and library agree and that a tensor can be
 * created, computed on and read back. */
#include <samba.h>
#include <stdio.h>
#include <string.h>

static int check(samba_status st, const char* what) {
  if (st != SAMBA_OK) {
    fprintf(stderr, "consumer: %s failed: %s (%s)\n", what, samba_status_name(st),
            samba_last_error_message());
    return 1;
  }
  return 0;
}

int main(void) {
  char want[32];
  const int64_t shape[2] = {2, 3};
  const float values[6] = {1, 2, 3, 4, 5, 6};
  float sum[6];
  samba_tensor* t = NULL;
  samba_tensor* inputs[2];
  samba_tensor* out = NULL;
  size_t n_out = 0;
  int64_t numel = 0;
  int failed = 0;
  int i;

  snprintf(want, sizeof want, "%d.%d.%d", SAMBA_VERSION_MAJOR, SAMBA_VERSION_MINOR,
           SAMBA_VERSION_PATCH);
  if (strcmp(samba_version(), want) != 0) {
    fprintf(stderr, "consumer: library %s, header %s\n", samba_version(), want);
    return 1;
  }
  if (check(samba_tensor_create(SAMBA_FLOAT32, shape, 2, &t), "samba_tensor_create")) return 1;
  failed = check(samba_tensor_copy_from(t, values, sizeof values), "samba_tensor_copy_from") ||
           check(samba_tensor_numel(t, &numel), "samba_tensor_numel");
  if (!failed && numel != 6) {
    fprintf(stderr, "consumer: numel %lld, expected 6\n", (long long)numel);
    failed = 1;
  }
  inputs[0] = t;
  inputs[1] = t;
  if (!failed) failed = check(samba_op_call(NULL, "add", inputs, 2, NULL, &out, 1, &n_out), "add");
  if (!failed) failed = check(samba_tensor_copy_to(out, sum, sizeof sum), "samba_tensor_copy_to");
  for (i = 0; !failed && i < 6; ++i) {
    if (sum[i] != 2 * values[i]) {
      fprintf(stderr, "consumer: add gave %g at %d, expected %g\n", sum[i], i, 2 * values[i]);
      failed = 1;
    }
  }
  samba_tensor_release(out);
  samba_tensor_release(t);
  if (!failed) printf("consumer: samba %s OK\n", samba_version());
  return failed;
}
