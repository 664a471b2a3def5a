// `sambaflow compile MODEL.onnx -o MODEL.pef` and `sambaflow run MODEL.pef
// --input NAME=FILE.npy ...`: the common case of an ONNX model, through the C
// interface as any application would use it.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <samba.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/core/error.h"
#include "engine/pef/reader.h"
#include "examples/server/tensor_codec.h"
#include "tools/command.h"

namespace samba::tool {
namespace {

namespace fs = std::filesystem;

void check(samba_status st) {
  if (st != SAMBA_OK) throw Error(static_cast<Status>(st), samba_last_error_message());
}

template <typename T, void (*Release)(T*)>
struct Releaser {
  void operator()(T* p) const { Release(p); }
};
using SessionPtr = std::unique_ptr<samba_session, Releaser<samba_session, samba_session_release>>;
using TensorPtr = std::unique_ptr<samba_tensor, Releaser<samba_tensor, samba_tensor_release>>;
using ModelPtr =
    std::unique_ptr<samba_onnx_model, Releaser<samba_onnx_model, samba_onnx_model_release>>;
using OptionsPtr = std::unique_ptr<samba_compile_options,
                                   Releaser<samba_compile_options, samba_compile_options_release>>;
using OptimizerPtr =
    std::unique_ptr<samba_optimizer, Releaser<samba_optimizer, samba_optimizer_release>>;

SessionPtr new_session() {
  samba_session* s = nullptr;
  check(samba_session_create(nullptr, &s));
  return SessionPtr(s);
}

std::vector<samba_tensor*> handles(const std::vector<TensorPtr>& ts) {
  std::vector<samba_tensor*> out;
  for (const auto& t : ts) out.push_back(t.get());
  return out;
}

struct CompileOptions {
  std::string model, pef;
  bool inference = false;
  int64_t batch = 0;
  double lr = 0.01;
  std::string loss;
  std::string mixed_precision = "none";
};

// An example input of each graph input, at its declared shape; a symbolic
// first dim is the batch size (-b, or 1).
std::vector<TensorPtr> example_inputs(const samba_onnx_model* m, int64_t batch) {
  size_t n = 0;
  check(samba_onnx_model_input_count(m, &n));
  std::vector<TensorPtr> inputs;
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    samba_dtype dtype = SAMBA_FLOAT32;
    const int64_t* dims = nullptr;
    size_t ndim = 0;
    check(samba_onnx_model_input_info(m, i, &name, &dtype, &dims, &ndim));
    std::vector<int64_t> shape(dims, dims + ndim);
    for (size_t d = 0; d < ndim; ++d) {
      if (shape[d] >= 0) continue;
      if (d != 0)
        throw Error(Status::Unsupported,
                    fmt::format("input '{}' of shape {} has a symbolic dim at position {}; only "
                                "the first (batch) dim may be symbolic, set by -b",
                                name, fmt::join(shape, "x"), d));
      shape[d] = batch > 0 ? batch : 1;
    }
    samba_tensor* t = nullptr;
    check(samba_tensor_create(dtype, shape.data(), shape.size(), &t));
    inputs.emplace_back(t);
    check(samba_tensor_set_name(t, name));
  }
  return inputs;
}

constexpr const char* kOutputNamesKey = "onnx.output_names";

std::vector<std::string> output_names(const samba_onnx_model* m) {
  size_t n = 0;
  check(samba_onnx_model_output_count(m, &n));
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    check(samba_onnx_model_output_info(m, i, &name, nullptr, nullptr, nullptr));
    names.emplace_back(name);
  }
  return names;
}

// Training: SGD with learning rate `lr` over the model's trainable
// initializers (the optimizer retains them).
OptimizerPtr sgd_over_initializers(const samba_onnx_model* m, double lr) {
  std::vector<TensorPtr> params;
  size_t n = 0;
  check(samba_onnx_model_initializer_count(m, &n));
  for (size_t i = 0; i < n; ++i) {
    samba_tensor* t = nullptr;
    check(samba_onnx_model_initializer(m, i, &t));
    TensorPtr owned(t);
    int32_t grad = 0;
    check(samba_tensor_requires_grad(t, &grad));
    if (grad) params.push_back(std::move(owned));
  }
  samba_attrs* attrs = nullptr;
  check(samba_attrs_create(&attrs));
  std::unique_ptr<samba_attrs, Releaser<samba_attrs, samba_attrs_release>> hyper(attrs);
  check(samba_attrs_set_float(attrs, "lr", lr));
  samba_optimizer* opt = nullptr;
  check(samba_optimizer_create("sgd", attrs, &opt));
  OptimizerPtr optimizer(opt);
  const auto ps = handles(params);
  if (!ps.empty()) check(samba_optimizer_add_param_group(opt, ps.data(), ps.size(), nullptr));
  return optimizer;
}

int compile(const CompileOptions& o) {
  samba_onnx_model* raw = nullptr;
  check(samba_onnx_model_load_file(o.model.c_str(), &raw));
  ModelPtr model(raw);
  SessionPtr session = new_session();
  std::vector<TensorPtr> inputs = example_inputs(model.get(), o.batch);

  samba_compile_options* opts_raw = nullptr;
  check(samba_compile_options_create(&opts_raw));
  OptionsPtr opts(opts_raw);
  check(samba_compile_options_set_name(opts.get(), fs::path(o.pef).stem().string().c_str()));
  check(samba_compile_options_set_pef_path(opts.get(), o.pef.c_str()));
  check(samba_compile_options_set_inference(opts.get(), o.inference ? 1 : 0));
  if (o.batch > 0) check(samba_compile_options_set_batch_size(opts.get(), o.batch));
  // The library checks the mode, so the CLI accepts exactly what the C interface does.
  check(samba_compile_options_set_mixed_precision(opts.get(), o.mixed_precision.c_str()));

  // The PEF's outputs are named after the traced ops; the ONNX names go in
  // its metadata, for `run` to name the files it writes.
  const std::vector<std::string> names = output_names(model.get());
  check(samba_compile_options_add_metadata(opts.get(), kOutputNamesKey,
                                           nlohmann::json(names).dump().c_str()));

  OptimizerPtr optimizer;
  if (!o.inference) {
    optimizer = sgd_over_initializers(model.get(), o.lr);
    if (!o.loss.empty()) {
      auto it = std::find(names.begin(), names.end(), o.loss);
      if (it == names.end())
        throw Error(Status::NotFound, fmt::format("--loss '{}' is not an output of {}; its "
                                                  "outputs are: {}",
                                                  o.loss, o.model, fmt::join(names, ", ")));
      const int64_t index = it - names.begin();
      check(samba_compile_options_set_loss_indices(opts.get(), &index, 1));
    }
  }
  const auto in = handles(inputs);
  samba_optimizer* opt = optimizer.get();
  check(samba_session_compile(session.get(), samba_onnx_model_forward, model.get(), in.data(),
                              in.size(), opt ? &opt : nullptr, opt ? 1 : 0, opts.get()));
  const bool fp32 = o.mixed_precision == "none" || o.mixed_precision == "mp0";
  std::printf("wrote %s (%s, %zu inputs%s)\n", o.pef.c_str(), o.inference ? "inference" : "training",
              in.size(), fp32 ? "" : ", mixed precision");
  return 0;
}

struct RunOptions {
  std::string pef;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::string output_dir = ".";
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(Status::IoError, fmt::format("cannot read input file '{}'", path));
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> names_of(const samba_session* s, samba_names_kind kind) {
  size_t n = 0;
  check(samba_session_name_count(s, kind, &n));
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    check(samba_session_name_at(s, kind, i, &name));
    names.emplace_back(name);
  }
  return names;
}

// The .npy file of `spec` (NAME=FILE) as a host tensor named NAME.
TensorPtr input_tensor(const std::string& spec, const std::vector<std::string>& known) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw Error(Status::InvalidArgument, fmt::format("--input '{}' is not NAME=FILE.npy", spec));
  const std::string name = spec.substr(0, eq), path = spec.substr(eq + 1);
  if (std::find(known.begin(), known.end(), name) == known.end())
    throw Error(Status::NotFound, fmt::format("--input '{}': the PEF has no input '{}'; its "
                                              "inputs are: {}",
                                              spec, name, fmt::join(known, ", ")));
  samba_server::HostTensor host;
  try {
    host = samba_server::decode_npy(read_all(path));
  } catch (const samba_server::BadRequest& e) {
    throw Error(Status::CorruptFile, fmt::format("input file '{}': {}", path, e.what()));
  }
  samba_tensor* t = nullptr;
  check(samba_tensor_create(host.dtype, host.shape.data(), host.shape.size(), &t));
  TensorPtr owned(t);
  check(samba_tensor_copy_from(t, host.bytes.data(), host.bytes.size()));
  check(samba_tensor_set_name(t, name.c_str()));
  return owned;
}

void write_npy(samba_tensor* t, const fs::path& path) {
  samba_server::HostTensor host;
  const int64_t* dims = nullptr;
  size_t ndim = 0;
  check(samba_tensor_shape(t, &dims, &ndim));
  host.shape.assign(dims, dims + ndim);
  check(samba_tensor_dtype(t, &host.dtype));
  size_t nbytes = 0;
  check(samba_tensor_nbytes(t, &nbytes));
  host.bytes.resize(nbytes);
  check(samba_tensor_copy_to(t, host.bytes.data(), nbytes));
  std::ofstream f(path, std::ios::binary);
  const std::string bytes = samba_server::encode_npy(host);
  if (!f.write(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw Error(Status::IoError, fmt::format("cannot write '{}'", path.string()));
}

// The ONNX output names `compile` recorded, when the PEF has them for its
// `n` outputs (a PEF compiled otherwise names its outputs itself).
std::vector<std::string> recorded_output_names(const std::string& pef, size_t n) {
  for (const auto& [key, value] : pef::read_pef(pef).metadata) {
    if (key != kOutputNamesKey) continue;
    const nlohmann::json names = nlohmann::json::parse(value, nullptr, false);
    if (!names.is_array() || names.size() != n) return {};
    std::vector<std::string> out;
    for (const auto& v : names) {
      if (!v.is_string()) return {};
      out.push_back(v.get<std::string>());
    }
    return out;
  }
  return {};
}

int run(const RunOptions& o) {
  SessionPtr session = new_session();
  check(samba_session_load_pef(session.get(), o.pef.c_str()));
  const std::vector<std::string> known = names_of(session.get(), SAMBA_NAMES_INPUTS);
  std::vector<TensorPtr> inputs;
  for (const std::string& spec : o.inputs) inputs.push_back(input_tensor(spec, known));
  std::error_code ec;
  fs::create_directories(o.output_dir, ec);
  if (ec)
    throw Error(Status::IoError,
                fmt::format("cannot create --output-dir '{}': {}", o.output_dir, ec.message()));
  const auto in = handles(inputs);
  size_t n_out = 0;
  std::vector<samba_tensor*> outs(names_of(session.get(), SAMBA_NAMES_OUTPUTS).size());
  check(samba_session_run(session.get(), in.data(), in.size(), nullptr, 0, nullptr, outs.data(),
                          outs.size(), &n_out));
  std::vector<TensorPtr> owned;
  for (size_t i = 0; i < n_out; ++i) owned.emplace_back(outs[i]);
  const std::vector<std::string> onnx_names = recorded_output_names(o.pef, n_out);
  for (size_t i = 0; i < owned.size(); ++i) {
    const char* traced = nullptr;
    check(samba_tensor_name(owned[i].get(), &traced));
    std::string name = onnx_names.empty() ? std::string(traced ? traced : "") : onnx_names[i];
    if (name.empty()) name = fmt::format("output_{}", i);
    // An output's name may hold characters a file name cannot.
    std::string file = name;
    for (char& c : file)
      if (c == '/' || c == '\\') c = '_';
    const fs::path path = fs::path(o.output_dir) / (file + ".npy");
    write_npy(owned[i].get(), path);
    std::printf("%s -> %s\n", name.c_str(), path.string().c_str());
  }
  return 0;
}

}  // namespace

void add_model_commands(CLI::App& app, CommandAction& action) {
  auto c = std::make_shared<CompileOptions>();
  CLI::App* compile_cmd = app.add_subcommand(
      "compile", "Compile an ONNX model into a PEF (training unless --inference)");
  compile_cmd->add_option("model", c->model, "the ONNX model file")
      ->required()
      ->check(CLI::ExistingFile);
  compile_cmd->add_option("-o,--output", c->pef, "the PEF file to write")->required();
  compile_cmd->add_flag("--inference", c->inference, "forward only: no gradients, no optimizer");
  compile_cmd->add_option("-b,--batch-size", c->batch, "batch size: a symbolic first dim's value")
      ->check(CLI::PositiveNumber);
  compile_cmd->add_option("--lr", c->lr, "SGD learning rate of a training compile")
      ->check(CLI::NonNegativeNumber);
  compile_cmd->add_option("--loss", c->loss,
                          "the output that is the loss (default: every output, scalars first)");
  compile_cmd->add_option("--mixed-precision,--graphamp-preset", c->mixed_precision,
                          "none (default) or bf16: products in bf16 with fp32 accumulation "
                          "and fp32 master weights (SambaFlow's presets mp0 and mp1 too)");
  compile_cmd->callback([&action, c] { action = [c] { return compile(*c); }; });

  auto r = std::make_shared<RunOptions>();
  CLI::App* run_cmd = app.add_subcommand("run", "Run a PEF on inputs from .npy files");
  run_cmd->add_option("pef", r->pef, "the PEF file")->required()->check(CLI::ExistingFile);
  run_cmd->add_option("-i,--input", r->inputs, "NAME=FILE.npy, one per model input");
  run_cmd->add_option("--output-dir", r->output_dir,
                      "where each output is written as <name>.npy (default: .)");
  run_cmd->callback([&action, r] { action = [r] { return run(*r); }; });
}

}  // namespace samba::tool
