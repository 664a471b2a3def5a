// Loads every PEF of the malformed corpus (tests/pef_corpus/malformed)
// through the C ABI and, when the loader accepts one, runs it: the whole
// schedule, each section type alone, and an evaluation run, with the
// device's values as inputs. Passes when nothing crashes (under ASan: no
// report, and the device arenas are fenced so that a kernel touching bytes
// outside its buffers is one), every refusal names what was wrong, and no
// accepted file fails as "a bug in Samba". The valid PEFs the corpus was
// made from must load and run.
//
//   pef_corpus_test <malformed dir> <valid dir>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "samba.h"

namespace fs = std::filesystem;

namespace {

// A refusal must say which part of the PEF is wrong.
constexpr const char* kFieldWords[] = {"tensor", "kernel", "op ",      "section", "schedule", "call",
                                       "graph",  "blob",   "argin",    "arena",   "memory",   "format",
                                       "PEF",    "batch",  "materializer", "file", "region"};
// Texts that leak from the C++ library or say nothing about the file.
constexpr const char* kLeaks[] = {"_M_range_check", "basic_string", "std::", "bad_alloc", "bug in Samba"};

std::string problem_with(samba_status st, const char* what) {
  const std::string msg = samba_last_error_message() ? samba_last_error_message() : "";
  if (st == SAMBA_ERR_INTERNAL) return std::string(what) + " failed as INTERNAL: " + msg;
  if (msg.empty()) return std::string(what) + " failed with an empty message";
  for (const char* leak : kLeaks)
    if (msg.find(leak) != std::string::npos) return std::string(what) + " message leaks '" + leak + "': " + msg;
  for (const char* word : kFieldWords)
    if (msg.find(word) != std::string::npos) return "";
  return std::string(what) + " message names no part of the PEF: " + msg;
}

struct Outcome {
  bool loaded = false;
  std::string problem;  // empty: as it should be
  std::string refusal;  // the loader's message when it refused the file
};

std::string run_once(samba_session* s, const samba_run_options* opts, const char* what) {
  samba_tensor* outputs[8] = {};
  size_t n = 0;
  samba_status st = samba_session_run(s, nullptr, 0, nullptr, 0, opts, outputs, 8, &n);
  for (size_t i = 0; i < n && i < 8; ++i) samba_tensor_release(outputs[i]);
  return st == SAMBA_OK ? "" : problem_with(st, what);
}

// Every way of running the loaded program the corpus exercises; the first
// problem found.
std::string run_all(samba_session* s) {
  samba_run_options* opts = nullptr;
  if (samba_run_options_create(&opts) != SAMBA_OK) return "run options: out of memory";
  std::string problem = run_once(s, nullptr, "run of the whole schedule");
  size_t types = 0;
  if (problem.empty() && samba_session_name_count(s, SAMBA_NAMES_SECTION_TYPES, &types) != SAMBA_OK)
    problem = "section types cannot be listed";
  for (size_t i = 0; i < types && problem.empty(); ++i) {
    const char* type = nullptr;
    samba_session_name_at(s, SAMBA_NAMES_SECTION_TYPES, i, &type);
    samba_run_options_set_section_types(opts, &type, 1);
    problem = run_once(s, opts, "run of one section type");
  }
  samba_run_options_set_section_types(opts, nullptr, 0);
  samba_run_options_set_train(opts, 0);
  if (problem.empty()) problem = run_once(s, opts, "evaluation run");
  samba_run_options_release(opts);
  return problem;
}

Outcome check_file(const fs::path& path) {
  Outcome o;
  samba_session* s = nullptr;
  if (samba_session_create(nullptr, &s) != SAMBA_OK) return {false, "session: out of memory", ""};
  samba_status st = samba_session_load_pef(s, path.c_str());
  o.loaded = st == SAMBA_OK;
  if (!o.loaded) o.refusal = samba_last_error_message();
  o.problem = o.loaded ? run_all(s) : problem_with(st, "load");
  samba_session_release(s);
  return o;
}

std::vector<fs::path> pefs_in(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".pef") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <malformed dir> <valid dir>\n", argv[0]);
    return 2;
  }
  int failures = 0;
  for (const fs::path& p : pefs_in(argv[2])) {
    Outcome o = check_file(p);
    if (!o.loaded || !o.problem.empty()) {
      std::fprintf(stderr, "FAIL %s (a valid PEF): %s\n", p.filename().c_str(),
                   o.loaded ? o.problem.c_str() : samba_last_error_message());
      ++failures;
    }
  }
  const auto files = pefs_in(argv[1]);
  std::map<std::string, std::pair<int, int>> by_class;  // class -> (refused, accepted)
  for (const fs::path& p : files) {
    std::printf("%s: ", p.filename().c_str());
    std::fflush(stdout);  // a crash shows which file it was
    Outcome o = check_file(p);
    std::printf("%s\n", o.loaded ? "accepted, ran" : ("refused: " + o.refusal).c_str());
    const std::string cls = p.filename().string().substr(0, p.filename().string().find('.'));
    (o.loaded ? by_class[cls].second : by_class[cls].first)++;
    if (!o.problem.empty()) {
      std::fprintf(stderr, "FAIL %s: %s\n", p.filename().c_str(), o.problem.c_str());
      ++failures;
    }
  }
  std::printf("%-20s %8s %8s\n", "class", "refused", "accepted");
  for (const auto& [cls, counts] : by_class) std::printf("%-20s %8d %8d\n", cls.c_str(), counts.first, counts.second);
  std::printf("%zu malformed PEFs, %d failures\n", files.size(), failures);
  if (files.size() < 300) {
    std::fprintf(stderr, "FAIL the corpus has %zu files; it should have at least 300\n", files.size());
    ++failures;
  }
  return failures ? 1 : 0;
}
