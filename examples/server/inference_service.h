// InferenceService: the HTTP API over the served models (docs/serving.md).
//
//   POST /v1/models/<name>/infer   JSON or .npy body -> JSON or .npy answer
//   GET  /v1/models                the models, their inputs and outputs
//   GET  /healthz                  200 while serving
//   GET  /metrics                  Prometheus text
//   POST /admin/shutdown           only when enabled (for tests)
//
// Every refused request gets a JSON body {"error": "..."} naming what was
// wrong and what was expected; the models keep serving.
#pragma once

#include <httplib.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "batcher.h"
#include "metrics.h"
#include "served_model.h"

namespace samba_server {

struct ServiceOptions {
  size_t max_body_bytes = size_t{16} << 20;
  bool admin_shutdown = false;
  int http_threads = 64;
};

class InferenceService {
 public:
  // `models` by name; `request_shutdown` is what POST /admin/shutdown calls.
  InferenceService(std::map<std::string, std::unique_ptr<ServedModel>>& models,
                   BatchingOptions batching, ServiceOptions options,
                   std::function<void()> request_shutdown);

  // Binds `host`:`port` (0: an ephemeral port) and returns the port bound,
  // or -1.
  int bind(const std::string& host, int port);
  // Serves until stop(); returns once every request in flight is answered.
  bool serve();
  // Stops accepting connections; serve() returns when the requests in
  // flight are answered. Safe from any thread.
  void stop() { http_.stop(); }

  const Metrics& metrics() const { return metrics_; }

 private:
  void infer(const httplib::Request& req, httplib::Response& res);
  std::vector<HostTensor> answer(ServedModel& model, const httplib::Request& req);
  void list_models(httplib::Response& res) const;

  std::map<std::string, std::unique_ptr<ServedModel>>& models_;
  const ServiceOptions options_;
  std::function<void()> request_shutdown_;
  Metrics metrics_;
  std::map<std::string, std::unique_ptr<Batcher>> batchers_;
  httplib::Server http_;
  socket_t listen_socket_ = -1;
};

}  // namespace samba_server
