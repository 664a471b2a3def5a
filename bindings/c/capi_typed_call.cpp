// The runtime side of the generated typed op functions.
#include "bindings/c/capi_typed_call.h"

namespace samba::capi {

void TypedOpCall::input(const char* name, const samba_tensor* t) {
  inputs_.push_back(tensor_arg(t, name));
}

void TypedOpCall::optional_input(const samba_tensor* t) {
  inputs_.push_back(t ? tensor(t) : Tensor());
}

void TypedOpCall::variadic_input(const char* name, samba_tensor* const* tensors, size_t n) {
  if (n) require(tensors, name);
  for (size_t i = 0; i < n; ++i) {
    if (!tensors[i]) fail(Status::NullPointer, "argument '{}[{}]' is NULL", name, i);
    inputs_.push_back(tensor(tensors[i]));
  }
}

void TypedOpCall::ints(const char* name, const int64_t* v, size_t n, bool required) {
  if (!v && n) fail(Status::NullPointer, "argument '{}' is NULL but its count is {}", name, n);
  if (v || required) attr(name, std::vector<int64_t>(v, v + n));
}

void TypedOpCall::floats(const char* name, const double* v, size_t n, bool required) {
  if (!v && n) fail(Status::NullPointer, "argument '{}' is NULL but its count is {}", name, n);
  if (v || required) attr(name, std::vector<double>(v, v + n));
}

void TypedOpCall::string(const char* name, const char* v, bool required) {
  if (required) require(v, name);
  if (v) attr(name, std::string(v));
}

samba_status call_typed_op(const char* fn, samba_session* session, const char* op,
                           std::span<samba_tensor** const> outs, TypedOpArgs args) noexcept {
  for (samba_tensor** o : outs)
    if (o) *o = nullptr;
  return guarded(fn, [&] {
    for (samba_tensor** o : outs) require(o, "out");
    TypedOpCall call(OpRegistry::global().get(op));
    args(call);
    std::vector<Tensor> result = run_op(session, call.op(), call.inputs(), call.attrs());
    SAMBA_CHECK(result.size() == outs.size(), Status::Internal,
                "op '{}' returned {} outputs; its schema declares {}", op, result.size(),
                outs.size());
    for (size_t i = 0; i < outs.size(); ++i) *outs[i] = to_handle(std::move(result[i]));
  });
}

samba_status call_typed_op_variadic(const char* fn, samba_session* session, const char* op,
                                    samba_tensor** outputs, size_t capacity, size_t* n_outputs,
                                    TypedOpArgs args) noexcept {
  if (outputs)
    for (size_t i = 0; i < capacity; ++i) outputs[i] = nullptr;
  if (n_outputs) *n_outputs = 0;
  return guarded(fn, [&] {
    require(n_outputs, "n_outputs");
    if (capacity) require(outputs, "outputs");
    TypedOpCall call(OpRegistry::global().get(op));
    args(call);
    std::vector<Tensor> result = run_op(session, call.op(), call.inputs(), call.attrs());
    *n_outputs = result.size();
    SAMBA_CHECK(result.size() <= capacity, Status::OutOfRange,
                "op '{}' produced {} outputs but `outputs` has room for {}", op, result.size(),
                capacity);
    for (size_t i = 0; i < result.size(); ++i) outputs[i] = to_handle(std::move(result[i]));
  });
}

}  // namespace samba::capi
