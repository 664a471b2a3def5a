#include "digits_pef.h"

#include <stdio.h>
#include <stdlib.h>

static void check(samba_status status, const char* what, const char* program) {
  if (status != SAMBA_OK) {
    fprintf(stderr, "%s: %s failed: %s: %s\n", program, what, samba_status_name(status),
            samba_last_error_message());
    exit(1);
  }
}

void digits_fill(const digits_set* d, const int* rows, int n, int batch, samba_tensor* image,
                 samba_tensor* label, const char* program) {
  float* x = NULL;
  int64_t* y = NULL;
  int i;
  check(samba_tensor_data(image, (void**)&x), "samba_tensor_data", program);
  check(samba_tensor_data(label, (void**)&y), "samba_tensor_data", program);
  digits_gather(d, rows, n, x, y);
  for (i = n; i < batch; ++i) digits_gather(d, rows, 1, x + (size_t)i * DIGITS_FEATURES, y + i);
}

static int count_correct(const float* logits, const int* rows, int n, const digits_set* d) {
  int i, c, correct = 0;
  for (i = 0; i < n; ++i) {
    int best = 0;
    for (c = 1; c < DIGITS_CLASSES; ++c)
      if (logits[i * DIGITS_CLASSES + c] > logits[i * DIGITS_CLASSES + best]) best = c;
    correct += best == d->labels[rows[i]];
  }
  return correct;
}

double digits_accuracy(samba_session* s, samba_tensor* logits, const digits_set* d, const int* rows,
                       int n, int batch, samba_tensor* image, samba_tensor* label,
                       const char* program) {
  const char* fwd = "FWD";
  const size_t bytes = sizeof(float) * (size_t)batch * DIGITS_CLASSES;
  samba_run_options* ro = NULL;
  samba_tensor* in[2];
  float* z = digits_xmalloc(bytes, program);
  int start, correct = 0;
  in[0] = image;
  in[1] = label;
  check(samba_run_options_create(&ro), "samba_run_options_create", program);
  check(samba_run_options_set_section_types(ro, &fwd, 1), "set section types", program);
  check(samba_run_options_set_train(ro, 0), "set train", program);
  for (start = 0; start < n; start += batch) {
    const int m = n - start < batch ? n - start : batch;
    samba_tensor* out = NULL;
    size_t n_out = 0;
    digits_fill(d, rows + start, m, batch, image, label, program);
    check(samba_session_run(s, in, 2, &logits, 1, ro, &out, 1, &n_out), "run FWD", program);
    check(samba_tensor_copy_to(out, z, bytes), "copy logits", program);
    correct += count_correct(z, rows + start, m, d);
    samba_tensor_release(out);
  }
  samba_run_options_release(ro);
  free(z);
  return (double)correct / n;
}
