// samba.hpp: a header-only C++17 wrapper over samba.h. Handles are owned
// (copy = retain, move = transfer), failed calls throw samba::Error carrying
// the status and the library's message, shapes are std::vector<int64_t>, and
// a model is any callable from std::vector<Tensor> to std::vector<Tensor>
// (an exception it throws fails the compile with its message).
#ifndef SAMBA_HPP
#define SAMBA_HPP

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "samba.h"

namespace samba {

// A failed call: status() is the samba_status, what() "SAMBA_ERR_X: message".
class Error : public std::runtime_error {
 public:
  Error(samba_status status, const std::string& message)
      : std::runtime_error(std::string(samba_status_name(status)) + ": " + message), status_(status) {}
  samba_status status() const noexcept { return status_; }

 private:
  samba_status status_;
};

// Throws Error for a failing status.
inline void check(samba_status st) {
  if (st != SAMBA_OK) throw Error(st, samba_last_error_message());
}

namespace detail {
// An owned handle of a C type with its release function.
template <typename T, void (*Release)(T*)>
struct Owned {
  struct Deleter {
    void operator()(T* p) const noexcept { Release(p); }
  };
  using Ptr = std::unique_ptr<T, Deleter>;
};
}  // namespace detail

// Attribute values for ops and optimizers.
class Attrs {
 public:
  Attrs() {
    samba_attrs* a = nullptr;
    check(samba_attrs_create(&a));
    h_.reset(a);
  }
  Attrs& set(const char* name, int64_t v) { return done(samba_attrs_set_int(h_.get(), name, v)); }
  Attrs& set(const char* name, int v) { return set(name, static_cast<int64_t>(v)); }
  Attrs& set(const char* name, double v) { return done(samba_attrs_set_float(h_.get(), name, v)); }
  Attrs& set(const char* name, bool v) { return done(samba_attrs_set_bool(h_.get(), name, v ? 1 : 0)); }
  Attrs& set(const char* name, const char* v) { return done(samba_attrs_set_string(h_.get(), name, v)); }
  Attrs& set(const char* name, const std::vector<int64_t>& v) {
    return done(samba_attrs_set_ints(h_.get(), name, v.data(), v.size()));
  }
  Attrs& set(const char* name, const std::vector<double>& v) {
    return done(samba_attrs_set_floats(h_.get(), name, v.data(), v.size()));
  }
  Attrs& set_dtype(const char* name, samba_dtype d) { return done(samba_attrs_set_dtype(h_.get(), name, d)); }
  const samba_attrs* get() const { return h_.get(); }

 private:
  Attrs& done(samba_status st) {
    check(st);
    return *this;
  }
  detail::Owned<samba_attrs, samba_attrs_release>::Ptr h_;
};

// A tensor handle: copying retains, destruction releases.
class Tensor {
 public:
  Tensor() = default;
  // Takes ownership of an owned handle (as the C functions return them).
  static Tensor adopt(samba_tensor* h) { return Tensor(h); }
  // Shares a borrowed handle (retains it).
  static Tensor borrow(samba_tensor* h) {
    check(samba_tensor_retain(h));
    return Tensor(h);
  }
  Tensor(const Tensor& o) : h_(o.h_) {
    if (h_) samba_tensor_retain(h_);
  }
  Tensor(Tensor&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Tensor& operator=(Tensor o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Tensor() { samba_tensor_release(h_); }

  // A zero-filled tensor.
  static Tensor zeros(const std::vector<int64_t>& shape, samba_dtype dtype = SAMBA_FLOAT32) {
    samba_tensor* t = nullptr;
    check(samba_tensor_create(dtype, shape.data(), shape.size(), &t));
    return Tensor(t);
  }
  // A tensor holding a copy of `values`, of the given shape.
  template <typename T>
  static Tensor from(const std::vector<T>& values, const std::vector<int64_t>& shape);

  samba_tensor* get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }
  // Hands the reference to a C function that takes ownership.
  samba_tensor* release() { return std::exchange(h_, nullptr); }

  std::vector<int64_t> shape() const {
    const int64_t* d = nullptr;
    size_t n = 0;
    check(samba_tensor_shape(h_, &d, &n));
    return std::vector<int64_t>(d, d + n);
  }
  samba_dtype dtype() const {
    samba_dtype d = 0;
    check(samba_tensor_dtype(h_, &d));
    return d;
  }
  int64_t numel() const {
    int64_t n = 0;
    check(samba_tensor_numel(h_, &n));
    return n;
  }
  std::string name() const {
    const char* n = nullptr;
    check(samba_tensor_name(h_, &n));
    return n ? n : "";
  }
  Tensor& set_name(const std::string& n) {
    check(samba_tensor_set_name(h_, n.c_str()));
    return *this;
  }
  Tensor& set_requires_grad(bool v = true) {
    check(samba_tensor_set_requires_grad(h_, v ? 1 : 0));
    return *this;
  }
  // The gradient (empty when none); samba_tensor_grad lends it, so this
  // takes a reference of its own.
  Tensor grad() const {
    samba_tensor* g = nullptr;
    check(samba_tensor_grad(h_, &g));
    return g ? borrow(g) : Tensor();
  }
  void backward() const { check(samba_tensor_backward(h_, nullptr, 0)); }
  double item() const {
    double v = 0;
    check(samba_tensor_item(h_, &v));
    return v;
  }
  // The values, converted to T by a copy.
  template <typename T>
  std::vector<T> to_vector() const;
  Tensor reshape(const std::vector<int64_t>& shape) const {
    samba_tensor* t = nullptr;
    check(samba_tensor_reshape(h_, shape.data(), shape.size(), &t));
    return Tensor(t);
  }

 private:
  explicit Tensor(samba_tensor* h) : h_(h) {}
  samba_tensor* h_ = nullptr;
};

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr samba_dtype value = SAMBA_FLOAT32;
};
template <>
struct DTypeOf<double> {
  static constexpr samba_dtype value = SAMBA_FLOAT64;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr samba_dtype value = SAMBA_INT64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr samba_dtype value = SAMBA_INT32;
};

template <typename T>
Tensor Tensor::from(const std::vector<T>& values, const std::vector<int64_t>& shape) {
  Tensor t = zeros(shape, DTypeOf<T>::value);
  check(samba_tensor_copy_from(t.get(), values.data(), values.size() * sizeof(T)));
  return t;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  samba_tensor* c = nullptr;
  check(samba_tensor_to(h_, DTypeOf<T>::value, &c));
  Tensor copy(c);
  std::vector<T> out(static_cast<size_t>(numel()));
  check(samba_tensor_copy_to(copy.get(), out.data(), out.size() * sizeof(T)));
  return out;
}

// Runs registry op `name` (eagerly, or recorded while compiling) and returns its outputs.
inline std::vector<Tensor> op(const char* name, const std::vector<Tensor>& inputs, const Attrs* attrs = nullptr,
                              samba_session* session = nullptr) {
  std::vector<samba_tensor*> in;
  for (const Tensor& t : inputs) in.push_back(t.get());
  std::vector<samba_tensor*> out(16, nullptr);
  size_t n = 0;
  check(samba_op_call(session, name, in.data(), in.size(), attrs ? attrs->get() : nullptr, out.data(), out.size(),
                      &n));
  std::vector<Tensor> result;
  for (size_t i = 0; i < n; ++i) result.push_back(Tensor::adopt(out[i]));
  return result;
}
// Single-output form.
inline Tensor op1(const char* name, const std::vector<Tensor>& inputs, const Attrs* attrs = nullptr) {
  return op(name, inputs, attrs).at(0);
}

// SGD or AdamW over parameter groups.
class Optimizer {
 public:
  Optimizer(const char* kind, const Attrs& defaults) {
    samba_optimizer* o = nullptr;
    check(samba_optimizer_create(kind, defaults.get(), &o));
    h_.reset(o);
  }
  Optimizer& add_param_group(const std::vector<Tensor>& params, const Attrs* hyper = nullptr) {
    std::vector<samba_tensor*> p;
    for (const Tensor& t : params) p.push_back(t.get());
    check(samba_optimizer_add_param_group(h_.get(), p.data(), p.size(), hyper ? hyper->get() : nullptr));
    return *this;
  }
  samba_optimizer* get() const { return h_.get(); }

 private:
  detail::Owned<samba_optimizer, samba_optimizer_release>::Ptr h_;
};

// A model: inputs to outputs. Exceptions fail the compile or trace with their message.
using Model = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

namespace detail {
inline samba_status call_model(void* user, samba_tensor* const* in, size_t n_in, samba_tensor** out, size_t cap,
                               size_t* n_out) noexcept {
  try {
    const Model& model = *static_cast<const Model*>(user);
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < n_in; ++i) inputs.push_back(Tensor::borrow(in[i]));
    std::vector<Tensor> outputs = model(inputs);
    if (outputs.size() > cap) throw std::length_error("the model returned more outputs than the engine takes");
    for (size_t i = 0; i < outputs.size(); ++i) out[i] = outputs[i].release();
    *n_out = outputs.size();
    return SAMBA_OK;
  } catch (const Error& e) {
    samba_set_error_message(e.status(), e.what());
    return e.status();
  } catch (const std::exception& e) {
    samba_set_error_message(SAMBA_ERR_INVALID_ARGUMENT, e.what());
    return SAMBA_ERR_INVALID_ARGUMENT;
  } catch (...) {
    samba_set_error_message(SAMBA_ERR_INTERNAL, "unknown exception in the model");
    return SAMBA_ERR_INTERNAL;
  }
}

inline std::vector<samba_tensor*> raw(const std::vector<Tensor>& ts) {
  std::vector<samba_tensor*> r;
  for (const Tensor& t : ts) r.push_back(t.get());
  return r;
}
inline std::vector<samba_optimizer*> raw(const std::vector<const Optimizer*>& os) {
  std::vector<samba_optimizer*> r;
  for (const Optimizer* o : os) r.push_back(o->get());
  return r;
}
}  // namespace detail

// Compile options (samba_compile_options).
class CompileOptions {
 public:
  CompileOptions() {
    samba_compile_options* o = nullptr;
    check(samba_compile_options_create(&o));
    h_.reset(o);
  }
  CompileOptions& pef_path(const std::string& p) { return done(samba_compile_options_set_pef_path(h_.get(), p.c_str())); }
  CompileOptions& name(const std::string& n) { return done(samba_compile_options_set_name(h_.get(), n.c_str())); }
  CompileOptions& inference(bool v) { return done(samba_compile_options_set_inference(h_.get(), v ? 1 : 0)); }
  CompileOptions& opt_level(int v) { return done(samba_compile_options_set_opt_level(h_.get(), v)); }
  // "none" or "bf16" (samba_compile_options_set_mixed_precision).
  CompileOptions& mixed_precision(const std::string& mode) {
    return done(samba_compile_options_set_mixed_precision(h_.get(), mode.c_str()));
  }
  CompileOptions& loss_indices(const std::vector<int64_t>& v) {
    return done(samba_compile_options_set_loss_indices(h_.get(), v.data(), v.size()));
  }
  const samba_compile_options* get() const { return h_.get(); }

 private:
  CompileOptions& done(samba_status st) {
    check(st);
    return *this;
  }
  detail::Owned<samba_compile_options, samba_compile_options_release>::Ptr h_;
};

// Run options (samba_run_options).
class RunOptions {
 public:
  RunOptions() {
    samba_run_options* o = nullptr;
    check(samba_run_options_create(&o));
    h_.reset(o);
  }
  RunOptions& hyperparam(const std::string& name, double v) {
    return done(samba_run_options_set_hyperparam(h_.get(), name.c_str(), v));
  }
  RunOptions& section_types(const std::vector<std::string>& types) {
    std::vector<const char*> p;
    for (const auto& t : types) p.push_back(t.c_str());
    return done(samba_run_options_set_section_types(h_.get(), p.data(), p.size()));
  }
  RunOptions& train(bool v) { return done(samba_run_options_set_train(h_.get(), v ? 1 : 0)); }
  const samba_run_options* get() const { return h_.get(); }

 private:
  RunOptions& done(samba_status st) {
    check(st);
    return *this;
  }
  detail::Owned<samba_run_options, samba_run_options_release>::Ptr h_;
};

// A session: compile models into PEFs, load and run them.
class Session {
 public:
  explicit Session(int32_t threads = 0, uint64_t seed = 0) {
    samba_session_options* o = nullptr;
    check(samba_session_options_create(&o));
    detail::Owned<samba_session_options, samba_session_options_release>::Ptr opts(o);
    check(samba_session_options_set_num_threads(o, threads));
    check(samba_session_options_set_seed(o, seed));
    samba_session* s = nullptr;
    check(samba_session_create(o, &s));
    h_.reset(s);
  }
  samba_session* get() const { return h_.get(); }

  // Loads (replaces) the PEF to run, without a model to check it against.
  void load_pef(const std::string& path) { check(samba_session_load_pef(h_.get(), path.c_str())); }

  void compile(const Model& model, const std::vector<Tensor>& inputs, const std::vector<const Optimizer*>& optimizers,
               const CompileOptions& opts) {
    auto in = detail::raw(inputs);
    auto op = detail::raw(optimizers);
    check(samba_session_compile(h_.get(), detail::call_model, const_cast<Model*>(&model), in.data(), in.size(),
                                op.data(), op.size(), opts.get()));
  }
  // Loads the PEF after checking the model against it; returns the model's outputs.
  std::vector<Tensor> trace_graph(const Model& model, const std::vector<Tensor>& inputs,
                                  const std::vector<const Optimizer*>& optimizers, const std::string& pef_path) {
    auto in = detail::raw(inputs);
    auto op = detail::raw(optimizers);
    std::vector<samba_tensor*> out(64, nullptr);
    size_t n = 0;
    check(samba_session_trace_graph(h_.get(), detail::call_model, const_cast<Model*>(&model), in.data(), in.size(),
                                    op.data(), op.size(), pef_path.c_str(), nullptr, out.data(), out.size(), &n));
    std::vector<Tensor> r;
    for (size_t i = 0; i < n; ++i) r.push_back(Tensor::adopt(out[i]));
    return r;
  }
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs = {},
                          const RunOptions* opts = nullptr) {
    auto in = detail::raw(inputs);
    auto want = detail::raw(outputs);
    std::vector<samba_tensor*> out(64, nullptr);
    size_t n = 0;
    check(samba_session_run(h_.get(), in.data(), in.size(), want.data(), want.size(), opts ? opts->get() : nullptr,
                            out.data(), out.size(), &n));
    std::vector<Tensor> r;
    for (size_t i = 0; i < n; ++i) r.push_back(Tensor::adopt(out[i]));
    return r;
  }
  // The device value of a tensor (sn_data).
  Tensor sn_data(const Tensor& t) {
    samba_tensor* v = nullptr;
    check(samba_tensor_sn_data(h_.get(), t.get(), &v));
    return Tensor::adopt(v);
  }

 private:
  detail::Owned<samba_session, samba_session_release>::Ptr h_;
};

}  // namespace samba

#endif  // SAMBA_HPP
