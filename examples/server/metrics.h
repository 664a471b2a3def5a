// The server's Prometheus metrics (text exposition format 0.0.4): answers by
// model and HTTP status, request latency, rows per run, and the rows waiting
// for a run. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace samba_server {

// A cumulative histogram with fixed upper bounds (the +Inf bucket is implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket, _sum and _count lines of `name` with `labels`
  // ("model=\"x\"", may be empty).
  void write(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, then +Inf; not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  // `model` is "" for requests that named no served model.
  void count_answer(const std::string& model, int status, double seconds);
  void count_run(const std::string& model, int64_t rows);
  // Rows waiting in a model's queue (set by its batcher).
  void set_queued_rows(const std::string& model, int64_t rows);
  // Requests being handled (decoding, queued, running or answering).
  void add_in_flight(int delta) { in_flight_ += delta; }
  int64_t answered(int status_class) const;  // 2 for 2xx, 4 for 4xx, ...

  std::string prometheus_text() const;

 private:
  struct PerModel {
    std::map<int, uint64_t> answers;  // by status
    Histogram latency{{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}};
    Histogram batch_rows{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}};
    int64_t queued_rows = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, PerModel> models_;
  std::atomic<int64_t> in_flight_{0};
};

}  // namespace samba_server
