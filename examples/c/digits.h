/*
 * digits: what the example programs share: the 8x8 handwritten digits data
 * set (1,797 images, 64 pixels 0..16 and a label 0..9 per CSV row, read
 * from a .csv or a .csv.gz with zlib), a fixed train/held-out
 * split, a small deterministic generator for shuffling and initial weights,
 * a clock, and a one-line progress bar.
 */
#ifndef SAMBA_EXAMPLES_DIGITS_H
#define SAMBA_EXAMPLES_DIGITS_H

#include <stddef.h>
#include <stdint.h>

#define DIGITS_FEATURES 64
#define DIGITS_CLASSES 10

typedef struct {
  float* pixels;   /* n x DIGITS_FEATURES, scaled to [0, 1] */
  int64_t* labels; /* n, 0..DIGITS_CLASSES-1 */
  int n;
} digits_set;

/* Reads the data set; on any problem prints what was wrong (prefixed with
 * `program`) and exits. */
digits_set digits_load(const char* path, const char* program);
void digits_free(digits_set* d);

/* The fixed split: a permutation of 0..n-1 (owned by the caller, free()) of
 * which the first n/5 rows are held out and the rest train. */
int* digits_split(const digits_set* d, int* n_train, int* n_test);

/* xorshift64*: deterministic across machines. */
uint64_t digits_rng_next(uint64_t* state);
double digits_rng_uniform(uint64_t* state); /* [0, 1) */
void digits_shuffle(int* order, int n, uint64_t* state);

/* Copies rows `rows[0..n)` into x (n x 64 floats) and y (n labels). */
void digits_gather(const digits_set* d, const int* rows, int n, float* x, int64_t* y);

void* digits_xmalloc(size_t bytes, const char* program);

/* The value of command-line option `option`, checked: all of `text` is a
 * number in [lo, hi]. Otherwise prints what was wrong and what was expected
 * (prefixed with `program`) and exits with status 2, a usage error. */
long digits_option_long(const char* text, const char* option, long lo, long hi, const char* program);
double digits_option_double(const char* text, const char* option, double lo, double hi, const char* program);
double digits_now_seconds(void);

/* "\r  epoch 3/20 [######......] step 12/22  loss 0.1234  56789 samples/s"
 * on a terminal (redrawn in place); one line per call otherwise when
 * `last` is set, nothing otherwise. */
void digits_progress(int epoch, int epochs, int step, int steps, double loss, double samples_per_s,
                     int last);

#endif
