// samba/torch.hpp: the LibTorch bridge. at::Tensor <-> samba::Tensor without
// copies (through DLPack), and running a loaded PEF on at::Tensors.
// Header-only, C++17, on top of samba.hpp; usable only where LibTorch's
// headers and libraries are (find_package(Torch), then link ${TORCH_LIBRARIES}
// and Samba::samba). Include it instead of <dlpack/dlpack.h>: LibTorch brings
// its own copy of the DLPack structs (ATen/dlpack.h), and the two cannot be in
// one translation unit. The namespace is samba::libtorch: a samba::torch
// would hide LibTorch's ::torch inside namespace samba and make `torch::`
// ambiguous under `using namespace samba`.
//
// Ownership (the whole contract):
//  * to_samba(t) returns a samba::Tensor viewing t's bytes. It holds a
//    reference to t's TensorImpl (through at::toDLPack's DLManagedTensor), so
//    the memory stays valid until BOTH the at::Tensor handles and every
//    Samba tensor viewing the memory (views, reshapes of it) are released, in
//    any order and from any thread. Samba calls the DLPack deleter exactly
//    once; the caller frees nothing but its own handles.
//  * to_torch(s) returns an at::Tensor viewing s's bytes. It holds a
//    reference to s's storage (samba_tensor_to_dlpack), released when the
//    last at::Tensor sharing that storage goes; s may be released first.
//  * A tensor without elements has no bytes to share: to_torch gives a new
//    empty at::Tensor of its shape and dtype.
//  * Both sides see each other's writes: the bytes are shared, not copied.
//    Nothing synchronizes them: do not write on one side while the other
//    reads (samba_session_run copies its inputs to the device when it is
//    called, so the inputs may change once it has returned).
//  * Only values cross: autograd history, requires_grad, sn_name and grads
//    stay on their side. Do not resize_() or set_() a torch tensor after
//    sharing it: a reallocation frees the bytes Samba views (as with any
//    DLPack export of PyTorch).
//
// What is refused (samba::Error, whose status() is the samba_status and
// what() names the tensor's property and what was expected; nothing is
// leaked or shared on a refusal):
//  * an undefined at::Tensor or empty samba::Tensor: SAMBA_ERR_NULL_POINTER;
//  * a tensor on another device than the CPU (CUDA, meta, ...), or a layout
//    other than strided (sparse, mkldnn): SAMBA_ERR_UNSUPPORTED; .cpu() or
//    .to_dense() make a copy first, if a copy is what is wanted;
//  * a dtype outside Samba's ten (float32/64, float16, bfloat16, int8/16/32/64,
//    uint8, bool), e.g. complex or quantized: SAMBA_ERR_UNSUPPORTED;
//  * a non-contiguous tensor (a transpose, a strided slice, an expand):
//    SAMBA_ERR_INVALID_ARGUMENT. Samba's tensors are dense row-major where a
//    PEF takes them; .contiguous() is the explicit copy;
//  * a Samba tensor without data (a symbolic tensor of a trace):
//    SAMBA_ERR_INVALID_STATE, from samba_tensor_to_dlpack.
// torch.bool crosses too, although LibTorch 1.13's DLPack export refuses
// it: the bridge shares it as uint8 and relabels it (one byte, 0 or 1, on
// both sides).
#ifndef SAMBA_TORCH_HPP
#define SAMBA_TORCH_HPP

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>

#include <cstddef>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "samba.hpp"

namespace samba::libtorch {

namespace detail {

// DLPack 0.8's kDLBool, which samba_tensor_from_dlpack and _to_dlpack use
// for bool; LibTorch 1.13's dlpack.h predates it.
constexpr uint8_t kDLBoolCode = 6;

inline bool has_samba_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kByte:
    case at::kBool:
      return true;
    default:
      return false;
  }
}

[[noreturn]] inline void refuse(samba_status status, const std::string& message) {
  throw Error(status, message);
}

// Refuses sharing `t`, saying what it is and `why`.
[[noreturn]] inline void refuse_to_share(samba_status status, const at::Tensor& t,
                                         const char* why) {
  std::ostringstream s;
  s << "to_samba: at::Tensor of sizes " << t.sizes();
  if (t.layout() == at::kStrided) s << ", strides " << t.strides();
  s << ", dtype " << t.scalar_type() << ", layout " << t.layout() << ", device " << t.device()
    << ": " << why;
  refuse(status, s.str());
}

}  // namespace detail

// A Samba tensor sharing t's memory (see the ownership rules above), named
// `name` when one is given (the sn_name a PEF matches its inputs by).
inline Tensor to_samba(const at::Tensor& t, const std::string& name = {}) {
  if (!t.defined()) detail::refuse(SAMBA_ERR_NULL_POINTER, "to_samba: the at::Tensor is undefined");
  if (!t.device().is_cpu())
    detail::refuse_to_share(SAMBA_ERR_UNSUPPORTED, t,
                            "Samba shares CPU memory only; .cpu() makes a copy");
  if (t.layout() != at::kStrided)
    detail::refuse_to_share(SAMBA_ERR_UNSUPPORTED, t,
                            "only strided (dense) tensors can be shared; .to_dense() makes a copy");
  if (!detail::has_samba_dtype(t.scalar_type()))
    detail::refuse_to_share(SAMBA_ERR_UNSUPPORTED, t,
                            "Samba has float32, float64, float16, bfloat16, int8, int16, int32, "
                            "int64, uint8 and bool");
  if (!t.is_contiguous())
    detail::refuse_to_share(SAMBA_ERR_INVALID_ARGUMENT, t,
                            "not contiguous; .contiguous() makes the copy Samba can share");
  const bool is_bool = t.scalar_type() == at::kBool;
  // The export holds its own handle on the TensorImpl: that, not `t`, keeps
  // the bytes alive for Samba.
  DLManagedTensor* managed = at::toDLPack(is_bool ? t.view(at::kByte) : t);
  if (is_bool) managed->dl_tensor.dtype = DLDataType{detail::kDLBoolCode, 8, 1};
  samba_tensor* out = nullptr;
  const samba_status st = samba_tensor_from_dlpack(managed, &out);
  if (st != SAMBA_OK) {
    // A refused import leaves the managed tensor with us.
    std::string message = samba_last_error_message();
    managed->deleter(managed);
    throw Error(st, message);
  }
  Tensor result = Tensor::adopt(out);
  if (!name.empty()) result.set_name(name);
  return result;
}

// An at::Tensor sharing s's memory (see the ownership rules above), with
// s's shape and strides.
inline at::Tensor to_torch(const Tensor& s) {
  if (!s) detail::refuse(SAMBA_ERR_NULL_POINTER, "to_torch: the samba::Tensor is empty");
  DLManagedTensor* managed = nullptr;
  check(samba_tensor_to_dlpack(s.get(), &managed));
  const bool is_bool = managed->dl_tensor.dtype.code == detail::kDLBoolCode;
  if (is_bool) managed->dl_tensor.dtype = DLDataType{kDLUInt, 8, 1};
  if (managed->dl_tensor.data == nullptr) {
    // A tensor without elements: there are no bytes to share, and LibTorch
    // 1.13 never calls the deleter of a null data pointer (at::from_blob's
    // context keeps it in a std::unique_ptr), which would leak Samba's
    // storage.
    const DLTensor& dl = managed->dl_tensor;
    const std::vector<int64_t> shape(dl.shape, dl.shape + dl.ndim);
    const at::ScalarType dtype = is_bool ? at::kBool : at::toScalarType(dl.dtype);
    managed->deleter(managed);
    return at::empty(shape, at::TensorOptions().dtype(dtype));
  }
  // Samba exports only CPU tensors of dtypes LibTorch has, so fromDLPack
  // takes the managed tensor; its deleter runs with the storage's last
  // reference.
  at::Tensor t = at::fromDLPack(managed);
  return is_bool ? t.view(at::kBool) : t;
}

// The names of list `kind` (SAMBA_NAMES_INPUTS, SAMBA_NAMES_OUTPUTS, ...) of
// the PEF loaded in `session`.
inline std::vector<std::string> names(const Session& session, samba_names_kind kind) {
  size_t n = 0;
  check(samba_session_name_count(session.get(), kind, &n));
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    check(samba_session_name_at(session.get(), kind, i, &name));
    out.emplace_back(name);
  }
  return out;
}

// Runs the PEF loaded in `session` on inputs given by sn_name and returns its
// outputs (every output of the graphs whose FWD section ran, in the PEF's
// order) as at::Tensors. The inputs are shared with Samba for the call
// (samba_session_run copies them to the device); the outputs are fresh host
// tensors, owned by the returned at::Tensors alone.
inline std::vector<at::Tensor> run(Session& session,
                                   const std::vector<std::pair<std::string, at::Tensor>>& inputs,
                                   const RunOptions* opts = nullptr) {
  std::vector<Tensor> shared;
  shared.reserve(inputs.size());
  for (const auto& [name, t] : inputs) shared.push_back(to_samba(t, name));
  std::vector<at::Tensor> outputs;
  for (const Tensor& out : session.run(shared, {}, opts)) outputs.push_back(to_torch(out));
  return outputs;
}

// As above, with the inputs in the order of the PEF's model inputs
// (SAMBA_NAMES_INPUTS); their number must match.
inline std::vector<at::Tensor> run(Session& session, const std::vector<at::Tensor>& inputs,
                                   const RunOptions* opts = nullptr) {
  const std::vector<std::string> input_names = names(session, SAMBA_NAMES_INPUTS);
  if (input_names.size() != inputs.size()) {
    std::string listed;
    for (const std::string& n : input_names) listed += (listed.empty() ? "" : ", ") + n;
    detail::refuse(SAMBA_ERR_INVALID_ARGUMENT,
                   "run: the PEF takes " + std::to_string(input_names.size()) + " inputs (" +
                       listed + "), got " + std::to_string(inputs.size()));
  }
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (size_t i = 0; i < inputs.size(); ++i) named.emplace_back(input_names[i], inputs[i]);
  return run(session, named, opts);
}

}  // namespace samba::libtorch

#endif  // SAMBA_TORCH_HPP
