// Checkpoint throughput: saving (compress, checksum, write, fsync, rename)
// and loading (read, verify, decompress, copy into targets) 256 MiB of fp32
// weights, as one tensor and as 256 tensors of 1 MiB, at the default zstd
// level (1) and at level -1, which stores float bytes uncompressed.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "engine/checkpoint/checkpoint.h"

using namespace samba;

namespace {

constexpr int64_t kTotalFloats = int64_t{64} << 20;  // 256 MiB

// Weights as training leaves them: small normally distributed values.
std::vector<CheckpointEntry> make_entries(int64_t tensors) {
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<CheckpointEntry> entries;
  const int64_t each = kTotalFloats / tensors;
  for (int64_t i = 0; i < tensors; ++i) {
    Tensor t = Tensor::empty({each}, DType::Float32);
    float* p = t.data<float>();
    for (int64_t k = 0; k < each; ++k) p[k] = normal(gen);
    entries.push_back({"layer" + std::to_string(i) + ".weight", CheckpointKind::Parameter, t});
  }
  return entries;
}

std::string bench_path() {
  auto dir = std::filesystem::temp_directory_path() /
             ("samba_checkpoint_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / "bench.ckpt").string();
}

void BM_Save(benchmark::State& state) {
  const auto entries = make_entries(state.range(0));
  const SaveOptions options{.compression_level = static_cast<int>(state.range(1))};
  const std::string path = bench_path();
  for (auto _ : state) save_checkpoint(path, entries, {{"step", "1"}}, options);
  state.SetBytesProcessed(state.iterations() * kTotalFloats * 4);
  state.counters["file_MiB"] = static_cast<double>(std::filesystem::file_size(path)) / (1 << 20);
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

void BM_Load(benchmark::State& state) {
  const auto entries = make_entries(state.range(0));
  const SaveOptions options{.compression_level = static_cast<int>(state.range(1))};
  const std::string path = bench_path();
  save_checkpoint(path, entries, {}, options);
  std::vector<CheckpointTarget> targets;
  for (const auto& e : entries)
    targets.push_back({e.name, Tensor::zeros(e.tensor.shape(), e.tensor.dtype())});
  for (auto _ : state) load_checkpoint(path, targets);
  state.SetBytesProcessed(state.iterations() * kTotalFloats * 4);
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

}  // namespace

// Args: {tensors, zstd level}
BENCHMARK(BM_Save)
    ->Args({1, 1})
    ->Args({256, 1})
    ->Args({1, -1})
    ->Args({256, -1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Load)
    ->Args({1, 1})
    ->Args({256, 1})
    ->Args({1, -1})
    ->Args({256, -1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
