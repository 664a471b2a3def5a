// What the generated typed op functions (samba/ops_generated.h, written at
// build time by tools/typed_ops/) are made of: each collects its C arguments
// into a TypedOpCall and hands it to call_typed_op, which runs the op on the
// same path as samba_op_call (run_op), with the same ownership and errors.
#pragma once

#include <span>
#include <type_traits>

#include "bindings/c/capi.h"

namespace samba::capi {

class TypedOpCall {
 public:
  explicit TypedOpCall(const OpDef& op) : op_(op) {}

  void input(const char* name, const samba_tensor* t);
  void optional_input(const samba_tensor* t);
  void variadic_input(const char* name, samba_tensor* const* tensors, size_t n);

  void attr(const char* name, AttrValue v) { attrs_.set(name, std::move(v)); }
  void flag(const char* name, int32_t v) { attr(name, v != 0); }
  void dtype(const char* name, samba_dtype d) { attr(name, checked_dtype(d, name)); }
  // Optional scalars come as pointers: NULL leaves the attribute out.
  template <typename T>
  void optional(const char* name, const T* v) {
    if (v) attr(name, *v);
  }
  void optional_flag(const char* name, const int32_t* v) {
    if (v) flag(name, *v);
  }
  void optional_dtype(const char* name, const samba_dtype* d) {
    if (d) dtype(name, *d);
  }
  // Lists and strings: NULL leaves a non-required attribute out (the schema's
  // default applies, or it stays absent); for a required list NULL is only
  // accepted as the empty list (n == 0).
  void ints(const char* name, const int64_t* v, size_t n, bool required);
  void floats(const char* name, const double* v, size_t n, bool required);
  void string(const char* name, const char* v, bool required);

  const OpDef& op() const { return op_; }
  std::span<const Tensor> inputs() const { return inputs_; }
  const Attrs& attrs() const { return attrs_; }

 private:
  const OpDef& op_;
  std::vector<Tensor> inputs_;
  Attrs attrs_;
};

// The generated function's lambda that fills a TypedOpCall, borrowed for
// the duration of the call: unlike std::function it never allocates, so
// nothing can throw before call_typed_op's boundary catches it.
class TypedOpArgs {
 public:
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, TypedOpArgs>)
  TypedOpArgs(F&& f) noexcept  // NOLINT(google-explicit-constructor): a lambda argument
      : fn_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* fn, TypedOpCall& c) {
          (*static_cast<std::remove_reference_t<F>*>(fn))(c);
        }) {}
  void operator()(TypedOpCall& c) const { call_(fn_, c); }

 private:
  void* fn_;
  void (*call_)(void*, TypedOpCall&);
};

// An op with a fixed number of outputs (zero for in-place ops): each
// out-parameter receives one OWNED tensor, all are NULL after a failure.
samba_status call_typed_op(const char* fn, samba_session* session, const char* op,
                           std::span<samba_tensor** const> outs, TypedOpArgs args) noexcept;

// An op whose output count is decided by inference (split, chunk): as
// samba_op_call's outputs / capacity / n_outputs.
samba_status call_typed_op_variadic(const char* fn, samba_session* session, const char* op,
                                    samba_tensor** outputs, size_t capacity, size_t* n_outputs,
                                    TypedOpArgs args) noexcept;

}  // namespace samba::capi
