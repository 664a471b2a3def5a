#include "inference_service.h"

#include <chrono>

namespace samba_server {
namespace {

using nlohmann::json;

constexpr const char* kJson = "application/json";
constexpr const char* kNpy = "application/x-npy";

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  // Messages quote what the client sent, which need not be UTF-8.
  res.set_content(json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace),
                  kJson);
}

bool content_type_is(const httplib::Request& req, const char* type) {
  const std::string value = req.get_header_value("Content-Type");
  return value.compare(0, std::char_traits<char>::length(type), type) == 0;
}

std::string output_names(const ServedModel& model) {
  std::string names;
  for (const TensorSpec& s : model.outputs()) names += (names.empty() ? "'" : ", '") + s.name + "'";
  return names;
}

// Counts a request as in flight for as long as its handler runs.
class InFlight {
 public:
  explicit InFlight(Metrics& m) : m_(m) { m_.add_in_flight(1); }
  ~InFlight() { m_.add_in_flight(-1); }

 private:
  Metrics& m_;
};

}  // namespace

InferenceService::InferenceService(std::map<std::string, std::unique_ptr<ServedModel>>& models,
                                   BatchingOptions batching, ServiceOptions options,
                                   std::function<void()> request_shutdown)
    : models_(models), options_(options), request_shutdown_(std::move(request_shutdown)) {
  for (auto& [name, model] : models_)
    batchers_[name] = std::make_unique<Batcher>(*model, batching, metrics_);

  // A keep-alive connection holds a thread, so there are enough for every
  // client of a busy server, and no client waits behind another's connection.
  const int threads = options_.http_threads;
  http_.new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  http_.set_keep_alive_max_count(100000);
  http_.set_keep_alive_timeout(2);
  http_.set_tcp_nodelay(true);
  http_.set_payload_max_length(options_.max_body_bytes);
  http_.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);  // SO_REUSEADDR
    listen_socket_ = sock;
  });

  http_.Post(R"(/v1/models/([^/]+)/infer)",
             [this](const httplib::Request& req, httplib::Response& res) { infer(req, res); });
  http_.Get("/v1/models",
            [this](const httplib::Request&, httplib::Response& res) { list_models(res); });
  http_.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"status", "serving"}}.dump(), kJson);
  });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.prometheus_text(), "text/plain; version=0.0.4");
  });
  http_.Post("/admin/shutdown", [this](const httplib::Request&, httplib::Response& res) {
    if (!options_.admin_shutdown)
      return send_error(
          res, 404,
          "POST /admin/shutdown is disabled; start the server with --enable-admin-shutdown");
    res.set_content(json{{"status", "shutting down"}}.dump(), kJson);
    request_shutdown_();
  });
  // What httplib refuses before a handler runs (a body over the limit, an
  // unknown path, a malformed request line) gets a JSON message too. The
  // limit is a property of the request, hence 400 rather than 413.
  http_.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        // Not counted by a handler: count it here, under no model.
        metrics_.count_answer("", res.status == 413 ? 400 : res.status, 0.0);
        if (res.status == 413) {
          // The body was left unread: the connection cannot carry another request.
          res.set_header("Connection", "close");
          send_error(res, 400,
                     "the request body of " + req.get_header_value("Content-Length") +
                         " bytes is over the limit of " + std::to_string(options_.max_body_bytes) +
                         " bytes (--max-body-bytes)");
        } else if (res.status == 404) {
          send_error(res, 404,
                     "no endpoint " + req.method + " " + req.path +
                         "; expected POST /v1/models/<name>/infer, GET /v1/models, GET /healthz or "
                         "GET /metrics");
        } else {
          send_error(res, res.status,
                     "the request is malformed (HTTP status " + std::to_string(res.status) + ")");
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
}

int InferenceService::bind(const std::string& host, int port) {
  const int bound =
      port == 0 ? http_.bind_to_any_port(host) : (http_.bind_to_port(host, port) ? port : -1);
  // httplib listens with a backlog of 5: when more clients connect at once
  // than its accept loop takes, the kernel drops their handshakes and the
  // requests they already sent fail. Listening again only raises the backlog.
  if (bound > 0 && listen_socket_ >= 0) ::listen(listen_socket_, SOMAXCONN);
  return bound;
}

bool InferenceService::serve() { return http_.listen_after_bind(); }

void InferenceService::list_models(httplib::Response& res) const {
  json list = json::array();
  for (const auto& [name, model] : models_) list.push_back(model->describe());
  res.set_content(json{{"models", list}}.dump(), kJson);
}

std::vector<HostTensor> InferenceService::answer(ServedModel& model, const httplib::Request& req) {
  std::map<std::string, HostTensor> tensors;
  if (content_type_is(req, kNpy)) {
    std::string input = req.get_param_value("input");
    if (input.empty()) {
      if (model.inputs().size() != 1)
        throw BadRequest(
            400, "model '" + model.name() + "' has " + std::to_string(model.inputs().size()) +
                     " inputs; name the one the .npy body holds with ?input=<name>, or send JSON");
      input = model.inputs()[0].name;
    }
    tensors.emplace(input, decode_npy(req.body));
  } else if (content_type_is(req, kJson) || !req.has_header("Content-Type")) {
    tensors = decode_json_inputs(req.body);
  } else {
    throw BadRequest(400, "Content-Type '" + req.get_header_value("Content-Type") + "' is not " +
                              kJson + " or " + kNpy);
  }
  const Rows rows = model.check_request(std::move(tensors));
  return batchers_.at(model.name())->infer(rows);
}

void InferenceService::infer(const httplib::Request& req, httplib::Response& res) {
  const InFlight in_flight(metrics_);
  const auto start = std::chrono::steady_clock::now();
  const std::string name = req.matches[1];
  auto it = models_.find(name);
  std::string label;  // the metrics' model label: only names of served models
  try {
    if (it == models_.end()) {
      std::string served;
      for (const auto& [n, m] : models_) served += (served.empty() ? "'" : ", '") + n + "'";
      throw BadRequest(404, "no model '" + name + "'; the server serves " + served);
    }
    ServedModel& model = *it->second;
    label = model.name();
    // Which output an .npy answer holds is settled before anything runs.
    const bool npy_answer = req.get_header_value("Accept").find(kNpy) != std::string::npos;
    const std::string output = req.get_param_value("output");
    const size_t n_outputs = model.outputs().size();
    size_t index = n_outputs;
    for (size_t i = 0; i < n_outputs; ++i)
      if (model.outputs()[i].name == output || (output.empty() && n_outputs == 1)) index = i;
    if (npy_answer && index == n_outputs)
      throw BadRequest(
          400, "an .npy answer holds one output: name it with ?output=<name> (model '" +
                   model.name() + "' has outputs " + output_names(model) + "), or accept JSON");
    std::vector<HostTensor> outputs = answer(model, req);
    if (npy_answer) {
      res.set_content(encode_npy(outputs[index]), kNpy);
    } else {
      json out = json::object();
      for (size_t i = 0; i < outputs.size(); ++i)
        out[model.outputs()[i].name] = encode_json(outputs[i]);
      res.set_content(json{{"model", model.name()}, {"outputs", std::move(out)}}.dump(), kJson);
    }
    res.status = 200;
  } catch (const BadRequest& e) {
    send_error(res, e.status, e.what());
  } catch (const std::exception& e) {
    send_error(res, 500, std::string("the run failed: ") + e.what());
  }
  metrics_.count_answer(
      label, res.status,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace samba_server
