#include "engine/pef/writer.h"

#include <flatbuffers/flatbuffers.h>

#include <span>
#include <variant>

#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/io/atomic_file.h"
#include "engine/pef/blob_codec.h"
#include "engine/pef/pef_generated.h"

namespace samba::pef {
namespace {

namespace fb = samba::pef::fb;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

// Fusion is stored by its position in samba::Fusion's declaration.
fb::Fusion to_fb(Fusion f) {
  switch (f) {
    case Fusion::Elementwise:
      return fb::Fusion::Elementwise;
    case Fusion::Reduction:
      return fb::Fusion::Reduction;
    case Fusion::Contraction:
      return fb::Fusion::Contraction;
    case Fusion::View:
      return fb::Fusion::View;
    case Fusion::Creation:
      return fb::Fusion::Creation;
    case Fusion::Opaque:
      return fb::Fusion::Opaque;
  }
  return static_cast<fb::Fusion>(static_cast<uint8_t>(f));
}

// Builds one program into a FlatBufferBuilder. Empty strings and vectors are
// left out (a reader sees them as empty), and names that repeat (op and
// attribute names) are stored once.
class PefBuilder {
 public:
  explicit PefBuilder(FlatBufferBuilder& fbb) : fbb_(fbb) {}

  Offset<fb::Program> build(const ProgramDesc& p, const std::vector<EncodedBlob>& blobs) {
    // Children first: FlatBuffers builds back to front.
    std::vector<Offset<fb::Blob>> blob_offs;
    blob_offs.reserve(p.blobs.size());
    for (size_t i = 0; i < p.blobs.size(); ++i)
      blob_offs.push_back(blob(p.blobs[i].data, blobs[i]));

    std::vector<Offset<fb::Tensor>> tensors;
    tensors.reserve(p.tensors.size());
    for (const auto& t : p.tensors) tensors.push_back(tensor(t));
    std::vector<Offset<fb::Kernel>> kernels;
    kernels.reserve(p.kernels.size());
    for (const auto& k : p.kernels) kernels.push_back(kernel(k));
    std::vector<Offset<fb::Section>> sections;
    for (const auto& s : p.sections) sections.push_back(section(s));
    std::vector<fb::Call> calls;
    for (const auto& c : p.schedule) calls.emplace_back(c.id, c.section);
    std::vector<Offset<fb::Argin>> argins;
    for (const auto& a : p.argins) argins.push_back(argin(a));
    std::vector<Offset<fb::Materializer>> mats;
    for (const auto& m : p.materializers) {
      auto kind = str(m.kind);
      auto params = attrs(m.params);
      mats.push_back(fb::CreateMaterializer(fbb_, kind, params));
    }
    std::vector<Offset<fb::Graph>> graphs;
    for (const auto& g : p.graphs) graphs.push_back(graph(g));
    std::vector<Offset<fb::MetadataEntry>> metadata;
    for (const auto& [k, v] : p.metadata) {
      auto ko = str(k);
      auto vo = str(v);
      metadata.push_back(fb::CreateMetadataEntry(fbb_, ko, vo));
    }
    auto arenas = fbb_.CreateVector(p.memory.arena_bytes, kNumMemTypes);
    auto activation = fbb_.CreateVector(p.memory.activation_bytes, kNumMemTypes);
    auto memory =
        fb::CreateMemoryPlan(fbb_, arenas, p.memory.peak_bytes, p.memory.lower_bound_bytes, activation);

    auto compiler_version = str(p.compiler_version);
    auto name = str(p.name);
    auto tensors_v = vec(tensors);
    auto kernels_v = vec(kernels);
    auto sections_v = vec(sections);
    auto schedule_v = calls.empty() ? Offset<flatbuffers::Vector<const fb::Call*>>()
                                    : fbb_.CreateVectorOfStructs(calls);
    auto argins_v = vec(argins);
    auto blobs_v = vec(blob_offs);
    auto mats_v = vec(mats);
    auto graphs_v = vec(graphs);
    auto metadata_v = vec(metadata);
    auto data_parallel = p.data_parallel.world_size > 0 ? data_parallel_table(p.data_parallel)
                                                        : Offset<fb::DataParallel>();
    return fb::CreateProgram(fbb_, p.format_major, p.format_minor, compiler_version, name,
                             p.opt_level, tensors_v, kernels_v, sections_v, schedule_v, argins_v,
                             blobs_v, mats_v, graphs_v, memory, metadata_v, data_parallel);
  }

  Offset<fb::DataParallel> data_parallel_table(const DataParallelDesc& dp) {
    std::vector<Offset<fb::ReduceBucket>> buckets;
    for (const auto& b : dp.buckets) {
      auto grads = fbb_.CreateVector(b.gradients);
      buckets.push_back(fb::CreateReduceBucket(fbb_, grads, static_cast<fb::MemType>(b.mem),
                                               static_cast<fb::DType>(b.dtype), b.arena_offset,
                                               b.nbytes));
    }
    auto buckets_v = vec(buckets);
    return fb::CreateDataParallel(fbb_, dp.world_size, dp.bucket_bytes, buckets_v);
  }

 private:
  Offset<flatbuffers::String> str(const std::string& s) {
    return s.empty() ? Offset<flatbuffers::String>() : fbb_.CreateString(s);
  }
  Offset<flatbuffers::String> shared_str(const std::string& s) {
    return s.empty() ? Offset<flatbuffers::String>() : fbb_.CreateSharedString(s);
  }
  template <typename T>
  Offset<flatbuffers::Vector<T>> vec(const std::vector<T>& v) {
    return v.empty() ? Offset<flatbuffers::Vector<T>>() : fbb_.CreateVector(v);
  }
  Offset<flatbuffers::Vector<Offset<flatbuffers::String>>> strings(
      const std::vector<std::string>& v) {
    if (v.empty()) return {};
    std::vector<Offset<flatbuffers::String>> offs;
    offs.reserve(v.size());
    for (const auto& s : v) offs.push_back(fbb_.CreateString(s));
    return fbb_.CreateVector(offs);
  }

  // Writes an attribute value; `type` receives its union tag.
  Offset<void> value(const AttrValue& v, fb::Value& type) {
    struct Visitor {
      PefBuilder& b;
      fb::Value& type;
      Offset<void> operator()(std::monostate) const {
        type = fb::Value::NONE;
        return {};
      }
      Offset<void> operator()(int64_t x) const {
        type = fb::Value::IntValue;
        return fb::CreateIntValue(b.fbb_, x).Union();
      }
      Offset<void> operator()(double x) const {
        type = fb::Value::FloatValue;
        return fb::CreateFloatValue(b.fbb_, x).Union();
      }
      Offset<void> operator()(bool x) const {
        type = fb::Value::BoolValue;
        return fb::CreateBoolValue(b.fbb_, x).Union();
      }
      Offset<void> operator()(const std::string& x) const {
        type = fb::Value::StringValue;
        auto s = b.fbb_.CreateSharedString(x);
        return fb::CreateStringValue(b.fbb_, s).Union();
      }
      Offset<void> operator()(const std::vector<int64_t>& x) const {
        type = fb::Value::IntsValue;
        auto v = b.fbb_.CreateVector(x);
        return fb::CreateIntsValue(b.fbb_, v).Union();
      }
      Offset<void> operator()(const std::vector<double>& x) const {
        type = fb::Value::FloatsValue;
        auto v = b.fbb_.CreateVector(x);
        return fb::CreateFloatsValue(b.fbb_, v).Union();
      }
      Offset<void> operator()(DType x) const {
        type = fb::Value::DTypeValue;
        return fb::CreateDTypeValue(b.fbb_, static_cast<fb::DType>(x)).Union();
      }
    };
    return std::visit(Visitor{*this, type}, v);
  }

  Offset<flatbuffers::Vector<Offset<fb::Attr>>> attrs(const Attrs& a) {
    if (a.items().empty()) return {};
    std::vector<Offset<fb::Attr>> offs;
    offs.reserve(a.items().size());
    for (const auto& [n, v] : a.items()) {
      fb::Value type = fb::Value::NONE;
      auto vo = value(v, type);
      auto no = shared_str(n);
      offs.push_back(fb::CreateAttr(fbb_, no, type, vo));
    }
    return fbb_.CreateVector(offs);
  }

  Offset<fb::Tensor> tensor(const TensorDesc& t) {
    auto name = str(t.name);
    auto shape = vec(t.shape);
    auto region = str(t.region);
    auto strides = vec(t.strides);
    auto owner = str(t.owner);
    return fb::CreateTensor(fbb_, name, static_cast<fb::DType>(t.dtype), shape,
                            static_cast<fb::TensorRole>(t.role), static_cast<fb::MemType>(t.mem),
                            t.arena_offset, t.nbytes, region, t.alias_of, strides, t.view_offset,
                            t.blob, t.materializer, t.grad, t.batch_dim, t.requires_grad, owner);
  }

  Offset<fb::OpCall> op_call(const OpCall& c) {
    auto op = shared_str(c.op);
    auto attr_v = attrs(c.attrs);
    auto inputs = vec(c.inputs);
    auto outputs = vec(c.outputs);
    Offset<flatbuffers::Vector<Offset<fb::ArginBinding>>> bindings;
    if (!c.bindings.empty()) {
      std::vector<Offset<fb::ArginBinding>> bs;
      for (const auto& b : c.bindings) {
        auto attr = shared_str(b.attr);
        bs.push_back(fb::CreateArginBinding(fbb_, attr, b.argin));
      }
      bindings = fbb_.CreateVector(bs);
    }
    return fb::CreateOpCall(fbb_, op, attr_v, inputs, outputs, bindings);
  }

  Offset<fb::Kernel> kernel(const KernelDesc& k) {
    auto name = str(k.name);
    std::vector<Offset<fb::OpCall>> ops;
    ops.reserve(k.ops.size());
    for (const auto& c : k.ops) ops.push_back(op_call(c));
    auto ops_v = vec(ops);
    auto reads = vec(k.reads);
    auto writes = vec(k.writes);
    return fb::CreateKernel(fbb_, name, to_fb(k.fusion), ops_v, reads, writes, k.flops, k.bytes);
  }

  Offset<fb::Section> section(const SectionDesc& s) {
    auto name = str(s.name);
    auto kernels = vec(s.kernels);
    auto reads = vec(s.reads);
    auto writes = vec(s.writes);
    return fb::CreateSection(fbb_, s.id, name, static_cast<fb::SectionType>(s.type), s.graph,
                             kernels, reads, writes, s.micro_batched);
  }

  Offset<fb::Argin> argin(const ArginDesc& a) {
    auto name = str(a.name);
    fb::Value type = fb::Value::NONE;
    auto v = value(a.default_value, type);
    return fb::CreateArgin(fbb_, name, static_cast<fb::ArginKind>(a.kind), type, v);
  }

  Offset<fb::Blob> blob(const std::vector<uint8_t>& raw, const EncodedBlob& enc) {
    std::span<const uint8_t> stored = enc.compressed ? std::span<const uint8_t>(enc.zstd) : raw;
    auto data = stored.empty() ? Offset<flatbuffers::Vector<uint8_t>>()
                               : fbb_.CreateVector(stored.data(), stored.size());
    return fb::CreateBlob(fbb_, enc.compressed ? fb::Compression::Zstd : fb::Compression::None,
                          raw.size(), enc.checksum, data);
  }

  Offset<fb::Graph> graph(const GraphDesc& g) {
    auto name = str(g.name);
    auto inputs = vec(g.inputs);
    auto outputs = vec(g.outputs);
    auto output_grads = vec(g.output_grads);
    auto parameters = vec(g.parameters);
    auto sections = vec(g.sections);
    auto signature = strings(g.signature);
    return fb::CreateGraph(fbb_, name, inputs, outputs, output_grads, parameters, sections,
                           g.batch_size, g.micro_batch_size, static_cast<fb::Mapping>(g.mapping),
                           g.inference, g.grad_accumulation, signature);
  }

  FlatBufferBuilder& fbb_;
};

// Compresses every blob; large sets are split across the pool, each blob
// independently, so the bytes do not depend on the thread count.
std::vector<EncodedBlob> encode_blobs(const std::vector<BlobDesc>& blobs) {
  std::vector<EncodedBlob> out(blobs.size());
  uint64_t total = 0;
  for (const auto& b : blobs) total += b.data.size();
  auto encode = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = encode_blob(blobs[i].data, kBlobZstdLevel);
  };
  constexpr uint64_t kWorthThreads = 1u << 20;
  parallel_for(static_cast<int64_t>(blobs.size()), total < kWorthThreads ? INT64_MAX : 1, encode);
  return out;
}

// An upper bound of the bytes the tables (all but blob payloads) take: each
// table or vector is charged its fields at 8 bytes plus a generous header.
uint64_t table_bytes_bound(const ProgramDesc& p) {
  constexpr uint64_t kTable = 128;
  auto attrs_bound = [](const Attrs& a) {
    uint64_t n = 0;
    for (const auto& [name, v] : a.items()) {
      n += kTable + name.size();
      if (auto* s = std::get_if<std::string>(&v)) n += s->size();
      if (auto* is = std::get_if<std::vector<int64_t>>(&v)) n += 8 * is->size();
      if (auto* ds = std::get_if<std::vector<double>>(&v)) n += 8 * ds->size();
    }
    return n;
  };
  uint64_t n = kTable * 16 + p.name.size() + p.compiler_version.size();
  for (const auto& t : p.tensors)
    n += kTable + t.name.size() + t.region.size() + t.owner.size() +
         8 * (t.shape.size() + t.strides.size());
  for (const auto& k : p.kernels) {
    n += kTable + k.name.size() + 4 * (k.reads.size() + k.writes.size());
    for (const auto& c : k.ops) {
      n += kTable + c.op.size() + 4 * (c.inputs.size() + c.outputs.size()) + attrs_bound(c.attrs);
      for (const auto& b : c.bindings) n += kTable + b.attr.size();
    }
  }
  for (const auto& s : p.sections)
    n += kTable + s.name.size() + 4 * (s.kernels.size() + s.reads.size() + s.writes.size());
  n += 8 * p.schedule.size();
  for (const auto& a : p.argins) n += 2 * kTable + a.name.size() + 8;
  n += kTable * p.blobs.size();
  for (const auto& m : p.materializers) n += kTable + m.kind.size() + attrs_bound(m.params);
  for (const auto& g : p.graphs) {
    n += kTable + g.name.size() +
         4 * (g.inputs.size() + g.outputs.size() + g.output_grads.size() + g.parameters.size() +
              g.sections.size());
    for (const auto& line : g.signature) n += 8 + line.size();
  }
  for (const auto& [k, v] : p.metadata) n += kTable + k.size() + v.size();
  n += 2 * kTable;
  for (const auto& b : p.data_parallel.buckets) n += 2 * kTable + 32 + 4 * b.gradients.size();
  return n;
}

// Builds the file into `fbb` and returns its bytes (owned by `fbb`).
std::span<const uint8_t> build_pef(const ProgramDesc& p, FlatBufferBuilder& fbb,
                                   const std::vector<EncodedBlob>& blobs) {
  uint64_t payload = 0;
  for (size_t i = 0; i < blobs.size(); ++i)
    payload += (blobs[i].compressed ? blobs[i].zstd.size() : p.blobs[i].data.size()) + 8;
  uint64_t bound = payload + table_bytes_bound(p);
  SAMBA_CHECK(bound < FLATBUFFERS_MAX_BUFFER_SIZE, Status::Unsupported,
              "program '{}' is too large for a PEF: its blobs take {} bytes compressed and its "
              "tables up to {} "
              "more, over the {} bytes a PEF file can hold",
              p.name, payload, bound - payload, uint64_t{FLATBUFFERS_MAX_BUFFER_SIZE});
  PefBuilder builder(fbb);
  fb::FinishProgramBuffer(fbb, builder.build(p, blobs));
  return {fbb.GetBufferPointer(), fbb.GetSize()};
}

size_t initial_capacity(const ProgramDesc& p, const std::vector<EncodedBlob>& blobs) {
  uint64_t n = 1024;
  for (size_t i = 0; i < blobs.size(); ++i)
    n += (blobs[i].compressed ? blobs[i].zstd.size() : p.blobs[i].data.size()) + 16;
  n += p.tensors.size() * 96 + p.kernels.size() * 256;
  return static_cast<size_t>(std::min<uint64_t>(n, FLATBUFFERS_MAX_BUFFER_SIZE));
}

}  // namespace

std::vector<uint8_t> serialize_pef(const ProgramDesc& program) {
  std::vector<EncodedBlob> blobs = encode_blobs(program.blobs);
  FlatBufferBuilder fbb(initial_capacity(program, blobs));
  std::span<const uint8_t> bytes = build_pef(program, fbb, blobs);
  return {bytes.begin(), bytes.end()};
}

void write_pef(const ProgramDesc& program, const std::string& path) {
  std::vector<EncodedBlob> blobs = encode_blobs(program.blobs);
  FlatBufferBuilder fbb(initial_capacity(program, blobs));
  write_file_atomically(path, build_pef(program, fbb, blobs));
}

}  // namespace samba::pef
