// The one table that maps ONNX ops (by opset range) to registry ops. Each
// row names the registry ops it emits and a lowering function; everything an
// ONNX op means is in its lowering, nowhere else.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/error.h"
#include "engine/onnx/onnx_model.h"

namespace samba::onnx_import {

// One node being lowered: its inputs (undefined where an optional input is
// omitted), attributes, and the opset it is read in.
class NodeContext {
 public:
  NodeContext(const Node& node, int64_t opset, std::vector<Tensor> inputs)
      : node_(node), opset_(opset), inputs_(std::move(inputs)) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  size_t input_count() const { return inputs_.size(); }
  // A required input; fails naming the node when it is missing.
  const Tensor& input(size_t i) const;
  // An optional input, or nullptr when omitted.
  const Tensor* optional_input(size_t i) const;
  // Number of outputs the node names (omitted trailing ones excluded).
  size_t output_count() const;

  int64_t attr_int(std::string_view name, int64_t def) const;
  double attr_float(std::string_view name, double def) const;
  std::string attr_string(std::string_view name, std::string def) const;
  std::optional<std::vector<int64_t>> attr_ints(std::string_view name) const;
  const Tensor* attr_tensor(std::string_view name) const;

  // The values of input i, which must be known at import (an initializer, a
  // Constant, or computed from them); `what` names it in the error.
  std::vector<int64_t> constant_ints(size_t i, std::string_view what) const;

  // "node 'n' (Op, opset 13)": how every error about this node starts.
  std::string where() const;
  template <typename... Args>
  [[noreturn]] void unsupported(fmt::format_string<Args...> f, Args&&... args) const {
    fail(Status::Unsupported, "{}: {}", where(), fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  [[noreturn]] void invalid(fmt::format_string<Args...> f, Args&&... args) const {
    fail(Status::InvalidArgument, "{}: {}", where(), fmt::format(f, std::forward<Args>(args)...));
  }

 private:
  const Node& node_;
  int64_t opset_;
  std::vector<Tensor> inputs_;
};

using LowerFn = std::vector<Tensor> (*)(const NodeContext&);

struct OpRule {
  std::string_view op_type;
  int64_t since;                  // first opset this row covers
  int64_t until;                  // last opset this row covers
  std::string_view registry_ops;  // what the lowering emits, for docs and messages
  LowerFn lower;
};

std::span<const OpRule> op_table();
// The row for `op_type` at `opset`, or nullptr.
const OpRule* find_rule(std::string_view op_type, int64_t opset);
// The row for node `node_name`'s `op_type` at `opset`; Unsupported, naming
// the node, the op, the opset and what is supported, when there is none.
const OpRule& rule_for(std::string_view node_name, std::string_view op_type, int64_t opset);
// "Abs, Add, ..." : the ops the table covers at `opset`.
std::string supported_ops(int64_t opset);

// ONNX TensorProto data type codes <-> Samba dtypes. Fails for a type the
// engine has no dtype for, naming `what`.
DType dtype_of_onnx(int32_t onnx_type, std::string_view what);

}  // namespace samba::onnx_import
