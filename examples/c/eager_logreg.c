/*
 * eager_logreg: trains a small classifier on handwritten digits through the
 * Samba C ABI alone, in eager mode: every op computes at once on the host and
 * autograd records what backward needs.
 *
 *   eager_logreg [DATA.csv[.gz]] [--epochs N] [--hidden H] [--lr LR] [--min-accuracy A]
 *
 * Model: logits = linear(tanh(linear(x, W1, b1)), W2, b2), loss =
 * cross_entropy(logits, label). Plain SGD, stepped eagerly on the host by a
 * samba_optimizer (samba_optimizer_step, then samba_optimizer_zero_grad).
 * The 1,797 images are split once, deterministically, into 80% training and
 * 20% held out; the program ends by printing the held-out accuracy and, with
 * --min-accuracy, fails when it is lower.
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <math.h>
#include <samba.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "digits.h"

#define FEATURES DIGITS_FEATURES
#define CLASSES DIGITS_CLASSES
#define BATCH 32

/* ---- errors --------------------------------------------------------------- */

static void check(samba_status status, const char* what) {
  if (status != SAMBA_OK) {
    fprintf(stderr, "eager_logreg: %s failed: %s: %s\n", what, samba_status_name(status),
            samba_last_error_message());
    exit(1);
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
static samba_tensor* new_parameter(int64_t rows, int64_t cols, int fan_in, const char* name, uint64_t* rng) {
  samba_tensor* t = new_tensor(SAMBA_FLOAT32, rows, cols);
  float* data = NULL;
  int64_t numel = 0, i;
  const double bound = 1.0 / sqrt((double)fan_in);
  check(samba_tensor_data(t, (void**)&data), "samba_tensor_data");
  check(samba_tensor_numel(t, &numel), "samba_tensor_numel");
  for (i = 0; i < numel; ++i) data[i] = (float)((2 * digits_rng_uniform(rng) - 1) * bound);
  check(samba_tensor_set_name(t, name), "samba_tensor_set_name");
  check(samba_tensor_set_requires_grad(t, 1), "samba_tensor_set_requires_grad");
  return t;
}

static Model model_create(int hidden, uint64_t* rng) {
  Model m;
  m.hidden = hidden;
  m.params[0] = new_parameter(hidden, FEATURES, FEATURES, "gemm1.weight", rng);
  m.params[1] = new_parameter(hidden, 0, FEATURES, "gemm1.bias", rng);
  m.params[2] = new_parameter(CLASSES, hidden, hidden, "gemm2.weight", rng);
  m.params[3] = new_parameter(CLASSES, 0, hidden, "gemm2.bias", rng);
  return m;
}

static void model_release(Model* m) {
  int i;
  for (i = 0; i < 4; ++i) samba_tensor_release(m->params[i]);
}

/* logits = linear(tanh(linear(x, W1, b1)), W2, b2), with the typed op
 * functions of samba.h. Intermediates are released as soon as the next op
 * has them: the autograd history keeps what backward needs alive on its
 * own. */
static samba_tensor* forward(samba_session* s, samba_tensor* const* params, samba_tensor* x) {
  samba_tensor *h = NULL, *a = NULL, *logits = NULL;
  check(samba_linear(s, x, params[0], params[1], &h), "samba_linear");
  check(samba_tanh(s, h, &a), "samba_tanh");
  check(samba_linear(s, a, params[2], params[3], &logits), "samba_linear");
  samba_tensor_release(h);
  samba_tensor_release(a);
  return logits;
}

/* Plain SGD over the four parameters, stepped eagerly on the host. */
static samba_optimizer* sgd(Model* m, float lr) {
  samba_optimizer* opt = NULL;
  samba_attrs* hp = NULL;
  check(samba_attrs_create(&hp), "samba_attrs_create");
  check(samba_attrs_set_float(hp, "lr", lr), "samba_attrs_set_float");
  check(samba_optimizer_create("sgd", hp, &opt), "samba_optimizer_create");
  check(samba_optimizer_add_param_group(opt, m->params, 4, NULL), "samba_optimizer_add_param_group");
  samba_attrs_release(hp);
  return opt;
}

/* The rows `rows[0..n)` of the data set as an n x 64 tensor and n labels. */
static void make_batch(const digits_set* d, const int* rows, int n, samba_tensor** x,
                       samba_tensor** y) {
  float* xp = NULL;
  int64_t* yp = NULL;
  *x = new_tensor(SAMBA_FLOAT32, n, FEATURES);
  *y = new_tensor(SAMBA_INT64, n, 0);
  check(samba_tensor_data(*x, (void**)&xp), "samba_tensor_data");
  check(samba_tensor_data(*y, (void**)&yp), "samba_tensor_data");
  digits_gather(d, rows, n, xp, yp);
}

/* Fraction of `rows` whose largest logit is the label. The forward runs on
 * detached parameters, so no autograd history is recorded. */
static double accuracy(samba_session* s, const Model* m, const digits_set* d, const int* rows, int n,
                       int* correct_out) {
  samba_tensor* detached[4];
  samba_tensor *x, *y, *logits;
  float* z = NULL;
  int i, c, correct = 0;
  for (i = 0; i < 4; ++i) check(samba_tensor_detach(m->params[i], &detached[i]), "detach");
  make_batch(d, rows, n, &x, &y);
  logits = forward(s, detached, x);
  z = digits_xmalloc(sizeof(float) * (size_t)n * CLASSES, "eager_logreg");
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
  static const struct option kLong[] = {{"epochs", required_argument, NULL, 'e'},
                                        {"hidden", required_argument, NULL, 'H'},
                                        {"lr", required_argument, NULL, 'l'},
                                        {"min-accuracy", required_argument, NULL, 'a'},
                                        {NULL, 0, NULL, 0}};
  Options o = {"examples/data/digits.csv.gz", 20, 32, 0.2f, 0.0};
  int c;
  while ((c = getopt_long(argc, argv, "", kLong, NULL)) != -1) {
    switch (c) {
      case 'e': o.epochs = (int)digits_option_long(optarg, "--epochs", 1, 1000000, "eager_logreg"); break;
      case 'H': o.hidden = (int)digits_option_long(optarg, "--hidden", 1, 1 << 16, "eager_logreg"); break;
      case 'l': o.lr = (float)digits_option_double(optarg, "--lr", 1e-12, 100, "eager_logreg"); break;
      case 'a': o.min_accuracy = digits_option_double(optarg, "--min-accuracy", 0, 1, "eager_logreg"); break;
      default: usage();
    }
  }
  if (optind < argc) o.data = argv[optind++];
  if (optind < argc) usage();
  return o;
}

int main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  digits_set data = digits_load(opt.data, "eager_logreg");
  samba_session* session = NULL;
  samba_optimizer* optimizer;
  Model model;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  int n_train, n_test, epoch, correct = 0;
  int* order = digits_split(&data, &n_train, &n_test); /* the first n_test rows are held out */
  int* train = order + n_test;
  const int steps = (n_train + BATCH - 1) / BATCH;
  double acc;

  check(samba_session_create(NULL, &session), "samba_session_create");
  model = model_create(opt.hidden, &rng);
  optimizer = sgd(&model, opt.lr);

  printf("samba %s: %d training and %d held-out digits, MLP 64-%d-10, batch %d, lr %g\n",
         samba_version(), n_train, n_test, opt.hidden, BATCH, opt.lr);
  for (epoch = 1; epoch <= opt.epochs; ++epoch) {
    double loss_sum = 0, t0 = digits_now_seconds();
    int start, step = 0;
    digits_shuffle(train, n_train, &rng);
    for (start = 0; start < n_train; start += BATCH) {
      const int n = n_train - start < BATCH ? n_train - start : BATCH;
      samba_tensor *x, *y, *logits, *loss = NULL;
      double value = 0;
      make_batch(&data, train + start, n, &x, &y);
      logits = forward(session, model.params, x);
      check(samba_cross_entropy(session, logits, y, &loss), "samba_cross_entropy");
      check(samba_tensor_item(loss, &value), "samba_tensor_item");
      check(samba_tensor_backward(loss, NULL, 0), "samba_tensor_backward");
      check(samba_optimizer_step(session, optimizer), "samba_optimizer_step");
      check(samba_optimizer_zero_grad(optimizer), "samba_optimizer_zero_grad");
      loss_sum += value * n;
      samba_tensor_release(loss);
      samba_tensor_release(logits);
      samba_tensor_release(x);
      samba_tensor_release(y);
      digits_progress(epoch, opt.epochs, ++step, steps, loss_sum / (start + n),
                      (start + n) / (digits_now_seconds() - t0), 0);
    }
    digits_progress(epoch, opt.epochs, steps, steps, loss_sum / n_train, n_train / (digits_now_seconds() - t0),
                    epoch == opt.epochs || epoch % 5 == 0);
  }

  acc = accuracy(session, &model, &data, order, n_test, &correct);
  printf("held-out accuracy: %.1f%% (%d/%d)\n", 100 * acc, correct, n_test);

  samba_optimizer_release(optimizer);
  model_release(&model);
  samba_session_release(session);
  free(order);
  digits_free(&data);
  if (acc < opt.min_accuracy) {
    fprintf(stderr, "eager_logreg: accuracy %.3f is below the required %.3f\n", acc,
            opt.min_accuracy);
    return 1;
  }
  return 0;
}
