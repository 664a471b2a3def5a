#include "served_model.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace samba_server {
namespace {

void check(samba_status st, const std::string& what) {
  if (st != SAMBA_OK)
    throw std::runtime_error(what + ": " + samba_status_name(st) + ": " +
                             samba_last_error_message());
}

struct TensorRelease {
  void operator()(samba_tensor* t) const { samba_tensor_release(t); }
};
using OwnedTensor = std::unique_ptr<samba_tensor, TensorRelease>;

struct RunOptionsRelease {
  void operator()(samba_run_options* o) const { samba_run_options_release(o); }
};

std::vector<int64_t> tensor_shape(const samba_tensor* t) {
  const int64_t* dims = nullptr;
  size_t ndim = 0;
  check(samba_tensor_shape(t, &dims, &ndim), "samba_tensor_shape");
  return std::vector<int64_t>(dims, dims + ndim);
}

}  // namespace

ServedModel::ServedModel(std::string name, const std::string& path, int threads)
    : name_(std::move(name)), path_(path) {
  samba_session_options* opts = nullptr;
  check(samba_session_options_create(&opts), "samba_session_options_create");
  samba_session_options_set_num_threads(opts, threads);
  const samba_status st = samba_session_create(opts, &session_);
  samba_session_options_release(opts);
  check(st, "samba_session_create");
  try {
    check(samba_session_load_pef(session_, path.c_str()),
          "loading model '" + name_ + "' from " + path);
    inputs_ = read_specs(SAMBA_NAMES_INPUTS);
    outputs_ = read_specs(SAMBA_NAMES_OUTPUTS);
  } catch (...) {
    samba_session_release(session_);
    throw;
  }
  // Batched when every input and output shares a leading dim (see the header).
  int64_t batch = -1;
  for (const auto* list : {&inputs_, &outputs_})
    for (const TensorSpec& s : *list) {
      if (s.shape.empty() || (batch >= 0 && s.shape[0] != batch)) batch = 0;
      if (batch < 0) batch = s.shape[0];
    }
  batch_size_ = batch > 0 ? batch : 0;
  for (auto* list : {&inputs_, &outputs_})
    for (TensorSpec& s : *list) {
      int64_t numel = 1;
      for (size_t d = batched() ? 1 : 0; d < s.shape.size(); ++d) numel *= s.shape[d];
      s.row_bytes = static_cast<size_t>(numel) * samba_dtype_size(s.dtype);
    }
}

ServedModel::~ServedModel() { samba_session_release(session_); }

std::vector<TensorSpec> ServedModel::read_specs(samba_names_kind kind) const {
  size_t n = 0;
  check(samba_session_name_count(session_, kind, &n), "samba_session_name_count");
  std::vector<const char*> names(n);
  for (size_t i = 0; i < n; ++i)
    check(samba_session_name_at(session_, kind, i, &names[i]), "samba_session_name_at");
  std::vector<samba_tensor*> values(n, nullptr);
  check(samba_session_get_tensors_by_name(session_, names.data(), n, values.data()),
        "reading the model's tensors");
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < n; ++i) {
    OwnedTensor value(values[i]);
    TensorSpec s;
    s.name = names[i];
    check(samba_tensor_dtype(value.get(), &s.dtype), "samba_tensor_dtype");
    s.shape = tensor_shape(value.get());
    specs.push_back(std::move(s));
  }
  return specs;
}

Rows ServedModel::check_request(std::map<std::string, HostTensor> tensors) const {
  Rows rows;
  rows.count = -1;
  for (const auto& [name, t] : tensors) {
    bool known = false;
    for (const TensorSpec& s : inputs_) known = known || s.name == name;
    if (!known) {
      std::string expected;
      for (const TensorSpec& s : inputs_)
        expected += (expected.empty() ? "'" : ", '") + s.name + "'";
      throw BadRequest(
          400, "model '" + name_ + "' has no input '" + name + "'; its inputs are " + expected);
    }
  }
  for (const TensorSpec& s : inputs_) {
    auto it = tensors.find(s.name);
    if (it == tensors.end())
      throw BadRequest(400, "input '" + s.name + "' of model '" + name_ + "' is missing");
    HostTensor& t = it->second;
    const std::string what = "input '" + s.name + "' of model '" + name_ + "'";
    if (t.dtype != s.dtype)
      throw BadRequest(400, what + " has dtype " + samba_dtype_name(t.dtype) + ", expected " +
                                samba_dtype_name(s.dtype));
    const std::vector<int64_t> sample(s.shape.begin() + (batched() ? 1 : 0), s.shape.end());
    const std::string expected = batched() ? shape_text(sample) + " (one sample) or [n, " +
                                                 shape_text(sample).substr(1) +
                                                 " with 1 <= n <= " + std::to_string(batch_size())
                                           : shape_text(s.shape);
    int64_t count = 1;
    bool single = false;
    if (!batched() || t.shape == sample) {
      single = batched();
      if (t.shape != (batched() ? sample : s.shape))
        throw BadRequest(400,
                         what + " has shape " + shape_text(t.shape) + ", expected " + expected);
    } else if (t.shape.size() == s.shape.size() &&
               std::equal(t.shape.begin() + 1, t.shape.end(), s.shape.begin() + 1) &&
               t.shape[0] >= 1 && t.shape[0] <= batch_size()) {
      count = t.shape[0];
    } else {
      throw BadRequest(400, what + " has shape " + shape_text(t.shape) + ", expected " + expected);
    }
    if (rows.count >= 0 && (count != rows.count || single != rows.single))
      throw BadRequest(400, what + " has " + std::to_string(count) +
                                " samples, the inputs before it " + std::to_string(rows.count) +
                                "; expected the same number of samples in every input");
    rows.count = count;
    rows.single = single;
    rows.inputs.push_back(std::move(t.bytes));
  }
  return rows;
}

std::vector<std::vector<HostTensor>> ServedModel::run(
    const std::vector<const Rows*>& requests) const {
  // The batch: each request's rows one after another, zeros after the last.
  std::vector<std::string> buffers;
  std::vector<OwnedTensor> tensors;
  std::vector<samba_tensor*> raw_inputs;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const TensorSpec& s = inputs_[i];
    std::string& buf =
        buffers.emplace_back(s.row_bytes * static_cast<size_t>(batched() ? batch_size_ : 1), '\0');
    size_t at = 0;
    for (const Rows* r : requests) {
      std::memcpy(buf.data() + at, r->inputs[i].data(), r->inputs[i].size());
      at += r->inputs[i].size();
    }
    samba_tensor* t = nullptr;
    check(samba_tensor_wrap(buf.data(), s.dtype, s.shape.data(), s.shape.size(), nullptr, &t),
          "samba_tensor_wrap");
    tensors.emplace_back(t);
    check(samba_tensor_set_name(t, s.name.c_str()), "samba_tensor_set_name");
    raw_inputs.push_back(t);
  }
  samba_run_options* raw_opts = nullptr;
  check(samba_run_options_create(&raw_opts), "samba_run_options_create");
  std::unique_ptr<samba_run_options, RunOptionsRelease> opts(raw_opts);
  // Only the forward sections, in evaluation mode, whatever else the PEF holds.
  const char* fwd = "FWD";
  check(samba_run_options_set_section_types(opts.get(), &fwd, 1),
        "samba_run_options_set_section_types");
  check(samba_run_options_set_train(opts.get(), 0), "samba_run_options_set_train");
  std::vector<samba_tensor*> raw_outputs(outputs_.size(), nullptr);
  size_t n_outputs = 0;
  check(samba_session_run(session_, raw_inputs.data(), raw_inputs.size(), nullptr, 0, opts.get(),
                          raw_outputs.data(), raw_outputs.size(), &n_outputs),
        "running model '" + name_ + "'");
  std::vector<OwnedTensor> results;
  for (size_t i = 0; i < n_outputs; ++i) results.emplace_back(raw_outputs[i]);

  std::vector<std::vector<HostTensor>> answers(requests.size());
  for (const TensorSpec& s : outputs_) {
    samba_tensor* value = nullptr;
    for (const OwnedTensor& r : results) {
      const char* name = nullptr;
      if (samba_tensor_name(r.get(), &name) == SAMBA_OK && name && s.name == name) value = r.get();
    }
    if (!value)
      throw std::runtime_error("the run of model '" + name_ + "' returned no output '" + s.name +
                               "'");
    std::string bytes(s.row_bytes * static_cast<size_t>(batched() ? batch_size_ : 1), '\0');
    check(samba_tensor_copy_to(value, bytes.data(), bytes.size()), "samba_tensor_copy_to");
    size_t at = 0;
    for (size_t r = 0; r < requests.size(); ++r) {
      HostTensor out;
      out.dtype = s.dtype;
      out.shape = s.shape;
      if (batched()) out.shape[0] = requests[r]->count;
      if (requests[r]->single) out.shape.erase(out.shape.begin());
      const size_t n =
          batched() ? s.row_bytes * static_cast<size_t>(requests[r]->count) : bytes.size();
      out.bytes = bytes.substr(at, n);
      at += n;
      answers[r].push_back(std::move(out));
    }
  }
  return answers;
}

nlohmann::json ServedModel::describe() const {
  auto list = [](const std::vector<TensorSpec>& specs) {
    nlohmann::json out = nlohmann::json::array();
    for (const TensorSpec& s : specs)
      out.push_back({{"name", s.name}, {"dtype", samba_dtype_name(s.dtype)}, {"shape", s.shape}});
    return out;
  };
  return {{"name", name_},
          {"pef", path_},
          {"batch_size", batch_size()},
          {"batched", batched()},
          {"inputs", list(inputs_)},
          {"outputs", list(outputs_)}};
}

}  // namespace samba_server
