// libFuzzer target for a PEF from load to run: any bytes are either refused
// with a status and a message naming the problem, or loaded through the C
// ABI (samba_session_load_pef) and run (every graph's whole schedule in
// training and in evaluation mode, then every section on its own) with
// generated inputs of the shapes and dtypes the PEF declares. A crash, a
// sanitizer report, a hang, SAMBA_ERR_INTERNAL or an empty error message is
// a finding. Under ASan + UBSan (make fuzz).
//
// The engine bounds the work of a file by its plan; this target bounds the
// plan further (kMaxPlanBytes, kMaxWork) so that a run costs milliseconds,
// not the minutes a legitimately large model may take.
//
//   build-fuzz/tests/fuzz/pef_run_fuzz -max_len=65536 -timeout=20 tests/fuzz/corpus/pef_run_fuzz
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/pef/reader.h"
#include "fuzz_target.h"
#include "pef_mutator_hook.h"

namespace {

using namespace samba;

constexpr uint64_t kMaxPlanBytes = 64ull << 20;
// Multiply-adds, estimated per op as the product of its two largest
// operands' element counts (a bound for GEMM and convolution), summed over
// the schedule and its micro-batches.
constexpr double kMaxWork = 1e8;
constexpr int64_t kMaxMicroBatches = 64;
constexpr size_t kMaxScheduleCalls = 4096;
constexpr size_t kMaxOutputs = 64;

double op_work(const pef::ProgramDesc& p, const pef::OpCall& op) {
  double first = 1, second = 1;
  auto count = [&](int32_t t) {
    if (t < 0) return;  // an optional operand not given
    const double n = static_cast<double>(numel_of(p.tensors.at(static_cast<size_t>(t)).shape));
    if (n > first) {
      second = first;
      first = n;
    } else if (n > second) {
      second = n;
    }
  };
  for (int32_t t : op.inputs) count(t);
  for (int32_t t : op.outputs) count(t);
  return first * second;
}

// Whether the plan is small enough to run here; the rest of the checks are
// the engine's.
bool within_budget(const pef::ProgramDesc& p) {
  uint64_t plan = 0;
  for (int m = 0; m < pef::kNumMemTypes; ++m) {
    if (p.memory.arena_bytes[m] > kMaxPlanBytes || p.memory.activation_bytes[m] > kMaxPlanBytes) return false;
    plan += p.memory.arena_bytes[m] + p.memory.activation_bytes[m];
  }
  if (plan > kMaxPlanBytes || p.schedule.size() > kMaxScheduleCalls) return false;
  double work = 0;
  for (const auto& call : p.schedule) {
    const auto& s = p.sections.at(static_cast<size_t>(call.section));
    const auto& g = p.graphs.at(static_cast<size_t>(s.graph));
    const int64_t micro_batches =
        s.micro_batched && g.micro_batch_size > 0 ? std::max<int64_t>(1, g.batch_size / g.micro_batch_size) : 1;
    if (micro_batches > kMaxMicroBatches) return false;
    for (int32_t k : s.kernels)
      for (const auto& op : p.kernels.at(static_cast<size_t>(k)).ops)
        work += op_work(p, op) * static_cast<double>(micro_batches);
  }
  // Sections run on their own below as well as in the schedule.
  return work * 3 <= kMaxWork;
}

// Host values for every input the PEF declares, of its shape and dtype:
// small numbers in [-1, 1] for floating inputs, 0 and 1 for the others
// (valid class labels and indices for any non-empty dim).
std::vector<samba_tensor*> generated_inputs(samba_session* s) {
  std::vector<samba_tensor*> inputs;
  size_t n = 0;
  if (fuzz::judged(samba_session_name_count(s, SAMBA_NAMES_INPUTS, &n), "name_count") != SAMBA_OK) return inputs;
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    samba_tensor* device = nullptr;
    if (fuzz::judged(samba_session_name_at(s, SAMBA_NAMES_INPUTS, i, &name), "name_at") != SAMBA_OK ||
        fuzz::judged(samba_session_get_tensors_by_name(s, &name, 1, &device), "get_tensors_by_name") != SAMBA_OK)
      continue;
    samba_dtype dtype = SAMBA_FLOAT32;
    int32_t floating = 0;
    samba_tensor* values = nullptr;
    samba_tensor_dtype(device, &dtype);
    samba_tensor_is_floating_point(device, &floating);
    if (samba_tensor_to(device, SAMBA_FLOAT64, &values) == SAMBA_OK) {
      int64_t numel = 0;
      double* v = nullptr;
      samba_tensor_numel(values, &numel);
      samba_tensor_data(values, reinterpret_cast<void**>(&v));
      for (int64_t j = 0; j < numel; ++j) v[j] = floating ? std::sin(0.7 * static_cast<double>(j) + 0.3 * i) : j % 2;
      samba_tensor* input = nullptr;
      if (samba_tensor_to(values, dtype, &input) == SAMBA_OK && samba_tensor_set_name(input, name) == SAMBA_OK)
        inputs.push_back(input);
      else
        samba_tensor_release(input);
      samba_tensor_release(values);
    }
    samba_tensor_release(device);
  }
  return inputs;
}

void run_once(samba_session* s, const std::vector<samba_tensor*>& inputs, const samba_run_options* opts) {
  samba_tensor* outputs[kMaxOutputs] = {};
  size_t n_outputs = 0;
  fuzz::judged(samba_session_run(s, inputs.data(), inputs.size(), nullptr, 0, opts, outputs, kMaxOutputs, &n_outputs),
               "samba_session_run");
  for (size_t i = 0; i < std::min(n_outputs, kMaxOutputs); ++i) samba_tensor_release(outputs[i]);
}

void run_everything(samba_session* s, const pef::ProgramDesc& p) {
  std::vector<samba_tensor*> inputs = generated_inputs(s);
  samba_run_options* opts = nullptr;
  samba_run_options_create(&opts);
  for (const auto& g : p.graphs) {
    samba_run_options_set_graph_name(opts, g.name.c_str());
    for (int32_t train : {1, 0}) {
      samba_run_options_set_train(opts, train);
      run_once(s, inputs, opts);
    }
  }
  samba_run_options_set_graph_name(opts, nullptr);
  samba_run_options_set_train(opts, 1);
  for (const auto& section : p.sections) {
    samba_run_options_set_section_ids(opts, &section.id, 1);
    run_once(s, inputs, opts);
  }
  samba_run_options_release(opts);
  for (samba_tensor* t : inputs) samba_tensor_release(t);
}

samba_session* fuzz_session() {
  static samba_session* session = [] {
    samba_session_options* o = nullptr;
    samba_session* s = nullptr;
    samba_session_options_create(&o);
    // One thread: a finding replays the same way every time.
    samba_session_options_set_num_threads(o, 1);
    if (samba_session_create(o, &s) != SAMBA_OK) fuzz::finding("samba_session_create", samba_last_error_message());
    samba_session_options_release(o);
    samba_set_log_level(SAMBA_LOG_ERROR);
    return s;
  }();
  return session;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::last_input_accepted = false;
  // The plan is read here first only to decide whether running it fits the
  // fuzzer's budget; a refusal here is the same one the C ABI would give.
  pef::ProgramDesc program;
  try {
    program = pef::parse_pef({data, size});
  } catch (const Error& e) {
    fuzz::last_refusal = e.what();
    return 0;
  }
  if (!within_budget(program)) {
    fuzz::last_refusal = "over the fuzzer's plan budget";
    return -1;  // not added to the corpus
  }
  static const std::string path = fuzz::scratch_path(".pef");
  fuzz::write_scratch(path, data, size);
  samba_session* s = fuzz_session();
  const samba_status st = fuzz::judged(samba_session_load_pef(s, path.c_str()), "samba_session_load_pef");
  if (st != SAMBA_OK) {
    // parse_pef accepted these bytes; only running out of memory may differ.
    if (st != SAMBA_ERR_OUT_OF_MEMORY)
      fuzz::finding("samba_session_load_pef", std::string("refused a PEF parse_pef accepts: ") + samba_last_error_message());
    fuzz::last_refusal = samba_last_error_message();
    return 0;
  }
  fuzz::last_input_accepted = true;
  run_everything(s, program);
  samba_session_unload(s);
  return 0;
}
