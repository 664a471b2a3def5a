// libFuzzer target for the ONNX importer: any bytes, imported through the C
// ABI, are either refused with a status and a message naming the problem,
// or imported, after which the model runs once eagerly on zeros (symbolic
// dims taken as 1), which may again refuse but must not crash. A crash, a
// sanitizer report, SAMBA_ERR_INTERNAL or an empty message is a finding.
//
//   build-asan/tests/fuzz/onnx_import_fuzz -max_len=65536 tests/fuzz/corpus/onnx_import_fuzz
#include <vector>

#include "engine/core/allocation_limit.h"
#include "fuzz_target.h"

namespace {

using namespace samba;

// A model may ask for any size computed from its constants (a Range of
// 2^31 elements is a valid model); above this limit the engine refuses it
// with OutOfMemory, as a machine without the memory would, instead of
// libFuzzer ending the run on its malloc limit.
[[maybe_unused]] const bool kAllocationLimited = [] {
  set_host_allocation_limit(size_t{256} << 20);
  return true;
}();

// The model's inputs as zero tensors; false when one cannot be made.
bool zero_inputs(const samba_onnx_model* m, std::vector<samba_tensor*>& out) {
  size_t n = 0;
  if (fuzz::judged(samba_onnx_model_input_count(m, &n), "onnx_model_input_count") != SAMBA_OK)
    return false;
  for (size_t i = 0; i < n; ++i) {
    samba_dtype dtype = 0;
    const int64_t* shape = nullptr;
    size_t ndim = 0;
    if (fuzz::judged(samba_onnx_model_input_info(m, i, nullptr, &dtype, &shape, &ndim),
                     "onnx_model_input_info"))
      return false;
    std::vector<int64_t> dims(shape, shape + ndim);
    int64_t numel = 1;
    for (int64_t& d : dims) {
      if (d < 0) d = 1;
      numel *= d > 0 ? d : 1;
      if (numel > (int64_t{1} << 20))
        return false;  // a big input is valid; it is only slow to fuzz
    }
    samba_tensor* t = nullptr;
    if (fuzz::judged(samba_tensor_create(dtype, dims.data(), dims.size(), &t), "tensor_create"))
      return false;
    out.push_back(t);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  samba_onnx_model* m = nullptr;
  fuzz::last_input_accepted = false;
  const samba_status st = fuzz::judged(samba_onnx_model_load(data, size, &m), "onnx_model_load");
  if (st != SAMBA_OK) {
    if (m) fuzz::finding("onnx_model_load", "a refused load returned a model");
    fuzz::last_refusal = samba_last_error_message();
    return 0;
  }
  fuzz::last_input_accepted = true;
  std::vector<samba_tensor*> inputs;
  if (zero_inputs(m, inputs)) {
    std::vector<samba_tensor*> outputs(256, nullptr);
    size_t n = 0;
    fuzz::judged(samba_onnx_model_forward(m, inputs.data(), inputs.size(), outputs.data(),
                                          outputs.size(), &n),
                 "onnx_model_forward");
    for (size_t i = 0; i < n; ++i) samba_tensor_release(outputs[i]);
  }
  for (samba_tensor* t : inputs) samba_tensor_release(t);
  samba_onnx_model_release(m);
  return 0;
}
