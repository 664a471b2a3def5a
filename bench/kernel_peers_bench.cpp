// Samba's GEMM and direct convolution kernels beside oneDNN's primitives, in
// one process, on the same shapes and 2 threads each: the measurement that
// decides between Samba's own AVX-512 kernels and adopting oneDNN
// (docs/PERFORMANCE.md, "Kernels beside oneDNN"). Figures are GFLOP/s of
// wall time and GFLOP per CPU-second of the process (2 m n k per product;
// 2 N O OH OW C KH KW per convolution); the label names the ISA level or
// oneDNN's implementation and, for the convolutions, the layouts.
// Each shape's rows are registered one after the other so that, on a shared
// machine, the peers' rows are measured close together in time.
//
// Pre-packing on both sides: Samba's fp32 product reads B packed once
// (prepack_b, as a loaded inference PEF does); oneDNN's primitives are
// created once with weights in `format_tag::any`, the weights reordered once
// into the layout the primitive chose, outside the timed loop.
//
// Threads. Debian's oneDNN (libdnnl-dev 2.6) is built with
// DNNL_CPU_RUNTIME = OMP (dnnl_config.h; dnnl_version()->cpu_runtime says so
// at run time and is printed in the context): each primitive runs on an
// OpenMP team of libgomp threads, sized here with omp_set_num_threads(2)
// (OMP_NUM_THREADS works too); dnnl::set_max_threads-style control exists
// only for the threadpool runtime. Samba's kernels run in a oneTBB arena of
// 2 threads (ThreadPool), as the other benchmarks do. For Samba the OpenMP
// runtime means: oneDNN's threads are not the arena's. A primitive called
// from an arena worker makes that worker the master of its own OpenMP team,
// so two flow-graph nodes running primitives at once use 2 x 2 OpenMP
// threads beside the arena's idle-spinning workers: oversubscription on a
// 2-core machine, and libgomp's spin-wait after each region (GOMP_SPINCOUNT,
// OMP_WAIT_POLICY) takes cycles from the arena's next tasks. Running it
// inside the one arena needs a oneDNN built with DNNL_CPU_RUNTIME=TBB (it
// then runs in the caller's arena) or THREADPOOL (an adapter of
// dnnl::threadpool_interop::threadpool_iface over the session's arena):
// not Debian's package. Here the two sides run one after the other, so
// neither waits on the other's threads beyond those spins. On a loaded
// machine libgomp's default wait stalls a 2-thread primitive on its
// descheduled team member (tens of ms for a b16 layer); run with
// OMP_WAIT_POLICY=passive there, and --threads=1 for the kernels alone.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bench/flop_counter.h"
#include "engine/core/dtype.h"
#include "engine/core/isa.h"
#include "engine/core/parallel.h"
#include "engine/kernels/conv_direct.h"
#include "engine/kernels/gemm.h"
#include "oneapi/dnnl/dnnl.hpp"

using namespace samba;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

// Threads of each side: 2 (the peers' setting); --threads=1 compares one
// core's kernels without either runtime's synchronisation.
int g_threads = 2;

std::vector<float> filled(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<float>((i * 7919) % 1000 - 500) / 500.0f;
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  std::transform(v.begin(), v.end(), h.begin(),
                 [](float x) { return Eigen::numext::bit_cast<uint16_t>(bf16(x)); });
  return h;
}

ThreadPool& samba_pool() {
  static ThreadPool pool(g_threads);
  return pool;
}

dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

struct AlignedDelete {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using AlignedFloats = std::unique_ptr<float[], AlignedDelete>;
AlignedFloats aligned_floats(size_t n) {
  return AlignedFloats(
      static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{64})));
}

// Runs the primitive with its arguments and waits for it; oneDNN's stream
// on the CPU runtime executes in the calling thread's OpenMP team.
void run(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args) {
  static dnnl::stream s(cpu_engine());
  p.execute(s, args);
  s.wait();
}

// A weight stored as `user` (plain), reordered once into the layout `want`
// that the primitive chose.
dnnl::memory weights_for(const dnnl::memory::desc& want, const dnnl::memory& user) {
  if (want == user.get_desc()) return user;
  dnnl::memory w(want, cpu_engine());
  run(dnnl::reorder(user, w), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, w}});
  return w;
}

// ---- fp32 linear: y (m x n) = x (m x k) @ Wᵀ + b, W stored (n, k) ---------------

struct LinearShape {
  int64_t m, k, n;
};

// Samba's GEMM layer arguments of the linear: x row-major, W read transposed in place.
template <typename Args, typename T>
void linear_args(Args& g, LinearShape s, const T* x, const T* w, const float* b, float* y) {
  g.m = s.m, g.n = s.n, g.k = s.k;
  g.a = {x, s.k, false};
  g.b = {w, s.k, true};
  g.c = y, g.ldc = s.n, g.bias = b;
}

void samba_linear(benchmark::State& state, LinearShape s) {
  std::vector<float> x = filled(s.m * s.k, 1.0f), w = filled(s.n * s.k, 0.05f),
                     b = filled(s.n, 0.1f), y(static_cast<size_t>(s.m * s.n));
  ThreadPool::Scope scope(&samba_pool());
  ops::GemmArgs<float> g;
  linear_args(g, s, x.data(), w.data(), b.data(), y.data());
  AlignedFloats packed;
  if (ops::gemm_packs_b(s.m, s.n, s.k, false, true)) {
    packed = aligned_floats(ops::prepacked_b_floats(s.k, s.n));
    ops::prepack_b(g.b, s.k, s.n, packed.get());
    g.b_packed = packed.get();
  }
  FlopCounter fc(state, 2.0 * s.m * s.n * s.k);
  for (auto _ : state) {
    ops::gemm(g);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(isa_name(active_isa())) + (packed ? " prepacked" : " in place"));
}

// The matmul primitive (weights as (k, n): W's storage read as tag ba), or
// the inner product (weights (n, k) as stored), both with the bias fused.
void onednn_linear(benchmark::State& state, LinearShape s, bool inner_product, dt type) {
  std::vector<float> xf = filled(s.m * s.k, 1.0f), wf = filled(s.n * s.k, 0.05f),
                     b = filled(s.n, 0.1f), y(static_cast<size_t>(s.m * s.n));
  std::vector<uint16_t> xh = to_bf16(xf), wh = to_bf16(wf);
  void* x = type == dt::bf16 ? static_cast<void*>(xh.data()) : xf.data();
  void* wp = type == dt::bf16 ? static_cast<void*>(wh.data()) : wf.data();
  dnnl::engine& eng = cpu_engine();
  const dnnl::memory::desc src({s.m, s.k}, type, tag::ab), dst({s.m, s.n}, dt::f32, tag::ab);
  dnnl::primitive prim;
  dnnl::memory::desc want_w, user_w;
  std::string impl;
  if (inner_product) {
    user_w = {{s.n, s.k}, type, tag::ab};
    dnnl::inner_product_forward::primitive_desc pd({dnnl::prop_kind::forward_inference,
                                                    src,
                                                    {{s.n, s.k}, type, tag::any},
                                                    {{s.n}, dt::f32, tag::a},
                                                    dst},
                                                   eng);
    prim = dnnl::inner_product_forward(pd), want_w = pd.weights_desc(), impl = pd.impl_info_str();
  } else {
    user_w = {{s.k, s.n}, type, tag::ba};
    dnnl::matmul::primitive_desc pd(
        {src, {{s.k, s.n}, type, tag::any}, {{1, s.n}, dt::f32, tag::ab}, dst}, eng);
    prim = dnnl::matmul(pd), want_w = pd.weights_desc(), impl = pd.impl_info_str();
  }
  dnnl::memory w = weights_for(want_w, dnnl::memory(user_w, eng, wp));
  const dnnl::memory bias(inner_product ? dnnl::memory::desc({s.n}, dt::f32, tag::a)
                                        : dnnl::memory::desc({1, s.n}, dt::f32, tag::ab),
                          eng, b.data());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(src, eng, x)},
                                             {DNNL_ARG_WEIGHTS, w},
                                             {DNNL_ARG_BIAS, bias},
                                             {DNNL_ARG_DST, dnnl::memory(dst, eng, y.data())}};
  FlopCounter fc(state, 2.0 * s.m * s.n * s.k);
  for (auto _ : state) run(prim, args);
  state.SetLabel(impl);
}

// Samba's bf16 GEMM with fp32 accumulation and fp32 output (no pre-packing:
// the bf16 kernels pack their panels per tile).
void samba_linear_bf16(benchmark::State& state, LinearShape s) {
  std::vector<uint16_t> x = to_bf16(filled(s.m * s.k, 1.0f)), w = to_bf16(filled(s.n * s.k, 0.05f));
  std::vector<float> b = filled(s.n, 0.1f), y(static_cast<size_t>(s.m * s.n));
  ThreadPool::Scope scope(&samba_pool());
  ops::Bf16GemmArgs<float> g;
  linear_args(g, s, x.data(), w.data(), b.data(), y.data());
  FlopCounter fc(state, 2.0 * s.m * s.n * s.k);
  for (auto _ : state) {
    ops::gemm(g);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(isa_name(active_isa())));
}

// ---- fp32 conv2d, 3x3, pad 1, stride 1, with bias (and relu) ---------------------

struct ConvShape {
  int64_t batch, in_c, out_c, h, w;
  int64_t flops() const { return 2 * batch * out_c * h * w * in_c * 9; }
};

void relu_rows(const void*, float* c, int64_t rows, int64_t cols, int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = std::max(c[i * ldc + j], 0.0f);
}

void samba_conv(benchmark::State& state, ConvShape s, bool relu) {
  std::vector<float> x = filled(s.batch * s.in_c * s.h * s.w, 1.0f),
                     w = filled(s.out_c * s.in_c * 9, 0.2f), b = filled(s.out_c, 0.1f),
                     y(static_cast<size_t>(s.batch * s.out_c * s.h * s.w));
  ops::ConvParams p;
  p.padding = {1, 1};
  const ops::ConvGeometry geo =
      ops::conv_geometry("conv2d", {s.batch, s.in_c, s.h, s.w}, {s.out_c, s.in_c, 3, 3}, p);
  ThreadPool::Scope scope(&samba_pool());
  ops::OutputTail tail{relu_rows, nullptr};
  FlopCounter fc(state, static_cast<double>(s.flops()));
  for (auto _ : state) {
    if (!ops::conv2d_direct_forward(geo, x.data(), w.data(), b.data(), y.data(),
                                    ops::DirectLayout::Cheapest, relu ? &tail : nullptr)) {
      state.SkipWithError("the direct kernel does not take this shape at this ISA level");
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(isa_name(active_isa())) + " direct, nchw");
}

// How the oneDNN convolution meets Samba's NCHW tensors.
enum class ConvLayout {
  Blocked,          // src/dst `any` (blocked), the data kept blocked: the primitive alone
  BlockedReorders,  // the same primitive, NCHW reordered in and out inside the timed loop
  Plain,            // the primitive created on NCHW src/dst
};

void onednn_conv(benchmark::State& state, ConvShape s, bool relu, ConvLayout layout) {
  std::vector<float> x = filled(s.batch * s.in_c * s.h * s.w, 1.0f),
                     wv = filled(s.out_c * s.in_c * 9, 0.2f), b = filled(s.out_c, 0.1f),
                     y(static_cast<size_t>(s.batch * s.out_c * s.h * s.w));
  dnnl::engine& eng = cpu_engine();
  const dnnl::memory::desc user_src({s.batch, s.in_c, s.h, s.w}, dt::f32, tag::nchw),
      user_dst({s.batch, s.out_c, s.h, s.w}, dt::f32, tag::nchw),
      user_w({s.out_c, s.in_c, 3, 3}, dt::f32, tag::oihw), bias_md({s.out_c}, dt::f32, tag::a);
  const bool plain = layout == ConvLayout::Plain;
  const dnnl::memory::desc src_md =
      plain ? user_src : dnnl::memory::desc(user_src.dims(), dt::f32, tag::any);
  const dnnl::memory::desc dst_md =
      plain ? user_dst : dnnl::memory::desc(user_dst.dims(), dt::f32, tag::any);
  dnnl::primitive_attr attr;
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  dnnl::convolution_forward::primitive_desc pd({dnnl::prop_kind::forward_inference,
                                                dnnl::algorithm::convolution_direct,
                                                src_md,
                                                {user_w.dims(), dt::f32, tag::any},
                                                bias_md,
                                                dst_md,
                                                {1, 1},
                                                {1, 1},
                                                {1, 1}},
                                               attr, eng);
  const dnnl::convolution_forward conv(pd);
  const dnnl::memory x_user(user_src, eng, x.data()), y_user(user_dst, eng, y.data());
  const dnnl::memory w = weights_for(pd.weights_desc(), dnnl::memory(user_w, eng, wv.data()));
  const bool src_differs = pd.src_desc() != user_src, dst_differs = pd.dst_desc() != user_dst;
  const dnnl::memory x_conv = src_differs ? dnnl::memory(pd.src_desc(), eng) : x_user;
  const dnnl::memory y_conv = dst_differs ? dnnl::memory(pd.dst_desc(), eng) : y_user;
  if (src_differs)
    run(dnnl::reorder(x_user, x_conv), {{DNNL_ARG_FROM, x_user}, {DNNL_ARG_TO, x_conv}});
  const std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, x_conv},
      {DNNL_ARG_WEIGHTS, w},
      {DNNL_ARG_BIAS, dnnl::memory(bias_md, eng, b.data())},
      {DNNL_ARG_DST, y_conv}};
  const bool reorders = layout == ConvLayout::BlockedReorders;
  FlopCounter fc(state, static_cast<double>(s.flops()));
  const dnnl::reorder to_conv = src_differs ? dnnl::reorder(x_user, x_conv) : dnnl::reorder();
  const dnnl::reorder to_user = dst_differs ? dnnl::reorder(y_conv, y_user) : dnnl::reorder();
  for (auto _ : state) {
    if (reorders && src_differs) run(to_conv, {{DNNL_ARG_FROM, x_user}, {DNNL_ARG_TO, x_conv}});
    run(conv, args);
    if (reorders && dst_differs) run(to_user, {{DNNL_ARG_FROM, y_conv}, {DNNL_ARG_TO, y_user}});
  }
  std::string label = pd.impl_info_str();
  if (layout != ConvLayout::Plain)
    label += std::string(src_differs ? " src blocked" : " src nchw") +
             (dst_differs ? ", dst blocked" : ", dst nchw") +
             (reorders ? " (reorders timed)" : " (no reorders)");
  state.SetLabel(label);
}

// ---- registration ---------------------------------------------------------------

std::string runtime_name(unsigned r) {
  switch (r) {
    case DNNL_RUNTIME_SEQ:
      return "sequential";
    case DNNL_RUNTIME_OMP:
      return "OpenMP";
    case DNNL_RUNTIME_TBB:
      return "TBB";
    case DNNL_RUNTIME_THREADPOOL:
      return "threadpool";
    default:
      return "other (" + std::to_string(r) + ")";
  }
}

void register_all() {
  using benchmark::RegisterBenchmark;
  auto done = [](benchmark::internal::Benchmark* b) {
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
  };
  const LinearShape linear[] = {{16, 784, 256},    {16, 256, 256},    {256, 784, 1024},
                                {256, 1024, 1024}, {1024, 784, 2048}, {1024, 2048, 2048}};
  for (const LinearShape& s : linear) {
    const std::string shape =
        std::to_string(s.m) + "x" + std::to_string(s.k) + "->" + std::to_string(s.n);
    done(RegisterBenchmark(("linear_f32/" + shape + "/samba").c_str(), samba_linear, s));
    done(RegisterBenchmark(("linear_f32/" + shape + "/onednn_matmul").c_str(), onednn_linear, s,
                           false, dt::f32));
    done(RegisterBenchmark(("linear_f32/" + shape + "/onednn_inner_product").c_str(), onednn_linear,
                           s, true, dt::f32));
  }
  // bf16 only where the CPU has the bf16 dot product: elsewhere both sides
  // would widen to fp32 and the rows would say nothing about bf16.
  if (isa_best_supported() >= IsaLevel::Avx512Bf16)
    for (const LinearShape& s : {linear[4], linear[5]}) {
      const std::string shape =
          std::to_string(s.m) + "x" + std::to_string(s.k) + "->" + std::to_string(s.n);
      done(RegisterBenchmark(("linear_bf16/" + shape + "/samba").c_str(), samba_linear_bf16, s));
      done(RegisterBenchmark(("linear_bf16/" + shape + "/onednn_matmul").c_str(), onednn_linear, s,
                             false, dt::bf16));
    }
  const ConvShape convs[] = {{256, 1, 16, 8, 8}, {256, 16, 32, 8, 8}};
  for (const ConvShape& s : convs)
    for (bool relu : {false, true}) {
      const std::string name = "conv_f32/b256_" + std::to_string(s.in_c) + "->" +
                               std::to_string(s.out_c) + (relu ? "_bias_relu" : "_bias");
      done(RegisterBenchmark((name + "/samba").c_str(), samba_conv, s, relu));
      done(RegisterBenchmark((name + "/onednn_blocked").c_str(), onednn_conv, s, relu,
                             ConvLayout::Blocked));
      done(RegisterBenchmark((name + "/onednn_blocked_reorders").c_str(), onednn_conv, s, relu,
                             ConvLayout::BlockedReorders));
      done(RegisterBenchmark((name + "/onednn_nchw").c_str(), onednn_conv, s, relu,
                             ConvLayout::Plain));
    }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]).starts_with("--threads=")) {
      g_threads = std::max(1, std::atoi(argv[i] + 10));
      std::copy(argv + i + 1, argv + argc, argv + i);
      --argc;
      break;
    }
  omp_set_num_threads(g_threads);  // oneDNN's OpenMP team (see the top of the file)
  const dnnl_version_t* v = dnnl_version();
  benchmark::AddCustomContext("onednn", std::to_string(v->major) + "." + std::to_string(v->minor) +
                                            "." + std::to_string(v->patch) + " (" + v->hash +
                                            "), CPU runtime " + runtime_name(v->cpu_runtime));
  benchmark::AddCustomContext(
      "threads", std::to_string(g_threads) + " (Samba: oneTBB arena; oneDNN: OpenMP team)");
  benchmark::AddCustomContext("samba_isa", std::string(isa_name(active_isa())));
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
