// samba-server under load, from a client's side (loopback only).
//
//   samba_server_test --server BIN --pef MODEL.pef --workdir DIR [--no-batching]
//                     [--requests 2000] [--malformed 200] [--clients 16]
//
// Starts the server on an ephemeral port serving the PEF under two names,
// sends the valid requests (one sample or several, JSON or .npy, answered as
// JSON or .npy) from concurrent clients with the malformed ones among them,
// and checks every answer bit for bit against a direct samba_session_run of
// the same rows in this process, and every malformed request gets its 4xx
// with a message naming the fault. Then it stops the server while clients
// keep sending (SIGTERM, or POST /admin/shutdown without batching) and
// checks the server exits 0 having answered exactly what the clients got.
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "served_model.h"
#include "tensor_codec.h"

namespace fs = std::filesystem;
using nlohmann::json;
using samba_server::HostTensor;

namespace {

std::mutex g_fail_mu;
std::atomic<int> g_failures{0};

void fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_fail_mu);
  if (++g_failures <= 20) std::cerr << "FAIL: " << what << "\n";
}

// The reference: the served model loaded here, run directly.
struct Reference {
  explicit Reference(const std::string& pef) : model("reference", pef, 1) {}
  int64_t batch() const { return model.batch_size(); }
  int64_t features() const { return model.inputs()[0].shape[1]; }
  int64_t classes() const { return model.outputs()[0].shape[1]; }
  // samba_session_run of `rows` alone (padded with zeros to the batch).
  std::string logits(const std::vector<float>& rows) const {
    samba_server::Rows r;
    r.count = static_cast<int64_t>(rows.size()) / features();
    r.inputs.emplace_back(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(float));
    return model.run({&r})[0][0].bytes;
  }
  samba_server::ServedModel model;
};

struct Server {
  pid_t pid = -1;
  int port = 0;
  fs::path log;
};

Server start_server(const std::string& bin, const std::string& pef, const fs::path& dir,
                    bool batching, size_t max_body) {
  fs::create_directories(dir);
  Server s;
  s.log = dir / "server.log";
  const fs::path port_file = dir / "port";
  fs::remove(port_file);
  std::vector<std::string> args = {bin,
                                   "--model",
                                   "resffn=" + pef,
                                   "--model",
                                   "copy=" + pef,
                                   "--port",
                                   "0",
                                   "--port-file",
                                   port_file.string(),
                                   "--max-body-bytes",
                                   std::to_string(max_body),
                                   "--session-threads",
                                   "2"};
  if (batching) {
    args.insert(args.end(), {"--max-batch-delay-us", "3000"});
  } else {
    args.insert(args.end(), {"--no-batching", "--enable-admin-shutdown"});
  }
  s.pid = fork();
  if (s.pid == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int fd = ::open(s.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  for (int i = 0; i < 600 && !fs::exists(port_file); ++i) {
    int status = 0;
    if (waitpid(s.pid, &status, WNOHANG) == s.pid)
      throw std::runtime_error("the server exited at start; see " + s.log.string());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::ifstream(port_file) >> s.port;
  if (s.port <= 0) throw std::runtime_error("the server wrote no port to " + port_file.string());
  return s;
}

std::string npy_of(const std::vector<float>& v, std::vector<int64_t> shape) {
  HostTensor t;
  t.shape = std::move(shape);
  t.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return samba_server::encode_npy(t);
}

std::string json_of(const std::string& input, const std::vector<float>& v,
                    const std::vector<int64_t>& shape, const std::string& dtype = "float32") {
  std::ostringstream data;
  data.precision(9);  // every float32 reads back exactly
  for (size_t i = 0; i < v.size(); ++i) data << (i ? "," : "") << v[i];
  return "{\"inputs\": {\"" + input + "\": {\"shape\": " + json(shape).dump() + ", \"dtype\": \"" +
         dtype + "\", \"data\": [" + data.str() + "]}}}";
}

// The logits in an answer, as raw float32 bytes.
std::string answer_bytes(const httplib::Result& res, bool npy, const std::string& output) {
  if (npy) return samba_server::decode_npy(res->body).bytes;
  const json doc = json::parse(res->body);
  std::string out;
  for (const json& v : doc.at("outputs").at(output).at("data")) {
    const float f = static_cast<float>(v.get<double>());
    out.append(reinterpret_cast<const char*>(&f), sizeof f);
  }
  return out;
}

struct Tally {
  std::atomic<int64_t> ok{0}, refused{0};
  std::atomic<int64_t> resffn_requests{0}, resffn_rows{0};  // sent to model "resffn"
};

// Valid request `j`: its rows from a generator seeded by j.
void valid_request(httplib::Client& cli, const Reference& ref, int64_t j, Tally& tally,
                   bool tolerate_transport) {
  std::mt19937_64 rng(static_cast<uint64_t>(j) * 0x9E3779B97F4A7C15ull + 1);
  const bool single = j % 3 == 0;
  const int64_t n =
      single ? 1 : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(ref.batch()));
  std::vector<float> rows(static_cast<size_t>(n * ref.features()));
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  for (float& x : rows) x = dist(rng);
  const std::vector<int64_t> shape =
      single ? std::vector<int64_t>{ref.features()} : std::vector<int64_t>{n, ref.features()};
  const bool send_npy = j % 2 == 1, answer_npy = j % 4 >= 2;
  const std::string model = j % 5 == 0 ? "copy" : "resffn";
  httplib::Headers headers;
  if (answer_npy) headers.emplace("Accept", "application/x-npy");
  // Now and then the input and the output are named in the query.
  std::string path = "/v1/models/" + model + "/infer";
  std::string query;
  if (send_npy && j % 3 == 1) query += "input=image";
  if (answer_npy && j % 8 >= 6)
    query += (query.empty() ? "" : "&") + ("output=" + ref.model.outputs()[0].name);
  if (!query.empty()) path += "?" + query;
  auto res =
      send_npy ? cli.Post(path.c_str(), headers, npy_of(rows, shape), "application/x-npy")
               : cli.Post(path.c_str(), headers, json_of("image", rows, shape), "application/json");
  if (!res) {
    if (!tolerate_transport)
      fail("request " + std::to_string(j) + ": " + httplib::to_string(res.error()) + " (" +
           std::string(send_npy ? "npy" : "json") + ")");
    throw std::runtime_error("transport");
  }
  ++tally.ok;
  if (model == "resffn") {
    ++tally.resffn_requests;
    tally.resffn_rows += n;
  }
  if (res->status != 200)
    return fail("request " + std::to_string(j) + ": HTTP " + std::to_string(res->status) + " " +
                res->body);
  const std::string output = ref.model.outputs()[0].name;
  if (answer_bytes(res, answer_npy, output) != ref.logits(rows))
    fail("request " + std::to_string(j) + " (" + std::to_string(n) +
         " rows): the answer differs from a direct run");
  if (!answer_npy) {
    const json logits = json::parse(res->body)["outputs"][output];
    const std::vector<int64_t> expected =
        single ? std::vector<int64_t>{ref.classes()} : std::vector<int64_t>{n, ref.classes()};
    if (logits["shape"].get<std::vector<int64_t>>() != expected || logits["dtype"] != "float32")
      fail("request " + std::to_string(j) + ": answer shape " + logits["shape"].dump() + " dtype " +
           logits["dtype"].dump());
  }
}

constexpr int kMalformedKinds = 14;

// Malformed request `k`: the status and a word its message must hold.
void malformed_request(httplib::Client& cli, const Reference& ref, int64_t k, size_t max_body,
                       Tally& tally) {
  const int64_t f = ref.features();
  const std::vector<float> row(static_cast<size_t>(f), 0.5f);
  std::string body, type = "application/json", path = "/v1/models/resffn/infer", word;
  httplib::Headers headers;
  int status = 400;
  switch (k % kMalformedKinds) {
    case 0:
      body = json_of("image", std::vector<float>(static_cast<size_t>(f + 1), 1.f), {f + 1});
      word = "shape";
      break;
    case 1:
      body = json_of("image", std::vector<float>(static_cast<size_t>(f), 2.f), {f}, "int64");
      word = "dtype";
      break;
    case 2:
      body = json_of("picture", row, {f});
      word = "no input 'picture'";
      break;
    case 3:
      body = json_of("image", row, {f});
      path = "/v1/models/nosuch/infer";
      status = 404;
      word = "no model";
      break;
    case 4:
      body = json_of("image", row, {f}).substr(0, 40);
      word = "not valid JSON";
      break;
    case 5:
      body = npy_of(row, {f}).substr(0, 70);
      type = "application/x-npy";
      word = ".npy";
      break;
    case 6:
      body = std::string(max_body + 1 + static_cast<size_t>(k), ' ');
      word = "over the limit";
      break;
    case 7: {
      HostTensor doubles;
      doubles.dtype = SAMBA_FLOAT64;
      doubles.shape = {f};
      doubles.bytes.assign(static_cast<size_t>(f) * sizeof(double), '\0');
      body = samba_server::encode_npy(doubles);
      type = "application/x-npy";
      word = "dtype float64, expected float32";
      break;
    }
    case 8:
      body = json_of("image", std::vector<float>(static_cast<size_t>((ref.batch() + 1) * f), 1.f),
                     {ref.batch() + 1, f});
      word = "1 <= n <= " + std::to_string(ref.batch());
      break;
    case 9:
      body = json_of("image", row, {f, 2});
      word = "needs";
      break;
    case 10:
      body = npy_of(row, {f});
      body.replace(body.find("False"), 5, "Maybe");
      type = "application/x-npy";
      word = "fortran_order";
      break;
    case 11:
      body = json_of("image", row, {f});
      body.replace(body.find("\"float32\""), 9, "32");
      word = "\"dtype\" is 32";
      break;
    case 12:
      body = npy_of(row, {f});
      type = "application/x-npy";
      path += "?input=picture";
      word = "no input 'picture'";
      break;
    default:
      body = json_of("image", row, {f});
      headers.emplace("Accept", "application/x-npy");
      path += "?output=nosuch";
      word = "name it with ?output=<name>";
      break;
  }
  auto res = cli.Post(path.c_str(), headers, body, type.c_str());
  const std::string what = "malformed request " + std::to_string(k) + " (kind " +
                           std::to_string(k % kMalformedKinds) + ")";
  if (!res) return fail(what + ": no answer: " + httplib::to_string(res.error()));
  ++tally.refused;
  if (res->status != status)
    return fail(what + ": HTTP " + std::to_string(res->status) + ", expected " +
                std::to_string(status) + ": " + res->body);
  const json doc = json::parse(res->body, nullptr, false);
  if (doc.is_discarded() || !doc.contains("error") ||
      doc["error"].get<std::string>().find(word) == std::string::npos)
    fail(what + ": message " + res->body + " does not mention '" + word + "'");
}

// Bodies that are neither valid nor one of the kinds above: valid JSON and
// .npy bodies with bytes flipped, cut out or inserted, and a few extremes.
// Each must be answered 200 or 400 with a JSON message: nothing else.
void mutated_requests(httplib::Client& cli, const Reference& ref, int count, int64_t& ok,
                      int64_t& refused) {
  const int64_t f = ref.features();
  const std::vector<float> rows(static_cast<size_t>(2 * f), 0.25f);
  std::vector<std::pair<std::string, std::string>> bodies = {
      {"{\"inputs\": " + std::string(100000, '['), "application/json"},
      {"{\"inputs\": {\"image\": {\"shape\": [99999999999, 99999999999, 99999999999], \"data\": "
       "[]}}}",
       "application/json"},
      {"{\"inputs\": {\"image\": {\"shape\": [" + std::to_string(f) + "], \"data\": [1e400]}}}",
       "application/json"},
      {"{\"inputs\": {\"image\": 5}}", "application/json"},
      {"null", "application/json"},
      {std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12), "application/x-npy"},
      {std::string("\x93NUMPY\x01\x00\xff\x0f{'descr': '", 19) + std::string(4000, 'a'),
       "application/x-npy"},
  };
  std::mt19937 rng(12345);
  for (int i = 0; i < count; ++i) {
    std::string body = i % 2 ? npy_of(rows, {2, f}) : json_of("image", rows, {2, f});
    for (int m = 0; m < 1 + static_cast<int>(rng() % 4); ++m) {
      const size_t at = rng() % body.size();
      switch (rng() % 3) {
        case 0:
          body[at] = static_cast<char>(rng());
          break;
        case 1:
          body.erase(at, 1 + rng() % 10);
          break;
        default:
          body.insert(at, std::string(1 + rng() % 5, static_cast<char>(rng())));
          break;
      }
      if (body.empty()) body = "x";
    }
    bodies.emplace_back(body, i % 2 ? "application/x-npy" : "application/json");
  }
  for (const auto& [body, type] : bodies) {
    auto res = cli.Post("/v1/models/resffn/infer", body, type.c_str());
    if (!res) {
      fail("mutated body: no answer: " + httplib::to_string(res.error()));
      continue;
    }
    const json doc = json::parse(res->body, nullptr, false);
    if (res->status == 200) {
      ++ok;
    } else if (res->status == 400 && !doc.is_discarded() && doc.contains("error")) {
      ++refused;
    } else {
      fail("mutated body: HTTP " + std::to_string(res->status) + " " + res->body.substr(0, 200));
    }
  }
}

int wait_exit(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"samba-server under load"};
  std::string server_bin, pef, workdir;
  int64_t requests = 2000, malformed = 200;
  int clients = 16;
  bool no_batching = false;
  app.add_option("--server", server_bin)->required();
  app.add_option("--pef", pef)->required();
  app.add_option("--workdir", workdir)->required();
  app.add_option("--requests", requests);
  app.add_option("--malformed", malformed);
  app.add_option("--clients", clients);
  app.add_flag("--no-batching", no_batching);
  CLI11_PARSE(app, argc, argv);
  const size_t max_body = 4 << 20;  // above every valid request of the models tested
  try {
    const Reference ref(pef);
    Server server = start_server(server_bin, pef, workdir, !no_batching, max_body);
    std::cout << "server on port " << server.port
              << (no_batching ? " without batching" : " with batching") << "\n";

    // Valid and malformed requests interleaved: job j is malformed when
    // j % stride == stride - 1.
    const int64_t total = requests + malformed, stride = malformed ? total / malformed : total + 1;
    std::atomic<int64_t> next{0};
    Tally tally;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c)
      threads.emplace_back([&] {
        httplib::Client cli("127.0.0.1", server.port);
        cli.set_read_timeout(60);
        for (int64_t j; (j = next++) < total;) {
          const bool bad = j % stride == stride - 1 && j / stride < malformed;
          try {
            if (bad)
              malformed_request(cli, ref, j / stride, max_body, tally);
            else
              valid_request(cli, ref, j, tally, false);
          } catch (const std::exception& e) {
            fail(std::string("request ") + std::to_string(j) + ": " + e.what());
          }
        }
      });
    for (std::thread& t : threads) t.join();
    threads.clear();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << tally.ok << " valid and " << tally.refused << " malformed requests answered in "
              << seconds << " s\n";
    if (tally.ok != requests || tally.refused != malformed) fail("not every request was answered");

    httplib::Client cli("127.0.0.1", server.port);
    auto models = cli.Get("/v1/models");
    if (!models || models->status != 200) {
      fail("GET /v1/models");
    } else {
      const json m = json::parse(models->body)["models"][1];  // "resffn" sorts after "copy"
      if (m["name"] != "resffn" || m["batch_size"] != ref.batch() ||
          m["inputs"][0]["name"] != "image" ||
          m["inputs"][0]["shape"] != json({ref.batch(), ref.features()}) ||
          m["outputs"][0]["dtype"] != "float32")
        fail("GET /v1/models: " + models->body);
    }
    auto health = cli.Get("/healthz");
    if (!health || health->status != 200) fail("GET /healthz");
    auto metrics = cli.Get("/metrics");
    if (!metrics || metrics->status != 200) {
      fail("GET /metrics");
    } else {
      std::smatch m;
      const std::string& text = metrics->body;
      const std::regex answered(
          R"(samba_server_requests_total\{model="resffn",code="200"\} (\d+))");
      if (!std::regex_search(text, m, answered))
        fail("/metrics has no count of resffn's 200 answers:\n" + text);
      const std::regex runs(R"(samba_server_batch_rows_count\{model="resffn"\} (\d+))");
      const std::regex rows(R"(samba_server_batch_rows_sum\{model="resffn"\} (\d+))");
      std::smatch r, n;
      if (!std::regex_search(text, r, runs) || !std::regex_search(text, n, rows)) {
        fail("/metrics has no batch size histogram:\n" + text);
      } else {
        const double mean = std::stod(n[1]) / std::stod(r[1]);
        std::cout << "resffn: " << r[1] << " runs, " << mean << " rows per run\n";
        // Without batching a run holds one request; with it, runs must
        // gather several now and then.
        const double per_request = double(tally.resffn_rows) / double(tally.resffn_requests);
        if (no_batching ? std::abs(mean - per_request) > 1e-9 : mean < 1.03 * per_request)
          fail("runs hold " + std::to_string(mean) + " rows on average, requests " +
               std::to_string(per_request));
      }
      if (text.find("samba_server_request_duration_seconds_bucket{model=\"resffn\",le=\"+Inf\"}") ==
              std::string::npos ||
          text.find("samba_server_queue_rows{model=\"resffn\"}") == std::string::npos)
        fail("/metrics lacks the latency histogram or the queue depth:\n" + text);
    }
    if (!no_batching) {
      auto admin = cli.Post("/admin/shutdown");
      if (!admin || admin->status != 404)
        fail("POST /admin/shutdown must be refused unless enabled");
    }

    // After the metrics are read: these runs would change the rows per run.
    int64_t mutated_ok = 0, mutated_refused = 0;
    mutated_requests(cli, ref, static_cast<int>(malformed), mutated_ok, mutated_refused);
    std::cout << "mutated bodies: " << mutated_ok << " answered, " << mutated_refused
              << " refused\n";

    // Stop under load: clients keep sending until the server stops taking
    // their requests; every answer they get must still be right.
    Tally last;
    std::atomic<int64_t> last_index{1'000'000};
    std::atomic<bool> give_up{false};
    for (int c = 0; c < clients; ++c)
      threads.emplace_back([&] {
        httplib::Client c2("127.0.0.1", server.port);
        c2.set_read_timeout(60);
        try {
          while (!give_up) valid_request(c2, ref, last_index++, last, true);
        } catch (const std::exception&) {
        }
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const int64_t before_stop = last.ok;
    if (no_batching) {
      auto res = cli.Post("/admin/shutdown");
      if (!res || res->status != 200) fail("POST /admin/shutdown");
    } else {
      kill(server.pid, SIGTERM);
    }
    const int code = wait_exit(server.pid, 60);
    give_up = true;
    for (std::thread& t : threads) t.join();
    std::cout << "stopped under load: " << before_stop << " answers before the stop, " << last.ok
              << " in all; exit " << code << "\n";
    if (code != 0)
      fail("the server exited with " + std::to_string(code) + "; see " + server.log.string());
    if (before_stop == 0) fail("no request was answered while stopping");
    // No request lost: the server answered exactly what the clients received.
    std::ifstream log(server.log);
    std::string line, summary;
    while (std::getline(log, line))
      if (line.find("stopped; answered") != std::string::npos) summary = line;
    const std::string expected =
        "answered " + std::to_string(requests + mutated_ok + last.ok) + " requests with 2xx, " +
        std::to_string(malformed + mutated_refused) + " with 4xx, 0 with 5xx";
    if (summary.find(expected) == std::string::npos)
      fail("the server's summary '" + summary + "' is not '" + expected + "'");
  } catch (const std::exception& e) {
    fail(e.what());
  }
  if (g_failures) {
    std::cerr << g_failures << " failures\n";
    return 1;
  }
  std::cout << "PASS\n";
  return 0;
}
