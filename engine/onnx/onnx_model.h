// An ONNX model imported as registry ops. Loading (onnx_load.cpp) parses the
// protobuf with the ONNX library, runs its checker and shape inference and
// converts the graph into the plain form below, so that the op table and the
// evaluator never see protobuf types and build without the ONNX library.
// Calling forward() inside a trace records registry ops, which is how an
// ONNX model reaches the compiler (and eager mode, outside tracing).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/attrs.h"
#include "engine/core/tensor.h"

namespace samba::onnx_import {

// The ONNX opsets the importer accepts for the default domain. The newest is
// the one the linked ONNX library knows (the op table covers up to it).
constexpr int64_t kMinOpset = 13;
int64_t max_opset();

// No dim of a real model comes near this; larger ones (declared, or made by
// an op from attribute values) are refused before any size arithmetic (a dim
// of 2^40 would overflow a byte count).
constexpr int64_t kMaxDim = int64_t{1} << 32;

// A graph input or output: its name, dtype and shape (-1 for a symbolic dim).
struct ValueInfo {
  std::string name;
  DType dtype = DType::Float32;
  Dims shape;
};

struct Node {
  std::string name;  // the node's name, or "<op_type>#<index>" when it has none
  std::string op_type;
  std::vector<std::string> inputs;   // "" for an omitted optional input
  std::vector<std::string> outputs;  // "" for an omitted optional output
  Attrs attrs;                       // int, float, string, ints, floats attributes
  std::vector<std::pair<std::string, Tensor>> tensor_attrs;  // TENSOR attributes (Constant)
};

struct Graph {
  int64_t opset = 0;
  std::vector<ValueInfo> inputs;  // graph inputs that are not initializers
  std::vector<ValueInfo> outputs;
  std::vector<Node> nodes;  // in topological order (the checker's rule)
  // Named after their initializer. Floating ones are parameters (requires
  // grad) unless an op uses them as statistics; the others are constants.
  std::vector<Tensor> initializers;
};

class Model {
 public:
  // `bytes`: a serialized ModelProto. External data files are looked up in
  // `base_dir` (none allowed when empty). Throws samba::Error: CorruptFile
  // (not a valid model), Unsupported (an opset, op, dtype or attribute the
  // importer lacks, or no ONNX library in this build), IoError (external
  // data unreadable), OutOfRange (a dim too large).
  static std::shared_ptr<const Model> from_bytes(std::span<const uint8_t> bytes,
                                                 const std::string& base_dir);
  // Reads `path`; external data files are read from its directory.
  static std::shared_ptr<const Model> from_file(const std::string& path);

  explicit Model(Graph g);

  const Graph& graph() const { return graph_; }

  // Evaluates the graph on `inputs` (one per graph input, in order) through
  // registry ops; returns the graph outputs in order.
  std::vector<Tensor> forward(std::span<const Tensor> inputs) const;

 private:
  Graph graph_;
};

// Checks every node against the op table (op known for the opset) before
// anything runs; the message names the node, op, opset and supported ops.
void check_supported(const Graph& g);

}  // namespace samba::onnx_import
