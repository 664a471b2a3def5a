// Built instead of onnx_load.cpp when CMake found no ONNX library: the
// importer's entry points fail naming what is missing.
#include "engine/core/error.h"
#include "engine/onnx/onnx_model.h"

namespace samba::onnx_import {
namespace {

[[noreturn]] void no_onnx() {
  fail(
      Status::Unsupported,
      "this Samba was built without the ONNX library (libonnx, libonnx_proto and protobuf; Debian: "
      "libonnx-dev), so ONNX models cannot be imported; rebuild with it installed");
}

}  // namespace

int64_t max_opset() { return 0; }

std::shared_ptr<const Model> Model::from_bytes(std::span<const uint8_t>, const std::string&) {
  no_onnx();
}
std::shared_ptr<const Model> Model::from_file(const std::string&) { no_onnx(); }

}  // namespace samba::onnx_import
