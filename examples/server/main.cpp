// samba-server: serves PEFs over HTTP for inference (docs/serving.md).
//
//   samba-server --model digits=resffn.pef [--model other=x.pef ...] [--port 8080]
//                [--max-batch-delay-us 500 | --no-batching] [--port-file FILE]
//
// SIGINT or SIGTERM stops it gracefully: it stops accepting connections,
// answers every request already received, and exits 0.
#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "inference_service.h"

namespace {

// name=path.pef
std::pair<std::string, std::string> split_model_option(const std::string& value) {
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == value.size() ||
      value.find_first_of("/?#", 0) < eq)
    throw CLI::ValidationError(
        "--model", "'" + value + "' is not NAME=PATH.pef (a name without '/', '?' or '#')");
  return {value.substr(0, eq), value.substr(eq + 1)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"samba-server: serves compiled Samba models (PEFs) over HTTP"};
  std::vector<std::string> model_options;
  std::string host = "127.0.0.1", port_file;
  int port = 8080, session_threads = 0;
  samba_server::BatchingOptions batching;
  samba_server::ServiceOptions service;
  int64_t max_delay_us = batching.max_delay.count();
  bool no_batching = false;
  app.add_option("--model", model_options, "A model to serve, as NAME=PATH.pef (repeatable)")
      ->required();
  app.add_option("--host", host, "Address to listen on")->capture_default_str();
  app.add_option("--port", port, "Port to listen on; 0 picks a free one")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--port-file", port_file, "Write the port bound to this file once listening");
  app.add_option("--max-batch-delay-us", max_delay_us,
                 "Longest a request waits for others to share its run, in microseconds")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{10'000'000}));
  app.add_flag("--no-batching", no_batching, "Run every request alone");
  app.add_option("--concurrent-runs", batching.concurrent_runs,
                 "Runs of one model in flight at once, each on its own execution context")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--session-threads", session_threads,
                 "Threads of each model's session; 0: one per hardware thread")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("--http-threads", service.http_threads, "Connections served at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--max-body-bytes", service.max_body_bytes, "Largest request body accepted")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 34));
  app.add_flag("--enable-admin-shutdown", service.admin_shutdown,
               "Accept POST /admin/shutdown (for tests)");
  CLI11_PARSE(app, argc, argv);
  batching.enabled = !no_batching;
  batching.max_delay = std::chrono::microseconds(max_delay_us);

  // Signals are taken by one thread with sigwait; every other thread, the
  // library's and httplib's included, inherits the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::map<std::string, std::unique_ptr<samba_server::ServedModel>> models;
  try {
    for (const std::string& option : model_options) {
      auto [name, path] = split_model_option(option);
      if (models.count(name))
        throw std::runtime_error("--model: the name '" + name + "' is given twice");
      models[name] = std::make_unique<samba_server::ServedModel>(name, path, session_threads);
    }
  } catch (const std::exception& e) {
    std::cerr << "samba-server: " << e.what() << "\n";
    return 1;
  }

  samba_server::InferenceService service_api(models, batching, service,
                                             [] { kill(getpid(), SIGTERM); });
  const int bound = service_api.bind(host, port);
  if (bound < 0) {
    std::cerr << "samba-server: cannot listen on " << host << ":" << port << "\n";
    return 1;
  }
  std::atomic<bool> serving_done{false};
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    if (serving_done) return;  // woken by main after serve() failed
    std::cerr << "samba-server: " << (signal == SIGINT ? "SIGINT" : "SIGTERM")
              << ": finishing the requests in flight\n";
    // httplib's stop() does nothing before serve() has started listening:
    // a signal right after start must still stop it.
    while (!serving_done) {
      service_api.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  for (const auto& [name, model] : models)
    std::cout << "samba-server: model '" << name << "' from " << model->path() << ": "
              << model->describe()["inputs"].dump() << " -> " << model->describe()["outputs"].dump()
              << (model->batched() ? ", batch " + std::to_string(model->batch_size())
                                   : ", not batched")
              << "\n";
  std::cout << "samba-server: listening on http://" << host << ":" << bound << " ("
            << (batching.enabled ? "batching, max delay " + std::to_string(max_delay_us) + " us"
                                 : "no batching")
            << ")" << std::endl;
  if (!port_file.empty()) {
    // Written whole under another name, then renamed: a reader never sees half.
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << bound << "\n";
    std::rename(tmp.c_str(), port_file.c_str());
  }
  const bool served = service_api.serve();
  serving_done = true;
  // serve() also returns when listening fails: wake the stopper then.
  if (!served) kill(getpid(), SIGTERM);
  stopper.join();
  const samba_server::Metrics& m = service_api.metrics();
  std::cout << "samba-server: stopped; answered " << m.answered(2) << " requests with 2xx, "
            << m.answered(4) << " with 4xx, " << m.answered(5) << " with 5xx" << std::endl;
  return served ? 0 : 1;
}
