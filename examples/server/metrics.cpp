#include "metrics.h"

#include <fmt/format.h>

namespace samba_server {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& labels) const {
  const std::string sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? fmt::format("{}", bounds_[i]) : "+Inf";
    out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, le, cumulative);
  }
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces, sum_, name, braces, count_);
}

void Metrics::count_answer(const std::string& model, int status, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  PerModel& m = models_[model];
  ++m.answers[status];
  m.latency.observe(seconds);
}

void Metrics::count_run(const std::string& model, int64_t rows) {
  std::lock_guard<std::mutex> lock(mu_);
  models_[model].batch_rows.observe(static_cast<double>(rows));
}

void Metrics::set_queued_rows(const std::string& model, int64_t rows) {
  std::lock_guard<std::mutex> lock(mu_);
  models_[model].queued_rows = rows;
}

int64_t Metrics::answered(int status_class) const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [name, m] : models_)
    for (const auto& [status, count] : m.answers)
      if (status / 100 == status_class) n += static_cast<int64_t>(count);
  return n;
}

std::string Metrics::prometheus_text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out +=
      "# HELP samba_server_requests_total Inference requests answered, by model and HTTP status.\n"
      "# TYPE samba_server_requests_total counter\n";
  for (const auto& [name, m] : models_)
    for (const auto& [status, count] : m.answers)
      out += fmt::format("samba_server_requests_total{{model=\"{}\",code=\"{}\"}} {}\n", name,
                         status, count);
  out +=
      "# HELP samba_server_request_duration_seconds Time from a request's arrival to its answer.\n"
      "# TYPE samba_server_request_duration_seconds histogram\n";
  for (const auto& [name, m] : models_)
    m.latency.write(out, "samba_server_request_duration_seconds",
                    fmt::format("model=\"{}\"", name));
  out +=
      "# HELP samba_server_batch_rows Rows (samples) of the requests gathered into one run.\n"
      "# TYPE samba_server_batch_rows histogram\n";
  for (const auto& [name, m] : models_)
    if (!name.empty())
      m.batch_rows.write(out, "samba_server_batch_rows", fmt::format("model=\"{}\"", name));
  out +=
      "# HELP samba_server_queue_rows Rows waiting for a run.\n"
      "# TYPE samba_server_queue_rows gauge\n";
  for (const auto& [name, m] : models_)
    if (!name.empty())
      out += fmt::format("samba_server_queue_rows{{model=\"{}\"}} {}\n", name, m.queued_rows);
  out +=
      "# HELP samba_server_requests_in_flight Requests being handled.\n"
      "# TYPE samba_server_requests_in_flight gauge\n";
  out += fmt::format("samba_server_requests_in_flight {}\n", in_flight_.load());
  return out;
}

}  // namespace samba_server
