// DLPack import and export: tensors shared with other frameworks without a
// copy. The header is DLPack 0.6 (DLManagedTensor, no versioned struct).
#include <dlpack/dlpack.h>

#include <optional>

#include "bindings/c/capi.h"

using namespace samba;
using namespace samba::capi;

namespace {

// kDLBool arrived in DLPack 0.8; 0.6 producers that know no better send
// kDLUInt with 1 bit, which is read as bool too.
constexpr uint8_t kDLBoolCode = 6;

std::optional<DType> dtype_from_dlpack(DLDataType t) {
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 32) return DType::Float32;
      if (t.bits == 64) return DType::Float64;
      if (t.bits == 16) return DType::Float16;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::BFloat16;
      break;
    case kDLInt:
      if (t.bits == 64) return DType::Int64;
      if (t.bits == 32) return DType::Int32;
      if (t.bits == 16) return DType::Int16;
      if (t.bits == 8) return DType::Int8;
      break;
    case kDLUInt:
      if (t.bits == 8) return DType::UInt8;
      if (t.bits == 1) return DType::Bool;
      break;
    case kDLBoolCode:
      if (t.bits == 8) return DType::Bool;
      break;
    default:
      break;
  }
  return std::nullopt;
}

DLDataType dtype_to_dlpack(DType d) {
  const auto bits = static_cast<uint8_t>(element_size(d) * 8);
  switch (d) {
    case DType::Float32:
    case DType::Float64:
    case DType::Float16:
      return {kDLFloat, bits, 1};
    case DType::BFloat16:
      return {kDLBfloat, bits, 1};
    case DType::UInt8:
      return {kDLUInt, bits, 1};
    case DType::Bool:
      return {kDLBoolCode, bits, 1};
    default:
      return {kDLInt, bits, 1};
  }
}

// What a DLManagedTensor made by samba_tensor_to_dlpack owns. The storage
// reference keeps the memory alive even if the tensor's data is cleared
// while a consumer still reads it.
struct ExportedTensor {
  DLManagedTensor managed{};
  Ref<TensorImpl> tensor;
  Ref<Storage> storage;
  Dims shape;
  Dims strides;
};

void release_exported(DLManagedTensor* self) {
  if (self) delete static_cast<ExportedTensor*>(self->manager_ctx);
}

}  // namespace

extern "C" {

samba_status samba_tensor_from_dlpack(DLManagedTensor* managed, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(managed, "managed");
    const DLTensor& dl = managed->dl_tensor;
    SAMBA_CHECK(
        dl.device.device_type == kDLCPU, Status::Unsupported,
        "DLPack tensor is on device type {} (id {}); only kDLCPU ({}) memory can be imported",
        static_cast<int>(dl.device.device_type), dl.device.device_id, static_cast<int>(kDLCPU));
    std::optional<DType> dt = dtype_from_dlpack(dl.dtype);
    SAMBA_CHECK(dt && dl.dtype.lanes == 1, Status::Unsupported,
                "DLPack dtype (code {}, bits {}, lanes {}) has no samba dtype", dl.dtype.code,
                dl.dtype.bits, dl.dtype.lanes);
    SAMBA_CHECK(dl.ndim >= 0 && dl.ndim <= kMaxRank, Status::InvalidArgument,
                "DLPack tensor has ndim {}; expected 0 to {}", dl.ndim, kMaxRank);
    const auto ndim = static_cast<size_t>(dl.ndim);
    Dims dims = checked_dims(dl.shape, ndim, "managed->dl_tensor.shape");
    if (dl.strides)
      for (size_t i = 0; i < ndim; ++i)
        SAMBA_CHECK(dl.strides[i] >= 0, Status::Unsupported,
                    "DLPack tensor has negative stride {} in dim {}; samba views need strides >= 0",
                    dl.strides[i], i);
    const size_t es = element_size(*dt);
    char* base = dl.data ? static_cast<char*>(dl.data) + dl.byte_offset : nullptr;
    SAMBA_CHECK(
        reinterpret_cast<uintptr_t>(base) % es == 0, Status::InvalidArgument,
        "DLPack data pointer plus byte_offset {} is not aligned to the {}-byte elements of {}",
        dl.byte_offset, es, dtype_name(*dt));

    if (managed->deleter == release_exported) {
      // One of ours coming back: share the original storage instead of
      // stacking a second owner on it.
      auto* exported = static_cast<ExportedTensor*>(managed->manager_ctx);
      Ref<Storage> storage = exported->storage;
      Tensor t =
          external_tensor(*dt, dims, dl.strides, base, [](size_t) { return Ref<Storage>(); });
      const char* start = static_cast<const char*>(storage->data());
      const int64_t offset = base ? (base - start) / static_cast<int64_t>(es) : 0;
      t.impl()->storage = std::move(storage);
      t.impl()->offset = offset;
      *out = to_handle(std::move(t));
      managed->deleter(managed);
      return;
    }
    *out = to_handle(external_tensor(*dt, dims, dl.strides, base, [managed, base](size_t n) {
      return Storage::adopt(base, n, [managed] {
        if (managed->deleter) managed->deleter(managed);
      });
    }));
  });
}

samba_status samba_tensor_to_dlpack(samba_tensor* t, DLManagedTensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    Tensor x = tensor_arg(t, "t");
    void* data = x.raw_data();  // fails for symbolic or cleared tensors
    auto exported = std::make_unique<ExportedTensor>();
    exported->tensor = x.ref();
    exported->storage = x.impl()->storage;
    exported->shape = x.shape();
    exported->strides = x.strides();
    DLManagedTensor& m = exported->managed;
    m.dl_tensor.data = data;
    m.dl_tensor.device = {kDLCPU, 0};
    m.dl_tensor.ndim = static_cast<int>(x.dim());
    m.dl_tensor.dtype = dtype_to_dlpack(x.dtype());
    m.dl_tensor.shape = exported->shape.data();
    m.dl_tensor.strides = exported->strides.data();
    m.dl_tensor.byte_offset = 0;
    m.manager_ctx = exported.get();
    m.deleter = release_exported;
    *out = &exported.release()->managed;
  });
}

}  // extern "C"
