// PEF write and read times for a large program: 10,000 tensors, 5,000
// fused kernels and 64 MiB of embedded weights (half compressible ramps,
// half noise). Serialize is compression + FlatBuffers building; WriteFile
// adds the atomic write with fsync; Parse is identifier, version, the
// FlatBuffers verifier, decompression with checksums and verify_program.
// bytes_per_second counts the uncompressed blob bytes.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>

#include "engine/pef/pef_log.h"
#include "engine/pef/reader.h"
#include "engine/pef/verify.h"
#include "engine/pef/writer.h"
#include "tests/unit/pef_sample_program.h"

using namespace samba::pef;

namespace {

constexpr size_t kBlobBytes = 64u << 20;

const ProgramDesc& program() {
  static const ProgramDesc p = sample::large_program(10000, 5000, kBlobBytes);
  return p;
}

const std::vector<uint8_t>& file_bytes() {
  static const std::vector<uint8_t> bytes = serialize_pef(program());
  return bytes;
}

void set_counters(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBlobBytes));
  state.counters["file_MiB"] = static_cast<double>(file_bytes().size()) / (1 << 20);
  state.counters["tensors"] = static_cast<double>(program().tensors.size());
  state.counters["kernels"] = static_cast<double>(program().kernels.size());
}

void BM_PefSerialize(benchmark::State& state) {
  program();
  for (auto _ : state) benchmark::DoNotOptimize(serialize_pef(program()));
  set_counters(state);
}
BENCHMARK(BM_PefSerialize)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PefWriteFile(benchmark::State& state) {
  std::string path = "/tmp/samba_pef_bench_" + std::to_string(::getpid()) + ".pef";
  program();
  for (auto _ : state) write_pef(program(), path);
  std::remove(path.c_str());
  set_counters(state);
}
BENCHMARK(BM_PefWriteFile)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PefParseAndVerify(benchmark::State& state) {
  file_bytes();
  for (auto _ : state) benchmark::DoNotOptimize(parse_pef(file_bytes()));
  set_counters(state);
}
BENCHMARK(BM_PefParseAndVerify)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PefVerifyProgram(benchmark::State& state) {
  program();
  for (auto _ : state) verify_program(program());
  set_counters(state);
}
BENCHMARK(BM_PefVerifyProgram)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PefFormatLog(benchmark::State& state) {
  program();
  for (auto _ : state) benchmark::DoNotOptimize(format_pef_log(program()));
  set_counters(state);
}
BENCHMARK(BM_PefFormatLog)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
