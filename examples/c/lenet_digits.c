/*
 * lenet_digits: a LeNet-style convolutional network for the 8x8 handwritten
 * digits, written with the typed op functions of samba.h, compiled to a PEF
 * and trained on the emulated RDU.
 *
 *   lenet_digits [DATA.csv[.gz]] [--epochs N] [--pef PATH] [--lr LR] [--min-accuracy A]
 *
 * Model (PyTorch: 8 lines):
 *   x = max_pool2d(conv2d(image, 1 -> 6, 3x3, padding 1), 2)    [N, 6, 4, 4]
 *   x = max_pool2d(conv2d(x, 6 -> 16, 3x3, padding 1), 2)       [N, 16, 2, 2]
 *   logits = linear(relu(linear(flatten(x), 64 -> 32)), 32 -> 10)
 *   loss = cross_entropy(logits, label)
 * SGD with momentum; the 1,797 images are split once into 80% training and
 * 20% held out, and the program ends by printing the held-out accuracy
 * (with --min-accuracy, it fails when the accuracy is lower).
 */
#include <getopt.h>
#include <math.h>
#include <samba.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digits_pef.h"

#define PROGRAM "lenet_digits"
#define BATCH 64

static void check(samba_status status, const char* what) {
  if (status != SAMBA_OK) {
    fprintf(stderr, PROGRAM ": %s failed: %s: %s\n", what, samba_status_name(status),
            samba_last_error_message());
    exit(1);
  }
}

/* ---- the model ------------------------------------------------------------ */

enum { C1W, C1B, C2W, C2B, F1W, F1B, F2W, F2B, N_PARAMS };
static const int64_t kPad[2] = {1, 1}, kPool[2] = {2, 2};

/* Runs `call` unless an earlier call of the model failed. */
#define TRY(call) \
  if (st == SAMBA_OK) st = (call)

/* Hands the loss (already in outputs[0]) and the logits to the caller on
 * success, releases the intermediates, and returns `st`. */
static samba_status finish(samba_status st, samba_tensor** t, size_t n, samba_tensor* logits,
                           samba_tensor** outputs, size_t* n_outputs) {
  size_t i;
  for (i = 0; i < n; ++i) samba_tensor_release(t[i]);
  if (st != SAMBA_OK) {
    samba_tensor_release(logits);
    return st;
  }
  outputs[1] = logits;
  *n_outputs = 2;
  return SAMBA_OK;
}

/* The model callback: traced once to compile, and again to load the PEF. */
static samba_status lenet(void* params, samba_tensor* const* in, size_t n_in, samba_tensor** out,
                          size_t capacity, size_t* n_out) {
  samba_tensor **p = (samba_tensor**)params, *t[7] = {NULL}, *logits = NULL;
  samba_status st = n_in == 2 && capacity >= 2 ? SAMBA_OK : SAMBA_ERR_INVALID_ARGUMENT;
  TRY(samba_conv2d(NULL, in[0], p[C1W], p[C1B], NULL, 0, kPad, 2, NULL, 0, 1, &t[0]));
  TRY(samba_max_pool2d(NULL, t[0], kPool, 2, NULL, 0, NULL, 0, NULL, 0, 0, &t[1]));
  TRY(samba_conv2d(NULL, t[1], p[C2W], p[C2B], NULL, 0, kPad, 2, NULL, 0, 1, &t[2]));
  TRY(samba_max_pool2d(NULL, t[2], kPool, 2, NULL, 0, NULL, 0, NULL, 0, 0, &t[3]));
  TRY(samba_flatten(NULL, t[3], 1, -1, &t[4]));
  TRY(samba_linear(NULL, t[4], p[F1W], p[F1B], &t[5]));
  TRY(samba_relu(NULL, t[5], &t[6]));
  TRY(samba_linear(NULL, t[6], p[F2W], p[F2B], &logits));
  TRY(samba_cross_entropy(NULL, logits, in[1], &out[0]));
  return finish(st, t, 7, logits, out, n_out);
}

/* Uniform in +-1/sqrt(fan_in), PyTorch's default for conv and linear layers. */
static samba_tensor* parameter(const char* name, const int64_t* shape, size_t ndim, int fan_in,
                               uint64_t* rng) {
  samba_tensor* t = NULL;
  float* data = NULL;
  int64_t numel = 0, i;
  check(samba_tensor_create(SAMBA_FLOAT32, shape, ndim, &t), "samba_tensor_create");
  check(samba_tensor_data(t, (void**)&data), "samba_tensor_data");
  check(samba_tensor_numel(t, &numel), "samba_tensor_numel");
  for (i = 0; i < numel; ++i)
    data[i] = (float)((2 * digits_rng_uniform(rng) - 1) / sqrt((double)fan_in));
  check(samba_tensor_set_name(t, name), "samba_tensor_set_name");
  check(samba_tensor_set_requires_grad(t, 1), "samba_tensor_set_requires_grad");
  return t;
}

static void make_params(samba_tensor** p) {
  static const int64_t c1w[] = {6, 1, 3, 3}, c1b[] = {6}, c2w[] = {16, 6, 3, 3}, c2b[] = {16};
  static const int64_t f1w[] = {32, 64}, f1b[] = {32}, f2w[] = {DIGITS_CLASSES, 32},
                       f2b[] = {DIGITS_CLASSES};
  uint64_t rng = 0x1E5E7ull;
  p[C1W] = parameter("conv1.weight", c1w, 4, 9, &rng);
  p[C1B] = parameter("conv1.bias", c1b, 1, 9, &rng);
  p[C2W] = parameter("conv2.weight", c2w, 4, 54, &rng);
  p[C2B] = parameter("conv2.bias", c2b, 1, 54, &rng);
  p[F1W] = parameter("fc1.weight", f1w, 2, 64, &rng);
  p[F1B] = parameter("fc1.bias", f1b, 1, 64, &rng);
  p[F2W] = parameter("fc2.weight", f2w, 2, 32, &rng);
  p[F2B] = parameter("fc2.bias", f2b, 1, 32, &rng);
}

/* ---- compile, load, train, evaluate ----------------------------------------- */

typedef struct {
  const char* data;
  const char* pef;
  int epochs;
  double lr, min_accuracy;
} Options;

static void usage(void) {
  fprintf(stderr, "usage: " PROGRAM " [DATA.csv[.gz]] [--epochs N] [--pef PATH] [--lr LR] [--min-accuracy A]\n");
  exit(2);
}

static Options parse_options(int argc, char** argv) {
  static const struct option kLong[] = {{"epochs", required_argument, NULL, 'e'},
                                        {"pef", required_argument, NULL, 'p'},
                                        {"lr", required_argument, NULL, 'l'},
                                        {"min-accuracy", required_argument, NULL, 'a'},
                                        {NULL, 0, NULL, 0}};
  Options o = {"examples/data/digits.csv.gz", "lenet_digits.pef", 10, 0.05, 0};
  int c;
  while ((c = getopt_long(argc, argv, "", kLong, NULL)) != -1) {
    switch (c) {
      case 'e': o.epochs = (int)digits_option_long(optarg, "--epochs", 1, 1000000, PROGRAM); break;
      case 'p': o.pef = optarg; break;
      case 'l': o.lr = digits_option_double(optarg, "--lr", 1e-12, 100, PROGRAM); break;
      case 'a': o.min_accuracy = digits_option_double(optarg, "--min-accuracy", 0, 1, PROGRAM); break;
      default: usage();
    }
  }
  if (optind < argc) o.data = argv[optind++];
  if (optind < argc) usage();
  return o;
}

static samba_optimizer* sgd(double lr, samba_tensor** params) {
  samba_optimizer* opt = NULL;
  samba_attrs* hp = NULL;
  check(samba_attrs_create(&hp), "samba_attrs_create");
  check(samba_attrs_set_float(hp, "lr", lr), "set lr");
  check(samba_attrs_set_float(hp, "momentum", 0.9), "set momentum");
  check(samba_optimizer_create("sgd", hp, &opt), "samba_optimizer_create");
  check(samba_optimizer_add_param_group(opt, params, N_PARAMS, NULL), "add_param_group");
  samba_attrs_release(hp);
  return opt;
}

/* Compiles the training PEF, then loads it (tracing the model again) and
 * returns the traced outputs: loss and logits. */
static void compile_and_load(samba_session* s, const Options* o, samba_tensor** params,
                             samba_optimizer* opt, samba_tensor** in, samba_tensor** traced) {
  samba_compile_options* co = NULL;
  size_t n = 0;
  check(samba_compile_options_create(&co), "samba_compile_options_create");
  check(samba_compile_options_set_name(co, PROGRAM), "set name");
  check(samba_compile_options_set_pef_path(co, o->pef), "set pef path");
  check(samba_compile_options_set_batch_size(co, BATCH), "set batch size");
  check(samba_compile_options_set_loss_indices(co, (const int64_t[]){0}, 1), "set loss indices");
  check(samba_session_compile(s, lenet, params, in, 2, &opt, 1, co), "compile");
  samba_compile_options_release(co);
  check(samba_session_trace_graph(s, lenet, params, in, 2, &opt, 1, o->pef, NULL, traced, 2, &n),
        "trace_graph");
}

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  const int64_t image_shape[4] = {BATCH, 1, 8, 8}, label_shape[1] = {BATCH};
  digits_set data = digits_load(o.data, PROGRAM);
  samba_tensor *params[N_PARAMS], *in[2], *traced[2] = {NULL, NULL};
  samba_session* s = NULL;
  samba_optimizer* opt;
  int n_train, n_test, epoch, i;
  int* order = digits_split(&data, &n_train, &n_test);
  uint64_t rng = 0xD161757ull;
  double acc;

  make_params(params);
  opt = sgd(o.lr, params);
  check(samba_tensor_create(SAMBA_FLOAT32, image_shape, 4, &in[0]), "create image");
  check(samba_tensor_create(SAMBA_INT64, label_shape, 1, &in[1]), "create label");
  check(samba_tensor_set_name(in[0], "image"), "name image");
  check(samba_tensor_set_name(in[1], "label"), "name label");
  check(samba_session_create(NULL, &s), "samba_session_create");
  compile_and_load(s, &o, params, opt, in, traced);

  printf("samba %s: training %s on %d digits (%d held out), batch %d, %d epochs\n",
         samba_version(), o.pef, n_train, n_test, BATCH, o.epochs);
  for (epoch = 1; epoch <= o.epochs; ++epoch) {
    const int steps = n_train / BATCH; /* whole batches: the PEF's batch size is fixed */
    double loss_sum = 0, t0 = digits_now_seconds();
    int step;
    digits_shuffle(order + n_test, n_train, &rng);
    for (step = 0; step < steps; ++step) {
      samba_tensor* loss = NULL;
      size_t n = 0;
      double value = 0;
      digits_fill(&data, order + n_test + step * BATCH, BATCH, BATCH, in[0], in[1], PROGRAM);
      check(samba_session_run(s, in, 2, &traced[0], 1, NULL, &loss, 1, &n), "run");
      check(samba_tensor_item(loss, &value), "item");
      samba_tensor_release(loss);
      loss_sum += value;
      digits_progress(epoch, o.epochs, step + 1, steps, loss_sum / (step + 1),
                      (step + 1) * BATCH / (digits_now_seconds() - t0), step + 1 == steps);
    }
  }
  acc = digits_accuracy(s, traced[1], &data, order, n_test, BATCH, in[0], in[1], PROGRAM);
  printf("held-out accuracy: %.1f%% (%d digits)\n", 100 * acc, n_test);

  samba_tensor_release(traced[0]);
  samba_tensor_release(traced[1]);
  samba_session_release(s);
  samba_optimizer_release(opt);
  for (i = 0; i < N_PARAMS; ++i) samba_tensor_release(params[i]);
  samba_tensor_release(in[0]);
  samba_tensor_release(in[1]);
  free(order);
  digits_free(&data);
  if (acc < o.min_accuracy) {
    fprintf(stderr, PROGRAM ": held-out accuracy %.3f is below the required %.3f\n", acc,
            o.min_accuracy);
    return 1;
  }
  return 0;
}
