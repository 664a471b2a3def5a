#include "engine/rng/lazy_param.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "engine/core/error.h"

namespace samba::rng {

namespace {

const std::string kCustom = "custom";

}  // namespace

Materializer::Materializer(MaterializerDesc builtin) {
  const auto kinds = materializer_kinds();
  SAMBA_CHECK(std::find(kinds.begin(), kinds.end(), builtin.kind) != kinds.end(), Status::NotFound,
              "unknown materializer kind '{}'; the built-in kinds are {}", builtin.kind, fmt::join(kinds, ", "));
  impl_ = std::move(builtin);
}

Materializer::Materializer(MaterializerFn custom) {
  SAMBA_CHECK(static_cast<bool>(custom), Status::NullPointer, "custom materializer: the function is empty");
  impl_ = std::move(custom);
}

const std::string& Materializer::kind() const {
  if (const auto* b = builtin()) return b->kind;
  return kCustom;
}

void Materializer::fill(const Tensor& out, const MaterializeOptions& o) const {
  if (const auto* b = builtin())
    materialize(*b, out, o);
  else
    materialize(std::get<MaterializerFn>(impl_), out, o);
}

MaterializeOptions LazySettings::options(uint64_t session_seed) const {
  MaterializeOptions o;
  o.seed = seed.value_or(session_seed);
  o.init_threads = init_threads;
  o.inverse_transform_sampling = inverse_transform_sampling;
  o.fp32_to_bf16_rounding = fp32_to_bf16_rounding;
  return o;
}

void LazyInitializer::fill(const Tensor& out, const std::string& name) const {
  MaterializeOptions o = options_;
  o.sn_name = name;
  materializer_->fill(out, o);
}

void LazyInitializer::materialize(TensorImpl& t) const {
  // Fill a fresh contiguous tensor, then install its storage: a failing
  // materializer leaves the placeholder as it was.
  Tensor values = Tensor::empty(t.shape, t.dtype);
  values.impl()->name = t.name;
  fill(values, t.name);
  t.strides = values.strides();
  t.offset = 0;
  t.storage = values.impl()->storage;
}

const LazyInitializer* lazy_initializer(const Tensor& t) {
  if (!t.defined()) return nullptr;
  return dynamic_cast<const LazyInitializer*>(t.impl()->init.get());
}

namespace {

void check_for(const Materializer& m, DType dtype, const Dims& shape, const std::string& name) {
  if (const auto* b = m.builtin()) check_materializer(*b, dtype, shape, name);
}

}  // namespace

Tensor make_parameter(const std::string& name, DType dtype, const Dims& shape,
                      std::shared_ptr<const Materializer> m, const MaterializeOptions& o, bool lazy) {
  SAMBA_CHECK(m != nullptr, Status::NullPointer, "parameter '{}': the materializer is missing", name);
  check_for(*m, dtype, shape, name);
  Tensor t = Tensor::symbolic(shape, dtype);  // shape, strides and dtype without storage
  TensorImpl& impl = *t.impl();
  impl.symbolic = false;
  impl.name = name;
  impl.requires_grad = is_floating(dtype);
  impl.is_parameter = true;
  impl.init = std::make_shared<LazyInitializer>(std::move(m), o);
  if (!lazy) t.materialize();
  return t;
}

void set_materializer(const Tensor& t, std::shared_ptr<const Materializer> m, const MaterializeOptions& o) {
  SAMBA_CHECK(t.defined(), Status::NullPointer, "materializer: the tensor is undefined");
  if (!m) {
    SAMBA_CHECK(!t.is_lazy(), Status::InvalidState,
                "materializer: tensor '{}' has no data yet; its materializer cannot be removed before it is "
                "materialized",
                t.name());
    t.impl()->init.reset();
    return;
  }
  check_for(*m, t.dtype(), t.shape(), t.name());
  const LazyInitializer* old = lazy_initializer(t);
  t.impl()->init = std::make_shared<LazyInitializer>(std::move(m), old ? old->options() : o);
}

}  // namespace samba::rng
