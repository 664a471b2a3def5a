// Semantic checks of PEF programs: each mutation of a valid program is
// refused by verify_program and, written to a file, by parse_pef, with a
// message naming the field and the index. Hand-built FlatBuffers cover what
// the writer never produces: zip bombs, shared-table bombs, unknown kinds.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zstd.h>

#include <algorithm>
#include <functional>
#include <limits>

#include "engine/core/error.h"
#include "engine/pef/blob_codec.h"
#include "engine/pef/pef_generated.h"
#include "engine/pef/pef_log.h"
#include "engine/pef/reader.h"
#include "engine/pef/verify.h"
#include "engine/pef/writer.h"
#include "error_test_util.h"
#include "pef_sample_program.h"

namespace samba::pef {
namespace {

using testing::expect_status;
using testing::message_of;

const ProgramDesc& sample() {
  static const ProgramDesc p = sample::resffn_program();
  return p;
}

int32_t find_tensor(const ProgramDesc& p, const std::string& name) {
  for (size_t i = 0; i < p.tensors.size(); ++i)
    if (p.tensors[i].name == name) return static_cast<int32_t>(i);
  throw std::runtime_error("test bug: no tensor " + name);
}
TensorDesc& tensor(ProgramDesc& p, const std::string& name) {
  return p.tensors[static_cast<size_t>(find_tensor(p, name))];
}
KernelDesc& kernel(ProgramDesc& p, const std::string& name) {
  for (auto& k : p.kernels)
    if (k.name == name) return k;
  throw std::runtime_error("test bug: no kernel " + name);
}

struct Mutation {
  std::string what;
  std::function<void(ProgramDesc&)> mutate;
  std::string expected;  // a part of the message
  Status status = Status::CorruptFile;
};

void PrintTo(const Mutation& m, std::ostream* os) { *os << m.what; }

class PefVerify : public ::testing::TestWithParam<Mutation> {};

TEST_P(PefVerify, RefusedInMemoryAndFromAFile) {
  const Mutation& m = GetParam();
  ProgramDesc p = sample();
  m.mutate(p);
  {
    SCOPED_TRACE("verify_program");
    expect_status(m.status, [&] { verify_program(p); }, {m.expected});
  }
  std::vector<uint8_t> bytes = serialize_pef(p);
  {
    SCOPED_TRACE("parse_pef");
    expect_status(m.status, [&] { parse_pef(bytes); }, {m.expected});
  }
  // The log of a broken program is still written, without crashing.
  EXPECT_FALSE(format_pef_log(p).empty());
}

std::vector<Mutation> mutations() {
  const int64_t big = int64_t{1} << 40;
  return {
      // Indices.
      {"op input out of range",
       [](ProgramDesc& p) { kernel(p, "gemm1_tanh").ops[0].inputs[0] = 999; },
       "kernel 0 'gemm1_tanh' op 0 'linear': input 0 ('x') 999 is out of range (the program has"},
      {"op output negative", [](ProgramDesc& p) { kernel(p, "loss").ops[0].outputs[0] = -1; },
       "op 0 'cross_entropy': output 0 -1 is out of range"},
      {"kernel read out of range", [](ProgramDesc& p) { kernel(p, "loss").reads.push_back(50000); },
       "kernel 3 'loss': reads[2] 50000 is out of range"},
      {"section kernel out of range", [](ProgramDesc& p) { p.sections[1].kernels.push_back(77); },
       "section 1 'fwd': kernels[4] 77 is out of range (the program has 9 kernels)"},
      {"section graph out of range", [](ProgramDesc& p) { p.sections[0].graph = 5; },
       "section 0 'zero_grad': graph 5 is out of range"},
      {"schedule section out of range", [](ProgramDesc& p) { p.schedule[2].section = -3; },
       "schedule call 2 (id 2): section -3 is out of range"},
      {"blob out of range", [](ProgramDesc& p) { tensor(p, "scale").blob = 40; },
       "blob 40 is out of range"},
      {"materializer out of range",
       [](ProgramDesc& p) { tensor(p, "gemm1.weight").materializer = 9; },
       "'gemm1.weight': materializer 9 is out of range"},
      {"grad out of range", [](ProgramDesc& p) { tensor(p, "gemm1.weight").grad = -2; },
       "grad -2 is out of range (the program has"},
      {"alias_of out of range", [](ProgramDesc& p) { tensor(p, "logits.t").alias_of = 1000; },
       "'logits.t': alias_of 1000 is out of range"},
      {"graph section out of range", [](ProgramDesc& p) { p.graphs[1].sections[0] = 12; },
       "graph 1 'predict': sections[0] 12 is out of range"},
      {"graph section of another graph", [](ProgramDesc& p) { p.graphs[1].sections[0] = 0; },
       "sections[0] is section 0 'zero_grad', which belongs to graph 0"},
      {"binding argin out of range",
       [](ProgramDesc& p) { kernel(p, "sgd_gemm1.weight").ops[0].bindings[0].argin = 4; },
       "binding of 'lr' to argin 4 is out of range (the program has 4 argins)"},
      // Shapes and sizes.
      {"overflowing shape",
       [=](ProgramDesc& p) {
         tensor(p, "h1").shape = {big, big};
       },
       "'h1': shape [1099511627776, 1099511627776] of float32 has more elements or bytes than fit "
       "in 64 bits"},
      {"overflowing bytes",
       [=](ProgramDesc& p) {
         tensor(p, "h1").shape = {big, big / 1024 * 1024 / 4096};
       },
       "has more elements or bytes than fit in 64 bits"},
      {"strides of an empty shape that overflow",
       [=](ProgramDesc& p) {
         TensorDesc& t = tensor(p, "loss");
         t.shape = {0, big, big};
         t.strides = {1, 1, 1};
         t.nbytes = 0;
       },
       "'loss': strides [1, 1, 1] on a tensor that owns its bytes"},
      {"negative dim",
       [](ProgramDesc& p) {
         tensor(p, "h1").shape = {8, -32};
       },
       "'h1': shape [8, -32] has negative dim 1"},
      {"rank 17", [](ProgramDesc& p) { tensor(p, "h1").shape = Dims(17, 1); },
       "'h1': rank 17 exceeds the maximum of 16"},
      {"nbytes not numel * size", [](ProgramDesc& p) { tensor(p, "gemm1.weight").nbytes = 100; },
       "'gemm1.weight': nbytes 100 but its 512 elements of float32 take 2048 bytes"},
      {"offset outside arena",
       [](ProgramDesc& p) { tensor(p, "gemm1.weight").arena_offset = p.memory.arena_bytes[0] - 100; },
       "nbytes 2048 exceeds the DDR state area of"},
      {"offset overflow", [](ProgramDesc& p) { tensor(p, "gemm1.weight").arena_offset = UINT64_MAX - 10; },
       "arena_offset 18446744073709551605 + nbytes 2048 exceeds the DDR state area"},
      {"offset splitting an element", [](ProgramDesc& p) { tensor(p, "gemm1.weight").arena_offset += 2; },
       "is not a multiple of the 4 bytes of a float32 element"},
      {"arena smaller than its tensors", [](ProgramDesc& p) { p.memory.peak_bytes -= p.memory.arena_bytes[1] - 10; p.memory.arena_bytes[1] = 10; p.memory.lower_bound_bytes = 0; },
       "'embed.weight': arena_offset 0 + nbytes 1024 exceeds the HBM state area of 10 bytes"},
      {"peak not the sum", [](ProgramDesc& p) { p.memory.peak_bytes += 1; }, "memory plan: peak_bytes"},
      {"lower bound above peak", [](ProgramDesc& p) { p.memory.lower_bound_bytes = p.memory.peak_bytes + 1; },
       "lower_bound_bytes"},
      // Storage relations.
      {"persistent overlap",
       [](ProgramDesc& p) {
         tensor(p, "gemm1.bias").arena_offset = tensor(p, "gemm1.weight").arena_offset + 64;
       },
       "overlap in the DDR arena; persistent tensors need their own bytes"},
      {"intermediate over an output", [](ProgramDesc& p) { tensor(p, "h1").arena_offset = tensor(p, "predict.probs").arena_offset; },
       "'h1' [", },
      {"region disagreement", [](ProgramDesc& p) { tensor(p, "predict.x").arena_offset += 64; p.memory.activation_bytes[2] += 64; p.memory.peak_bytes += 64; },
       "'predict.x': region 'io.x' is HOST"},
      {
          "alias of an alias",
          [](ProgramDesc& p) {
            TensorDesc a = tensor(p, "logits.t");
            a.name = "logits.t.t";
            a.alias_of = find_tensor(p, "logits.t");
            p.tensors.push_back(a);
          },
          "'logits.t.t': alias_of tensor",
      },
      {"alias view past its base", [](ProgramDesc& p) { tensor(p, "logits.t").view_offset = 1; },
       "'logits.t': view (offset 1, strides [1, 4], shape [4, 8]) reads past the 128 bytes of its "
       "base tensor"},
      {"alias with bytes", [](ProgramDesc& p) { tensor(p, "logits.t").nbytes = 128; },
       "an alias owns no bytes"},
      {"alias stride count", [](ProgramDesc& p) { tensor(p, "logits.t").strides = {1}; },
       "1 strides for a shape of rank 2"},
      {"owner strides not contiguous",
       [](ProgramDesc& p) {
         tensor(p, "h1").strides = {1, 8};
       },
       "must be empty or the contiguous strides of shape [8, 32]"},
      {"blob size mismatch", [](ProgramDesc& p) { p.blobs[0].data.push_back(1); },
       "'gemm1.bias': blob 0 holds 129 bytes, but the tensor has nbytes 128"},
      {"blob and materializer", [](ProgramDesc& p) { tensor(p, "gemm1.bias").materializer = 0; },
       "has both blob 0 and materializer 0"},
      {"materializer on an input", [](ProgramDesc& p) { tensor(p, "y").materializer = 1; },
       "only parameters, buffers and optimizer state"},
      {"parameter grad not a gradient",
       [](ProgramDesc& p) { tensor(p, "gemm1.weight").grad = find_tensor(p, "h1"); },
       "'gemm1.weight': grad tensor"},
      {"batch dim beyond rank", [](ProgramDesc& p) { tensor(p, "y").batch_dim = 1; },
       "'y': batch_dim 1 is not -1 or a dim"},
      {"owner unknown", [](ProgramDesc& p) { tensor(p, "gemm1.weight.grad").owner = "nope"; },
       "owner 'nope' is not a tensor"},
      // Enum codes.
      {"dtype code", [](ProgramDesc& p) { tensor(p, "h1").dtype = static_cast<DType>(42); },
       "'h1': dtype code 42 is not a dtype (0..9)"},
      {"role code", [](ProgramDesc& p) { tensor(p, "h1").role = static_cast<TensorRole>(10); },
       "'h1': role code 10 is not a role"},
      {"mem code", [](ProgramDesc& p) { tensor(p, "h1").mem = static_cast<MemType>(3); },
       "'h1': mem code 3 is not a memory type"},
      {"section type code",
       [](ProgramDesc& p) { p.sections[2].type = static_cast<SectionType>(6); },
       "type code 6 is not a section type"},
      {"mapping code", [](ProgramDesc& p) { p.graphs[0].mapping = static_cast<Mapping>(2); },
       "mapping code 2 is not a mapping"},
      {"argin kind code", [](ProgramDesc& p) { p.argins[0].kind = static_cast<ArginKind>(9); },
       "argin 0 'sgd.lr': kind code 9"},
      {"dtype attribute code",
       [](ProgramDesc& p) {
         kernel(p, "zero_grads").ops[2].attrs.set("dtype", static_cast<DType>(77));
       },
       "attribute 'dtype': dtype code 77 is not a dtype"},
      // Names.
      {"duplicate tensor name", [](ProgramDesc& p) { tensor(p, "h1").name = "gemm1.weight"; },
       "'gemm1.weight': name already used by tensor"},
      {"empty tensor name", [](ProgramDesc& p) { tensor(p, "h1").name = ""; }, ": name is empty"},
      {"duplicate argin", [](ProgramDesc& p) { p.argins[1].name = "sgd.lr"; },
       "argin 1 'sgd.lr': name already used by argin 0"},
      {"argin default outside the attribute's range", [](ProgramDesc& p) { p.argins[0].default_value = -1.0; },
       "the default of attribute 'lr': argin 'sgd.lr'"},
      {"duplicate section id", [](ProgramDesc& p) { p.sections[1].id = 0; },
       "id 0 already used by section 0"},
      {"duplicate call id", [](ProgramDesc& p) { p.schedule[1].id = 0; },
       "call id 0 is not its position 1"},
      {"duplicate graph name", [](ProgramDesc& p) { p.graphs[1].name = "train"; },
       "graph 1 'train': name already used by graph 0"},
      {"duplicate metadata key", [](ProgramDesc& p) { p.metadata.emplace_back("model", "again"); },
       "key 'model' already used"},
      {"empty program name", [](ProgramDesc& p) { p.name.clear(); }, "program: name is empty"},
      {"opt level", [](ProgramDesc& p) { p.opt_level = 9; }, "opt_level 9 is not 0..3"},
      // Ops against the registry.
      {"unknown op", [](ProgramDesc& p) { kernel(p, "loss").ops[0].op = "cross_entropyy"; },
       "op 0 'cross_entropyy'"},
      {"unknown attribute",
       [](ProgramDesc& p) { kernel(p, "dropout_0").ops[0].attrs.set("bogus", int64_t{1}); },
       "op 'dropout' has no attribute 'bogus'"},
      {"attribute of the wrong type",
       [](ProgramDesc& p) { kernel(p, "dropout_0").ops[0].attrs.set("p", std::string("high")); },
       "'p'"},
      {"missing required attribute",
       [](ProgramDesc& p) { kernel(p, "zero_grads").ops[0].attrs = Attrs{}; },
       "op 'zeros' requires attribute 'shape'"},
      {"too many inputs",
       [](ProgramDesc& p) { kernel(p, "gemm1_tanh").ops[1].inputs.push_back(0); },
       "op 1 'tanh': 2 inputs, but the op takes 1"},
      {"too few inputs", [](ProgramDesc& p) { kernel(p, "loss").ops[0].inputs.resize(1); },
       "1 inputs, but the op takes 2 to 3"},
      {"required input absent",
       [](ProgramDesc& p) { kernel(p, "gemm1_tanh").ops[0].inputs[1] = -1; },
       "input 1 ('weight') -1 is out of range"},
      {"two outputs", [](ProgramDesc& p) { kernel(p, "loss").ops[0].outputs.push_back(0); },
       "2 outputs, but the op gives 1"},
      {"binding unknown attribute",
       [](ProgramDesc& p) { kernel(p, "dropout_0").ops[0].bindings[0].attr = "rate"; },
       "binding names attribute 'rate', which op 'dropout' does not have"},
      {"binding int attribute to float argin",
       [](ProgramDesc& p) { kernel(p, "dropout_0").ops[0].bindings[1].argin = 0; },
       "attribute 'seed' (int) cannot take argin 0 'sgd.lr'"},
      {"input not in kernel reads",
       [](ProgramDesc& p) {
         kernel(p, "gemm1_tanh").reads.erase(kernel(p, "gemm1_tanh").reads.begin());
       },
       "input 0 ('x') tensor 0 'x' is missing from the kernel's reads and writes"},
      {"output not in kernel writes", [](ProgramDesc& p) { kernel(p, "loss").writes.clear(); },
       "output 0 tensor"},
      {"kernel without ops", [](ProgramDesc& p) { kernel(p, "loss").ops.clear(); },
       "kernel 3 'loss': has no ops"},
      // Argins, graphs, materializers.
      {"argin default not a number",
       [](ProgramDesc& p) { p.argins[0].default_value = std::string("x"); },
       "is not an int or a float"},
      {"dropout seed float", [](ProgramDesc& p) { p.argins[3].default_value = 1.5; },
       "a dropout seed needs an int default"},
      {"graph input of wrong role",
       [](ProgramDesc& p) { p.graphs[0].inputs[0] = find_tensor(p, "h1"); },
       "graph 0 'train': inputs[0] is tensor"},
      {"graph output grads count", [](ProgramDesc& p) { p.graphs[0].output_grads.clear(); },
       "0 output_grads for 1 outputs"},
      {"graph parameter of wrong role",
       [](ProgramDesc& p) { p.graphs[0].parameters.push_back(find_tensor(p, "scale")); },
       "a constant, not a parameter"},
      {"micro batch above batch", [](ProgramDesc& p) { p.graphs[0].micro_batch_size = 64; },
       "micro-batched, but graph 0 'train' has micro_batch_size 64 and batch_size 8"},
      // Each op's own inference against the tensors the PEF gives it.
      {"gemm output slot smaller than inferred",
       [](ProgramDesc& p) {
         TensorDesc& h1 = tensor(p, "h1");
         h1.shape = {8, 16};
         h1.nbytes = 8 * 16 * 4;
       },
       "kernel 0 'gemm1_tanh' op 0 'linear': output 0 tensor 14 'h1' is float32 [8, 16], but the "
       "op infers float32 [8, 32]"},
      {"swapped gemm operands",
       [](ProgramDesc& p) { std::swap(kernel(p, "gemm1_tanh").ops[0].inputs[0],
                                      kernel(p, "gemm1_tanh").ops[0].inputs[1]); },
       "kernel 0 'gemm1_tanh' op 0 'linear': "},
      {"output dtype changed", [](ProgramDesc& p) { tensor(p, "t1").dtype = DType::Int32; },
       "kernel 0 'gemm1_tanh' op 1 'tanh': output 0 tensor 15 't1' is int32 [8, 32], but the op "
       "infers float32 [8, 32]"},
      {"elementwise output of lower rank",
       [](ProgramDesc& p) { tensor(p, "t1").shape = {8 * 32}; },
       "op 1 'tanh': output 0 tensor 15 't1' is float32 [256], but the op infers float32 [8, 32]"},
      {"strided view as an op output",
       [](ProgramDesc& p) {
         KernelDesc& k = kernel(p, "zero_grads");
         k.ops[2].attrs.set("shape", std::vector<int64_t>{4, 8});
         k.ops[2].outputs = {find_tensor(p, "logits.t")};
         k.writes.push_back(find_tensor(p, "logits.t"));
       },
       "is a view with strides [1, 4]; the op writes contiguous [8, 1]"},
      // Every operand of every kernel stays inside its buffer.
      {"view of another dtype",
       [](ProgramDesc& p) { tensor(p, "logits.t").dtype = DType::Int8; },
       "'logits.t': dtype int8 differs from its base tensor 16 'logits''s float32; a view cannot "
       "reinterpret its base's bytes"},
      {"strided view into an op that reads contiguous inputs",
       [](ProgramDesc& p) {
         TensorDesc t = tensor(p, "logits.t");
         t.name = "dropped.t";
         t.alias_of = find_tensor(p, "dropped");
         t.shape = {8, 4};
         t.strides = {1, 8};  // inside the 32 elements of its base, but not contiguous
         p.tensors.push_back(t);
         kernel(p, "loss").ops[0].inputs[0] = static_cast<int32_t>(p.tensors.size() - 1);
         kernel(p, "loss").reads.push_back(static_cast<int32_t>(p.tensors.size() - 1));
       },
       "kernel 3 'loss' op 0 'cross_entropy': input 0 ('input') tensor 24 'dropped.t' is a view "
       "with strides [1, 8], but op 'cross_entropy' reads its inputs contiguous ([4, 1])"},
      {"view op as a kernel's op",
       [](ProgramDesc& p) { kernel(p, "loss").ops[0].op = "reshape"; },
       "kernel 3 'loss' op 0 'reshape': op 'reshape' is a view and has no kernel"},
      {"binding an attribute fixed at compile time",
       [](ProgramDesc& p) { kernel(p, "dropout_0").ops[0].bindings.push_back({"offset", 3}); },
       "binds attribute 'offset' to argin 3 'dropout_0.seed', but op 'dropout' fixes 'offset' at "
       "compile time"},
      {"binding a rate to a hyperparameter argin",
       [](ProgramDesc& p) { kernel(p, "dropout_0").ops[0].bindings[0].argin = 0; },
       "attribute 'p' takes a dropout_rate argin, but argin 0 'sgd.lr' is a hyperparam"},
      {"binding an attribute twice",
       [](ProgramDesc& p) { kernel(p, "dropout_0").ops[0].bindings.push_back({"p", 2}); },
       "kernel 2 'dropout_0' op 0 'dropout': attribute 'p' is bound to an argin twice"},
      {"kernel reading a tensor twice",
       [](ProgramDesc& p) { kernel(p, "loss").reads.push_back(kernel(p, "loss").reads[0]); },
       "kernel 3 'loss': reads[2] lists tensor 18 'dropped' again; a kernel lists each tensor it "
       "reads once"},
      {"kernel writing a tensor twice",
       [](ProgramDesc& p) { kernel(p, "loss").writes.push_back(kernel(p, "loss").writes[0]); },
       "kernel 3 'loss': writes[1] lists tensor 12 'loss' again"},
      {"schedule calling a section twice",
       [](ProgramDesc& p) { p.schedule.push_back({5, 4}); },
       "schedule call 5 (id 5): calls section 4 'predict_fwd' again (call 4); the schedule calls "
       "each section once"},
      {"kernel in two sections",
       [](ProgramDesc& p) { p.sections[4].kernels.push_back(p.sections[1].kernels[0]); },
       "section 4 'predict_fwd': kernels[1] is kernel 0 'gemm1_tanh', already in section 1 'fwd'; "
       "a kernel belongs to one section"},
      {"section listing a kernel twice",
       [](ProgramDesc& p) { p.sections[1].kernels.push_back(p.sections[1].kernels[1]); },
       "section 1 'fwd': kernels[4] is kernel 1 again (kernels[1]); a section runs a kernel once"},
      {"micro-batch slice past a tensor held for fewer micro-batches",
       [](ProgramDesc& p) {
         // predict runs 4 micro-batches, but x is held for train's 2.
         p.graphs[1].micro_batch_size = 2;
         p.sections[4].micro_batched = true;
         kernel(p, "predict").ops[0].inputs[0] = find_tensor(p, "x");
         kernel(p, "predict").reads.push_back(find_tensor(p, "x"));
       },
       "section 4 'predict_fwd': runs 4 micro-batches of graph 1 'predict', but its kernel 8 "
       "'predict' touches tensor 0 'x', held for the 2 micro-batches of graph 0 'train'"},
      {"micro-batch rows overflowing a dim",
       [](ProgramDesc& p) {
         TensorDesc t = tensor(p, "y");
         t.name = "y.empty";
         t.shape = {int64_t{1} << 62, 0};
         t.nbytes = 0;
         p.tensors.push_back(t);
         p.graphs[0].inputs.push_back(static_cast<int32_t>(p.tensors.size() - 1));
       },
       "graph 0 'train': tensor 24 'y.empty' has 4611686018427387904 rows per micro-batch; 2 "
       "micro-batches of them overflow a dim"},
      // Micro-batch fields the runtime divides by and multiplies with.
      {"micro-batched section without micro batch",
       [](ProgramDesc& p) { p.graphs[0].micro_batch_size = 0; },
       "micro-batched, but graph 0 'train' has micro_batch_size 0 and batch_size 8"},
      {"micro batch not dividing batch", [](ProgramDesc& p) { p.graphs[0].micro_batch_size = 3; },
       "micro_batch_size 3 does not divide batch_size 8"},
      {"batch buffer size wrapping",
       [](ProgramDesc& p) {
         p.graphs[0].batch_size = int64_t{1} << 61;
         p.graphs[0].micro_batch_size = 2;
       },
       "micro-batches overflows a buffer size"},
      // Call ids index the schedule: each is its position.
      {"call id 2^30", [](ProgramDesc& p) { p.schedule[1].id = 1 << 30; },
       "schedule call 1 (id 1073741824): call id 1073741824 is not its position 1"},
      {"call id INT_MIN",
       [](ProgramDesc& p) { p.schedule[1].id = std::numeric_limits<int32_t>::min(); },
       "call id -2147483648 is not its position 1"},
      {"call id 1000", [](ProgramDesc& p) { p.schedule[0].id = 1000; },
       "call id 1000 is not its position 0"},
      {"call id -1", [](ProgramDesc& p) { p.schedule[0].id = -1; },
       "call id -1 is not its position 0"},
      {"empty materializer kind", [](ProgramDesc& p) { p.materializers[1].kind.clear(); },
       "materializer 1: kind is empty"},
      {"materializer parameter without value",
       [](ProgramDesc& p) { p.materializers[0].params.set("a", std::monostate{}); },
       "parameter 'a' has no value"},
  };
}

INSTANTIATE_TEST_SUITE_P(Mutations, PefVerify, ::testing::ValuesIn(mutations()),
                         [](const ::testing::TestParamInfo<Mutation>& info) {
                           std::string n;
                           for (char c : info.param.what)
                             n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

// ---- files the writer never produces ------------------------------------------------------

namespace fb = samba::pef::fb;
using flatbuffers::FlatBufferBuilder;

// A minimal program holding one blob with the fields given directly, and
// (when `attach`) one Constant tensor of `nbytes` bytes taking its contents.
// `plan_bytes` is the memory plan's size (by default the tensor's); `copies`
// repeats the blob.
std::vector<uint8_t> one_blob_file(uint64_t nbytes, uint64_t declared,
                                   const std::vector<uint8_t>& stored, fb::Compression compression,
                                   uint64_t checksum, bool attach = true,
                                   uint64_t plan_bytes = UINT64_MAX, int copies = 1) {
  FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::Blob>> blobs;
  for (int i = 0; i < copies; ++i)
    blobs.push_back(fb::CreateBlob(fbb, compression, declared, checksum, fbb.CreateVector(stored)));
  if (plan_bytes == UINT64_MAX) plan_bytes = nbytes;
  std::vector<int64_t> shape = {static_cast<int64_t>(nbytes)};
  auto tensor =
      fb::CreateTensorDirect(fbb, "c", fb::DType::UInt8, &shape, fb::TensorRole::Constant,
                             fb::MemType::DDR, 0, nbytes, nullptr, -1, nullptr, 0, attach ? 0 : -1);
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors = {tensor};
  uint64_t arenas[3] = {plan_bytes, 0, 0};
  auto arena_v = fbb.CreateVector(arenas, 3);
  auto memory = fb::CreateMemoryPlan(fbb, arena_v, plan_bytes, 0);
  auto root =
      fb::CreateProgramDirect(fbb, kFormatMajor, kFormatMinor, "0.1", "one_blob", 1, &tensors,
                              nullptr, nullptr, nullptr, nullptr, &blobs, nullptr, nullptr, memory);
  fb::FinishProgramBuffer(fbb, root);
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

// A program with no tensors whose only materializer has the given params.
std::vector<uint8_t> params_file(
    const std::function<flatbuffers::Offset<fb::Attr>(FlatBufferBuilder&)>& make_attr) {
  FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::Attr>> params = {make_attr(fbb)};
  auto mat = fb::CreateMaterializerDirect(fbb, "zeros", &params);
  std::vector<flatbuffers::Offset<fb::Materializer>> mats = {mat};
  uint64_t arenas[3] = {0, 0, 0};
  auto memory = fb::CreateMemoryPlan(fbb, fbb.CreateVector(arenas, 3), 0, 0);
  auto root =
      fb::CreateProgramDirect(fbb, kFormatMajor, kFormatMinor, "0.1", "params", 1, nullptr, nullptr,
                              nullptr, nullptr, nullptr, nullptr, &mats, nullptr, memory);
  fb::FinishProgramBuffer(fbb, root);
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

std::vector<uint8_t> zstd_of(const std::vector<uint8_t>& raw) {
  std::vector<uint8_t> out(ZSTD_compressBound(raw.size()));
  size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string refusal(const std::vector<uint8_t>& bytes, Status want = Status::CorruptFile) {
  expect_status(want, [&] { parse_pef(bytes); });
  return message_of([&] { parse_pef(bytes); });
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

TEST(PefCrafted, HandBuiltBlobFileIsAccepted) {
  std::vector<uint8_t> raw(1000, 7);
  ProgramDesc p =
      parse_pef(one_blob_file(1000, 1000, zstd_of(raw), fb::Compression::Zstd, blob_checksum(raw)));
  ASSERT_EQ(p.blobs.size(), 1u);
  EXPECT_EQ(p.blobs[0].data, raw);
}

TEST(PefCrafted, ZipBombStopsAtTheDeclaredSize) {
  std::vector<uint8_t> zeros(64u << 20, 0);  // 64 MiB of zeros: a few KiB of zstd
  std::vector<uint8_t> frame = zstd_of(zeros);
  ASSERT_LT(frame.size(), 64u << 10);
  std::vector<uint8_t> head(zeros.begin(), zeros.begin() + 1000);
  EXPECT_HAS(refusal(one_blob_file(1000, 1000, frame, fb::Compression::Zstd, blob_checksum(head))),
             "blob 0: decompresses to more than its declared 1000 bytes");
}

TEST(PefCrafted, HugeDeclaredSizeCostsNothing) {
  std::vector<uint8_t> raw(1000, 3);
  uint64_t huge = uint64_t{1} << 40;
  // Attached to a tensor: refused from the sizes alone.
  EXPECT_HAS(
      refusal(one_blob_file(1000, huge, zstd_of(raw), fb::Compression::Zstd, blob_checksum(raw))),
      "tensor 0 'c': blob 0 holds 1099511627776 bytes, but the tensor has nbytes 1000");
  // Not attached: never decompressed, so never a cost (under ASan, a 1 TiB
  // allocation would abort the test); the blob is left empty.
  ProgramDesc p = parse_pef(
      one_blob_file(1000, huge, zstd_of(raw), fb::Compression::Zstd, blob_checksum(raw), false));
  ASSERT_EQ(p.blobs.size(), 1u);
  EXPECT_TRUE(p.blobs[0].data.empty());
}

// One zstd frame of `n` zeros, compressed in pieces so that neither the
// test nor the frame holds more than a few MiB.
std::vector<uint8_t> zeros_frame(uint64_t n) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  const std::vector<uint8_t> piece(1u << 20, 0);
  std::vector<uint8_t> out;
  std::vector<uint8_t> buf(ZSTD_CStreamOutSize());
  for (uint64_t done = 0; done < n;) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(piece.size(), n - done));
    done += len;
    ZSTD_inBuffer in{piece.data(), len, 0};
    const ZSTD_EndDirective mode = done == n ? ZSTD_e_end : ZSTD_e_continue;
    for (bool finished = false; !finished;) {
      ZSTD_outBuffer ob{buf.data(), buf.size(), 0};
      const size_t left = ZSTD_compressStream2(cctx, &ob, &in, mode);
      EXPECT_FALSE(ZSTD_isError(left));
      out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(ob.pos));
      finished = ZSTD_isError(left) || (mode == ZSTD_e_end ? left == 0 : in.pos == in.size);
    }
  }
  ZSTD_freeCCtx(cctx);
  return out;
}

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// A 1 GiB frame of zeros takes a few dozen KiB: attached to a tensor of a
// plan far smaller, it is refused from the sizes, before any decompression.
TEST(PefCrafted, ZstdBombPastTheMemoryPlanIsRefusedUndecoded) {
  const uint64_t gib = uint64_t{1} << 30;
  const std::vector<uint8_t> frame = zeros_frame(gib);
  ASSERT_LT(frame.size(), 256u << 10);
  const long before = peak_rss_kib();
  EXPECT_HAS(refusal(one_blob_file(gib, gib, frame, fb::Compression::Zstd, 0, true, 1u << 20)),
             "blobs: the blobs tensors use decode to more than the memory plan's peak of 1048576 "
             "bytes (blob 0 of 1073741824 bytes, for tensor 0 'c', goes past it)");
  EXPECT_LT(peak_rss_kib() - before, 256 << 10) << "KiB more at the peak";
}

// Blobs no tensor uses are never decompressed, however much they declare.
TEST(PefCrafted, UnusedZstdBombsAreNotDecoded) {
  const uint64_t half_gib = uint64_t{1} << 29;
  const std::vector<uint8_t> frame = zeros_frame(half_gib);
  const long before = peak_rss_kib();
  ProgramDesc p = parse_pef(one_blob_file(1000, half_gib, frame, fb::Compression::Zstd, 0, false,
                                          UINT64_MAX, 4));
  ASSERT_EQ(p.blobs.size(), 4u);
  for (const BlobDesc& b : p.blobs) EXPECT_TRUE(b.data.empty());
  EXPECT_LT(peak_rss_kib() - before, 256 << 10) << "KiB more at the peak";
}

TEST(PefCrafted, DamagedZstdFrames) {
  std::vector<uint8_t> raw = sample::float_bytes(4096, false);
  std::vector<uint8_t> frame = zstd_of(raw);
  uint64_t sum = blob_checksum(raw);
  std::vector<uint8_t> cut(frame.begin(), frame.end() - 5);
  std::string msg = refusal(one_blob_file(raw.size(), raw.size(), cut, fb::Compression::Zstd, sum));
  EXPECT_HAS(msg, "blob 0: ");
  std::vector<uint8_t> trailing = frame;
  trailing.push_back(0);
  EXPECT_HAS(refusal(one_blob_file(raw.size(), raw.size(), trailing, fb::Compression::Zstd, sum)),
             "blob 0: 1 bytes follow the zstd frame");
  std::vector<uint8_t> garbage(frame.size(), 0x5a);
  EXPECT_HAS(refusal(one_blob_file(raw.size(), raw.size(), garbage, fb::Compression::Zstd, sum)),
             "blob 0: the zstd data is damaged");
  EXPECT_HAS(refusal(one_blob_file(raw.size(), raw.size(), frame, fb::Compression::Zstd, sum ^ 1)),
             "blob 0: checksum mismatch");
  std::vector<uint8_t> short_raw(raw.begin(), raw.end() - 1);
  EXPECT_HAS(refusal(one_blob_file(raw.size(), raw.size(), short_raw, fb::Compression::None, sum)),
             "blob 0: stored uncompressed with 16383 bytes, declared 16384");
  EXPECT_HAS(
      refusal(one_blob_file(raw.size(), raw.size(), raw, static_cast<fb::Compression>(9), sum)),
      "blob 0: compression code 9 is not one this runtime knows");
}

TEST(PefCrafted, UnknownUnionKindAndMissingValue) {
  auto unknown = params_file([](FlatBufferBuilder& fbb) {
    auto v = fb::CreateIntValue(fbb, 5);
    return fb::CreateAttrDirect(fbb, "a", static_cast<fb::Value>(20), v.Union());
  });
  EXPECT_HAS(
      refusal(unknown),
      "materializer 0 'zeros' attribute 'a': value kind code 20 is not one this runtime knows");
  auto missing = params_file(
      [](FlatBufferBuilder& fbb) { return fb::CreateAttrDirect(fbb, "a", fb::Value::IntValue); });
  EXPECT_HAS(refusal(missing), "attribute 'a': value of kind IntValue has no data");
  auto twice = [] {
    FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<fb::Attr>> params = {
        fb::CreateAttrDirect(fbb, "a", fb::Value::IntValue, fb::CreateIntValue(fbb, 1).Union()),
        fb::CreateAttrDirect(fbb, "a", fb::Value::IntValue, fb::CreateIntValue(fbb, 2).Union())};
    std::vector<flatbuffers::Offset<fb::Materializer>> mats = {
        fb::CreateMaterializerDirect(fbb, "zeros", &params)};
    uint64_t arenas[3] = {0, 0, 0};
    auto memory = fb::CreateMemoryPlan(fbb, fbb.CreateVector(arenas, 3), 0, 0);
    fb::FinishProgramBuffer(
        fbb, fb::CreateProgramDirect(fbb, 1, 0, "", "p", 1, nullptr, nullptr, nullptr, nullptr,
                                     nullptr, nullptr, &mats, nullptr, memory));
    return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  }();
  EXPECT_HAS(refusal(twice), "attribute 'a' appears twice");
}

// One op call referenced a thousand times, holding one attribute referenced
// a thousand times: a small file that would make the verifier visit a
// million tables. The table limit refuses it.
TEST(PefCrafted, SharedTableBombRefused) {
  FlatBufferBuilder fbb;
  auto attr = fb::CreateAttrDirect(fbb, "alpha", fb::Value::FloatValue,
                                   fb::CreateFloatValue(fbb, 1).Union());
  std::vector<flatbuffers::Offset<fb::Attr>> attrs(1000, attr);
  auto call = fb::CreateOpCallDirect(fbb, "add", &attrs);
  std::vector<flatbuffers::Offset<fb::OpCall>> ops(1000, call);
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels = {
      fb::CreateKernelDirect(fbb, "k", fb::Fusion::Opaque, &ops)};
  fb::FinishProgramBuffer(fbb,
                          fb::CreateProgramDirect(fbb, 1, 0, "", "bomb", 1, nullptr, &kernels));
  std::vector<uint8_t> bytes(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  ASSERT_LT(bytes.size(), 64u << 10);
  EXPECT_HAS(refusal(bytes), "the FlatBuffers structure is damaged");
}

TEST(PefCrafted, ArenaCountAndFusionCode) {
  FlatBufferBuilder fbb;
  uint64_t arenas[2] = {0, 0};
  auto memory = fb::CreateMemoryPlan(fbb, fbb.CreateVector(arenas, 2), 0, 0);
  fb::FinishProgramBuffer(
      fbb, fb::CreateProgramDirect(fbb, 1, 0, "", "p", 1, nullptr, nullptr, nullptr, nullptr,
                                   nullptr, nullptr, nullptr, nullptr, memory));
  EXPECT_HAS(refusal({fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()}),
             "memory plan: 2 arena sizes, expected 3");
  FlatBufferBuilder fk;
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels = {
      fb::CreateKernelDirect(fk, "k", static_cast<fb::Fusion>(9))};
  fb::FinishProgramBuffer(fk, fb::CreateProgramDirect(fk, 1, 0, "", "p", 1, nullptr, &kernels));
  EXPECT_HAS(refusal({fk.GetBufferPointer(), fk.GetBufferPointer() + fk.GetSize()}),
             "kernel 0 'k': fusion code 9 is not a fusion class");
}

}  // namespace
}  // namespace samba::pef
