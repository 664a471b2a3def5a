// Loading an ONNX model with the ONNX library: parse, bring external data in,
// check, infer shapes, then convert to the importer's plain graph.
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include "engine/io/file_io.h"
#include "engine/onnx/onnx_schemas.h"
#include "engine/onnx/op_table.h"

namespace samba::onnx_import {
namespace {

namespace fs = std::filesystem;

Dims checked_dims(const google::protobuf::RepeatedField<int64_t>& dims, std::string_view what) {
  SAMBA_CHECK(dims.size() <= kMaxRank, Status::Unsupported,
              "{} has rank {}; at most {} dims are supported", what, dims.size(), kMaxRank);
  Dims out(dims.begin(), dims.end());
  int64_t n = 1;
  for (int64_t d : out) {
    SAMBA_CHECK(d >= 0 && d <= kMaxDim, Status::OutOfRange,
                "{} has a dim of {}; dims must be in [0, 2^32]", what, d);
    SAMBA_CHECK(d == 0 || n <= (int64_t{1} << 40) / d, Status::OutOfRange,
                "{} of shape {} has more than 2^40 elements", what, dims_str(out));
    n *= d;
  }
  return out;
}

// Reads `length` bytes at `offset` of an external data file beside the model.
std::string read_external(const onnx::TensorProto& t, const std::string& base_dir,
                          size_t expected) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& e : t.external_data()) {
    try {
      if (e.key() == "location")
        location = e.value();
      else if (e.key() == "offset")
        offset = std::stoll(e.value());
      else if (e.key() == "length")
        length = std::stoll(e.value());
    } catch (const std::exception&) {
      fail(Status::CorruptFile, "initializer '{}': external data {} '{}' is not a number", t.name(),
           e.key(), e.value());
    }
  }
  SAMBA_CHECK(
      !base_dir.empty(), Status::Unsupported,
      "initializer '{}' keeps its data in an external file '{}'; load the model from its path "
      "so the file can be found beside it",
      t.name(), location);
  const fs::path rel(location);
  bool escapes = location.empty() || rel.is_absolute();
  for (const auto& part : rel) escapes = escapes || part == "..";
  SAMBA_CHECK(
      !escapes, Status::CorruptFile,
      "initializer '{}': external data location '{}' must be a relative path inside the model's "
      "directory",
      t.name(), location);
  SAMBA_CHECK(offset >= 0 && (length < 0 || static_cast<size_t>(length) == expected),
              Status::CorruptFile,
              "initializer '{}': external data offset {} length {}; expected a length of {} bytes",
              t.name(), offset, length, expected);
  const fs::path file = fs::path(base_dir) / rel;
  const int fd = open_regular_file_for_read(file.string(), "ONNX external data");
  struct stat st {};
  const bool sized = ::fstat(fd, &st) == 0;
  const int64_t size = sized ? static_cast<int64_t>(st.st_size) : -1;
  if (size < 0 || offset > size || static_cast<int64_t>(expected) > size - offset) {
    ::close(fd);
    fail(Status::CorruptFile,
         "initializer '{}': external data file '{}' has {} bytes; {} are needed at offset {}",
         t.name(), file.string(), size, expected, offset);
  }
  std::string bytes(expected, '\0');
  size_t done = 0;
  while (done < expected) {
    const ssize_t got =
        ::pread(fd, bytes.data() + done, expected - done, static_cast<off_t>(offset + done));
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  ::close(fd);
  SAMBA_CHECK(done == expected, Status::IoError,
              "initializer '{}': reading '{}' failed after {} of {} bytes", t.name(), file.string(),
              done, expected);
  return bytes;
}

// Moves every external initializer's bytes into the model, so the checker and
// shape inference see a self-contained model.
void internalize_external_data(onnx::ModelProto& m, const std::string& base_dir) {
  for (onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) continue;
    const DType dt = dtype_of_onnx(t.data_type(), fmt::format("initializer '{}'", t.name()));
    const Dims dims = checked_dims(t.dims(), fmt::format("initializer '{}'", t.name()));
    const size_t nbytes = static_cast<size_t>(numel_of(dims)) * element_size(dt);
    std::string bytes = read_external(t, base_dir, nbytes);
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
    t.set_raw_data(std::move(bytes));
  }
}

template <typename Src, typename Field>
void copy_typed(const Field& field, const Tensor& out, std::string_view name) {
  SAMBA_CHECK(field.size() == out.numel(), Status::CorruptFile,
              "initializer '{}' has {} values, its shape {} needs {}", name, field.size(),
              dims_str(out.shape()), out.numel());
  Tensor src = Tensor::empty(out.shape(),
                             sizeof(Src) == 8
                                 ? (std::is_floating_point_v<Src> ? DType::Float64 : DType::Int64)
                                 : (std::is_floating_point_v<Src> ? DType::Float32 : DType::Int32));
  std::copy(field.begin(), field.end(), src.data<Src>());
  out.copy_from(src);
}

Tensor tensor_of(const onnx::TensorProto& t, std::string_view what) {
  const DType dt = dtype_of_onnx(t.data_type(), what);
  Tensor out = Tensor::empty(checked_dims(t.dims(), what), dt);
  if (t.has_raw_data()) {
    SAMBA_CHECK(t.raw_data().size() == out.nbytes(), Status::CorruptFile,
                "{} has {} bytes of data, its shape {} and dtype {} need {}", what,
                t.raw_data().size(), dims_str(out.shape()), dtype_name(dt), out.nbytes());
    if (out.nbytes()) std::memcpy(out.raw_data(), t.raw_data().data(), out.nbytes());
  } else if (dt == DType::Float32) {
    copy_typed<float>(t.float_data(), out, what);
  } else if (dt == DType::Float64) {
    copy_typed<double>(t.double_data(), out, what);
  } else if (dt == DType::Int64) {
    copy_typed<int64_t>(t.int64_data(), out, what);
  } else if (dt == DType::Float16 || dt == DType::BFloat16) {
    // Half floats travel as their bit patterns in int32_data.
    SAMBA_CHECK(t.int32_data_size() == out.numel(), Status::CorruptFile,
                "{} has {} values, its shape needs {}", what, t.int32_data_size(), out.numel());
    auto* p = static_cast<uint16_t*>(out.raw_data());
    for (int64_t i = 0; i < out.numel(); ++i)
      p[i] = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
  } else {
    copy_typed<int32_t>(t.int32_data(), out, what);
  }
  return out;
}

ValueInfo value_info_of(const onnx::ValueInfoProto& v) {
  const std::string what = fmt::format("graph input or output '{}'", v.name());
  SAMBA_CHECK(v.type().has_tensor_type(), Status::Unsupported,
              "{} is not a tensor; supported: tensors", what);
  const auto& tt = v.type().tensor_type();
  ValueInfo info{v.name(), dtype_of_onnx(tt.elem_type(), what), {}};
  SAMBA_CHECK(tt.has_shape(), Status::Unsupported,
              "{} has no shape; supported: tensors of known rank", what);
  SAMBA_CHECK(tt.shape().dim_size() <= kMaxRank, Status::Unsupported,
              "{} has rank {}; at most {} dims", what, tt.shape().dim_size(), kMaxRank);
  for (const auto& d : tt.shape().dim()) {
    if (!d.has_dim_value()) {
      info.shape.push_back(-1);
      continue;
    }
    SAMBA_CHECK(d.dim_value() >= 0 && d.dim_value() <= kMaxDim, Status::OutOfRange,
                "{} has a dim of {}; dims must be in [0, 2^32]", what, d.dim_value());
    info.shape.push_back(d.dim_value());
  }
  return info;
}

Node node_of(const onnx::NodeProto& n, size_t index) {
  Node node{n.name().empty() ? fmt::format("{}#{}", n.op_type(), index) : n.name(),
            n.op_type(),
            {n.input().begin(), n.input().end()},
            {n.output().begin(), n.output().end()},
            {},
            {}};
  SAMBA_CHECK(n.domain().empty() || n.domain() == "ai.onnx", Status::Unsupported,
              "node '{}' ({}): domain '{}' is not supported; supported: the default ONNX domain",
              node.name, n.op_type(), n.domain());
  for (const onnx::AttributeProto& a : n.attribute()) {
    switch (a.type()) {
      case onnx::AttributeProto::FLOAT:
        node.attrs.set(a.name(), static_cast<double>(a.f()));
        break;
      case onnx::AttributeProto::INT:
        node.attrs.set(a.name(), a.i());
        break;
      case onnx::AttributeProto::STRING:
        node.attrs.set(a.name(), a.s());
        break;
      case onnx::AttributeProto::INTS:
        node.attrs.set(a.name(), std::vector<int64_t>(a.ints().begin(), a.ints().end()));
        break;
      case onnx::AttributeProto::FLOATS:
        node.attrs.set(a.name(), std::vector<double>(a.floats().begin(), a.floats().end()));
        break;
      case onnx::AttributeProto::TENSOR:
        node.tensor_attrs.emplace_back(
            a.name(),
            tensor_of(a.t(), fmt::format("node '{}' attribute '{}'", node.name, a.name())));
        break;
      default:
        fail(Status::Unsupported,
             "node '{}' ({}): attribute '{}' has type {}; supported: float, int, string, tensor, "
             "floats, ints",
             node.name, n.op_type(), a.name(), onnx::AttributeProto::AttributeType_Name(a.type()));
    }
  }
  return node;
}

int64_t default_domain_opset(const onnx::ModelProto& m) {
  int64_t opset = -1;
  for (const auto& o : m.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
    else
      fail(Status::Unsupported,
           "the model imports operator set domain '{}'; supported: the default ONNX domain",
           o.domain());
  }
  SAMBA_CHECK(opset >= kMinOpset && opset <= max_opset(), Status::Unsupported,
              "the model uses ONNX opset {}; supported: opsets {} to {}", opset, kMinOpset,
              max_opset());
  return opset;
}

Graph convert(const onnx::ModelProto& m) {
  Graph g;
  g.opset = default_domain_opset(m);
  const onnx::GraphProto& gp = m.graph();
  std::unordered_set<std::string> init_names;
  for (const onnx::TensorProto& t : gp.initializer()) {
    Tensor v = tensor_of(t, fmt::format("initializer '{}'", t.name()));
    v.impl()->name = t.name();
    init_names.insert(t.name());
    g.initializers.push_back(std::move(v));
  }
  for (const auto& v : gp.input())
    if (!init_names.count(v.name())) g.inputs.push_back(value_info_of(v));
  for (const auto& v : gp.output()) g.outputs.push_back(value_info_of(v));
  for (int i = 0; i < gp.node_size(); ++i)
    g.nodes.push_back(node_of(gp.node(i), static_cast<size_t>(i)));
  // Running statistics are state, not trained; every other float initializer is.
  std::unordered_set<std::string> statistics;
  for (const Node& n : g.nodes)
    if (n.op_type == "BatchNormalization")
      for (size_t i = 3; i < 5 && i < n.inputs.size(); ++i) statistics.insert(n.inputs[i]);
  for (Tensor& t : g.initializers) {
    const bool trainable = is_floating(t.dtype()) && !statistics.count(t.name());
    t.impl()->requires_grad = trainable;
    t.impl()->is_parameter = trainable;
  }
  return g;
}

// ONNX's shape inference runs every node's inference function, and those of
// convolution and pooling divide by window attributes they never check (a
// Conv with strides 0 is a division by zero inside libonnx). So before it
// runs, every node must be an op of the table (the ops whose inference is
// then all that runs) with positive window attributes.
void check_before_shape_inference(const onnx::ModelProto& m, int64_t opset) {
  const onnx::GraphProto& gp = m.graph();
  for (int i = 0; i < gp.node_size(); ++i) {
    const onnx::NodeProto& n = gp.node(i);
    const std::string name = n.name().empty() ? fmt::format("{}#{}", n.op_type(), i) : n.name();
    rule_for(name, n.op_type(), opset);
    for (const onnx::AttributeProto& a : n.attribute()) {
      const bool window = a.name() == "strides" || a.name() == "dilations" ||
                          a.name() == "kernel_shape" || a.name() == "group";
      if (!window) continue;
      bool positive = a.name() != "group" || a.i() > 0;
      for (int64_t v : a.ints()) positive = positive && v > 0;
      SAMBA_CHECK(positive, Status::InvalidArgument,
                  "node '{}' ({}): attribute '{}' must be positive, got {}", name, n.op_type(),
                  a.name(),
                  a.name() == "group" ? std::to_string(a.i())
                                      : dims_str(Dims(a.ints().begin(), a.ints().end())));
    }
  }
}

}  // namespace

int64_t max_opset() {
  const auto& map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = map.find("");
  return it == map.end() ? kMinOpset : it->second.second;
}

std::shared_ptr<const Model> Model::from_bytes(std::span<const uint8_t> bytes,
                                               const std::string& base_dir) {
  SAMBA_CHECK(bytes.size() <= static_cast<size_t>(INT_MAX), Status::Unsupported,
              "the ONNX model is {} bytes; protobuf reads at most 2 GiB (keep large weights as "
              "external data)",
              bytes.size());
  onnx::ModelProto m;
  SAMBA_CHECK(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())), Status::CorruptFile,
              "the {} bytes given are not a valid ONNX ModelProto (the protobuf does not parse; a "
              "truncated or "
              "non-ONNX file?)",
              bytes.size());
  SAMBA_CHECK(m.has_graph(), Status::CorruptFile, "the ONNX model has no graph");
  lift_unchanged_opset(m);
  const int64_t opset = default_domain_opset(m);
  internalize_external_data(m, base_dir);
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    fail(Status::CorruptFile, "the ONNX checker refuses the model: {}", e.what());
  }
  check_before_shape_inference(m, opset);
  guard_window_shape_inference();
  try {
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    fail(Status::InvalidArgument, "ONNX shape inference fails on the model: {}", e.what());
  }
  return std::make_shared<const Model>(convert(m));
}

std::shared_ptr<const Model> Model::from_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  const fs::path dir = fs::path(path).parent_path();
  return from_bytes(bytes, dir.empty() ? std::string(".") : dir.string());
}

}  // namespace samba::onnx_import
