#include "compiler/memplan/memory_plan.h"

#include <algorithm>
#include <map>

#include "engine/core/error.h"

namespace samba::compiler {
namespace {

uint64_t align_up(uint64_t n) { return (n + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment; }

uint64_t bytes_of(const Value& v) {
  return static_cast<uint64_t>(numel_of(v.shape)) * element_size(v.dtype);
}

struct Interval {
  ValueId value;
  uint64_t bytes;  // aligned
  int32_t first, last;
  size_t graph;
};

// Greedy by size: the biggest buffers are placed first, each at the lowest
// offset where it overlaps no placed buffer whose lifetime intersects its
// own. Placed buffers are indexed by the steps they are alive at, so each
// placement looks only at its contemporaries (intermediates are mostly
// short-lived; the cost grows with the number of buffers, not its square).
// Returns the area size used from `base`.
uint64_t place_intermediates(std::vector<Interval>& items, uint64_t base, MemoryPlan& plan) {
  std::sort(items.begin(), items.end(), [](const Interval& a, const Interval& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.first < b.first;
  });
  int32_t steps = 0;
  for (const Interval& it : items) steps = std::max(steps, it.last + 1);
  std::vector<std::vector<uint32_t>> alive(static_cast<size_t>(steps));
  std::vector<uint64_t> offset(items.size(), 0);
  std::vector<uint32_t> seen(items.size(), UINT32_MAX);
  std::vector<std::pair<uint64_t, uint64_t>> busy;
  uint64_t top = 0;
  for (uint32_t k = 0; k < items.size(); ++k) {
    const Interval& it = items[k];
    busy.clear();
    for (int32_t st = it.first; st <= it.last; ++st)
      for (uint32_t other : alive[static_cast<size_t>(st)]) {
        if (seen[other] == k) continue;
        seen[other] = k;
        busy.emplace_back(offset[other], offset[other] + items[other].bytes);
      }
    std::sort(busy.begin(), busy.end());
    uint64_t at = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo >= at + it.bytes) break;
      at = std::max(at, hi);
    }
    offset[k] = at;
    for (int32_t st = it.first; st <= it.last; ++st) alive[static_cast<size_t>(st)].push_back(k);
    plan.graphs[it.graph].offset[it.value] = base + at;
    top = std::max(top, at + it.bytes);
  }
  return top;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<PlanInput>& inputs, bool io_host_memory,
                       bool gradients_first) {
  MemoryPlan plan;
  struct Member {
    size_t graph;
    ValueId value;
  };
  std::map<std::string, std::vector<Member>> regions;  // ordered: a deterministic layout
  std::vector<Interval> transient[pef::kNumMemTypes];
  int32_t step = 0;
  // Gradients by the step of their last write (backward's end for them).
  std::vector<std::pair<int32_t, std::string>> gradient_keys;

  for (size_t gi = 0; gi < inputs.size(); ++gi) {
    const Graph& g = *inputs[gi].graph;
    const auto& kernels = *inputs[gi].kernels;
    const auto& sections = *inputs[gi].sections;
    const size_t nv = g.values.size();
    Placement& pl = plan.graphs.emplace_back();
    pl.mem.assign(nv, pef::MemType::DDR);
    pl.offset.assign(nv, 0);
    pl.nbytes.assign(nv, 0);
    pl.pinned.assign(nv, false);

    // Kernel steps in schedule order (continuing the previous graph's), and
    // the section of each step.
    std::vector<int32_t> step_of_kernel(kernels.size(), -1), section_of_kernel(kernels.size(), -1);
    for (size_t s = 0; s < sections.size(); ++s)
      for (int32_t k : sections[s].kernels) {
        step_of_kernel[k] = step++;
        section_of_kernel[k] = static_cast<int32_t>(s);
      }

    // Lifetimes of roots: first write and last read, in steps; whether any
    // use is in another section than the definition.
    std::vector<int32_t> first(nv, -1), last(nv, -1), def_section(nv, -1), last_write(nv, -1);
    std::vector<bool> crosses(nv, false);
    for (size_t k = 0; k < kernels.size(); ++k) {
      const int32_t st = step_of_kernel[k], sec = section_of_kernel[k];
      for (NodeId nid : kernels[k].nodes) {
        const Node& n = g.node(nid);
        auto touch = [&](ValueId v, bool read) {
          const ValueId r = g.root(v);
          if (first[r] < 0) first[r] = st, def_section[r] = sec;
          last[r] = std::max(last[r], st);
          if (!read && kernels[k].phase == Phase::Backward)
            last_write[r] = std::max(last_write[r], st);
          if (read && def_section[r] != sec) crosses[r] = true;
        };
        for (ValueId o : n.outputs) touch(o, false);
        for (ValueId in : n.inputs)
          if (in != kNone) touch(in, true);
      }
    }

    for (const Value& v : g.values) {
      if (v.is_view()) continue;
      pl.nbytes[v.id] = bytes_of(v);
      pef::MemType mem = pef::MemType::DDR;
      if (v.mem)
        mem = *v.mem;
      else if (io_host_memory && (v.kind == ValueKind::Input || v.is_output))
        mem = pef::MemType::HOST;
      pl.mem[v.id] = mem;
      const bool transient_value = v.kind == ValueKind::Intermediate && !v.is_output &&
                                   !crosses[v.id] && first[v.id] >= 0;
      if (v.kind == ValueKind::Intermediate && !transient_value) pl.pinned[v.id] = true;
      if (transient_value) {
        transient[static_cast<int>(mem)].push_back(
            {static_cast<ValueId>(v.id), align_up(pl.nbytes[v.id]), first[v.id], last[v.id], gi});
      } else {
        // Values of different graphs share names; only the app's named
        // state and inputs of the same name (or region) are one tensor.
        const std::string key = !is_shared_across_graphs(v.kind)
                                    ? fmt::format("{}/{}", gi, v.name)
                                    : (v.region.empty() ? v.name : v.region);
        regions[key].push_back({gi, v.id});
        if (gradients_first && v.kind == ValueKind::Gradient && regions[key].size() == 1) {
          gradient_keys.emplace_back(last_write[v.id], key);
          plan.gradient_order.emplace_back(gi, static_cast<ValueId>(v.id));
        }
      }
    }
  }

  // Gradients first, in production order (stable: ties keep their value
  // order), then every other region in name order.
  std::vector<size_t> by_production(gradient_keys.size());
  for (size_t i = 0; i < by_production.size(); ++i) by_production[i] = i;
  std::stable_sort(by_production.begin(), by_production.end(), [&](size_t a, size_t b) {
    return gradient_keys[a].first < gradient_keys[b].first;
  });
  std::vector<std::pair<size_t, ValueId>> gradient_order;
  std::vector<const std::pair<const std::string, std::vector<Member>>*> ordered;
  for (size_t i : by_production) {
    ordered.push_back(&*regions.find(gradient_keys[i].second));
    gradient_order.push_back(plan.gradient_order[i]);
  }
  plan.gradient_order = std::move(gradient_order);
  for (const auto& entry : regions)
    if (std::find(ordered.begin(),
                  ordered.begin() + static_cast<std::ptrdiff_t>(gradient_keys.size()),
                  &entry) == ordered.begin() + static_cast<std::ptrdiff_t>(gradient_keys.size()))
      ordered.push_back(&entry);

  uint64_t persistent_total = 0;
  uint64_t state_cursor[pef::kNumMemTypes] = {0, 0, 0}, act_cursor[pef::kNumMemTypes] = {0, 0, 0};
  for (const auto* entry : ordered) {
    const auto& [key, members] = *entry;
    const Member lead = members[0];
    const pef::MemType mem = plan.graphs[lead.graph].mem[lead.value];
    uint64_t bytes = 0;
    for (const Member& m : members) {
      const pef::MemType other = plan.graphs[m.graph].mem[m.value];
      SAMBA_CHECK(other == mem, Status::InvalidArgument,
                  "compile: tensors '{}' and '{}' share region '{}' but ask for different memory "
                  "types ({} and {})",
                  inputs[lead.graph].graph->value(lead.value).name,
                  inputs[m.graph].graph->value(m.value).name, key, pef::mem_type_name(mem),
                  pef::mem_type_name(other));
      bytes = std::max(bytes, plan.graphs[m.graph].nbytes[m.value]);
    }
    const int mt = static_cast<int>(mem);
    const Value& lv = inputs[lead.graph].graph->value(lead.value);
    const bool activation = lv.kind == ValueKind::Input || lv.kind == ValueKind::Intermediate;
    uint64_t* cursor = activation ? act_cursor : state_cursor;
    for (const Member& m : members) {
      const Value& mv = inputs[m.graph].graph->value(m.value);
      SAMBA_CHECK((mv.kind == ValueKind::Input || mv.kind == ValueKind::Intermediate) == activation,
                  Status::InvalidArgument,
                  "compile: '{}' ({}) and '{}' ({}) share region '{}', but one is model state and the "
                  "other per-run data",
                  lv.name, value_kind_name(lv.kind), mv.name, value_kind_name(mv.kind), key);
      plan.graphs[m.graph].offset[m.value] = cursor[mt];
    }
    cursor[mt] += align_up(bytes);
    persistent_total += align_up(bytes);
  }

  // The largest set of transient intermediates alive at one step.
  uint64_t live_peak = 0;
  {
    std::vector<int64_t> delta(static_cast<size_t>(step) + 2, 0);
    for (const auto& list : transient)
      for (const Interval& it : list) {
        delta[it.first] += static_cast<int64_t>(it.bytes);
        delta[it.last + 1] -= static_cast<int64_t>(it.bytes);
      }
    int64_t live = 0;
    for (int64_t d : delta) live_peak = std::max<uint64_t>(live_peak, static_cast<uint64_t>(live += d));
  }

  for (int mt = 0; mt < pef::kNumMemTypes; ++mt) {
    const uint64_t used = place_intermediates(transient[mt], act_cursor[mt], plan);
    plan.arena_bytes[mt] = state_cursor[mt];
    plan.activation_bytes[mt] = act_cursor[mt] + used;
    plan.peak_bytes += plan.arena_bytes[mt] + plan.activation_bytes[mt];
  }
  plan.lower_bound_bytes = persistent_total + live_peak;
  return plan;
}

}  // namespace samba::compiler
