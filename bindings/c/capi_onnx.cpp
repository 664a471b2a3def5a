// ONNX import (samba/onnx.h): an imported model is a model callback.
#include <memory>
#include <nlohmann/json.hpp>

#include "bindings/c/capi.h"
#include "engine/onnx/op_table.h"

using namespace samba;
using namespace samba::capi;

struct samba_onnx_model {
  std::shared_ptr<const onnx_import::Model> impl;
};

namespace {

const onnx_import::ValueInfo& value_info(const std::vector<onnx_import::ValueInfo>& infos,
                                         size_t index, const char* what) {
  SAMBA_CHECK(index < infos.size(), Status::OutOfRange,
              "{} index {} is out of range: the model has {}", what, index, infos.size());
  return infos[index];
}

void write_info(const onnx_import::ValueInfo& v, const char** name, samba_dtype* dtype,
                const int64_t** shape, size_t* ndim) {
  if (name) *name = v.name.c_str();
  if (dtype) *dtype = static_cast<samba_dtype>(v.dtype);
  if (shape) *shape = v.shape.data();
  if (ndim) *ndim = v.shape.size();
}

std::string op_table_json() {
  nlohmann::json rows = nlohmann::json::array();
  for (const onnx_import::OpRule& r : onnx_import::op_table())
    rows.push_back({{"op", r.op_type},
                    {"since", r.since},
                    {"until", r.until},
                    {"registry_ops", r.registry_ops}});
  return rows.dump();
}

}  // namespace

extern "C" {

samba_status samba_onnx_model_load(const void* data, size_t size, samba_onnx_model** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(data, "data");
    auto model = std::make_unique<samba_onnx_model>();
    model->impl = onnx_import::Model::from_bytes({static_cast<const uint8_t*>(data), size}, "");
    *out = model.release();
  });
}

samba_status samba_onnx_model_load_file(const char* path, samba_onnx_model** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(path, "path");
    auto model = std::make_unique<samba_onnx_model>();
    model->impl = onnx_import::Model::from_file(path);
    *out = model.release();
  });
}

void samba_onnx_model_release(samba_onnx_model* model) { delete model; }

int64_t samba_onnx_max_opset(void) { return onnx_import::max_opset(); }

samba_status samba_onnx_model_forward(void* model, samba_tensor* const* inputs, size_t n_inputs,
                                      samba_tensor** outputs, size_t capacity, size_t* n_outputs) {
  return SAMBA_GUARDED({
    require(model, "model");
    require(n_outputs, "n_outputs");
    *n_outputs = 0;
    const auto& m = *static_cast<const samba_onnx_model*>(model)->impl;
    const std::vector<Tensor> in = tensors_of(inputs, n_inputs, "inputs");
    std::vector<Tensor> result = m.forward(in);
    SAMBA_CHECK(result.size() <= capacity, Status::OutOfRange,
                "the ONNX model has {} outputs; the caller has room for {}", result.size(),
                capacity);
    if (!result.empty()) require(outputs, "outputs");
    for (size_t i = 0; i < result.size(); ++i) outputs[i] = to_handle(std::move(result[i]));
    *n_outputs = result.size();
  });
}

samba_status samba_onnx_model_opset(const samba_onnx_model* model, int64_t* out) {
  return SAMBA_GUARDED({
    require(model, "model");
    require(out, "out");
    *out = model->impl->graph().opset;
  });
}

samba_status samba_onnx_model_input_count(const samba_onnx_model* model, size_t* out) {
  return SAMBA_GUARDED({
    require(model, "model");
    require(out, "out");
    *out = model->impl->graph().inputs.size();
  });
}

samba_status samba_onnx_model_output_count(const samba_onnx_model* model, size_t* out) {
  return SAMBA_GUARDED({
    require(model, "model");
    require(out, "out");
    *out = model->impl->graph().outputs.size();
  });
}

samba_status samba_onnx_model_input_info(const samba_onnx_model* model, size_t index,
                                         const char** name, samba_dtype* dtype,
                                         const int64_t** shape, size_t* ndim) {
  return SAMBA_GUARDED({
    require(model, "model");
    write_info(value_info(model->impl->graph().inputs, index, "input"), name, dtype, shape, ndim);
  });
}

samba_status samba_onnx_model_output_info(const samba_onnx_model* model, size_t index,
                                          const char** name, samba_dtype* dtype,
                                          const int64_t** shape, size_t* ndim) {
  return SAMBA_GUARDED({
    require(model, "model");
    write_info(value_info(model->impl->graph().outputs, index, "output"), name, dtype, shape, ndim);
  });
}

samba_status samba_onnx_model_initializer_count(const samba_onnx_model* model, size_t* out) {
  return SAMBA_GUARDED({
    require(model, "model");
    require(out, "out");
    *out = model->impl->graph().initializers.size();
  });
}

samba_status samba_onnx_model_initializer(const samba_onnx_model* model, size_t index,
                                          samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(model, "model");
    const auto& inits = model->impl->graph().initializers;
    SAMBA_CHECK(index < inits.size(), Status::OutOfRange,
                "initializer index {} is out of range: the model has {}", index, inits.size());
    *out = to_handle(inits[index]);
  });
}

samba_status samba_onnx_op_table_json(const char** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    static const std::string text = op_table_json();
    *out = text.c_str();
  });
}

}  // extern "C"
