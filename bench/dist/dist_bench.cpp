// Data-parallel benchmark (docs/DISTRIBUTED.md), one process per rank under
// mpirun, over libsamba's C ABI and MPI:
//   1. a bare MPI_Allreduce sweep (4 B .. 64 MiB) on this job's transport,
//      the calibration of the alpha-beta model (bench/dist/scaling_model.py);
//   2. a data-parallel PEF (compiled with --data-parallel -ws N, images of
//      `features` floats and int64 labels) loaded by samba_session_trace_graph:
//      the compute-only step (the same PEF run without data parallel, so
//      REDUCE is skipped), the REDUCE section alone, and a bare
//      MPI_Allreduce of the same gradient bytes in the same bucket sizes, in
//      the same run (the REDUCE bandwidth against MPI's);
//   3. whole data-parallel steps in the normal, inorder and optimal modes,
//      with the share of the all-reduce hidden behind compute:
//      (compute + reduce - step) / reduce.
// Rank 0 prints a table and, with --out, writes the figures as JSON.
//
//   mpirun -np 2 dist_bench --pef resffn.pef --batch 32 --features 784 [--iterations 30] [--out r.json]
#include <mpi.h>
#include <samba.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

void check(samba_status st, const char* what) {
  if (st == SAMBA_OK) return;
  std::fprintf(stderr, "dist_bench: %s failed: %s: %s\n", what, samba_status_name(st), samba_last_error_message());
  MPI_Abort(MPI_COMM_WORLD, 2);
}

struct Args {
  std::string pef, out, model = "model";
  int64_t batch = 32, features = 784, classes = 10, bucket_bytes = 25 << 20;
  int iterations = 30;
  int threads = 0;  // the session's threads; 0: Samba's default (every core)
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--pef") a.pef = v;
    else if (k == "--out") a.out = v;
    else if (k == "--model") a.model = v;
    else if (k == "--batch") a.batch = std::stoll(v);
    else if (k == "--features") a.features = std::stoll(v);
    else if (k == "--classes") a.classes = std::stoll(v);
    else if (k == "--bucket-bytes") a.bucket_bytes = std::stoll(v);
    else if (k == "--iterations") a.iterations = std::stoi(v);
    else if (k == "--threads") a.threads = std::stoi(v);
    else {
      std::fprintf(stderr, "dist_bench: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.pef.empty()) {
    std::fprintf(stderr, "usage: dist_bench --pef PEF [--batch B --features F --classes C --iterations N "
                         "--bucket-bytes B --threads T --model NAME --out JSON]\n");
    std::exit(2);
  }
  return a;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median seconds of one MPI_Allreduce of `bytes` in chunks of `chunk` bytes
// (one call per chunk, as one REDUCE bucket each), every rank in step.
double bare_allreduce_s(int64_t bytes, int64_t chunk, int reps) {
  std::vector<float> buf(static_cast<size_t>(std::max<int64_t>(1, bytes / 4)), 1.0f);
  std::vector<double> times;
  for (int r = -2; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now_s();
    for (int64_t off = 0; off < bytes; off += chunk) {
      const int64_t n = std::min(chunk, bytes - off) / 4;
      MPI_Allreduce(MPI_IN_PLACE, buf.data() + off / 4, static_cast<int>(std::max<int64_t>(1, n)), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    }
    double t = now_s() - t0;
    // The slowest rank's time is the collective's.
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (r >= 0) times.push_back(t);
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

samba_tensor* tensor(samba_dtype dt, std::vector<int64_t> shape, const void* data, size_t bytes, const char* name) {
  samba_tensor* t = nullptr;
  check(samba_tensor_create(dt, shape.data(), shape.size(), &t), "samba_tensor_create");
  check(samba_tensor_copy_from(t, data, bytes), "samba_tensor_copy_from");
  check(samba_tensor_set_name(t, name), "samba_tensor_set_name");
  return t;
}

int64_t gradient_bytes(samba_session* s) {
  size_t n = 0;
  check(samba_session_name_count(s, SAMBA_NAMES_WEIGHTS, &n), "weight names");
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    check(samba_session_name_at(s, SAMBA_NAMES_WEIGHTS, i, &name), "weight name");
    samba_tensor* t = nullptr;
    check(samba_session_get_tensors_by_name(s, &name, 1, &t), "get weight");
    int64_t numel = 0;
    check(samba_tensor_numel(t, &numel), "numel");
    total += numel * 4;
    samba_tensor_release(t);
  }
  return total;
}

// Mean milliseconds per step over `iterations`, the slowest rank's.
double step_ms(samba_session* s, samba_tensor** in, const samba_run_options* ro, int iterations) {
  MPI_Barrier(MPI_COMM_WORLD);
  samba_perf_report rep{};
  rep.struct_size = sizeof rep;
  check(samba_session_measure_performance(s, in, 2, ro, iterations, 3, &rep), "measure_performance");
  double ms = rep.latency_mean_ms;
  MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return ms;
}

samba_run_options* run_options(bool data_parallel, const char* mode, const char* only_section) {
  samba_run_options* ro = nullptr;
  check(samba_run_options_create(&ro), "run options");
  check(samba_run_options_set_hyperparam(ro, "lr", 1e-4), "lr");
  if (data_parallel) check(samba_run_options_set_data_parallel(ro, 1, 1, mode), "data parallel");
  if (only_section) check(samba_run_options_set_section_types(ro, &only_section, 1), "section types");
  return ro;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const Args args = parse(argc, argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // The application's own MPI: Samba joins on its communicator.
  check(samba_dist_init_with_comm(MPI_Comm_c2f(MPI_COMM_WORLD)), "samba_dist_init_with_comm");

  // 1. The calibration sweep.
  std::vector<std::pair<int64_t, double>> sweep;
  for (int64_t bytes = 4; bytes <= (int64_t{64} << 20); bytes *= 4)
    sweep.emplace_back(bytes, bare_allreduce_s(bytes, bytes, bytes >= (1 << 22) ? 10 : 50));

  // 2. The PEF: compute-only, REDUCE alone, bare all-reduce of its bytes.
  samba_session* s = nullptr;
  samba_session_options* so = nullptr;
  check(samba_session_options_create(&so), "session options");
  if (args.threads > 0) check(samba_session_options_set_num_threads(so, args.threads), "num_threads");
  check(samba_session_create(so, &s), "session");
  samba_session_options_release(so);
  std::mt19937 gen(1234 + rank);
  std::normal_distribution<float> normal;
  std::vector<float> image(static_cast<size_t>(args.batch * args.features));
  for (float& v : image) v = normal(gen);
  std::vector<int64_t> label(static_cast<size_t>(args.batch));
  for (size_t i = 0; i < label.size(); ++i) label[i] = static_cast<int64_t>((i * 7 + rank) % args.classes);
  samba_tensor* in[2] = {
      tensor(SAMBA_FLOAT32, {args.batch, args.features}, image.data(), image.size() * 4, "image"),
      tensor(SAMBA_INT64, {args.batch}, label.data(), label.size() * 8, "label")};
  size_t n_out = 0;
  samba_tensor* outs[8] = {};
  check(samba_session_trace_graph(s, nullptr, nullptr, in, 2, nullptr, 0, args.pef.c_str(), nullptr, outs, 8, &n_out),
        "trace_graph");
  const int64_t grad_bytes = gradient_bytes(s);

  samba_run_options* plain = run_options(false, "normal", nullptr);
  const double compute_ms = step_ms(s, in, plain, args.iterations);
  samba_run_options* reduce_only = run_options(true, "normal", "REDUCE");
  const double reduce_ms = step_ms(s, in, reduce_only, args.iterations);
  const double bare_ms = 1e3 * bare_allreduce_s(grad_bytes, args.bucket_bytes, args.iterations);

  // 3. Whole data-parallel steps in each mode.
  const char* modes[3] = {"normal", "inorder", "optimal"};
  double mode_ms[3];
  for (int m = 0; m < 3; ++m) {
    samba_run_options* ro = run_options(true, modes[m], nullptr);
    mode_ms[m] = step_ms(s, in, ro, args.iterations);
    samba_run_options_release(ro);
  }

  if (rank == 0) {
    const double gbps = grad_bytes / (reduce_ms * 1e-3) / 1e9, bare_gbps = grad_bytes / (bare_ms * 1e-3) / 1e9;
    std::printf("dist_bench %s: %d ranks, %lld gradient bytes, batch %lld per rank, load average %s\n",
                args.model.c_str(), world, static_cast<long long>(grad_bytes), static_cast<long long>(args.batch),
                loadavg().c_str());
    std::printf("  compute-only step %.3f ms; REDUCE alone %.3f ms (%.2f GB/s) vs bare MPI_Allreduce %.3f ms "
                "(%.2f GB/s): %.0f%%\n",
                compute_ms, reduce_ms, gbps, bare_ms, bare_gbps, 100.0 * bare_ms / reduce_ms);
    for (int m = 0; m < 3; ++m)
      std::printf("  %-8s step %.3f ms; communication hidden %.0f%%\n", modes[m], mode_ms[m],
                  100.0 * (compute_ms + reduce_ms - mode_ms[m]) / reduce_ms);
    if (!args.out.empty()) {
      std::ostringstream j;
      j << "{\"model\": \"" << args.model << "\", \"world_size\": " << world << ", \"grad_bytes\": " << grad_bytes
        << ", \"batch_per_replica\": " << args.batch << ", \"loadavg\": \"" << loadavg()
        << "\", \"compute_step_ms\": " << compute_ms << ", \"reduce_ms\": " << reduce_ms
        << ", \"bare_allreduce_ms\": " << bare_ms << ", \"bucket_bytes\": " << args.bucket_bytes;
      for (int m = 0; m < 3; ++m) j << ", \"" << modes[m] << "_step_ms\": " << mode_ms[m];
      j << ", \"allreduce_sweep\": [";
      for (size_t i = 0; i < sweep.size(); ++i)
        j << (i ? ", " : "") << "{\"bytes\": " << sweep[i].first << ", \"seconds\": " << sweep[i].second << "}";
      j << "]}\n";
      std::ofstream(args.out) << j.str();
    }
  }
  samba_run_options_release(plain);
  samba_run_options_release(reduce_only);
  for (size_t i = 0; i < n_out; ++i) samba_tensor_release(outs[i]);
  samba_tensor_release(in[0]);
  samba_tensor_release(in[1]);
  samba_session_release(s);
  check(samba_dist_finalize(), "samba_dist_finalize");
  MPI_Finalize();
  return 0;
}
