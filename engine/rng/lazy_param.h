// Lazy parameters (enable_lazy_param): a parameter created in lazy mode is a
// placeholder (shape, dtype, name) with a materializer and no data. Its
// values are produced when first needed, from the stream (seed, sn_name),
// so they are the same whenever and on however many threads that happens.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "engine/core/tensor.h"
#include "engine/rng/materializer.h"

namespace samba::rng {

// A materializer: a built-in descriptor (stored in PEF files) or a custom
// callable (kept in the process only). Immutable; shared by the tensors it
// initializes.
class Materializer {
 public:
  // Checks the kind and its parameters' names and types (shape-dependent
  // checks wait for the tensor). Throws NotFound / InvalidArgument.
  explicit Materializer(MaterializerDesc builtin);
  explicit Materializer(MaterializerFn custom);

  // "kaiming_uniform", ..., or "custom".
  const std::string& kind() const;
  // The descriptor of a built-in; null for a custom one.
  const MaterializerDesc* builtin() const { return std::get_if<MaterializerDesc>(&impl_); }
  // Fills `out` (with data) as the materializer says, under `o`.
  void fill(const Tensor& out, const MaterializeOptions& o) const;

 private:
  std::variant<MaterializerDesc, MaterializerFn> impl_;
};

// enable_lazy_param's arguments. No seed: the session's seed.
struct LazySettings {
  std::optional<uint64_t> seed;
  int init_threads = 8;
  bool inverse_transform_sampling = false;
  Bf16Rounding fp32_to_bf16_rounding = Bf16Rounding::NearestEven;

  // The materialization options for `session_seed` when no seed is set.
  MaterializeOptions options(uint64_t session_seed) const;
};

// A tensor's initializer: its materializer plus the options it was created
// under (a tensor's values never depend on later changes of settings). The
// stream is the tensor's sn_name at materialization time.
class LazyInitializer final : public Initializer {
 public:
  LazyInitializer(std::shared_ptr<const Materializer> m, MaterializeOptions o)
      : materializer_(std::move(m)), options_(std::move(o)) {}
  const std::shared_ptr<const Materializer>& materializer() const { return materializer_; }
  const MaterializeOptions& options() const { return options_; }
  void materialize(TensorImpl& t) const override;
  // Fills an existing tensor with data (e.g. device memory) with the values
  // materialize() would give the tensor named `name`.
  void fill(const Tensor& out, const std::string& name) const;

 private:
  std::shared_ptr<const Materializer> materializer_;
  MaterializeOptions options_;
};

// The tensor's lazy initializer, or null when it has none (or another kind).
const LazyInitializer* lazy_initializer(const Tensor& t);

// A parameter of `shape` and `dtype` named `name` whose values come from
// `m`: a placeholder when `lazy`, otherwise materialized now. Checks the
// materializer against the shape and dtype first.
Tensor make_parameter(const std::string& name, DType dtype, const Dims& shape,
                      std::shared_ptr<const Materializer> m, const MaterializeOptions& o, bool lazy);

// Sets (or with m null, removes) t's materializer, keeping the options of
// any previous one, else `o`. Checks it against t's shape and dtype.
void set_materializer(const Tensor& t, std::shared_ptr<const Materializer> m, const MaterializeOptions& o);

}  // namespace samba::rng
