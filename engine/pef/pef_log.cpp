#include "engine/pef/pef_log.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>

#include "engine/core/isa.h"
#include "engine/io/atomic_file.h"

namespace samba::pef {
namespace {

using Out = std::back_insert_iterator<std::string>;

std::string_view safe_dtype_name(DType t) {
  return is_valid_dtype(static_cast<int32_t>(t)) ? dtype_name(t) : std::string_view("?");
}


// Engineering notation for estimates: "1.05G".
std::string si(double v) {
  static constexpr const char* kUnits[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (v >= 1000 && u < 5) {
    v /= 1000;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f}{}", v, kUnits[u]);
}

class LogWriter {
 public:
  explicit LogWriter(const ProgramDesc& p) : p_(p), out_(std::back_inserter(text_)) {}

  std::string write() {
    header();
    graphs();
    sections();
    schedule();
    argins();
    tensors();
    memory();
    if (p_.data_parallel.world_size > 0) {
      title("data parallel");
      fmt::format_to(out_, "{}", format_data_parallel(p_));
    }
    metadata();
    return std::move(text_);
  }

 private:
  std::string tensor(int64_t i) const {
    if (i == -1) return "-";
    if (i < 0 || static_cast<size_t>(i) >= p_.tensors.size())
      return fmt::format("<tensor {} out of range>", i);
    return p_.tensors[static_cast<size_t>(i)].name;
  }
  std::string tensors(const std::vector<int32_t>& list) const {
    std::vector<std::string> names;
    names.reserve(list.size());
    for (int32_t i : list) names.push_back(tensor(i));
    return names.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(names, ", "));
  }
  std::string section_ref(int32_t s) const {
    if (s < 0 || static_cast<size_t>(s) >= p_.sections.size())
      return fmt::format("<section {} out of range>", s);
    const SectionDesc& sd = p_.sections[static_cast<size_t>(s)];
    return fmt::format("section {} '{}' ({}, id {})", s, sd.name, section_type_name(sd.type),
                       sd.id);
  }
  void title(std::string_view t) { fmt::format_to(out_, "\n== {} ==\n", t); }

  void header() {
    uint64_t blob_bytes = 0;
    for (const auto& b : p_.blobs) blob_bytes += b.data.size();
    fmt::format_to(out_, "PEF '{}'\n", p_.name);
    fmt::format_to(out_, "format          {}.{}\n", p_.format_major, p_.format_minor);
    fmt::format_to(out_, "compiler        {}\n",
                   p_.compiler_version.empty() ? "(unknown)" : p_.compiler_version);
    fmt::format_to(out_, "opt level       o{}\n", p_.opt_level);
    // Set by the compiler for a mixed-precision compile (compiler/passes/mixed_precision.h).
    std::string precision = "none (the dtypes the model traced)";
    for (const auto& [key, value] : p_.metadata)
      if (key == "compiler.mixed_precision")
        precision = value + " (bf16 products, fp32 accumulation and weights)";
    fmt::format_to(out_, "mixed precision {}\n", precision);
    // A PEF is the same on every CPU; its FLOP and byte estimates are read
    // against the kernels of the machine that compiled it.
    fmt::format_to(out_, "host isa        {}\n", isa_name(active_isa()));
    fmt::format_to(
        out_,
        "contents        {} graphs, {} sections, {} calls, {} kernels, {} tensors, {} argins, "
        "{} blobs ({}), {} materializers\n",
        p_.graphs.size(), p_.sections.size(), p_.schedule.size(), p_.kernels.size(),
        p_.tensors.size(), p_.argins.size(), p_.blobs.size(), human_bytes(blob_bytes),
        p_.materializers.size());
  }

  void graphs() {
    title("graphs");
    for (size_t g = 0; g < p_.graphs.size(); ++g) {
      const GraphDesc& gd = p_.graphs[g];
      fmt::format_to(
          out_, "graph {} '{}': batch {}, micro-batch {}, mapping {}, {}{}\n", g, gd.name,
          gd.batch_size == 0 ? std::string("-") : fmt::format("{}", gd.batch_size),
          gd.micro_batch_size == 0 ? std::string("-") : fmt::format("{}", gd.micro_batch_size),
          mapping_name(gd.mapping), gd.inference ? "inference" : "training",
          gd.grad_accumulation ? ", gradient accumulation" : "");
      fmt::format_to(out_, "  inputs      {}\n", tensors(gd.inputs));
      std::vector<std::string> outs;
      for (size_t i = 0; i < gd.outputs.size(); ++i) {
        int32_t grad = i < gd.output_grads.size() ? gd.output_grads[i] : -1;
        outs.push_back(grad >= 0 ? fmt::format("{} (grad {})", tensor(gd.outputs[i]), tensor(grad))
                                 : tensor(gd.outputs[i]));
      }
      fmt::format_to(
          out_, "  outputs     {}\n",
          outs.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(outs, ", ")));
      fmt::format_to(out_, "  parameters  {}\n", tensors(gd.parameters));
      std::vector<std::string> secs;
      for (int32_t s : gd.sections) secs.push_back(section_ref(s));
      fmt::format_to(
          out_, "  sections    {}\n",
          secs.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(secs, ", ")));
      fmt::format_to(out_, "  signature   {} lines\n", gd.signature.size());
      for (const auto& line : gd.signature) fmt::format_to(out_, "    {}\n", line);
    }
  }

  void op_line(const OpCall& c) {
    std::vector<std::string> attrs;
    for (const auto& [n, v] : c.attrs.items())
      attrs.push_back(fmt::format("{}={}", n, attr_value_str(v)));
    fmt::format_to(out_, "      {}({}) -> {}", c.op,
                   c.inputs.empty() ? std::string() : tensors(c.inputs), tensors(c.outputs));
    if (!attrs.empty()) fmt::format_to(out_, "  {}", fmt::join(attrs, " "));
    for (const auto& b : c.bindings) {
      bool ok = b.argin >= 0 && static_cast<size_t>(b.argin) < p_.argins.size();
      fmt::format_to(out_, "  [{} <- argin '{}']", b.attr,
                     ok ? p_.argins[static_cast<size_t>(b.argin)].name
                        : fmt::format("<{} out of range>", b.argin));
    }
    fmt::format_to(out_, "\n");
  }

  void kernel_lines(int32_t k) {
    if (k < 0 || static_cast<size_t>(k) >= p_.kernels.size()) {
      fmt::format_to(out_, "  kernel {} <out of range>\n", k);
      return;
    }
    const KernelDesc& kd = p_.kernels[static_cast<size_t>(k)];
    fmt::format_to(out_, "  kernel {} '{}' {}, {} ops, {} FLOPs, {} bytes\n", k, kd.name,
                   fusion_name(kd.fusion), kd.ops.size(), si(kd.flops), si(kd.bytes));
    for (const auto& c : kd.ops) op_line(c);
  }

  void sections() {
    title("sections");
    std::vector<bool> placed(p_.kernels.size(), false);
    for (size_t s = 0; s < p_.sections.size(); ++s) {
      const SectionDesc& sd = p_.sections[s];
      double flops = 0, bytes = 0;
      for (int32_t k : sd.kernels)
        if (k >= 0 && static_cast<size_t>(k) < p_.kernels.size()) {
          flops += p_.kernels[static_cast<size_t>(k)].flops;
          bytes += p_.kernels[static_cast<size_t>(k)].bytes;
          placed[static_cast<size_t>(k)] = true;
        }
      fmt::format_to(
          out_, "section {} '{}' id {} type {} graph {}{}: {} kernels, {} FLOPs, {} bytes\n", s,
          sd.name, sd.id, section_type_name(sd.type), sd.graph,
          sd.micro_batched ? " micro-batched" : "", sd.kernels.size(), si(flops), si(bytes));
      fmt::format_to(out_, "  reads   {}\n  writes  {}\n", tensors(sd.reads), tensors(sd.writes));
      for (int32_t k : sd.kernels) kernel_lines(k);
    }
    if (std::find(placed.begin(), placed.end(), false) != placed.end()) {
      fmt::format_to(out_, "kernels in no section:\n");
      for (size_t k = 0; k < placed.size(); ++k)
        if (!placed[k]) kernel_lines(static_cast<int32_t>(k));
    }
  }

  void schedule() {
    title("schedule");
    for (const auto& c : p_.schedule)
      fmt::format_to(out_, "call {} -> {}\n", c.id, section_ref(c.section));
  }

  void argins() {
    title("argins");
    for (size_t a = 0; a < p_.argins.size(); ++a) {
      const ArginDesc& ad = p_.argins[a];
      fmt::format_to(out_, "argin {} '{}' {} default {}\n", a, ad.name, argin_kind_name(ad.kind),
                     attr_value_str(ad.default_value));
    }
  }

  void tensors() {
    title("tensors");
    struct Row {
      std::string cells[10];
    };
    std::vector<Row> rows;
    rows.reserve(p_.tensors.size() + 1);
    rows.push_back(
        {{"#", "name", "role", "dtype", "shape", "memory", "offset", "nbytes", "region", "notes"}});
    for (size_t i = 0; i < p_.tensors.size(); ++i) {
      const TensorDesc& t = p_.tensors[i];
      std::vector<std::string> notes;
      if (t.role == TensorRole::Alias)
        notes.push_back(fmt::format("alias of {} strides {} offset {}", tensor(t.alias_of),
                                    dims_str(t.strides), t.view_offset));
      if (t.blob >= 0) notes.push_back(fmt::format("blob {}", t.blob));
      if (t.materializer >= 0) {
        bool ok = static_cast<size_t>(t.materializer) < p_.materializers.size();
        notes.push_back(
            fmt::format("materializer {} '{}'", t.materializer,
                        ok ? p_.materializers[static_cast<size_t>(t.materializer)].kind : "?"));
      }
      if (t.grad >= 0) notes.push_back(fmt::format("grad {}", tensor(t.grad)));
      if (!t.owner.empty()) notes.push_back(fmt::format("owner {}", t.owner));
      if (t.batch_dim >= 0) notes.push_back(fmt::format("batch dim {}", t.batch_dim));
      if (t.requires_grad) notes.push_back("requires grad");
      bool alias = t.role == TensorRole::Alias;
      rows.push_back(
          {{fmt::format("{}", i), t.name, std::string(tensor_role_name(t.role)),
            std::string(safe_dtype_name(t.dtype)), dims_str(t.shape),
            alias ? std::string("-")
                  : fmt::format("{} {}", mem_type_name(t.mem), in_activation_area(t.role) ? "act" : "state"),
            alias ? "-" : fmt::format("{}", t.arena_offset),
            alias ? "-" : fmt::format("{}", t.nbytes), t.region.empty() ? "-" : t.region,
            fmt::format("{}", fmt::join(notes, "; "))}});
    }
    size_t width[10] = {};
    for (const Row& r : rows)
      for (int c = 0; c < 10; ++c) width[c] = std::max(width[c], r.cells[c].size());
    for (const Row& r : rows) {
      std::string line;
      for (int c = 0; c < 10; ++c) {
        bool numeric = c == 0 || c == 6 || c == 7;
        if (c == 9)
          line += r.cells[c];
        else if (numeric)
          line += fmt::format("{:>{}}  ", r.cells[c], width[c]);
        else
          line += fmt::format("{:<{}}  ", r.cells[c], width[c]);
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      fmt::format_to(out_, "{}\n", line);
    }
  }

  void memory() {
    title("memory plan");
    for (int m = 0; m < kNumMemTypes; ++m)
      fmt::format_to(out_, "state {:<4}      {} bytes ({})\n", mem_type_name(static_cast<MemType>(m)),
                     p_.memory.arena_bytes[m], human_bytes(p_.memory.arena_bytes[m]));
    for (int m = 0; m < kNumMemTypes; ++m)
      fmt::format_to(out_, "activation {:<4} {} bytes ({})\n", mem_type_name(static_cast<MemType>(m)),
                     p_.memory.activation_bytes[m], human_bytes(p_.memory.activation_bytes[m]));
    fmt::format_to(out_, "peak            {} bytes ({})\n", p_.memory.peak_bytes, human_bytes(p_.memory.peak_bytes));
    fmt::format_to(out_, "lower bound     {} bytes ({})", p_.memory.lower_bound_bytes,
                   human_bytes(p_.memory.lower_bound_bytes));
    if (p_.memory.lower_bound_bytes > 0)
      fmt::format_to(out_, ", peak is {:.2f}x of it",
                     static_cast<double>(p_.memory.peak_bytes) /
                         static_cast<double>(p_.memory.lower_bound_bytes));
    fmt::format_to(out_, "\n");
  }

  void metadata() {
    title("metadata");
    for (const auto& [k, v] : p_.metadata) fmt::format_to(out_, "{} = {}\n", k, v);
  }

  const ProgramDesc& p_;
  std::string text_;
  Out out_;
};

}  // namespace

std::string human_bytes(uint64_t n) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string format_data_parallel(const ProgramDesc& p) {
  const DataParallelDesc& dp = p.data_parallel;
  if (dp.world_size == 0) return {};
  std::vector<std::string> reduce;
  for (const auto& sd : p.sections)
    if (sd.type == SectionType::REDUCE)
      reduce.push_back(fmt::format("'{}' (id {})", sd.name, sd.id));
  std::string s = fmt::format(
      "world size {}, REDUCE {}, {} buckets of up to {} (mean over the replicas)\n", dp.world_size,
      reduce.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(reduce, ", ")),
      dp.buckets.size(), human_bytes(dp.bucket_bytes));
  for (size_t b = 0; b < dp.buckets.size(); ++b) {
    const ReduceBucketDesc& bd = dp.buckets[b];
    std::vector<std::string> names;
    for (int32_t g : bd.gradients)
      names.push_back(g >= 0 && static_cast<size_t>(g) < p.tensors.size()
                          ? p.tensors[static_cast<size_t>(g)].name
                          : fmt::format("<{} out of range>", g));
    s += fmt::format("bucket {}: {} state offset {}, {} bytes ({}), {}, {} gradients: {}\n", b,
                     static_cast<int>(bd.mem) < kNumMemTypes ? mem_type_name(bd.mem) : "?",
                     bd.arena_offset, bd.nbytes, human_bytes(bd.nbytes), safe_dtype_name(bd.dtype),
                     bd.gradients.size(), fmt::join(names, ", "));
  }
  return s;
}

std::string format_pef_log(const ProgramDesc& program) { return LogWriter(program).write(); }

void write_pef_log(const ProgramDesc& program, const std::string& path) {
  std::string text = format_pef_log(program);
  write_file_atomically(path, text);
}

}  // namespace samba::pef
