#include "engine/core/strided.h"

#include "engine/core/error.h"

namespace samba {

StridedPlan::StridedPlan(Spec spec) {
  const size_t nops = spec.strides.size();
  SAMBA_CHECK(nops >= 1 && nops <= kMaxOperands, Status::Internal, "StridedPlan: {} operands", nops);
  strides_.assign(nops, {});
  // Drop size-1 dimensions (their strides do not matter), then merge
  // neighbours that are contiguous with each other in every operand.
  for (size_t d = 0; d < spec.shape.size(); ++d) {
    if (spec.shape[d] == 1) continue;
    if (!shape_.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < nops; ++k)
        mergeable &= strides_[k].back() == spec.strides[k][d] * spec.shape[d];
      if (mergeable) {
        shape_.back() *= spec.shape[d];
        for (size_t k = 0; k < nops; ++k) strides_[k].back() = spec.strides[k][d];
        continue;
      }
    }
    shape_.push_back(spec.shape[d]);
    for (size_t k = 0; k < nops; ++k) strides_[k].push_back(spec.strides[k][d]);
  }
  for (int64_t s : spec.shape)
    if (s == 0) {
      shape_.assign(1, 0);
      for (auto& st : strides_) st.assign(1, 0);
      break;
    }
}

int64_t StridedPlan::outer_count() const {
  int64_t n = 1;
  for (size_t d = 0; d + 1 < shape_.size(); ++d) n *= shape_[d];
  return n;
}

}  // namespace samba
