#include "engine/runtime/pipeline.h"

#include <oneapi/tbb/flow_graph.h>

#include <atomic>
#include <exception>
#include <mutex>

#include "engine/runtime/tbb_handover.h"

namespace samba::runtime {

namespace flow = tbb::flow;
using Node = flow::continue_node<flow::continue_msg>;

struct MicroBatchPipeline::Graph {
  ExecutionContext& ctx;
  std::vector<int32_t> sections;
  int64_t micro = 0;
  int slots = 0;
  flow::graph graph;
  flow::broadcast_node<flow::continue_msg> start{graph};
  std::vector<std::unique_ptr<Node>> nodes;
  // Per run: the values of each micro-batch (its own random stream).
  std::vector<RunValues> per_micro;
  const std::function<void(int64_t, ExecutionContext&)>* finished = nullptr;
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  std::exception_ptr error;

  explicit Graph(ExecutionContext& c) : ctx(c) {}

  // A node running `body` unless an earlier node failed.
  Node& node(std::function<void()> body) {
    nodes.push_back(std::make_unique<Node>(graph, [this, body = std::move(body)](const flow::continue_msg&) {
      taken_over(this);
      if (!failed.load(std::memory_order_relaxed)) {
        try {
          body();
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!error) error = std::current_exception();
          failed = true;
        }
      }
      handed_over(this);
    }));
    return *nodes.back();
  }
};

MicroBatchPipeline::MicroBatchPipeline(ExecutionContext& ctx, std::vector<int32_t> sections, int64_t micro, int slots)
    : g_(std::make_unique<Graph>(ctx)) {
  Graph& g = *g_;
  g.sections = std::move(sections);
  g.micro = micro;
  g.slots = slots;
  const Program& prog = ctx.program();
  for (int s = 0; s < slots; ++s) ctx.slot(s);  // slots exist before any node runs

  std::vector<Node*> done(static_cast<size_t>(micro), nullptr);
  // Per section-local kernel position, the node of the previous micro-batch
  // (for kernels that write state).
  std::vector<std::vector<Node*>> last_state_writer(g.sections.size());
  for (size_t i = 0; i < g.sections.size(); ++i)
    last_state_writer[i].assign(prog.sections()[static_cast<size_t>(g.sections[i])].kernels.size(), nullptr);

  for (int64_t m = 0; m < micro; ++m) {
    ExecutionContext& slot = ctx.slot(static_cast<int>(m % slots));
    Node& begin = g.node([&slot, m] { slot.select_micro_batch(static_cast<int32_t>(m)); });
    if (m < slots)
      flow::make_edge(g.start, begin);
    else
      flow::make_edge(*done[static_cast<size_t>(m - slots)], begin);  // its slot is free again
    Node* barrier = &begin;
    std::vector<Node*> all_kernels;
    for (size_t si = 0; si < g.sections.size(); ++si) {
      const SectionPlan& sp = prog.sections()[static_cast<size_t>(g.sections[si])];
      std::vector<Node*> knodes;
      for (size_t j = 0; j < sp.kernels.size(); ++j) {
        const int32_t kernel = sp.kernels[j];
        Graph* raw = &g;
        Node& k = g.node([raw, &slot, kernel, m] { slot.run_kernel(kernel, raw->per_micro[static_cast<size_t>(m)]); });
        knodes.push_back(&k);
        all_kernels.push_back(&k);
        if (sp.preds[j].empty()) flow::make_edge(*barrier, k);
        for (int32_t p : sp.preds[j]) flow::make_edge(*knodes[static_cast<size_t>(p)], k);
        if (prog.kernels()[static_cast<size_t>(kernel)].writes_state) {
          if (Node* prev = last_state_writer[si][j]) flow::make_edge(*prev, k);
          last_state_writer[si][j] = &k;
        }
      }
      if (si + 1 < g.sections.size()) {
        Node& next = g.node([] {});
        for (Node* k : knodes) flow::make_edge(*k, next);
        if (knodes.empty()) flow::make_edge(*barrier, next);
        barrier = &next;
      }
    }
    Graph* raw = &g;
    Node& end = g.node([raw, &slot, m] { (*raw->finished)(m, slot); });
    for (Node* k : all_kernels) flow::make_edge(*k, end);
    if (all_kernels.empty()) flow::make_edge(*barrier, end);
    if (m > 0) flow::make_edge(*done[static_cast<size_t>(m - 1)], end);  // in order
    done[static_cast<size_t>(m)] = &end;
  }
}

MicroBatchPipeline::~MicroBatchPipeline() = default;

bool MicroBatchPipeline::matches(const std::vector<int32_t>& sections, int64_t micro, int slots) const {
  return g_->sections == sections && g_->micro == micro && g_->slots == slots;
}

void MicroBatchPipeline::run(const RunValues& values,
                             const std::function<void(int64_t, ExecutionContext&)>& finished) {
  Graph& g = *g_;
  g.per_micro.assign(static_cast<size_t>(g.micro), values);
  for (int64_t m = 0; m < g.micro; ++m) g.per_micro[static_cast<size_t>(m)].rng_step = values.rng_step * g.micro + m;
  g.finished = &finished;
  g.failed = false;
  g.error = nullptr;
  handed_over(&g);
  g.start.try_put(flow::continue_msg());
  g.graph.wait_for_all();
  taken_over(&g);
  g.finished = nullptr;
  if (g.error) std::rethrow_exception(g.error);
}

MicroBatchPipeline& pipeline_for(ExecutionContext& ctx, const std::vector<int32_t>& sections, int64_t micro,
                                 int slots) {
  using Cache = std::vector<std::unique_ptr<MicroBatchPipeline>>;
  auto& holder = ctx.pipeline_cache();
  if (!holder) holder = std::make_shared<Cache>();
  auto& cache = *static_cast<Cache*>(holder.get());
  for (auto& p : cache)
    if (p->matches(sections, micro, slots)) return *p;
  cache.push_back(std::make_unique<MicroBatchPipeline>(ctx, sections, micro, slots));
  return *cache.back();
}

}  // namespace samba::runtime
