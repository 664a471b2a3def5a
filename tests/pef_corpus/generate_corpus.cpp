// Writes the malformed-PEF corpus: every mutation class of the structure-
// aware mutator applied to each of the four corpus models with fixed seeds,
// one file per mutation, named <class>.<model>.<seed>.pef, plus the models'
// valid PEFs. Deterministic: run it again and the files are the same.
//
//   pef_corpus_generate <malformed dir> <valid dir> [files per class and model]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unordered_set>
#include <string>

#include "tests/pef_corpus/corpus_models.h"
#include "tests/pef_mutate/pef_mutate.h"

namespace fs = std::filesystem;
using namespace samba::testing;

namespace {

void write(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <malformed dir> <valid dir> [files per class and model]\n", argv[0]);
    return 2;
  }
  const fs::path malformed = argv[1], valid = argv[2];
  const int per_model = argc > 3 ? std::stoi(argv[3]) : 3;
  try {
    const fs::path scratch = fs::temp_directory_path() / "samba_pef_corpus_models";
    fs::create_directories(scratch);
    const auto models = compile_corpus_models(scratch.string());
    fs::remove_all(scratch);
    fs::create_directories(malformed);
    fs::create_directories(valid);
    for (const fs::directory_entry& e : fs::directory_iterator(malformed))
      if (e.path().extension() == ".pef") fs::remove(e.path());
    size_t total = 0;
    for (const auto& model : models) {
      write(valid / (model.name + ".pef"), model.pef);
      for (int c = 0; c < kNumPefMutations; ++c) {
        const auto m = static_cast<PefMutation>(c);
        std::unordered_set<std::string> seen{std::string(model.pef.begin(), model.pef.end())};
        int written = 0;
        // A seed whose edit does not apply or repeats an earlier file is
        // skipped; a bounded number of tries keeps the run short.
        for (uint64_t seed = 1; seed <= 40 && written < per_model; ++seed) {
          std::vector<uint8_t> bytes = mutate_pef_as(model.pef, m, seed);
          if (bytes.empty() || !seen.insert(std::string(bytes.begin(), bytes.end())).second) continue;
          write(malformed / (std::string(mutation_name(m)) + "." + model.name + "." + std::to_string(seed) + ".pef"),
                bytes);
          ++written;
          ++total;
        }
      }
    }
    std::printf("wrote %zu malformed PEFs to %s\n", total, malformed.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pef_corpus_generate: %s\n", e.what());
    return 1;
  }
  return 0;
}
