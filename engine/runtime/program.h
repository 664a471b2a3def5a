// Program: a verified PEF made ready to run, immutable once built. Op names
// are resolved to registry entries, attributes bound to argins are located,
// and each section's kernels get their dependency graph, derived from the
// device bytes they read and write (so tensors that share memory through the
// plan are ordered correctly, whatever their names). Many execution contexts
// (concurrent runs) share one Program.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/pef/program.h"

namespace samba::runtime {

class FusedElementwise;

// An op call ready to run. `attrs` holds the compiled values; `bound` lists,
// for each attribute fed by an argin, its position in attrs.items() and the
// argin's index, so a run patches values in place without lookups.
struct OpStep {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<int32_t> inputs;   // tensor indices; -1 for an absent optional input
  std::vector<int32_t> outputs;  // tensor indices
  struct Bound {
    size_t attr;
    int32_t argin;
  };
  std::vector<Bound> bound;
  int32_t rng_offset_attr = -1;  // position of an attribute with the RngOffset role
  int32_t training_attr = -1;    // position of an attribute with the Training role
};

struct KernelPlan {
  std::string name;
  Fusion fusion = Fusion::Opaque;
  std::vector<OpStep> steps;
  double flops = 0;  // the compiler's estimate
  double bytes = 0;  // kernel_bytes_moved(), once the program is built
  bool writes_state = false;  // writes a tensor of the state area
  // Set when the kernel's elementwise chain runs as one tiled pass
  // (fused_elementwise.h); null: its steps run one by one.
  std::shared_ptr<const FusedElementwise> fused;
  // A lone linear whose output the next kernel, in every plan that holds
  // either, normalizes row by row (layer_norm, alone or leading a fused
  // chain) and may wait for nothing but this kernel and what this kernel
  // waits for: that kernel's index, else -1. The runtime may run it inside
  // this kernel's product, on each run of rows as the product finishes
  // them, while they are in cache (ops::RowsWork; the product decides).
  int32_t rows_consumer = -1;
  int32_t rows_producer = -1;  // on such a consumer: the linear
  // The pair as one kernel, for profiles: "<linear>+<consumer>", the sum of
  // their flops, and their bytes less the product's output read back.
  std::string pair_name;
  double pair_flops = 0, pair_bytes = 0;
};

struct SectionPlan {
  int32_t id = 0;
  std::string name;
  pef::SectionType type = pef::SectionType::FWD;
  int32_t graph = 0;
  std::vector<int32_t> kernels;                // program kernel indices, in order
  std::vector<std::vector<int32_t>> preds;     // per local kernel: local kernels it waits for
  bool micro_batched = false;
  bool writes_state = false;  // any kernel writes the state area
};

class Program {
 public:
  // Builds from a program that passed pef::verify_program (or came from
  // the reader, which verifies).
  explicit Program(pef::ProgramDesc desc);

  const pef::ProgramDesc& desc() const { return desc_; }
  // Frees the blobs' bytes (their sizes stay readable as empty vectors): once
  // the runtime has copied the initial values to the device, keeping them
  // would double the memory of the parameters.
  void release_blobs();
  const std::vector<KernelPlan>& kernels() const { return kernels_; }
  const std::vector<SectionPlan>& sections() const { return sections_; }
  // Spatial units: for a graph compiled with the spatial mapping, all its
  // sections (in schedule order) as one unit whose kernels depend on each
  // other across section boundaries only where they share bytes, so a run of
  // the whole schedule overlaps the optimizer of early layers with the
  // backward of later ones. Empty for the section mapping.
  const std::vector<SectionPlan>& units() const { return units_; }
  // The unit of graph g's whole schedule, or -1.
  int32_t unit_of_graph(int32_t g) const;

  // Index of the tensor / argin with that name; -1 if none.
  int32_t find_tensor(std::string_view name) const;
  int32_t find_argin(std::string_view name) const;

  // Value `v` given to argin `a` (run or set_argin) as the attributes bound
  // to it take it: checked by the registry's check_attr_value against the
  // schema of every one of them (type, range; NaN and infinities refused
  // where a range is declared), so every path refuses the same values.
  // Throws InvalidArgument naming the argin.
  AttrValue check_argin(int32_t a, const AttrValue& v) const;

  // The fused kernel that computes tensor t without ever storing it (its
  // value lives only in the pass's tiles), or -1.
  int32_t fused_away_in(int32_t t) const;

  // The tensor whose bytes tensor t uses (t itself unless it is an alias).
  int32_t root(int32_t t) const;
  bool in_activation(int32_t t) const;  // its bytes are in the activation area

 private:
  void build_kernel(const pef::KernelDesc& kd);
  void build_section(const pef::SectionDesc& sd);
  void build_units();
  // Sets rows_consumer and rows_producer, once sections and units are built.
  void pair_row_consumers();
  // Plans the fused pass of every elementwise chain, once all kernels are
  // known: an intermediate is stored only when something else reads it.
  void plan_fusion();
  // Per kernel of the list, the earlier kernels of the list it must wait for.
  std::vector<std::vector<int32_t>> dependencies(const std::vector<int32_t>& kernels) const;

  pef::ProgramDesc desc_;
  std::vector<KernelPlan> kernels_;
  std::vector<int32_t> fused_away_in_;  // per tensor, see fused_away_in()
  std::vector<SectionPlan> sections_;
  std::vector<SectionPlan> units_;
  std::vector<int32_t> unit_of_graph_;
  std::unordered_map<std::string, int32_t> tensor_by_name_;
  std::unordered_map<std::string, int32_t> argin_by_name_;
  std::vector<std::vector<const AttrSpec*>> argin_specs_;  // per argin: the attributes bound to it
};

// Bytes kernel k loads from and stores to memory in one run, as the runtime
// runs it: every pass over memory counts each tensor it reads once and each
// it writes once more (an input the op updates in place is both). Steps run
// one by one are a pass each, so an intermediate one writes and the next
// reads counts twice; a fused pass (fused_elementwise.h) counts its external
// inputs, its producer's inputs and the results it stores, never the values
// that stay in its tiles. A view counts the bytes it covers (a broadcast
// value, its one element). The profiles' byte rates come from this.
double kernel_bytes_moved(const Program& program, const KernelPlan& k);

}  // namespace samba::runtime
