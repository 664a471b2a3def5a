/*
 * digits_pef: what the examples that train a PEF on the digits share:
 * filling the model's input tensors with rows of the data set, and the
 * held-out accuracy of the loaded PEF. On any failure they print what was
 * wrong (prefixed with `program`) and exit.
 */
#ifndef SAMBA_EXAMPLES_DIGITS_PEF_H
#define SAMBA_EXAMPLES_DIGITS_PEF_H

#include <samba.h>

#include "digits.h"

/* Copies rows[0..n) into `image` (batch x 64 floats, of any shape) and
 * `label` (batch int64); a short batch (n < batch) is padded with copies of
 * its first row. */
void digits_fill(const digits_set* d, const int* rows, int n, int batch, samba_tensor* image,
                 samba_tensor* label, const char* program);

/* The fraction of rows[0..n) whose largest logit is at the label: runs the
 * FWD section of the session's PEF (train off) batch by batch on (image,
 * label), with `logits` the traced output that holds the logits. */
double digits_accuracy(samba_session* s, samba_tensor* logits, const digits_set* d, const int* rows,
                       int n, int batch, samba_tensor* image, samba_tensor* label,
                       const char* program);

#endif
