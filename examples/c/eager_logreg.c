/*
 * eager_logreg: trains a small classifier on handwritten digits through the
 * Samba C ABI alone, in eager mode: every op computes at once on the host and
 * autograd records what backward needs.
 *
 *   eager_logreg [DATA.csv[.gz]] [--epochs N] [--hidden H] [--lr LR] [--min-accuracy A]
 *
 * Model: logits = linear(tanh(linear(x, W1, b1)), W2, b2), loss =
 * cross_entropy(logits, label). Plain SGD; the update is done on the raw
 * float data of the parameters, between steps, where no op is recording.
 * The 1,797 images are split once, deterministically, into 80% training and
 * 20% held out; the program ends by printing the held-out accuracy and, with
 * --min-accuracy, fails when it is lower.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <samba.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FEATURES 64
#define CLASSES 10
#define BATCH 32
#define MAX_PIXEL 16

/* ---- errors --------------------------------------------------------------- */

static void check(samba_status status, const char* what) {
  if (status != SAMBA_OK) {
    fprintf(stderr, "eager_logreg: %s failed: %s: %s\n", what, samba_status_name(status),
            samba_last_error_message());
    exit(1);
  }
}

static void* xmalloc(size_t bytes) {
  void* p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "eager_logreg: out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}

/* ---- the data set ---------------------------------------------------------- */

typedef struct {
  float* pixels;   /* n x FEATURES, scaled to [0, 1] */
  int64_t* labels; /* n, 0..CLASSES-1 */
  int n;
} Dataset;

static int ends_with(const char* s, const char* suffix) {
  size_t ls = strlen(s), lf = strlen(suffix);
  return ls >= lf && strcmp(s + ls - lf, suffix) == 0;
}

/* A .gz file is read through `gzip -dc`, so the example needs no zlib. The
 * path is single-quoted for the shell (a quote inside becomes '\''). */
static FILE* open_data(const char* path, int* is_pipe) {
  FILE* f;
  *is_pipe = ends_with(path, ".gz");
  if (*is_pipe) {
    size_t len = strlen(path), i;
    char* cmd = xmalloc(4 * len + 32);
    char* p = cmd + sprintf(cmd, "gzip -dc -- '");
    for (i = 0; i < len; ++i) {
      if (path[i] == '\'') {
        memcpy(p, "'\\''", 4);
        p += 4;
      } else {
        *p++ = path[i];
      }
    }
    strcpy(p, "'");
    f = popen(cmd, "r");
    free(cmd);
  } else {
    f = fopen(path, "r");
  }
  if (!f) {
    perror(path);
    exit(1);
  }
  return f;
}

/* Parses one row: FEATURES pixels 0..MAX_PIXEL, then the label 0..9. */
static int parse_row(const char* line, float* pixels, int64_t* label) {
  const char* p = line;
  int i;
  for (i = 0; i <= FEATURES; ++i) {
    char* end;
    long v = strtol(p, &end, 10);
    if (end == p) return 0;
    if (i < FEATURES) {
      if (v < 0 || v > MAX_PIXEL) return 0;
      pixels[i] = (float)v / MAX_PIXEL;
    } else {
      if (v < 0 || v >= CLASSES) return 0;
      *label = v;
    }
    p = end;
    if (i < FEATURES && *p++ != ',') return 0;
  }
  while (*p == '\r' || *p == '\n' || *p == ' ') ++p;
  return *p == '\0';
}

static Dataset load_digits(const char* path) {
  Dataset d = {NULL, NULL, 0};
  int capacity = 2048, is_pipe, status;
  char* line = NULL;
  size_t line_cap = 0;
  FILE* f = open_data(path, &is_pipe);
  d.pixels = xmalloc(sizeof(float) * FEATURES * capacity);
  d.labels = xmalloc(sizeof(int64_t) * capacity);
  while (getline(&line, &line_cap, f) > 0) {
    if (line[0] == '\n') continue;
    if (d.n == capacity) {
      capacity *= 2;
      d.pixels = realloc(d.pixels, sizeof(float) * FEATURES * capacity);
      d.labels = realloc(d.labels, sizeof(int64_t) * capacity);
      if (!d.pixels || !d.labels) {
        fprintf(stderr, "eager_logreg: out of memory reading %s\n", path);
        exit(1);
      }
    }
    if (!parse_row(line, d.pixels + (size_t)d.n * FEATURES, d.labels + d.n)) {
      fprintf(stderr,
              "eager_logreg: %s line %d: expected %d integers 0..%d and a label 0..%d, "
              "comma-separated\n",
              path, d.n + 1, FEATURES, MAX_PIXEL, CLASSES - 1);
      exit(1);
    }
    ++d.n;
  }
  free(line);
  status = is_pipe ? pclose(f) : fclose(f);
  if (status != 0 || d.n == 0) {
    fprintf(stderr, "eager_logreg: could not read %s%s\n", path,
            is_pipe ? " (is gzip installed and the file intact?)" : "");
    exit(1);
  }
  return d;
}

/* ---- deterministic randomness (xorshift64*) -------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

static double rng_uniform(void) { return (double)(rng_next() >> 11) / 9007199254740992.0; }

static void shuffle(int* order, int n) {
  int i;
  for (i = n - 1; i > 0; --i) {
    int j = (int)(rng_next() % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

/* ---- the model ------------------------------------------------------------- */

typedef struct {
  samba_tensor* params[4]; /* W1 (hidden x 64), b1, W2 (10 x hidden), b2 */
  int hidden;
} Model;

static samba_tensor* new_tensor(samba_dtype dtype, int64_t rows, int64_t cols) {
  samba_tensor* t = NULL;
  int64_t shape[2];
  shape[0] = rows;
  shape[1] = cols;
  check(samba_tensor_create(dtype, shape, cols ? 2 : 1, &t), "samba_tensor_create");
  return t;
}

/* Uniform in +-1/sqrt(fan_in), the usual initialisation of a linear layer. */
static samba_tensor* new_parameter(int64_t rows, int64_t cols, int fan_in, const char* name) {
  samba_tensor* t = new_tensor(SAMBA_FLOAT32, rows, cols);
  float* data = NULL;
  int64_t numel = 0, i;
  const double bound = 1.0 / sqrt((double)fan_in);
  check(samba_tensor_data(t, (void**)&data), "samba_tensor_data");
  check(samba_tensor_numel(t, &numel), "samba_tensor_numel");
  for (i = 0; i < numel; ++i) data[i] = (float)((2 * rng_uniform() - 1) * bound);
  check(samba_tensor_set_name(t, name), "samba_tensor_set_name");
  check(samba_tensor_set_requires_grad(t, 1), "samba_tensor_set_requires_grad");
  return t;
}

static Model model_create(int hidden) {
  Model m;
  m.hidden = hidden;
  m.params[0] = new_parameter(hidden, FEATURES, FEATURES, "gemm1.weight");
  m.params[1] = new_parameter(hidden, 0, FEATURES, "gemm1.bias");
  m.params[2] = new_parameter(CLASSES, hidden, hidden, "gemm2.weight");
  m.params[3] = new_parameter(CLASSES, 0, hidden, "gemm2.bias");
  return m;
}

static void model_release(Model* m) {
  int i;
  for (i = 0; i < 4; ++i) samba_tensor_release(m->params[i]);
}

/* Calls a single-output op; the result is OWNED by the caller. */
static samba_tensor* op(samba_session* s, const char* name, samba_tensor* a, samba_tensor* b,
                        samba_tensor* c) {
  samba_tensor* inputs[3];
  samba_tensor* out = NULL;
  size_t n_in = 0, n_out = 0;
  inputs[n_in++] = a;
  if (b) inputs[n_in++] = b;
  if (c) inputs[n_in++] = c;
  check(samba_op_call(s, name, inputs, n_in, NULL, &out, 1, &n_out), name);
  return out;
}

/* logits = linear(tanh(linear(x, W1, b1)), W2, b2). Intermediates are
 * released as soon as the next op has them: the autograd history keeps what
 * backward needs alive on its own. */
static samba_tensor* forward(samba_session* s, samba_tensor* const* params, samba_tensor* x) {
  samba_tensor* h = op(s, "linear", x, params[0], params[1]);
  samba_tensor* a = op(s, "tanh", h, NULL, NULL);
  samba_tensor* logits = op(s, "linear", a, params[2], params[3]);
  samba_tensor_release(h);
  samba_tensor_release(a);
  return logits;
}

/* p -= lr * grad, on the parameters' own memory; then the grad is cleared
 * so the next backward starts from zero. */
static void sgd_step(Model* m, float lr, float* scratch) {
  int i;
  for (i = 0; i < 4; ++i) {
    samba_tensor* grad = NULL;
    float* data = NULL;
    size_t bytes = 0;
    int64_t numel = 0, k;
    check(samba_tensor_grad(m->params[i], &grad), "samba_tensor_grad");
    if (!grad) continue;
    check(samba_tensor_numel(m->params[i], &numel), "samba_tensor_numel");
    bytes = (size_t)numel * sizeof(float);
    /* copy_to gives C order whatever the gradient's strides are. */
    check(samba_tensor_copy_to(grad, scratch, bytes), "samba_tensor_copy_to");
    check(samba_tensor_data(m->params[i], (void**)&data), "samba_tensor_data");
    for (k = 0; k < numel; ++k) data[k] -= lr * scratch[k];
    check(samba_tensor_set_grad(m->params[i], NULL), "samba_tensor_set_grad");
  }
}

/* The rows `rows[0..n)` of the data set as an n x 64 tensor and n labels. */
static void make_batch(const Dataset* d, const int* rows, int n, samba_tensor** x,
                       samba_tensor** y) {
  float* xp = NULL;
  int64_t* yp = NULL;
  int i;
  *x = new_tensor(SAMBA_FLOAT32, n, FEATURES);
  *y = new_tensor(SAMBA_INT64, n, 0);
  check(samba_tensor_data(*x, (void**)&xp), "samba_tensor_data");
  check(samba_tensor_data(*y, (void**)&yp), "samba_tensor_data");
  for (i = 0; i < n; ++i) {
    memcpy(xp + (size_t)i * FEATURES, d->pixels + (size_t)rows[i] * FEATURES,
           sizeof(float) * FEATURES);
    yp[i] = d->labels[rows[i]];
  }
}

/* Fraction of `rows` whose largest logit is the label. The forward runs on
 * detached parameters, so no autograd history is recorded. */
static double accuracy(samba_session* s, const Model* m, const Dataset* d, const int* rows, int n,
                       int* correct_out) {
  samba_tensor* detached[4];
  samba_tensor *x, *y, *logits;
  float* z = NULL;
  int i, c, correct = 0;
  for (i = 0; i < 4; ++i) check(samba_tensor_detach(m->params[i], &detached[i]), "detach");
  make_batch(d, rows, n, &x, &y);
  logits = forward(s, detached, x);
  z = xmalloc(sizeof(float) * (size_t)n * CLASSES);
  check(samba_tensor_copy_to(logits, z, sizeof(float) * (size_t)n * CLASSES), "copy_to");
  for (i = 0; i < n; ++i) {
    int best = 0;
    for (c = 1; c < CLASSES; ++c)
      if (z[i * CLASSES + c] > z[i * CLASSES + best]) best = c;
    correct += best == d->labels[rows[i]];
  }
  free(z);
  samba_tensor_release(logits);
  samba_tensor_release(x);
  samba_tensor_release(y);
  for (i = 0; i < 4; ++i) samba_tensor_release(detached[i]);
  if (correct_out) *correct_out = correct;
  return (double)correct / n;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- main ------------------------------------------------------------------ */

typedef struct {
  const char* data;
  int epochs, hidden;
  float lr;
  double min_accuracy;
} Options;

static void usage(void) {
  fprintf(stderr,
          "usage: eager_logreg [DATA.csv[.gz]] [--epochs N] [--hidden H] [--lr LR] "
          "[--min-accuracy A]\n");
  exit(2);
}

static Options parse_options(int argc, char** argv) {
  Options o = {"examples/data/digits.csv.gz", 20, 32, 0.2f, 0.0};
  int i;
  for (i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (a[0] != '-') {
      o.data = a;
      continue;
    }
    if (i + 1 >= argc) usage();
    if (strcmp(a, "--epochs") == 0) {
      o.epochs = atoi(argv[++i]);
    } else if (strcmp(a, "--hidden") == 0) {
      o.hidden = atoi(argv[++i]);
    } else if (strcmp(a, "--lr") == 0) {
      o.lr = (float)atof(argv[++i]);
    } else if (strcmp(a, "--min-accuracy") == 0) {
      o.min_accuracy = atof(argv[++i]);
    } else {
      usage();
    }
  }
  if (o.epochs < 1 || o.hidden < 1 || !(o.lr > 0)) usage();
  return o;
}

int main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  const int interactive = isatty(STDOUT_FILENO);
  Dataset data = load_digits(opt.data);
  samba_session* session = NULL;
  Model model;
  int *order, *train, *test;
  int n_test = data.n / 5, n_train = data.n - n_test, epoch, i, correct = 0;
  float* scratch;
  double acc;

  order = xmalloc(sizeof(int) * data.n);
  for (i = 0; i < data.n; ++i) order[i] = i;
  shuffle(order, data.n); /* one fixed split: the generator's seed is constant */
  test = order;
  train = order + n_test;

  check(samba_session_create(NULL, &session), "samba_session_create");
  model = model_create(opt.hidden);
  scratch = xmalloc(sizeof(float) * FEATURES * (size_t)opt.hidden); /* W1, the largest */

  printf("samba %s: %d training and %d held-out digits, MLP 64-%d-10, batch %d, lr %g\n",
         samba_version(), n_train, n_test, opt.hidden, BATCH, opt.lr);
  for (epoch = 1; epoch <= opt.epochs; ++epoch) {
    double loss_sum = 0, t0 = now_seconds(), seconds;
    int start;
    shuffle(train, n_train);
    for (start = 0; start < n_train; start += BATCH) {
      const int n = n_train - start < BATCH ? n_train - start : BATCH;
      samba_tensor *x, *y, *logits, *loss;
      double value = 0;
      make_batch(&data, train + start, n, &x, &y);
      logits = forward(session, model.params, x);
      loss = op(session, "cross_entropy", logits, y, NULL);
      check(samba_tensor_item(loss, &value), "samba_tensor_item");
      check(samba_tensor_backward(loss, NULL, 0), "samba_tensor_backward");
      sgd_step(&model, opt.lr, scratch);
      loss_sum += value * n;
      samba_tensor_release(loss);
      samba_tensor_release(logits);
      samba_tensor_release(x);
      samba_tensor_release(y);
    }
    seconds = now_seconds() - t0;
    printf("%sepoch %3d/%d  loss %.4f  %8.0f samples/s%s", interactive ? "\r" : "", epoch,
           opt.epochs, loss_sum / n_train, n_train / seconds, interactive ? "" : "\n");
    fflush(stdout);
  }
  if (interactive) printf("\n");

  acc = accuracy(session, &model, &data, test, n_test, &correct);
  printf("held-out accuracy: %.1f%% (%d/%d)\n", 100 * acc, correct, n_test);

  free(scratch);
  model_release(&model);
  samba_session_release(session);
  free(order);
  free(data.pixels);
  free(data.labels);
  if (acc < opt.min_accuracy) {
    fprintf(stderr, "eager_logreg: accuracy %.3f is below the required %.3f\n", acc,
            opt.min_accuracy);
    return 1;
  }
  return 0;
}
