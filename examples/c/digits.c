#define _POSIX_C_SOURCE 200809L

#include "digits.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define MAX_PIXEL 16

void* digits_xmalloc(size_t bytes, const char* program) {
  void* p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "%s: out of memory (%zu bytes)\n", program, bytes);
    exit(1);
  }
  return p;
}

long digits_option_long(const char* text, const char* option, long lo, long hi, const char* program) {
  char* end;
  long v;
  errno = 0;
  v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    fprintf(stderr, "%s: %s expects an integer from %ld to %ld, got '%s'\n", program, option, lo, hi, text);
    exit(2);
  }
  return v;
}

double digits_option_double(const char* text, const char* option, double lo, double hi, const char* program) {
  char* end;
  double v;
  errno = 0;
  v = strtod(text, &end);
  /* !(v >= lo) also refuses NaN. */
  if (end == text || *end != '\0' || errno == ERANGE || !(v >= lo) || !(v <= hi)) {
    fprintf(stderr, "%s: %s expects a number from %g to %g, got '%s'\n", program, option, lo, hi, text);
    exit(2);
  }
  return v;
}

/* Parses one row: DIGITS_FEATURES pixels 0..MAX_PIXEL, then the label. */
static int parse_row(const char* line, float* pixels, int64_t* label) {
  const char* p = line;
  int i;
  for (i = 0; i <= DIGITS_FEATURES; ++i) {
    char* end;
    long v = strtol(p, &end, 10);
    if (end == p) return 0;
    if (i < DIGITS_FEATURES) {
      if (v < 0 || v > MAX_PIXEL) return 0;
      pixels[i] = (float)v / MAX_PIXEL;
    } else {
      if (v < 0 || v >= DIGITS_CLASSES) return 0;
      *label = v;
    }
    p = end;
    if (i < DIGITS_FEATURES && *p++ != ',') return 0;
  }
  while (*p == '\r' || *p == '\n' || *p == ' ') ++p;
  return *p == '\0';
}

digits_set digits_load(const char* path, const char* program) {
  digits_set d = {NULL, NULL, 0};
  int capacity = 2048, line_no = 0, error = Z_OK;
  /* Rows are 65 short numbers; a longer line is not this data set. */
  char line[1024];
  /* zlib reads a .csv.gz and, transparently, a plain .csv. */
  gzFile f = gzopen(path, "rb");
  if (!f) {
    fprintf(stderr, "%s: cannot open %s: %s\n", program, path, strerror(errno));
    exit(1);
  }
  d.pixels = digits_xmalloc(sizeof(float) * DIGITS_FEATURES * capacity, program);
  d.labels = digits_xmalloc(sizeof(int64_t) * capacity, program);
  while (gzgets(f, line, sizeof line)) {
    ++line_no;
    if (!strchr(line, '\n') && !gzeof(f)) {
      fprintf(stderr, "%s: %s line %d: longer than %zu bytes; expected a row of the digits CSV\n", program,
              path, line_no, sizeof line - 1);
      exit(1);
    }
    if (line[0] == '\n' || (line[0] == '\r' && line[1] == '\n')) continue;
    if (d.n == capacity) {
      capacity *= 2;
      d.pixels = realloc(d.pixels, sizeof(float) * DIGITS_FEATURES * capacity);
      d.labels = realloc(d.labels, sizeof(int64_t) * capacity);
      if (!d.pixels || !d.labels) {
        fprintf(stderr, "%s: out of memory reading %s\n", program, path);
        exit(1);
      }
    }
    if (!parse_row(line, d.pixels + (size_t)d.n * DIGITS_FEATURES, d.labels + d.n)) {
      fprintf(stderr, "%s: %s line %d: expected %d integers 0..%d and a label 0..%d, comma-separated\n",
              program, path, line_no, DIGITS_FEATURES, MAX_PIXEL, DIGITS_CLASSES - 1);
      exit(1);
    }
    ++d.n;
  }
  gzerror(f, &error);
  if (error != Z_OK || d.n == 0) {
    fprintf(stderr, "%s: could not read %s: %s\n", program, path,
            error != Z_OK ? gzerror(f, &error) : "no rows");
    exit(1);
  }
  gzclose(f);
  return d;
}

void digits_free(digits_set* d) {
  free(d->pixels);
  free(d->labels);
  d->pixels = NULL;
  d->labels = NULL;
  d->n = 0;
}

uint64_t digits_rng_next(uint64_t* s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

double digits_rng_uniform(uint64_t* s) { return (double)(digits_rng_next(s) >> 11) / 9007199254740992.0; }

void digits_shuffle(int* order, int n, uint64_t* s) {
  int i;
  for (i = n - 1; i > 0; --i) {
    int j = (int)(digits_rng_next(s) % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

int* digits_split(const digits_set* d, int* n_train, int* n_test) {
  uint64_t state = 0x9E3779B97F4A7C15ull; /* one fixed split for every run */
  int* order = digits_xmalloc(sizeof(int) * (size_t)d->n, "digits");
  int i;
  for (i = 0; i < d->n; ++i) order[i] = i;
  digits_shuffle(order, d->n, &state);
  *n_test = d->n / 5;
  *n_train = d->n - *n_test;
  return order;
}

void digits_gather(const digits_set* d, const int* rows, int n, float* x, int64_t* y) {
  int i;
  for (i = 0; i < n; ++i) {
    memcpy(x + (size_t)i * DIGITS_FEATURES, d->pixels + (size_t)rows[i] * DIGITS_FEATURES,
           sizeof(float) * DIGITS_FEATURES);
    y[i] = d->labels[rows[i]];
  }
}

double digits_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void digits_progress(int epoch, int epochs, int step, int steps, double loss, double samples_per_s,
                     int last) {
  static int interactive = -1;
  char bar[21];
  int filled, i;
  if (interactive < 0) interactive = isatty(STDOUT_FILENO);
  if (!interactive && !last) return;
  filled = steps > 0 ? (int)((long)step * 20 / steps) : 20;
  for (i = 0; i < 20; ++i) bar[i] = i < filled ? '#' : '.';
  bar[20] = '\0';
  printf("%sepoch %3d/%d [%s] step %4d/%d  loss %.4f  %9.0f samples/s%s", interactive ? "\r" : "", epoch,
         epochs, bar, step, steps, loss, samples_per_s, last ? "\n" : "");
  fflush(stdout);
}
