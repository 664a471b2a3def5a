// Bounded work for any PEF: loading (parsing, verifying and building the
// runtime's program) takes time linear in the file's size, whatever the file
// repeats 30,000 times, and decompression never goes past what the memory
// plan can hold. Each case is a small file that a quadratic path or an
// unbounded decompression would turn into minutes or gigabytes.
#include <gtest/gtest.h>
#include <zstd.h>

#include <chrono>
#include <functional>

#include "engine/core/error.h"
#include "engine/pef/blob_codec.h"
#include "engine/pef/pef_generated.h"
#include "engine/core/sanitizers.h"
#include "engine/pef/reader.h"
#include "engine/pef/writer.h"
#include "engine/runtime/program.h"
#include "error_test_util.h"
#include "pef_sample_program.h"

namespace samba::pef {
namespace {

constexpr bool kSanitized = SAMBA_ASAN || SAMBA_TSAN;

// Sanitizers slow everything down several times over and unevenly: they
// run the same files at a tenth of the size, with no time limit.
constexpr int kRepeats = kSanitized ? 3'000 : 30'000;
// A linear load of these files takes well under a second in Release; a
// quadratic one takes tens of seconds.
constexpr double kLoadSeconds = 5.0;

// Parses, verifies and builds the runtime's program (its dependency graphs
// and spatial units); returns the seconds taken, or rethrows the refusal.
double load_seconds(const std::vector<uint8_t>& bytes) {
  const auto start = std::chrono::steady_clock::now();
  runtime::Program program(parse_pef(bytes));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void expect_loads_in_bounded_time(const ProgramDesc& p) {
  const std::vector<uint8_t> bytes = serialize_pef(p);
  const double seconds = load_seconds(bytes);
  if (!kSanitized) {
    EXPECT_LT(seconds, kLoadSeconds) << bytes.size() << "-byte file";
  }
}

template <typename F>
void expect_refused_in_bounded_time(const ProgramDesc& p, F&& check_message) {
  const std::vector<uint8_t> bytes = serialize_pef(p);
  const auto start = std::chrono::steady_clock::now();
  try {
    load_seconds(bytes);
    ADD_FAILURE() << "the file was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::CorruptFile) << e.what();
    check_message(std::string(e.what()));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!kSanitized) {
    EXPECT_LT(seconds, kLoadSeconds) << bytes.size() << "-byte file";
  }
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

TEST(PefBoundedLoad, ManyKernelsTensorsAndBlobs) {
  // kRepeats kernels in one section, as many intermediates and weight blobs.
  expect_loads_in_bounded_time(sample::large_program(2 * kRepeats, kRepeats, 1u << 20));
}

TEST(PefBoundedLoad, SectionListingOneKernelManyTimes) {
  ProgramDesc p = sample::resffn_program();
  std::vector<int32_t>& kernels = p.sections[1].kernels;
  const int32_t first = kernels[0];
  kernels.assign(static_cast<size_t>(kRepeats), first);
  expect_refused_in_bounded_time(p, [](const std::string& m) {
    EXPECT_HAS(m, "section 1 'fwd': kernels[1] is kernel 0 again (kernels[0])");
  });
}

// A spatial graph runs all its scheduled sections as one flow graph: a
// schedule calling its section many times would make one long chain of
// kernels that all read the same weights.
TEST(PefBoundedLoad, ScheduleCallingASectionManyTimes) {
  ProgramDesc p = sample::resffn_program();
  const int32_t predict = p.schedule.back().section;
  while (p.schedule.size() < static_cast<size_t>(kRepeats))
    p.schedule.push_back({static_cast<int32_t>(p.schedule.size()), predict});
  expect_refused_in_bounded_time(p, [](const std::string& m) {
    EXPECT_HAS(m, "schedule call 5 (id 5): calls section 4 'predict_fwd' again (call 4)");
  });
}

TEST(PefBoundedLoad, KernelReadingOneTensorManyTimes) {
  ProgramDesc p = sample::resffn_program();
  for (KernelDesc& k : p.kernels) {
    if (k.reads.empty()) continue;
    const int32_t first = k.reads[0];
    k.reads.resize(static_cast<size_t>(kRepeats), first);
  }
  expect_refused_in_bounded_time(p, [](const std::string& m) {
    EXPECT_HAS(m, "kernel 0 'gemm1_tanh': reads[3] lists tensor 0 'x' again");
  });
}

// Many kernels of one section, each reading the same weights and its own
// tensors: the runtime's ordering of their accesses must not compare every
// kernel with every earlier one.
TEST(PefBoundedLoad, ManyKernelsReadingOneWeight) {
  using R = TensorRole;
  sample::ProgramBuilder b("fan_out");
  const int32_t x = b.tensor("x", R::Input, DType::Float32, {4});
  const int32_t w = b.tensor("w", R::Parameter, DType::Float32, {4});
  std::vector<int32_t> kernels, outputs;
  for (int k = 0; k < kRepeats; ++k) {
    const int32_t y = b.tensor(fmt::format("y{}", k), R::Output, DType::Float32, {4});
    outputs.push_back(y);
    kernels.push_back(b.kernel(fmt::format("k{}", k), Fusion::Elementwise,
                               {sample::ProgramBuilder::op("add", {x, w}, {y})}));
  }
  const int32_t s = b.section(0, "fwd", SectionType::FWD, 0, kernels);
  b.call(0, s);
  GraphDesc& g = b.graph("fan_out");
  g.inputs = {x};
  g.outputs = outputs;
  g.output_grads.assign(outputs.size(), -1);
  g.parameters = {w};
  g.sections = {s};
  g.mapping = Mapping::Spatial;
  g.inference = true;
  expect_loads_in_bounded_time(b.finish());
}

// Intermediates that each overlap all the earlier ones in part (the bytes
// an arena reuses) without covering any: every kernel conflicts with every
// earlier one, and ordering them pairwise would take their count squared
// in time and memory.
TEST(PefBoundedLoad, KernelsWritingOverlappingIntermediates) {
  sample::ProgramBuilder b("overlaps");
  const int64_t n = kRepeats;
  std::vector<int32_t> kernels;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = b.intermediate(fmt::format("t{}", i), DType::Float32, {n},
                                     static_cast<uint64_t>(i) * 4);
    kernels.push_back(b.kernel(
        fmt::format("k{}", i), Fusion::Creation,
        {sample::ProgramBuilder::op("zeros", {}, {t}, {{"shape", std::vector<int64_t>{n}}})}));
  }
  const int32_t s = b.section(0, "fwd", SectionType::FWD, 0, kernels);
  b.call(0, s);
  GraphDesc& g = b.graph("overlaps");
  g.sections = {s};
  g.inference = true;
  expect_loads_in_bounded_time(b.finish());
}

// Many graphs mapped spatially, each with one section: gathering each
// graph's unit must not walk the whole schedule once per graph (each
// graph is small, so this file has twice as many).
TEST(PefBoundedLoad, ManySpatialGraphs) {
  sample::ProgramBuilder b("many_graphs");
  for (int i = 0; i < 2 * kRepeats; ++i) {
    const int32_t y = b.tensor(fmt::format("y{}", i), TensorRole::Output, DType::Float32, {2});
    const int32_t k =
        b.kernel(fmt::format("k{}", i), Fusion::Creation,
                 {sample::ProgramBuilder::op("zeros", {}, {y}, {{"shape", std::vector<int64_t>{2}}})});
    const int32_t s = b.section(i, fmt::format("s{}", i), SectionType::FWD, i, {k});
    b.call(i, s);
    GraphDesc& g = b.graph(fmt::format("g{}", i));
    g.outputs = {y};
    g.output_grads = {-1};
    g.sections = {s};
    g.mapping = Mapping::Spatial;
    g.inference = true;
  }
  expect_loads_in_bounded_time(b.finish());
}

TEST(PefBoundedLoad, OpCallWithManyAttributes) {
  ProgramDesc p = sample::resffn_program();
  Attrs& attrs = p.kernels[0].ops[0].attrs;
  for (int i = 0; i < kRepeats / 10; ++i) attrs.set(fmt::format("a{}", i), int64_t{i});
  expect_refused_in_bounded_time(p, [](const std::string& m) {
    EXPECT_HAS(m, "kernel 0 'gemm1_tanh' op 0 'linear': ");
  });
}

}  // namespace
}  // namespace samba::pef
