// Elementwise ops at 16M float32 elements on the default pool, against
// memcpy moving the same bytes (the bandwidth ceiling of a streaming op),
// plus the eager dispatch cost of a tiny op.
//
// Bytes per iteration count what the op must move: binary ops read two
// arrays and write one (3 x 64 MB), unary ops read one and write one
// (2 x 64 MB); memcpy of N bytes moves 2N. Two flavours per op:
//   Call:   samba::call as a user runs it, a fresh output each time (so the
//           kernel's first touch of new pages is included);
//   Kernel: the op's kernel writing into a preallocated output, the loop alone.
#include <benchmark/benchmark.h>

#include <cstring>

#include "engine/core/parallel.h"
#include "engine/ops/registry.h"

using namespace samba;

namespace {

constexpr int64_t kN = int64_t{1} << 24;  // 16M elements

Tensor filled(int64_t n, float v) {
  Tensor t = Tensor::empty({n}, DType::Float32);
  float* p = t.data<float>();
  parallel_for(n, kMinGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = v + static_cast<float>(i % 97) * 0.01f;
  });
  return t;
}

// memcpy of `bytes` split over the pool, into a buffer that is already mapped.
void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  Tensor src = Tensor::zeros({bytes}, DType::UInt8), dst = Tensor::zeros({bytes}, DType::UInt8);
  const char* s = src.data<char>();
  char* d = dst.data<char>();
  for (auto _ : state) {
    // One memcpy per thread: glibc then uses its best (non-temporal) path.
    parallel_for(bytes, bytes / current_pool().threads(), [&](int64_t b, int64_t e) {
      std::memcpy(d + b, s + b, static_cast<size_t>(e - b));
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
}
// Same traffic as a binary op (3 x 64 MB) and as a unary op (2 x 64 MB).
BENCHMARK(BM_Memcpy)
    ->Arg(kN * 4 * 3 / 2)
    ->Arg(kN * 4)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void run_call(benchmark::State& state, const char* op, std::vector<Tensor> in, const Attrs& attrs) {
  const OpDef& def = OpRegistry::global().get(op);
  for (auto _ : state) benchmark::DoNotOptimize(call(def, in, attrs));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(in.size() + 1) * kN * 4);
  state.SetLabel(op);
}

void run_kernel(benchmark::State& state, const char* op, std::vector<Tensor> in,
                const Attrs& attrs) {
  const OpDef& def = OpRegistry::global().get(op);
  Attrs resolved = def.resolve(attrs);
  std::vector<Tensor> out{filled(kN, 0)};
  KernelContext kc{def, in, out, resolved};
  for (auto _ : state) {
    def.kernel(kc);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(in.size() + 1) * kN * 4);
  state.SetLabel(op);
}

#define SAMBA_EW_BENCH(name, op, ninputs, attrs)                              \
  void BM_##name##Call(benchmark::State& s) {                                 \
    std::vector<Tensor> in;                                                   \
    for (int k = 0; k < ninputs; ++k) in.push_back(filled(kN, 0.5f + k));     \
    run_call(s, op, in, attrs);                                               \
  }                                                                           \
  void BM_##name##Kernel(benchmark::State& s) {                               \
    std::vector<Tensor> in;                                                   \
    for (int k = 0; k < ninputs; ++k) in.push_back(filled(kN, 0.5f + k));     \
    run_kernel(s, op, in, attrs);                                             \
  }                                                                           \
  BENCHMARK(BM_##name##Kernel)->UseRealTime()->Unit(benchmark::kMillisecond); \
  BENCHMARK(BM_##name##Call)->UseRealTime()->Unit(benchmark::kMillisecond)

SAMBA_EW_BENCH(Add, "add", 2, Attrs{});
SAMBA_EW_BENCH(Mul, "mul", 2, Attrs{});
SAMBA_EW_BENCH(Relu, "relu", 1, Attrs{});
SAMBA_EW_BENCH(Sigmoid, "sigmoid", 1, Attrs{});
SAMBA_EW_BENCH(Gelu, "gelu", 1, Attrs{});
SAMBA_EW_BENCH(GeluTanh, "gelu", 1, (Attrs{{"approximate", "tanh"}}));
SAMBA_EW_BENCH(Exp, "exp", 1, Attrs{});
SAMBA_EW_BENCH(Tanh, "tanh", 1, Attrs{});

// The fixed cost of an eager op: lookup, attributes, inference, allocation
// and a 4-element kernel.
void BM_TinyAddCall(benchmark::State& state) {
  Tensor a = filled(4, 1), b = filled(4, 2);
  for (auto _ : state) benchmark::DoNotOptimize(call1("add", {a, b}));
}
BENCHMARK(BM_TinyAddCall);

}  // namespace

BENCHMARK_MAIN();
