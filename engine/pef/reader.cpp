#include "engine/pef/reader.h"

#include <flatbuffers/flatbuffers.h>

#include <new>
#include <optional>

#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/io/file_io.h"
#include "engine/io/frame_codec.h"
#include "engine/pef/pef_generated.h"
#include "engine/pef/verify.h"

namespace samba::pef {
namespace {

namespace fb = samba::pef::fb;
template <typename T>
using FbVector = flatbuffers::Vector<T>;
template <typename T>
using FbTables = flatbuffers::Vector<flatbuffers::Offset<T>>;

// The smallest buffer with a root offset and a file identifier.
constexpr size_t kHeaderBytes = sizeof(flatbuffers::uoffset_t) + flatbuffers::kFileIdentifierLength;

std::string printable(std::span<const uint8_t> bytes) {
  std::string s;
  for (uint8_t c : bytes)
    s += (c >= 0x20 && c < 0x7f) ? fmt::format("{}", char(c)) : fmt::format("\\x{:02x}", c);
  return s;
}

void check_header(std::span<const uint8_t> bytes) {
  SAMBA_CHECK(bytes.size() >= kHeaderBytes, Status::CorruptFile,
              "not a PEF file: {} bytes, fewer than the {} of a PEF header", bytes.size(),
              kHeaderBytes);
  SAMBA_CHECK(bytes.size() < FLATBUFFERS_MAX_BUFFER_SIZE, Status::CorruptFile,
              "not a PEF file: {} bytes, more than the {} a PEF can hold", bytes.size(),
              uint64_t{FLATBUFFERS_MAX_BUFFER_SIZE});
  SAMBA_CHECK(
      fb::ProgramBufferHasIdentifier(bytes.data()), Status::CorruptFile,
      "not a PEF file: file identifier '{}', expected '{}'",
      printable(bytes.subspan(sizeof(flatbuffers::uoffset_t), flatbuffers::kFileIdentifierLength)),
      fb::ProgramIdentifier());
}

PefVersion read_version(std::span<const uint8_t> bytes) {
  check_header(bytes);
  flatbuffers::Verifier v(bytes.data(), bytes.size());
  flatbuffers::uoffset_t root = v.VerifyOffset(0);
  // Program derives privately from flatbuffers::Table; generated code reads a
  // root the same way, through the table it is laid out as.
  const auto* table =
      root ? reinterpret_cast<const flatbuffers::Table*>(bytes.data() + root) : nullptr;
  SAMBA_CHECK(table && table->VerifyTableStart(v) &&
                  table->VerifyField<uint32_t>(v, fb::Program::VT_FORMAT_MAJOR, sizeof(uint32_t)) &&
                  table->VerifyField<uint32_t>(v, fb::Program::VT_FORMAT_MINOR, sizeof(uint32_t)),
              Status::CorruptFile,
              "corrupt PEF: the root table holding the format version is damaged");
  return {table->GetField<uint32_t>(fb::Program::VT_FORMAT_MAJOR, 0),
          table->GetField<uint32_t>(fb::Program::VT_FORMAT_MINOR, 0)};
}

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

template <typename T>
std::vector<T> scalars(const FbVector<T>* v) {
  if (!v || v->size() == 0) return {};
  return std::vector<T>(v->data(), v->data() + v->size());
}

Fusion from_fb(fb::Fusion f, const std::string& where) {
  switch (f) {
    case fb::Fusion::Elementwise:
      return Fusion::Elementwise;
    case fb::Fusion::Reduction:
      return Fusion::Reduction;
    case fb::Fusion::Contraction:
      return Fusion::Contraction;
    case fb::Fusion::View:
      return Fusion::View;
    case fb::Fusion::Creation:
      return Fusion::Creation;
    case fb::Fusion::Opaque:
      return Fusion::Opaque;
  }
  fail(Status::CorruptFile, "{}: fusion code {} is not a fusion class (0..{})", where,
       static_cast<int>(f), static_cast<int>(fb::Fusion::MAX));
}

// Attribute values: the union tag says which table holds the value.
AttrValue value(fb::Value type, const void* h, const std::string& what) {
  auto missing = [&]() -> AttrValue {
    fail(Status::CorruptFile, "{}: value of kind {} has no data", what, fb::EnumNameValue(type));
  };
  switch (type) {
    case fb::Value::NONE:
      return std::monostate{};
    case fb::Value::IntValue: {
      const auto* v = static_cast<const fb::IntValue*>(h);
      return v ? AttrValue(int64_t{v->value()}) : missing();
    }
    case fb::Value::FloatValue: {
      const auto* v = static_cast<const fb::FloatValue*>(h);
      return v ? AttrValue(v->value()) : missing();
    }
    case fb::Value::BoolValue: {
      const auto* v = static_cast<const fb::BoolValue*>(h);
      return v ? AttrValue(v->value()) : missing();
    }
    case fb::Value::StringValue: {
      const auto* v = static_cast<const fb::StringValue*>(h);
      return v ? AttrValue(str(v->value())) : missing();
    }
    case fb::Value::IntsValue: {
      const auto* v = static_cast<const fb::IntsValue*>(h);
      return v ? AttrValue(scalars(v->values())) : missing();
    }
    case fb::Value::FloatsValue: {
      const auto* v = static_cast<const fb::FloatsValue*>(h);
      return v ? AttrValue(scalars(v->values())) : missing();
    }
    case fb::Value::DTypeValue: {
      const auto* v = static_cast<const fb::DTypeValue*>(h);
      return v ? AttrValue(static_cast<DType>(static_cast<int32_t>(v->value()))) : missing();
    }
  }
  fail(Status::CorruptFile, "{}: value kind code {} is not one this runtime knows (0..{})", what,
       static_cast<int>(type), static_cast<int>(fb::Value::MAX));
}

// More attributes than any op or materializer has: Attrs looks names up one
// by one, so a call with many attributes would cost their count squared.
constexpr flatbuffers::uoffset_t kMaxAttrs = 256;

Attrs attrs(const FbTables<fb::Attr>* v, const std::string& what) {
  Attrs out;
  if (!v) return out;
  SAMBA_CHECK(v->size() <= kMaxAttrs, Status::CorruptFile,
              "{}: {} attributes, more than the {} any op or materializer takes", what, v->size(),
              kMaxAttrs);
  for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i) {
    const fb::Attr* a = v->Get(i);
    std::string name = str(a->name());
    // Attrs::set would merge a repeated name; a file must not repeat one.
    SAMBA_CHECK(!out.find(name), Status::CorruptFile, "{}: attribute '{}' appears twice", what,
                name);
    out.set(name, value(a->value_type(), a->value(), fmt::format("{} attribute '{}'", what, name)));
  }
  return out;
}

TensorDesc tensor(const fb::Tensor& t) {
  TensorDesc d;
  d.name = str(t.name());
  d.dtype = static_cast<DType>(static_cast<int32_t>(t.dtype()));
  d.shape = scalars(t.shape());
  d.role = static_cast<TensorRole>(t.role());
  d.mem = static_cast<MemType>(t.mem());
  d.arena_offset = t.arena_offset();
  d.nbytes = t.nbytes();
  d.region = str(t.region());
  d.alias_of = t.alias_of();
  d.strides = scalars(t.strides());
  d.view_offset = t.view_offset();
  d.blob = t.blob();
  d.materializer = t.materializer();
  d.grad = t.grad();
  d.batch_dim = t.batch_dim();
  d.requires_grad = t.requires_grad();
  d.owner = str(t.owner());
  return d;
}

KernelDesc kernel(const fb::Kernel& k, size_t index) {
  KernelDesc d;
  d.name = str(k.name());
  std::string where = fmt::format("kernel {} '{}'", index, d.name);
  d.fusion = from_fb(k.fusion(), where);
  if (const auto* ops = k.ops()) {
    d.ops.reserve(ops->size());
    for (flatbuffers::uoffset_t i = 0; i < ops->size(); ++i) {
      const fb::OpCall* c = ops->Get(i);
      OpCall call;
      call.op = str(c->op());
      call.attrs = attrs(c->attrs(), fmt::format("{} op {} '{}'", where, i, call.op));
      call.inputs = scalars(c->inputs());
      call.outputs = scalars(c->outputs());
      if (const auto* bs = c->bindings())
        for (const fb::ArginBinding* b : *bs) call.bindings.push_back({str(b->attr()), b->argin()});
      d.ops.push_back(std::move(call));
    }
  }
  d.reads = scalars(k.reads());
  d.writes = scalars(k.writes());
  d.flops = k.flops();
  d.bytes = k.bytes();
  return d;
}

SectionDesc section(const fb::Section& s) {
  SectionDesc d;
  d.id = s.id();
  d.name = str(s.name());
  d.type = static_cast<SectionType>(s.type());
  d.graph = s.graph();
  d.kernels = scalars(s.kernels());
  d.reads = scalars(s.reads());
  d.writes = scalars(s.writes());
  d.micro_batched = s.micro_batched();
  return d;
}

GraphDesc graph(const fb::Graph& g) {
  GraphDesc d;
  d.name = str(g.name());
  d.inputs = scalars(g.inputs());
  d.outputs = scalars(g.outputs());
  d.output_grads = scalars(g.output_grads());
  d.parameters = scalars(g.parameters());
  d.sections = scalars(g.sections());
  d.batch_size = g.batch_size();
  d.micro_batch_size = g.micro_batch_size();
  d.mapping = static_cast<Mapping>(g.mapping());
  d.inference = g.inference();
  d.grad_accumulation = g.grad_accumulation();
  if (const auto* sig = g.signature())
    for (const flatbuffers::String* line : *sig) d.signature.push_back(str(line));
  return d;
}

// Which blobs tensors take their contents from; the others are never
// decompressed. Checks each used blob's declared size against every tensor
// that takes it, and their total against the memory plan, before any
// decompression: the device holds every tensor with contents in its
// arenas, so a file whose blobs decode to more than the plan's peak is a
// zip bomb, refused without work.
std::vector<bool> used_blobs(const ProgramDesc& p, const FbTables<fb::Blob>& blobs) {
  std::vector<bool> used(blobs.size(), false);
  uint64_t total = 0;
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const TensorDesc& t = p.tensors[i];
    if (t.blob < 0 || static_cast<size_t>(t.blob) >= blobs.size())
      continue;  // verify_program reports it
    uint64_t size = blobs.Get(t.blob)->uncompressed_size();
    SAMBA_CHECK(size == t.nbytes, Status::CorruptFile,
                "tensor {} '{}': blob {} holds {} bytes, but the tensor has nbytes {}", i, t.name,
                t.blob, size, t.nbytes);
    if (used[static_cast<size_t>(t.blob)]) continue;
    used[static_cast<size_t>(t.blob)] = true;
    SAMBA_CHECK(!__builtin_add_overflow(total, size, &total) && total <= p.memory.peak_bytes,
                Status::CorruptFile,
                "blobs: the blobs tensors use decode to more than the memory plan's peak of {} bytes "
                "(blob {} of {} bytes, for tensor {} '{}', goes past it)",
                p.memory.peak_bytes, t.blob, size, i, t.name);
  }
  return used;
}

std::vector<uint8_t> blob_bytes(const fb::Blob& b, size_t index) {
  std::string what = fmt::format("blob {}", index);
  uint64_t size = b.uncompressed_size();
  std::span<const uint8_t> stored;
  if (b.data()) stored = {b.data()->data(), b.data()->size()};
  std::vector<uint8_t> data;
  switch (b.compression()) {
    case fb::Compression::None:
      SAMBA_CHECK(stored.size() == size, Status::CorruptFile,
                  "{}: stored uncompressed with {} bytes, declared {}", what, stored.size(), size);
      data.assign(stored.begin(), stored.end());
      break;
    case fb::Compression::Zstd:
      if (size == 0 && stored.empty()) break;
      data = decompress_frame(stored, size, what);
      break;
    default:
      fail(Status::CorruptFile, "{}: compression code {} is not one this runtime knows (0..{})",
           what, static_cast<int>(b.compression()), static_cast<int>(fb::Compression::MAX));
  }
  verify_xxh64(data, b.checksum(), what);
  return data;
}

// Decodes the used blobs, spread over the pool when there is enough to do;
// unused ones stay empty. The error reported is the one of the lowest blob
// index, whatever thread found it first.
std::vector<BlobDesc> blobs(const FbTables<fb::Blob>& v, const std::vector<bool>& used) {
  std::vector<BlobDesc> out(v.size());
  std::vector<std::optional<Error>> errors(v.size());
  uint64_t total = 0;
  for (flatbuffers::uoffset_t i = 0; i < v.size(); ++i)
    if (used[i] && v.Get(i)->data()) total += v.Get(i)->data()->size();
  constexpr uint64_t kWorthThreads = 1u << 20;
  parallel_for(
      static_cast<int64_t>(v.size()), total < kWorthThreads ? INT64_MAX : 1,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          if (!used[static_cast<size_t>(i)]) continue;
          try {
            out[i].data =
                blob_bytes(*v.Get(static_cast<flatbuffers::uoffset_t>(i)), static_cast<size_t>(i));
          } catch (const Error& err) {
            errors[i] = err;
          } catch (const std::bad_alloc&) {
            errors[i] = Error(
                Status::OutOfMemory,
                fmt::format("blob {}: cannot allocate its {} bytes", i,
                            v.Get(static_cast<flatbuffers::uoffset_t>(i))->uncompressed_size()));
          }
        }
      });
  for (auto& e : errors)
    if (e) throw *e;
  return out;
}

ProgramDesc convert(const fb::Program& root) {
  ProgramDesc p;
  p.name = str(root.name());
  p.compiler_version = str(root.compiler_version());
  p.format_major = root.format_major();
  p.format_minor = root.format_minor();
  p.opt_level = root.opt_level();
  if (const auto* v = root.tensors()) {
    p.tensors.reserve(v->size());
    for (const fb::Tensor* t : *v) p.tensors.push_back(tensor(*t));
  }
  if (const auto* v = root.kernels()) {
    p.kernels.reserve(v->size());
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i)
      p.kernels.push_back(kernel(*v->Get(i), i));
  }
  if (const auto* v = root.sections())
    for (const fb::Section* s : *v) p.sections.push_back(section(*s));
  if (const auto* v = root.schedule())
    for (const fb::Call* c : *v) p.schedule.push_back({c->id(), c->section()});
  if (const auto* v = root.argins()) {
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i) {
      const fb::Argin* a = v->Get(i);
      ArginDesc d;
      d.name = str(a->name());
      d.kind = static_cast<ArginKind>(a->kind());
      d.default_value = value(a->default_value_type(), a->default_value(),
                              fmt::format("argin {} '{}' default", i, d.name));
      p.argins.push_back(std::move(d));
    }
  }
  if (const auto* v = root.materializers()) {
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i) {
      const fb::Materializer* m = v->Get(i);
      MaterializerDesc d;
      d.kind = str(m->kind());
      d.params = attrs(m->params(), fmt::format("materializer {} '{}'", i, d.kind));
      p.materializers.push_back(std::move(d));
    }
  }
  if (const auto* v = root.graphs())
    for (const fb::Graph* g : *v) p.graphs.push_back(graph(*g));
  if (const fb::MemoryPlan* m = root.memory()) {
    const auto* arenas = m->arena_bytes();
    size_t n = arenas ? arenas->size() : 0;
    SAMBA_CHECK(n == kNumMemTypes, Status::CorruptFile,
                "memory plan: {} arena sizes, expected {} (DDR, HBM, HOST)", n, kNumMemTypes);
    for (size_t i = 0; i < n; ++i) p.memory.arena_bytes[i] = arenas->Get(static_cast<flatbuffers::uoffset_t>(i));
    // An absent list means empty activation areas; a present one has one
    // size per memory type.
    const auto* activation = m->activation_bytes();
    const size_t na = activation ? activation->size() : 0;
    SAMBA_CHECK(!activation || na == kNumMemTypes, Status::CorruptFile,
                "memory plan: {} activation area sizes, expected {} (DDR, HBM, HOST)", na, kNumMemTypes);
    for (size_t i = 0; i < na; ++i)
      p.memory.activation_bytes[i] = activation->Get(static_cast<flatbuffers::uoffset_t>(i));
    p.memory.peak_bytes = m->peak_bytes();
    p.memory.lower_bound_bytes = m->lower_bound_bytes();
  }
  if (const auto* v = root.metadata())
    for (const fb::MetadataEntry* e : *v) p.metadata.emplace_back(str(e->key()), str(e->value()));
  if (const fb::DataParallel* dp = root.data_parallel()) {
    p.data_parallel.world_size = dp->world_size();
    p.data_parallel.bucket_bytes = dp->bucket_bytes();
    if (const auto* v = dp->buckets())
      for (const fb::ReduceBucket* b : *v) {
        ReduceBucketDesc d;
        if (b->gradients()) d.gradients.assign(b->gradients()->begin(), b->gradients()->end());
        d.mem = static_cast<MemType>(b->mem());
        d.dtype = static_cast<DType>(static_cast<int32_t>(b->dtype()));
        d.arena_offset = b->arena_offset();
        d.nbytes = b->nbytes();
        p.data_parallel.buckets.push_back(std::move(d));
      }
  }
  if (const auto* v = root.blobs()) {
    p.blobs = blobs(*v, used_blobs(p, *v));
  }
  return p;
}

}  // namespace

PefVersion peek_pef_version(std::span<const uint8_t> bytes) {
  // FlatBuffers reads scalars in place; a misaligned buffer is copied first.
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) != 0) {
    std::vector<uint8_t> copy(bytes.begin(), bytes.end());
    return read_version(copy);
  }
  return read_version(bytes);
}

ProgramDesc parse_pef(std::span<const uint8_t> bytes) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) != 0) {
    std::vector<uint8_t> copy(bytes.begin(), bytes.end());
    return parse_pef(copy);
  }
  PefVersion version = read_version(bytes);
  SAMBA_CHECK(version.major == kFormatMajor, Status::VersionMismatch,
              "file has PEF format {}.{}; this runtime reads {}.x", version.major, version.minor,
              kFormatMajor);

  flatbuffers::Verifier::Options opts;
  opts.max_depth = 32;
  // A writer never shares tables, and each takes at least 4 bytes, so a file
  // holds at most size/4 of them: more means tables referenced many times
  // over, which would make verifying cost far more than the file's size.
  opts.max_tables = static_cast<flatbuffers::uoffset_t>(bytes.size() / 4 + 64);
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), opts);
  SAMBA_CHECK(
      fb::VerifyProgramBuffer(verifier), Status::CorruptFile,
      "corrupt PEF: the FlatBuffers structure is damaged (an offset, size or nesting outside the "
      "{}-byte file)",
      bytes.size());

  // Decoded structures take a small multiple of the file's size; a file
  // crafted to decode into more than the machine has is refused as such.
  try {
    ProgramDesc program = convert(*fb::GetProgram(bytes.data()));
    verify_program(program);
    return program;
  } catch (const std::bad_alloc&) {
    fail(Status::OutOfMemory, "out of memory decoding a PEF of {} bytes", bytes.size());
  }
}

ProgramDesc read_pef(const std::string& path) {
  std::vector<uint8_t> bytes = read_file_bytes(path);
  try {
    return parse_pef(bytes);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace samba::pef
