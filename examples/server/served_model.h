// ServedModel: one PEF loaded into its own samba_session, described by its
// inputs and outputs, and run for inference from many threads at once (the
// runtime gives each concurrent run its own execution context).
//
// The batch dimension: an inference compile fixes the batch size, and the
// PEF records it per graph but the C ABI does not expose it. The server
// takes dim 0 as the batch dim when every input and every output has rank
// >= 1 and the same dim 0 (the compile's batch size splits exactly the
// inputs whose dim 0 equals it). Such a model takes requests of one sample
// (the sample shape) or of n <= batch samples ([n, ...]); the batcher packs
// them into the rows of one run and pads the rest with zeros. Any other
// model takes whole inputs, one request per run.
#pragma once

#include <samba.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor_codec.h"

namespace samba_server {

struct TensorSpec {
  std::string name;
  samba_dtype dtype = SAMBA_FLOAT32;
  std::vector<int64_t> shape;  // the PEF's, batch dim included
  size_t row_bytes = 0;        // bytes of one sample (batched models)
};

// One request's inputs, checked against the model: the rows it fills and,
// per model input in order, its bytes.
struct Rows {
  int64_t count = 0;
  bool single = false;  // sent without the batch dim: answered without it
  std::vector<std::string> inputs;
};

class ServedModel {
 public:
  // Loads the PEF at `path` into a session of `threads` threads (<= 0: one
  // per hardware thread). Throws std::runtime_error naming the file and the
  // library's message.
  ServedModel(std::string name, const std::string& path, int threads);
  ~ServedModel();
  ServedModel(const ServedModel&) = delete;
  ServedModel& operator=(const ServedModel&) = delete;

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  const std::vector<TensorSpec>& inputs() const { return inputs_; }
  const std::vector<TensorSpec>& outputs() const { return outputs_; }
  bool batched() const { return batch_size_ > 0; }
  // Rows of one run (the PEF's batch size); 1 for a model without a batch dim.
  int64_t batch_size() const { return batched() ? batch_size_ : 1; }

  // Checks the request's tensors by name against the inputs (each given once,
  // of the input's dtype and of its sample shape or [n, sample...] with the
  // same n <= batch for every input). Throws BadRequest naming what differs.
  Rows check_request(std::map<std::string, HostTensor> tensors) const;

  // Runs `rows` (total count <= batch_size()) as one batch padded with zeros
  // and returns, per request, its outputs in output order. Thread-safe.
  // Throws std::runtime_error with the library's message.
  std::vector<std::vector<HostTensor>> run(const std::vector<const Rows*>& rows) const;

  // The model's description for GET /v1/models.
  nlohmann::json describe() const;

 private:
  std::vector<TensorSpec> read_specs(samba_names_kind kind) const;

  std::string name_;
  std::string path_;
  samba_session* session_ = nullptr;
  std::vector<TensorSpec> inputs_;
  std::vector<TensorSpec> outputs_;
  int64_t batch_size_ = 0;  // 0: not batched
};

}  // namespace samba_server
