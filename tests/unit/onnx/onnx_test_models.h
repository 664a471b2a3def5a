// Small ONNX models built with the ONNX protobuf API, for the importer's tests.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace samba::testing::onnx_models {

inline onnx::ModelProto model(int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("samba-tests");
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

// A float tensor value; a dim of -1 is symbolic ("N").
inline void value(onnx::ValueInfoProto* v, const std::string& name,
                  const std::vector<int64_t>& dims, int32_t elem = onnx::TensorProto::FLOAT) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0)
      shape->add_dim()->set_dim_param("N");
    else
      shape->add_dim()->set_dim_value(d);
  }
}

inline void input(onnx::ModelProto& m, const std::string& name, const std::vector<int64_t>& dims,
                  int32_t elem = onnx::TensorProto::FLOAT) {
  value(m.mutable_graph()->add_input(), name, dims, elem);
}
inline void output(onnx::ModelProto& m, const std::string& name, const std::vector<int64_t>& dims,
                   int32_t elem = onnx::TensorProto::FLOAT) {
  value(m.mutable_graph()->add_output(), name, dims, elem);
}

inline onnx::TensorProto* initializer(onnx::ModelProto& m, const std::string& name,
                                      const std::vector<int64_t>& dims,
                                      const std::vector<float>& values) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return t;
}

inline onnx::TensorProto* int64_initializer(onnx::ModelProto& m, const std::string& name,
                                            const std::vector<int64_t>& values) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
  return t;
}

inline onnx::NodeProto* node(onnx::ModelProto& m, const std::string& op,
                             const std::vector<std::string>& in,
                             const std::vector<std::string>& out, const std::string& name = "") {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_" + out.at(0) : name);
  for (const auto& s : in) n->add_input(s);
  for (const auto& s : out) n->add_output(s);
  return n;
}

inline void attr_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void attr_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

inline std::string bytes(const onnx::ModelProto& m) { return m.SerializeAsString(); }

}  // namespace samba::testing::onnx_models
