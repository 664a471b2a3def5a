// Out of memory anywhere in compile, load, run and checkpoint save/load
// (in the style of SQLite's malloc tests): for N = 1, 2, ... the Nth
// allocation of the call fails, and the call must return
// SAMBA_ERR_OUT_OF_MEMORY with a message, leak nothing and leave the session
// (program, device weights, argins, files on disk) as it was; the loop ends
// when a call makes fewer than N allocations and succeeds. Calls that
// allocate more than kExhaustive times are sampled so that make test stays
// quick: every N up to kExhaustive, then N grows by 1/kGrowth of itself
// each time (about kGrowth * ln(total / kExhaustive) more calls; a compile
// of the model here makes about 1,300 allocations, so about 450 calls).
// SAMBA_ALLOC_FAILURE_EXHAUSTIVE=1 tries every N. Under ASan, LeakSanitizer
// also checks for leaks at exit.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "alloc_failure_injection.h"
#include "engine/core/scratch.h"
#include "tests/capi/capi_test_util.h"

namespace {

namespace fs = std::filesystem;
using samba::testing::arm_allocation_failure;
using samba::testing::disarm_allocation_failure;
using samba::testing::live_allocations;

constexpr int64_t kExhaustive = 300;
constexpr int64_t kGrowth = 100;

// What a failed call must leave as it was.
struct SessionState {
  samba_status program = SAMBA_OK;  // SAMBA_ERR_INVALID_STATE: no PEF loaded
  std::vector<std::string> weights;
  std::vector<std::vector<double>> weight_values;  // device values
  std::vector<double> argins;
  bool operator==(const SessionState&) const = default;
};

// Field by field, so that a failure says what changed.
void expect_same(const SessionState& now, const SessionState& before, const char* what) {
  EXPECT_EQ(now.program, before.program) << what << " changed whether a program is loaded";
  EXPECT_EQ(now.weights, before.weights) << what << " changed the weights' names";
  EXPECT_EQ(now.weight_values, before.weight_values) << what << " changed a weight's device values";
  EXPECT_EQ(now.argins, before.argins) << what << " changed an argin";
}

std::vector<std::string> names_of(samba_session* s, samba_names_kind kind) {
  size_t n = 0;
  std::vector<std::string> names;
  if (samba_session_name_count(s, kind, &n) != SAMBA_OK) return names;
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    EXPECT_EQ(samba_session_name_at(s, kind, i, &name), SAMBA_OK);
    names.emplace_back(name);
  }
  return names;
}

SessionState snapshot(samba_session* s) {
  SessionState st;
  size_t n = 0;
  st.program = samba_session_name_count(s, SAMBA_NAMES_WEIGHTS, &n);
  if (st.program != SAMBA_OK) return st;
  st.weights = names_of(s, SAMBA_NAMES_WEIGHTS);
  for (const std::string& w : st.weights) {
    const char* name = w.c_str();
    samba_tensor* t = nullptr;
    EXPECT_EQ(samba_session_get_tensors_by_name(s, &name, 1, &t), SAMBA_OK) << samba_last_error_message();
    int64_t k = 0;
    double* v = values_of(t, &k);
    st.weight_values.emplace_back(v, v + k);
    free(v);
    samba_tensor_release(t);
  }
  for (const std::string& a : names_of(s, SAMBA_NAMES_ARGINS)) {
    double v = 0;
    EXPECT_EQ(samba_session_argin(s, a.c_str(), &v), SAMBA_OK);
    st.argins.push_back(v);
  }
  return st;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// Blocks allocated and not yet freed, less the per-thread caches kernels
// keep between calls (engine/core/scratch.h): a worker thread that runs a
// kernel for the first time during a call grows its cache, which is kept,
// not leaked.
int64_t uncached_live_allocations() { return live_allocations() - samba::cached_blocks_held(); }

// Runs `call` with its Nth allocation failing for N = 1, 2, ...; after each
// failure `unchanged` checks the session and files. The loop ends with the
// first call that succeeds.
void fail_each_allocation(const char* what, const std::function<samba_status()>& call,
                          const std::function<void()>& unchanged) {
  const bool exhaustive = std::getenv("SAMBA_ALLOC_FAILURE_EXHAUSTIVE") != nullptr;
  int64_t n = 1;
  int failures = 0;
  for (;; n += (n < kExhaustive || exhaustive) ? 1 : n / kGrowth) {
    // The thread's error message is a heap string whatever the call leaves
    // in it, so the live count compares like with like.
    samba_set_error_message(SAMBA_ERR_INTERNAL, "a message longer than the short-string buffer");
    const int64_t live_before = uncached_live_allocations();
    arm_allocation_failure(n);
    const samba_status st = call();
    const samba::testing::InjectionResult r = disarm_allocation_failure();
    if (st == SAMBA_OK || !r.failed) {
      ASSERT_EQ(st, SAMBA_OK) << what << " with no allocation failing: " << samba_last_error_message();
      // A call that succeeds although allocation N failed got over it by
      // itself (a cache it can do without): it succeeded, so the loop ends.
      std::printf("%s: %lld allocations, %d failures injected and refused%s\n", what,
                  static_cast<long long>(r.allocations), failures,
                  r.failed ? ", then one the call got over" : "");
      return;
    }
    ++failures;
    ASSERT_EQ(st, SAMBA_ERR_OUT_OF_MEMORY)
        << what << " with allocation " << n << " failing: " << samba_last_error_message();
    ASSERT_STRNE(samba_last_error_message(), "") << what << ", allocation " << n;
    ASSERT_EQ(uncached_live_allocations(), live_before)
        << what << " leaked with allocation " << n << " failing";
    unchanged();
    if (::testing::Test::HasFatalFailure()) return;
  }
}

class AllocationFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("samba_alloc_failure_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    pef_ = (dir_ / "model.pef").string();
    const int64_t s_w[2] = {3, 4}, s_b[1] = {3}, s_x[2] = {6, 4}, s_y[1] = {6};
    const int64_t labels[6] = {0, 1, 2, 2, 1, 0};
    float xs[24];
    for (int i = 0; i < 24; ++i) xs[i] = static_cast<float>(std::cos(0.9 * i));
    net_.w = named_param("fc.weight", s_w, 2);
    net_.b = named_param("fc.bias", s_b, 1);
    in_[0] = make_f32(xs, s_x, 2);
    in_[1] = make_i64(labels, s_y, 1);
    ASSERT_EQ(samba_tensor_set_name(in_[0], "x"), SAMBA_OK);
    ASSERT_EQ(samba_tensor_set_name(in_[1], "y"), SAMBA_OK);
    samba_attrs* hp = nullptr;
    ASSERT_EQ(samba_attrs_create(&hp), SAMBA_OK);
    ASSERT_EQ(samba_attrs_set_float(hp, "lr", 0.5), SAMBA_OK);
    ASSERT_EQ(samba_attrs_set_float(hp, "momentum", 0.9), SAMBA_OK);
    ASSERT_EQ(samba_optimizer_create("SGD", hp, &opt_), SAMBA_OK);
    samba_attrs_release(hp);
    samba_tensor* params[2] = {net_.w, net_.b};
    ASSERT_EQ(samba_optimizer_add_param_group(opt_, params, 2, nullptr), SAMBA_OK);
    ASSERT_EQ(samba_compile_options_create(&co_), SAMBA_OK);
    ASSERT_EQ(samba_compile_options_set_pef_path(co_, pef_.c_str()), SAMBA_OK);
    ASSERT_EQ(samba_run_options_create(&ro_), SAMBA_OK);
  }
  void TearDown() override {
    samba_run_options_release(ro_);
    samba_compile_options_release(co_);
    samba_optimizer_release(opt_);
    for (samba_tensor* t : {in_[0], in_[1], net_.w, net_.b}) samba_tensor_release(t);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  samba_status compile(samba_session* s) {
    return samba_session_compile(s, linear_loss_model, &net_, in_, 2, &opt_, 1, co_);
  }
  // A session with the compiled PEF loaded (trace_graph) and `steps`
  // training steps run.
  samba_session* trained_session(int steps) {
    samba_session* s = nullptr;
    EXPECT_EQ(samba_session_create(nullptr, &s), SAMBA_OK);
    if (!fs::exists(pef_)) {
      EXPECT_EQ(compile(s), SAMBA_OK) << samba_last_error_message();
    }
    samba_tensor* traced = nullptr;
    size_t n = 0;
    EXPECT_EQ(samba_session_trace_graph(s, linear_loss_model, &net_, in_, 2, &opt_, 1, pef_.c_str(), nullptr,
                                        &traced, 1, &n),
              SAMBA_OK)
        << samba_last_error_message();
    samba_tensor_release(traced);
    for (int i = 0; i < steps; ++i) run_step(s);
    return s;
  }
  double run_step(samba_session* s) {
    samba_tensor* loss = nullptr;
    size_t n = 0;
    double v = 0;
    EXPECT_EQ(samba_session_run(s, in_, 2, nullptr, 0, ro_, &loss, 1, &n), SAMBA_OK) << samba_last_error_message();
    EXPECT_EQ(samba_tensor_item(loss, &v), SAMBA_OK);
    samba_tensor_release(loss);
    return v;
  }

  fs::path dir_;
  std::string pef_;
  LinearNet net_{};
  samba_tensor* in_[2] = {nullptr, nullptr};
  samba_optimizer* opt_ = nullptr;
  samba_compile_options* co_ = nullptr;
  samba_run_options* ro_ = nullptr;
};

TEST_F(AllocationFailure, CompileLeavesNoPefAndNoProgram) {
  samba_session* s = nullptr;
  ASSERT_EQ(samba_session_create(nullptr, &s), SAMBA_OK);
  ASSERT_EQ(compile(s), SAMBA_OK);  // warms the registry and the thread pool
  fs::remove(pef_);
  fs::remove(pef_ + ".log");
  const SessionState before = snapshot(s);
  const std::set<std::string> files = listing(dir_);
  fail_each_allocation(
      "compile", [&] { return compile(s); },
      [&] {
        expect_same(snapshot(s), before, "a failed compile");
        EXPECT_EQ(listing(dir_), files) << "a failed compile left files behind";
      });
  EXPECT_TRUE(fs::exists(pef_));
  samba_session_release(s);
}

TEST_F(AllocationFailure, LoadKeepsTheProgramAndTrainedWeights) {
  samba_session* s = trained_session(3);
  const SessionState before = snapshot(s);
  fail_each_allocation(
      "load_pef", [&] { return samba_session_load_pef(s, pef_.c_str()); },
      [&] { expect_same(snapshot(s), before, "a failed PEF load"); });
  samba_session_release(s);
}

TEST_F(AllocationFailure, RunChangesNoWeightsAndNoOutputs) {
  samba_session* s = trained_session(1);
  samba_session* twin = trained_session(1);
  const double expected = run_step(twin);  // what the session's next step gives
  const SessionState before = snapshot(s);
  samba_tensor* loss = nullptr;
  size_t n_outputs = 99;
  fail_each_allocation(
      "run", [&] { return samba_session_run(s, in_, 2, nullptr, 0, ro_, &loss, 1, &n_outputs); },
      [&] {
        EXPECT_EQ(loss, nullptr);
        EXPECT_EQ(n_outputs, 99u);
        expect_same(snapshot(s), before, "a failed run");
      });
  double got = 0;
  ASSERT_EQ(samba_tensor_item(loss, &got), SAMBA_OK);
  EXPECT_EQ(got, expected) << "the successful run after the failed ones is not the next step";
  samba_tensor_release(loss);
  samba_session_release(twin);
  samba_session_release(s);
}

TEST_F(AllocationFailure, CheckpointSaveKeepsThePreviousFile) {
  samba_session* s = trained_session(1);
  const fs::path ckpt = dir_ / "model.ckpt";
  ASSERT_EQ(samba_session_save_checkpoint(s, ckpt.c_str(), SAMBA_TRANSFER_PARAMETERS), SAMBA_OK);
  const std::string previous = file_bytes(ckpt);
  run_step(s);
  const SessionState before = snapshot(s);
  const std::set<std::string> files = listing(dir_);
  fail_each_allocation(
      "save_checkpoint",
      [&] { return samba_session_save_checkpoint(s, ckpt.c_str(), SAMBA_TRANSFER_PARAMETERS); },
      [&] {
        EXPECT_EQ(file_bytes(ckpt), previous) << "a failed save changed the checkpoint";
        EXPECT_EQ(listing(dir_), files) << "a failed save left a temporary file";
        expect_same(snapshot(s), before, "a failed checkpoint save");
      });
  EXPECT_NE(file_bytes(ckpt), previous);
  samba_session_release(s);
}

TEST_F(AllocationFailure, CheckpointLoadChangesNoTensor) {
  samba_session* s = trained_session(1);
  const fs::path ckpt = dir_ / "model.ckpt";
  ASSERT_EQ(samba_session_save_checkpoint(s, ckpt.c_str(), SAMBA_TRANSFER_PARAMETERS), SAMBA_OK);
  const SessionState saved = snapshot(s);
  run_step(s);
  const SessionState before = snapshot(s);
  ASSERT_NE(before.weight_values, saved.weight_values);
  fail_each_allocation(
      "load_checkpoint",
      [&] { return samba_session_load_checkpoint(s, ckpt.c_str(), SAMBA_TRANSFER_PARAMETERS, 1); },
      [&] { expect_same(snapshot(s), before, "a failed checkpoint load"); });
  expect_same(snapshot(s), saved, "the successful load");
  samba_session_release(s);
}

}  // namespace
