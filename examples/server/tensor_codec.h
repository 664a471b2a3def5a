// Tensors as they travel over HTTP: decoded from a request body (JSON or a
// NumPy .npy file) into host bytes, and encoded back for the answer. The
// codec knows nothing of models; checking a tensor against what a model
// expects is ServedModel's work.
#pragma once

#include <samba.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace samba_server {

// A request the server refuses: HTTP `status` with `message` (naming what was
// wrong and what was expected) as the JSON answer's "error".
struct BadRequest : std::runtime_error {
  BadRequest(int status, const std::string& message)
      : std::runtime_error(message), status(status) {}
  int status;
};

// A dense, C-ordered host tensor.
struct HostTensor {
  samba_dtype dtype = SAMBA_FLOAT32;
  std::vector<int64_t> shape;
  std::string bytes;  // numel * element size, little-endian

  int64_t numel() const;
};

std::string shape_text(const std::vector<int64_t>& shape);

// {"inputs": {"<name>": {"shape": [...], "dtype": "float32", "data": [...]}}}:
// data is the flat, row-major list of numbers (booleans for bool). Throws
// BadRequest naming the field at fault.
std::map<std::string, HostTensor> decode_json_inputs(std::string_view body);

// A NumPy .npy file (format 1.0-3.0, C order, little-endian or one-byte
// dtypes). Throws BadRequest naming what is malformed.
HostTensor decode_npy(std::string_view body);

// {"shape": [...], "dtype": "...", "data": [...]}. Floats are written with
// the shortest text that reads back to the same value.
nlohmann::json encode_json(const HostTensor& t);
std::string encode_npy(const HostTensor& t);

}  // namespace samba_server
