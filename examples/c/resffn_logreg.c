/*
 * resffn_logreg: the ResFFNLogReg app of the SambaFlow modeling guide, in C
 * on Samba: a feed-forward network with two activations and a residual
 * connection, compiled to a PEF and trained on the emulated RDU.
 *
 *   resffn_logreg compile [-b 64] [-mb 0] [--inference] [-p out.pef] [--hidden 128] [--o0]
 *   resffn_logreg run -p out.pef [--epochs 30] [--inference] [--data DIGITS.csv.gz]
 *                     [--checkpoint FILE] [--profile TRACE.json] [--min-accuracy A]
 *                     [--steps N] [--dump FILE]
 *   resffn_logreg measure-performance -p out.pef [--iterations 200] [--inference]
 *
 * Model (num_features 64, num_classes 10):
 *   out = tanh(norm1(gemm1(x)));  res = out
 *   out = sigmoid(norm2(gemm2(out)) + res)
 *   out = gemm3(out);             loss = cross_entropy(out, label)
 * Training uses SGD with momentum (lr 0.1, momentum 0.9, weight decay 1e-4);
 * the learning rate follows a cosine schedule through run()'s
 * hyperparameters. A training run saves the weights to --checkpoint; an
 * inference run (of a PEF compiled with --inference) loads them from there.
 * --steps stops training after N steps; --dump writes the initial weights,
 * and each step's rows, learning rate and loss, as JSON lines, so another
 * framework can replay the same steps (tests/python/torch_reference.py).
 */
#include <getopt.h>
#include <math.h>
#include <samba.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digits_pef.h"

#define PROGRAM "resffn_logreg"

static void check(samba_status status, const char* what) {
  if (status != SAMBA_OK) {
    fprintf(stderr, PROGRAM ": %s failed: %s: %s\n", what, samba_status_name(status), samba_last_error_message());
    exit(1);
  }
}

/* ---- options -------------------------------------------------------------- */

typedef struct {
  const char* command;
  const char* pef;
  const char* data;
  const char* checkpoint;
  const char* profile;
  const char* dump;
  const char* mixed_precision;
  int max_steps;
  int batch, micro_batch, hidden, epochs, iterations, inference, o0;
  double lr, momentum, weight_decay, min_accuracy;
} Options;

static void usage(void) {
  fprintf(stderr,
          "usage: " PROGRAM " compile [-b B] [-mb MB] [--inference] [-p PEF] [--hidden H] [--o0]\n"
          "                         [--mixed-precision none|bf16]\n"
          "       " PROGRAM " run -p PEF [--epochs N] [--inference] [--data CSV] [--checkpoint FILE]\n"
          "                     [--profile TRACE.json] [--min-accuracy A] [-b B] [--hidden H]\n"
          "       " PROGRAM " measure-performance -p PEF [--iterations N] [--inference] [-b B]\n");
  exit(2);
}

static Options parse_options(int argc, char** argv) {
  /* SambaFlow apps spell the micro-batch option -mb: getopt_long_only takes
   * "-mb" as a long option while "-b" and "-p" stay short ones. */
  static const struct option kLong[] = {
      {"batch-size", required_argument, NULL, 'b'},  {"mb", required_argument, NULL, 'm'},
      {"microbatch-size", required_argument, NULL, 'm'}, {"pef", required_argument, NULL, 'p'},
      {"hidden", required_argument, NULL, 'H'},      {"epochs", required_argument, NULL, 'e'},
      {"iterations", required_argument, NULL, 'i'},  {"data", required_argument, NULL, 'd'},
      {"checkpoint", required_argument, NULL, 'c'},  {"profile", required_argument, NULL, 'P'},
      {"dump", required_argument, NULL, 'D'},        {"steps", required_argument, NULL, 's'},
      {"lr", required_argument, NULL, 'l'},          {"min-accuracy", required_argument, NULL, 'a'},
      {"inference", no_argument, NULL, 'I'},         {"o0", no_argument, NULL, 'O'},
      {"mixed-precision", required_argument, NULL, 'M'},
      {NULL, 0, NULL, 0}};
  Options o;
  int c;
  memset(&o, 0, sizeof o);
  o.pef = "out/resffn_logreg.pef";
  o.data = "examples/data/digits.csv.gz";
  o.checkpoint = "out/resffn_logreg.ckpt";
  o.mixed_precision = "none";
  o.batch = 64;
  o.hidden = 128;
  o.epochs = 30;
  o.iterations = 200;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  if (argc < 2 || argv[1][0] == '-') usage();
  o.command = argv[1];
  /* The options follow the command: parse argv[1..] as if argv[1] were the program. */
  while ((c = getopt_long_only(argc - 1, argv + 1, "b:p:", kLong, NULL)) != -1) {
    switch (c) {
      case 'b': o.batch = (int)digits_option_long(optarg, "--batch-size", 1, 1 << 20, PROGRAM); break;
      case 'm': o.micro_batch = (int)digits_option_long(optarg, "-mb", 0, 1 << 20, PROGRAM); break;
      case 'p': o.pef = optarg; break;
      case 'H': o.hidden = (int)digits_option_long(optarg, "--hidden", 1, 1 << 16, PROGRAM); break;
      case 'e': o.epochs = (int)digits_option_long(optarg, "--epochs", 1, 1000000, PROGRAM); break;
      case 'i': o.iterations = (int)digits_option_long(optarg, "--iterations", 1, 100000000, PROGRAM); break;
      case 'd': o.data = optarg; break;
      case 'c': o.checkpoint = optarg; break;
      case 'P': o.profile = optarg; break;
      case 'D': o.dump = optarg; break;
      case 's': o.max_steps = (int)digits_option_long(optarg, "--steps", 0, 100000000, PROGRAM); break;
      case 'l': o.lr = digits_option_double(optarg, "--lr", 0, 100, PROGRAM); break;
      case 'a': o.min_accuracy = digits_option_double(optarg, "--min-accuracy", 0, 1, PROGRAM); break;
      case 'I': o.inference = 1; break;
      case 'O': o.o0 = 1; break;
      case 'M': o.mixed_precision = optarg; break; /* the library refuses an unknown mode */
      default: usage(); /* getopt printed what it did not understand */
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, PROGRAM ": unexpected argument '%s'\n", argv[optind + 1]);
    usage();
  }
  return o;
}

/* ---- the model ------------------------------------------------------------- */

enum { W1, B1, W2, B2, W3, B3, N1W, N1B, N2W, N2B, N_PARAMS };
static const char* const kParamNames[N_PARAMS] = {
    "gemm1.weight", "gemm1.bias", "gemm2.weight", "gemm2.bias", "gemm3.weight",
    "gemm3.bias",   "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"};

typedef struct {
  samba_tensor* p[N_PARAMS];
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

/* nn.Linear's default initialisation: uniform in +-1/sqrt(fan_in) for both
 * the weight (kaiming_uniform with a = sqrt(5) comes to that bound) and the
 * bias; LayerNorm's weight is one and its bias zero. */
static samba_tensor* parameter(int which, int64_t rows, int64_t cols, int fan_in, uint64_t* rng) {
  samba_tensor* t = new_tensor(SAMBA_FLOAT32, rows, cols);
  float* data = NULL;
  int64_t numel = 0, i;
  check(samba_tensor_data(t, (void**)&data), "samba_tensor_data");
  check(samba_tensor_numel(t, &numel), "samba_tensor_numel");
  for (i = 0; i < numel; ++i) {
    if (which == N1W || which == N2W)
      data[i] = 1.0f;
    else if (which == N1B || which == N2B)
      data[i] = 0.0f;
    else
      data[i] = (float)((2 * digits_rng_uniform(rng) - 1) / sqrt((double)fan_in));
  }
  check(samba_tensor_set_name(t, kParamNames[which]), "samba_tensor_set_name");
  check(samba_tensor_set_requires_grad(t, 1), "samba_tensor_set_requires_grad");
  return t;
}

static Model model_create(int hidden) {
  uint64_t rng = 0x5EEDF00Dull; /* the same weights in compile and run */
  Model m;
  m.hidden = hidden;
  m.p[W1] = parameter(W1, hidden, DIGITS_FEATURES, DIGITS_FEATURES, &rng);
  m.p[B1] = parameter(B1, hidden, 0, DIGITS_FEATURES, &rng);
  m.p[W2] = parameter(W2, hidden, hidden, hidden, &rng);
  m.p[B2] = parameter(B2, hidden, 0, hidden, &rng);
  m.p[W3] = parameter(W3, DIGITS_CLASSES, hidden, hidden, &rng);
  m.p[B3] = parameter(B3, DIGITS_CLASSES, 0, hidden, &rng);
  m.p[N1W] = parameter(N1W, hidden, 0, 0, &rng);
  m.p[N1B] = parameter(N1B, hidden, 0, 0, &rng);
  m.p[N2W] = parameter(N2W, hidden, 0, 0, &rng);
  m.p[N2B] = parameter(N2B, hidden, 0, 0, &rng);
  return m;
}

static void model_release(Model* m) {
  int i;
  for (i = 0; i < N_PARAMS; ++i) samba_tensor_release(m->p[i]);
}

/* LayerNorm over the hidden features with the weight and bias `w`, `b`. */
static samba_status layer_norm(Model* m, samba_tensor* x, int w, int b, samba_tensor** out) {
  const int64_t shape[1] = {m->hidden};
  return samba_layer_norm(NULL, x, m->p[w], m->p[b], shape, 1, 1e-5, out);
}

#define TRY(call)                           \
  do {                                      \
    if ((st = (call)) != SAMBA_OK) goto end; \
  } while (0)

/* The model callback: traced once to compile, and again by trace_graph. */
static samba_status resffn(void* user, samba_tensor* const* inputs, size_t n_inputs, samba_tensor** outputs,
                           size_t capacity, size_t* n_outputs) {
  Model* m = (Model*)user;
  samba_tensor *g1 = NULL, *n1 = NULL, *res = NULL, *g2 = NULL, *n2 = NULL, *sum = NULL, *act = NULL;
  samba_tensor *logits = NULL, *loss = NULL;
  samba_status st = SAMBA_OK;
  if (n_inputs != 2 || capacity < 2) return SAMBA_ERR_INVALID_ARGUMENT;
  TRY(samba_linear(NULL, inputs[0], m->p[W1], m->p[B1], &g1));
  TRY(layer_norm(m, g1, N1W, N1B, &n1));
  TRY(samba_tanh(NULL, n1, &res));
  TRY(samba_linear(NULL, res, m->p[W2], m->p[B2], &g2));
  TRY(layer_norm(m, g2, N2W, N2B, &n2));
  TRY(samba_add(NULL, n2, res, &sum));
  TRY(samba_sigmoid(NULL, sum, &act));
  TRY(samba_linear(NULL, act, m->p[W3], m->p[B3], &logits));
  TRY(samba_cross_entropy(NULL, logits, inputs[1], &loss));
  outputs[0] = loss;
  outputs[1] = logits;
  loss = logits = NULL;
  *n_outputs = 2;
end:
  samba_tensor_release(g1);
  samba_tensor_release(n1);
  samba_tensor_release(res);
  samba_tensor_release(g2);
  samba_tensor_release(n2);
  samba_tensor_release(sum);
  samba_tensor_release(act);
  samba_tensor_release(logits);
  samba_tensor_release(loss);
  return st;
}

static samba_optimizer* sgd(const Options* o, Model* m) {
  samba_optimizer* opt = NULL;
  samba_attrs* hp = NULL;
  check(samba_attrs_create(&hp), "samba_attrs_create");
  check(samba_attrs_set_float(hp, "lr", o->lr), "set lr");
  check(samba_attrs_set_float(hp, "momentum", o->momentum), "set momentum");
  check(samba_attrs_set_float(hp, "weight_decay", o->weight_decay), "set weight_decay");
  check(samba_optimizer_create("sgd", hp, &opt), "samba_optimizer_create");
  check(samba_optimizer_add_param_group(opt, m->p, N_PARAMS, NULL), "samba_optimizer_add_param_group");
  samba_attrs_release(hp);
  return opt;
}

/* The model's inputs: an image batch and its labels, named as the guide names them. */
static void make_inputs(int batch, samba_tensor** image, samba_tensor** label) {
  *image = new_tensor(SAMBA_FLOAT32, batch, DIGITS_FEATURES);
  *label = new_tensor(SAMBA_INT64, batch, 0);
  check(samba_tensor_set_name(*image, "image"), "name image");
  check(samba_tensor_set_name(*label, "label"), "name label");
}

/* ---- replay dump ---------------------------------------------------------------- */

static void dump_tensor(FILE* f, const char* name, samba_tensor* t) {
  int64_t n = 0, i;
  float* v;
  check(samba_tensor_numel(t, &n), "numel");
  v = digits_xmalloc(sizeof(float) * (size_t)n, PROGRAM);
  check(samba_tensor_copy_to(t, v, sizeof(float) * (size_t)n), "copy_to");
  fprintf(f, "{\"param\": \"%s\", \"values\": [", name);
  for (i = 0; i < n; ++i) fprintf(f, "%s%.9g", i ? ", " : "", v[i]);
  fprintf(f, "]}\n");
  free(v);
}

static void dump_step(FILE* f, const int* rows, int n, double lr, double loss) {
  int i;
  fprintf(f, "{\"lr\": %.17g, \"loss\": %.9g, \"rows\": [", lr, loss);
  for (i = 0; i < n; ++i) fprintf(f, "%s%d", i ? ", " : "", rows[i]);
  fprintf(f, "]}\n");
}

/* ---- commands ---------------------------------------------------------------- */

static int cmd_compile(const Options* o) {
  Model m = model_create(o->hidden);
  samba_optimizer* opt = o->inference ? NULL : sgd(o, &m);
  samba_session* s = NULL;
  samba_compile_options* co = NULL;
  samba_tensor *image, *label, *in[2];
  double t0 = digits_now_seconds();
  make_inputs(o->batch, &image, &label);
  in[0] = image;
  in[1] = label;
  check(samba_session_create(NULL, &s), "samba_session_create");
  check(samba_compile_options_create(&co), "samba_compile_options_create");
  check(samba_compile_options_set_name(co, "resffn_logreg"), "set name");
  check(samba_compile_options_set_pef_path(co, o->pef), "set pef path");
  check(samba_compile_options_set_inference(co, o->inference), "set inference");
  check(samba_compile_options_set_batch_size(co, o->batch), "set batch size");
  check(samba_compile_options_set_micro_batch_size(co, o->micro_batch), "set micro-batch size");
  check(samba_compile_options_set_opt_level(co, o->o0 ? 0 : 1), "set opt level");
  check(samba_compile_options_set_mixed_precision(co, o->mixed_precision), "set mixed precision");
  check(samba_compile_options_set_loss_indices(co, (const int64_t[]){0}, 1), "set loss indices");
  check(samba_session_compile(s, resffn, &m, in, 2, opt ? &opt : NULL, opt ? 1 : 0, co), "compile");
  printf("compiled %s (%s, batch %d%s, o%d) in %.2f s; see %s.log\n", o->pef,
         o->inference ? "inference" : "training", o->batch, o->micro_batch ? ", micro-batched" : "", o->o0 ? 0 : 1,
         digits_now_seconds() - t0, o->pef);
  samba_compile_options_release(co);
  samba_session_release(s);
  samba_optimizer_release(opt);
  samba_tensor_release(image);
  samba_tensor_release(label);
  model_release(&m);
  return 0;
}

static int cmd_run(const Options* o, int measure) {
  Model m = model_create(o->hidden);
  samba_optimizer* opt = o->inference ? NULL : sgd(o, &m);
  digits_set data = digits_load(o->data, PROGRAM);
  samba_session* s = NULL;
  samba_run_options* ro = NULL;
  samba_tensor *image, *label, *in[2], *traced[2] = {NULL, NULL};
  size_t n_traced = 0;
  int n_train, n_test, epoch, steps;
  int* order = digits_split(&data, &n_train, &n_test);
  int* train = order + n_test;
  uint64_t rng = 0xC0FFEEull;
  double acc;

  make_inputs(o->batch, &image, &label);
  in[0] = image;
  in[1] = label;
  check(samba_session_create(NULL, &s), "samba_session_create");
  if (o->profile) check(samba_session_start_profile(s), "start profile");
  check(samba_session_trace_graph(s, resffn, &m, in, 2, opt ? &opt : NULL, opt ? 1 : 0, o->pef, NULL, traced, 2,
                                  &n_traced),
        "trace_graph");
  check(samba_run_options_create(&ro), "samba_run_options_create");

  if (measure) {
    const char* fwd = "FWD";
    double t0 = 0, *lat = digits_xmalloc(sizeof(double) * (size_t)o->iterations, PROGRAM);
    int i;
    if (o->inference) check(samba_run_options_set_section_types(ro, &fwd, 1), "set section types");
    digits_fill(&data, train, o->batch, o->batch, image, label, PROGRAM);
    for (i = -10; i < o->iterations; ++i) { /* ten warm-up steps first */
      samba_tensor* loss = NULL;
      size_t n = 0;
      const double t = digits_now_seconds();
      if (i == 0) t0 = t;
      check(samba_session_run(s, in, 2, &traced[0], 1, ro, &loss, 1, &n), "run");
      if (i >= 0) lat[i] = digits_now_seconds() - t;
      samba_tensor_release(loss);
    }
    {
      const double total = digits_now_seconds() - t0;
      int a, b;
      for (a = 1; a < o->iterations; ++a)
        for (b = a; b > 0 && lat[b - 1] > lat[b]; --b) {
          double tmp = lat[b];
          lat[b] = lat[b - 1];
          lat[b - 1] = tmp;
        }
      printf("%s, batch %d: %.0f samples/s, latency p50 %.3f ms, p99 %.3f ms over %d steps\n",
             o->inference ? "inference (FWD)" : "training step (FWD+BCKWD+OPT)", o->batch,
             o->iterations * o->batch / total, 1e3 * lat[o->iterations / 2],
             1e3 * lat[(int)(o->iterations * 0.99)], o->iterations);
    }
    free(lat);
  } else if (!o->inference) {
    FILE* dump = NULL;
    int total_steps = 0;
    if (o->dump) {
      int k;
      dump = fopen(o->dump, "w");
      if (!dump) {
        fprintf(stderr, PROGRAM ": cannot write %s\n", o->dump);
        exit(1);
      }
      fprintf(dump, "{\"hidden\": %d, \"batch\": %d, \"momentum\": %.17g, \"weight_decay\": %.17g}\n", o->hidden,
              o->batch, o->momentum, o->weight_decay);
      for (k = 0; k < N_PARAMS; ++k) dump_tensor(dump, kParamNames[k], m.p[k]);
    }
    steps = n_train / o->batch; /* whole batches: the PEF's batch size is fixed */
    printf("samba %s: training %s on %d digits (%d held out), batch %d, %d epochs\n", samba_version(), o->pef,
           n_train, n_test, o->batch, o->epochs);
    for (epoch = 1; epoch <= o->epochs; ++epoch) {
      double loss_sum = 0, t0 = digits_now_seconds();
      int step, seen = 0;
      /* Cosine learning-rate schedule, fed through the lr argin. */
      const double lr = o->lr * 0.5 * (1 + cos(3.14159265358979323846 * (epoch - 1) / o->epochs));
      check(samba_run_options_set_hyperparam(ro, "lr", lr), "set lr");
      digits_shuffle(train, n_train, &rng);
      /* Whole batches only: the PEF's batch size is fixed. */
      for (step = 0; step + 1 <= n_train / o->batch; ++step) {
        samba_tensor* loss = NULL;
        size_t n = 0;
        double value = 0;
        digits_fill(&data, train + step * o->batch, o->batch, o->batch, image, label, PROGRAM);
        check(samba_session_run(s, in, 2, &traced[0], 1, ro, &loss, 1, &n), "run");
        check(samba_tensor_item(loss, &value), "item");
        samba_tensor_release(loss);
        if (dump) dump_step(dump, train + step * o->batch, o->batch, lr, value);
        loss_sum += value * o->batch;
        seen += o->batch;
        digits_progress(epoch, o->epochs, step + 1, steps, loss_sum / seen,
                        seen / (digits_now_seconds() - t0), 0);
        if (o->max_steps && ++total_steps >= o->max_steps) break;
      }
      digits_progress(epoch, o->epochs, steps, steps, loss_sum / seen, seen / (digits_now_seconds() - t0),
                      epoch == o->epochs || epoch % 10 == 0 || (o->max_steps && total_steps >= o->max_steps));
      if (o->max_steps && total_steps >= o->max_steps) break;
    }
    if (dump) fclose(dump);
    check(samba_session_save_checkpoint(s, o->checkpoint, SAMBA_TRANSFER_PARAMETERS), "save checkpoint");
    printf("saved the weights to %s\n", o->checkpoint);
  } else {
    check(samba_session_load_checkpoint(s, o->checkpoint, SAMBA_TRANSFER_PARAMETERS, 0), "load checkpoint");
  }

  if (!measure) {
    acc = digits_accuracy(s, traced[1], &data, order, n_test, o->batch, image, label, PROGRAM);
    printf("held-out accuracy: %.1f%% (%d digits)\n", 100 * acc, n_test);
  } else {
    acc = 1;
  }
  if (o->profile) {
    check(samba_session_end_profile(s, o->profile), "end profile");
    printf("profile written to %s (open it in https://ui.perfetto.dev)\n", o->profile);
  }
  samba_run_options_release(ro);
  samba_tensor_release(traced[0]);
  samba_tensor_release(traced[1]);
  samba_session_release(s);
  samba_optimizer_release(opt);
  samba_tensor_release(image);
  samba_tensor_release(label);
  model_release(&m);
  free(order);
  digits_free(&data);
  if (acc < o->min_accuracy) {
    fprintf(stderr, PROGRAM ": held-out accuracy %.3f is below the required %.3f\n", acc, o->min_accuracy);
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  if (strcmp(o.command, "compile") == 0) return cmd_compile(&o);
  if (strcmp(o.command, "run") == 0) return cmd_run(&o, 0);
  if (strcmp(o.command, "measure-performance") == 0) return cmd_run(&o, 1);
  usage();
  return 2;
}
