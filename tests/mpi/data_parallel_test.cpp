// Data parallel under mpirun (-np 2 and -np 4; registered by
// tests/CMakeLists.txt only when MPI is found). One program, a scenario per
// argument:
//
//   train    N replicas at batch B train as one process at batch N*B (an MLP
//            with a residual block and a conv net, 20 SGD and 20 AdamW
//            steps); the three overlap modes and reduce_on_rdu on and off give
//            bit-identical parameters; rank 0's initial weights reach every
//            rank; bad input (no REDUCE, world size, differing PEFs, timeout).
//            The application owns MPI here (samba_dist_init_with_comm).
//   abort    rank 1 calls samba_dist_abort; rank 0, inside a collective, fails
//            with CANCELLED naming rank 1 and its reason, within the timeout.
//   kill     rank 1 is SIGKILLed in the middle of a step; rank 0 must not
//            hang (Open MPI ends the job, or the timeout does).
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "dp_test_util.h"

namespace {

int g_world = 1;
constexpr int64_t kBatch = 4;  // per replica
constexpr int kSteps = 20;

struct Compiled {
  samba_session* session = nullptr;
  Model model;
  samba_optimizer* opt = nullptr;
  std::string pef;
};

samba_optimizer* optimizer_for(const Model& m, bool adamw) {
  samba_attrs* hp = nullptr;
  DP_OK(samba_attrs_create(&hp));
  DP_OK(samba_attrs_set_float(hp, "lr", adamw ? 0.01 : 0.2));
  if (adamw) DP_OK(samba_attrs_set_float(hp, "weight_decay", 0.01));
  samba_optimizer* opt = nullptr;
  DP_OK(samba_optimizer_create(adamw ? "adamw" : "sgd", hp, &opt));
  samba_attrs_release(hp);
  DP_OK(samba_optimizer_add_param_group(opt, const_cast<samba_tensor**>(m.params.data()),
                                        m.params.size(), nullptr));
  return opt;
}

// Compiles `m` at `batch` (data parallel for `world_size` replicas when > 0)
// into a PEF of this rank's own.
Compiled compile(Model m, bool adamw, int64_t batch, int32_t world_size, const std::string& tag) {
  Compiled c;
  c.model = std::move(m);
  c.opt = optimizer_for(c.model, adamw);
  c.pef = "dp_" + tag + "_r" + std::to_string(g_rank) + ".pef";
  DP_OK(samba_session_create(nullptr, &c.session));
  samba_compile_options* co = nullptr;
  DP_OK(samba_compile_options_create(&co));
  DP_OK(samba_compile_options_set_pef_path(co, c.pef.c_str()));
  // Small buckets: several all-reduces per step, so the overlap modes have
  // something to overlap and to order.
  if (world_size > 0) DP_OK(samba_compile_options_set_data_parallel(co, world_size, 2048));
  samba_tensor *x = nullptr, *y = nullptr;
  batch_of(c.model.conv, 0, 0, batch, &x, &y);
  samba_tensor* in[2] = {x, y};
  DP_OK(samba_session_compile(c.session, model_fn, &c.model, in, 2, &c.opt, 1, co));
  samba_compile_options_release(co);
  samba_tensor_release(x);
  samba_tensor_release(y);
  return c;
}

void release(Compiled& c) {
  samba_session_release(c.session);
  samba_optimizer_release(c.opt);
  for (samba_tensor* p : c.model.params) samba_tensor_release(p);
  c = Compiled{};
}

// trace_graph without re-tracing: the device starts from the weights the
// PEF embeds (this rank's own), then takes rank 0's.
samba_status trace(Compiled& c, const char* mode) {
  samba_trace_options* to = nullptr;
  DP_OK(samba_trace_options_create(&to));
  DP_OK(samba_trace_options_set_data_parallel_mode(to, mode));
  samba_tensor* out = nullptr;
  size_t n = 0;
  samba_status st = samba_session_trace_graph(c.session, nullptr, nullptr, nullptr, 0, &c.opt, 1,
                                              c.pef.c_str(), to, &out, 1, &n);
  samba_tensor_release(out);
  samba_trace_options_release(to);
  return st;
}

std::vector<float> parameters(Compiled& c) {
  std::vector<float> all;
  for (samba_tensor* p : c.model.params) {
    samba_tensor* v = nullptr;
    DP_OK(samba_tensor_sn_data(c.session, p, &v));
    for (float f : values_of(v)) all.push_back(f);
    samba_tensor_release(v);
  }
  return all;
}

double step(Compiled& c, int s, int64_t first, int64_t batch, const samba_run_options* ro) {
  samba_tensor *x = nullptr, *y = nullptr;
  batch_of(c.model.conv, s, first, batch, &x, &y);
  samba_tensor* in[2] = {x, y};
  samba_tensor* loss = nullptr;
  size_t n = 0;
  DP_OK(samba_session_run(c.session, in, 2, nullptr, 0, ro, &loss, 1, &n));
  double v = 0;
  DP_OK(samba_tensor_item(loss, &v));
  samba_tensor_release(loss);
  samba_tensor_release(x);
  samba_tensor_release(y);
  return v;
}

// Tolerance against one process at the whole batch: the only difference is
// the order of the float32 sums (each replica sums its own rows, then the
// all-reduce sums the replicas and divides by N, where one process sums all
// rows at once): a few ulps per step, which 20 steps of SGD keep at ~1e-6;
// AdamW divides by sqrt(v) and so scales small gradient differences up
// where a gradient is near zero, hence its looser bound.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol,
                  const char* what) {
  DP_CHECK(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]) /
                                (1.0 + std::fabs(static_cast<double>(b[i]))));
  if (worst > tol) {
    std::fprintf(stderr, "rank %d: %s: parameters differ by %g (tolerance %g)\n", g_rank, what,
                 worst, tol);
    std::exit(1);
  }
}

void train_equivalence(bool conv, bool adamw) {
  const char* name = conv ? (adamw ? "conv_adamw" : "conv_sgd") : (adamw ? "mlp_adamw" : "mlp_sgd");
  // One process at batch N*B, from rank 0's initial values.
  Compiled ref =
      compile(make_model(conv, 0.0), adamw, kBatch * g_world, 0, std::string(name) + "_ref");
  DP_OK(trace(ref, "normal"));
  std::vector<double> ref_loss;
  for (int s = 0; s < kSteps; ++s) ref_loss.push_back(step(ref, s, 0, kBatch * g_world, nullptr));
  const std::vector<float> expected = parameters(ref);

  // Every rank starts from its own values: trace_graph gives them rank 0's.
  Compiled dp = compile(make_model(conv, 0.5 * g_rank), adamw, kBatch, g_world, name);
  std::vector<float> first_result;
  for (const char* mode : {"normal", "inorder", "optimal"})
    for (int on_rdu : {1, 0}) {
      DP_OK(trace(dp, mode));
      samba_run_options* ro = nullptr;
      DP_OK(samba_run_options_create(&ro));
      DP_OK(
          samba_run_options_set_data_parallel(ro, 1, on_rdu, nullptr));  // the mode trace_graph set
      for (int s = 0; s < kSteps; ++s) {
        double local = step(dp, s, kBatch * g_rank, kBatch, ro);
        double global = 0;
        MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        global /= g_world;
        // The global batch's loss is the mean of the replicas' losses.
        if (std::fabs(global - ref_loss[static_cast<size_t>(s)]) >
            1e-4 * (1 + std::fabs(ref_loss[static_cast<size_t>(s)]))) {
          std::fprintf(stderr, "rank %d: %s %s rdu=%d step %d: loss %.9g, one process %.9g\n",
                       g_rank, name, mode, on_rdu, s, global, ref_loss[static_cast<size_t>(s)]);
          std::exit(1);
        }
      }
      samba_run_options_release(ro);
      const std::vector<float> got = parameters(dp);
      expect_close(got, expected, adamw ? 2e-4 : 2e-5, name);
      if (first_result.empty())
        first_result = got;
      else
        DP_CHECK(std::memcmp(got.data(), first_result.data(), got.size() * sizeof(float)) == 0);
      // Every replica holds the same parameters: gathered on rank 0, each
      // rank's copy is rank 0's bit for bit.
      const char* pname = conv ? "fc.weight" : "head.weight";
      samba_tensor* gathered = nullptr;
      DP_OK(samba_session_gather_tensors_by_name(dp.session, &pname, 1, &gathered));
      if (g_rank == 0) {
        const std::vector<float> all = values_of(gathered);
        const size_t per = all.size() / static_cast<size_t>(g_world);
        for (int r = 1; r < g_world; ++r)
          DP_CHECK(std::memcmp(all.data(), all.data() + per * static_cast<size_t>(r),
                               per * sizeof(float)) == 0);
      } else {
        DP_CHECK(gathered == nullptr);
      }
      samba_tensor_release(gathered);
    }
  std::printf(
      "rank %d: %s: %d replicas x batch %lld = one process at batch %lld; 3 modes x reduce_on_rdu "
      "bit-identical\n",
      g_rank, name, g_world, static_cast<long long>(kBatch),
      static_cast<long long>(kBatch * g_world));
}

// measure_performance of a data-parallel run reports the job's throughput.
void measure_global() {
  Compiled c = compile(make_model(false, 0.0), false, kBatch, g_world, "measure");
  DP_OK(trace(c, "inorder"));
  samba_run_options* ro = nullptr;
  DP_OK(samba_run_options_create(&ro));
  DP_OK(samba_run_options_set_data_parallel(ro, 1, 0, "optimal"));
  samba_tensor *x = nullptr, *y = nullptr;
  batch_of(false, 0, kBatch * g_rank, kBatch, &x, &y);
  samba_tensor* in[2] = {x, y};
  samba_perf_report rep{};
  rep.struct_size = sizeof rep;
  DP_OK(samba_session_measure_performance(c.session, in, 2, ro, 5, 1, &rep));
  DP_CHECK(rep.batch_size == kBatch * g_world);
  DP_CHECK(rep.samples_per_second > 0);
  // Every rank reports the same job-wide figure.
  double mine = rep.samples_per_second, lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  DP_CHECK(lo == hi);
  release(c);
  samba_run_options_release(ro);
  samba_tensor_release(x);
  samba_tensor_release(y);
}

void bad_input() {
  // A PEF compiled without data parallel.
  Compiled plain = compile(make_model(false, 0.0), false, kBatch, 0, "plain");
  DP_OK(trace(plain, "normal"));
  samba_run_options* ro = nullptr;
  DP_OK(samba_run_options_create(&ro));
  DP_FAILS(samba_run_options_set_data_parallel(ro, 1, 1, "sideways"), SAMBA_ERR_INVALID_ARGUMENT,
           "sideways");
  DP_OK(samba_run_options_set_data_parallel(ro, 1, 1, "normal"));
  samba_tensor *x = nullptr, *y = nullptr;
  batch_of(false, 0, 0, kBatch, &x, &y);
  samba_tensor* in[2] = {x, y};
  samba_tensor* out = nullptr;
  size_t n = 0;
  DP_FAILS(samba_session_run(plain.session, in, 2, nullptr, 0, ro, &out, 1, &n),
           SAMBA_ERR_INVALID_ARGUMENT, "recompile");

  // Compiled for another world size: refused at trace_graph, on every rank.
  Compiled other = compile(make_model(false, 0.0), false, kBatch, g_world + 1, "world");
  DP_FAILS(trace(other, "normal"), SAMBA_ERR_INVALID_ARGUMENT, "replicas; the job has");
  DP_FAILS(samba_session_run(other.session, in, 2, nullptr, 0, ro, &out, 1, &n),
           SAMBA_ERR_INVALID_ARGUMENT, "replicas; the job has");

  // The last rank compiles another model: every rank's trace_graph names it.
  const bool odd = g_rank == g_world - 1;
  Compiled mixed = compile(make_model(false, 0.0, odd ? 24 : 32), false, kBatch, g_world, "mixed");
  const std::string named = "rank(s) " + std::to_string(g_world - 1);
  DP_FAILS(trace(mixed, "normal"), SAMBA_ERR_INVALID_ARGUMENT, named.c_str());

  // Timeout: rank 0 gathers alone for 300 ms; the others join late.
  DP_OK(samba_dist_set_timeout_ms(300));
  DP_FAILS(samba_dist_set_timeout_ms(0), SAMBA_ERR_INVALID_ARGUMENT, "positive");
  const char* pname = "head.weight";
  samba_tensor* g = nullptr;
  if (g_rank == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    DP_FAILS(samba_session_gather_tensors_by_name(plain.session, &pname, 1, &g), SAMBA_ERR_TIMEOUT,
             "300 ms");
    DP_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
  }
  DP_OK(samba_dist_set_timeout_ms(60000));
  if (g_rank != 0) DP_OK(samba_session_gather_tensors_by_name(plain.session, &pname, 1, &g));
  MPI_Barrier(MPI_COMM_WORLD);
  samba_tensor_release(g);
  samba_run_options_release(ro);
  samba_tensor_release(x);
  samba_tensor_release(y);
  release(plain);
  release(other);
  release(mixed);
  std::printf("rank %d: bad input refused: no REDUCE, world size, differing PEFs, timeout\n",
              g_rank);
}

int run_train() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  DP_OK(samba_dist_init_with_comm(static_cast<int64_t>(MPI_Comm_c2f(MPI_COMM_WORLD))));
  int32_t rank = -1, world = 0, distributed = -1, available = 0;
  DP_OK(samba_dist_available(&available));
  DP_OK(samba_dist_rank(&rank));
  DP_OK(samba_dist_world_size(&world));
  DP_OK(samba_dist_is_distributed(&distributed));
  g_rank = rank;
  g_world = world;
  DP_CHECK(available == 1 && world >= 2 && distributed == 1);
  DP_FAILS(samba_dist_init_with_comm(static_cast<int64_t>(MPI_Comm_c2f(MPI_COMM_WORLD))),
           SAMBA_ERR_INVALID_STATE, "already");
  for (bool conv : {false, true})
    for (bool adamw : {false, true}) train_equivalence(conv, adamw);
  measure_global();
  bad_input();
  DP_OK(samba_dist_finalize());
  MPI_Finalize();
  return 0;
}

int run_abort() {
  DP_OK(samba_dist_init());
  int32_t rank = 0;
  DP_OK(samba_dist_rank(&rank));
  g_rank = rank;
  Compiled c = compile(make_model(false, 0.0), false, kBatch, 0, "abort");
  DP_OK(trace(c, "normal"));
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    samba_dist_abort(3, "loss is NaN at step 7");
    return 1;  // not reached
  }
  DP_OK(samba_dist_set_timeout_ms(30000));
  const char* pname = "head.weight";
  samba_tensor* g = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  const samba_status st = samba_session_gather_tensors_by_name(c.session, &pname, 1, &g);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (st == SAMBA_ERR_CANCELLED && std::strstr(samba_last_error_message(), "rank 1") &&
      std::strstr(samba_last_error_message(), "loss is NaN at step 7") && s < 10)
    std::printf("rank 0 saw the abort of rank 1 after %.2f s: %s\n", s, samba_last_error_message());
  else
    std::printf("rank 0: unexpected %s after %.2f s: %s\n", samba_status_name(st), s,
                samba_last_error_message());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(10));  // MPI_Abort of rank 1 ends the job
  return 1;
}

int run_kill() {
  DP_OK(samba_dist_init());
  int32_t rank = 0, world = 0;
  DP_OK(samba_dist_rank(&rank));
  DP_OK(samba_dist_world_size(&world));
  g_rank = rank;
  g_world = world;
  DP_OK(samba_dist_set_timeout_ms(5000));
  Compiled c = compile(make_model(false, 0.0), false, kBatch, world, "kill");
  DP_OK(trace(c, "inorder"));
  samba_run_options* ro = nullptr;
  DP_OK(samba_run_options_create(&ro));
  DP_OK(samba_run_options_set_data_parallel(ro, 1, 1, nullptr));
  for (int s = 0; s < 1000; ++s) {
    if (rank == 1 && s == 3) raise(SIGKILL);
    samba_tensor *x = nullptr, *y = nullptr;
    batch_of(false, s, kBatch * rank, kBatch, &x, &y);
    samba_tensor* in[2] = {x, y};
    samba_tensor* loss = nullptr;
    size_t n = 0;
    const samba_status st = samba_session_run(c.session, in, 2, nullptr, 0, ro, &loss, 1, &n);
    if (st != SAMBA_OK) {
      std::printf("rank %d: step %d failed: %s\n", rank, s, samba_last_error_message());
      std::fflush(stdout);
      samba_dist_abort(2, samba_last_error_message());
    }
    samba_tensor_release(loss);
    samba_tensor_release(x);
    samba_tensor_release(y);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "train";
  if (what == "train") return run_train();
  if (what == "abort") return run_abort();
  if (what == "kill") return run_kill();
  std::fprintf(stderr, "usage: %s [train|abort|kill]\n", argv[0]);
  return 2;
}
