// Runs a fuzz target's entry point once on every file given (directories:
// every regular file in them, in name order), without libFuzzer: the seed
// corpus as a regression test in any build. A finding aborts, as under the
// fuzzer. Seeds named "valid-*" must also be accepted by the target, so a
// corpus the format or the compiler has outgrown fails instead of silently
// testing only the refusal paths.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional in a target, as under libFuzzer.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.emplace_back(argv[i]);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "replay: no input files (usage: %s FILE|DIR...)\n", argv[0]);
    return 2;
  }
  int stale = 0;
  size_t accepted = 0;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    samba::fuzz::last_input_accepted = false;
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    if (samba::fuzz::last_input_accepted) ++accepted;
    if (f.filename().string().starts_with("valid-") && !samba::fuzz::last_input_accepted) {
      std::fprintf(stderr, "replay: seed %s is refused (%s); regenerate the corpus with tests/fuzz/make_corpus.sh\n",
                   f.c_str(), samba::fuzz::last_refusal.c_str());
      ++stale;
    }
  }
  std::printf("replay: %zu inputs, %zu accepted, %d stale seeds\n", files.size(), accepted, stale);
  return stale ? 1 : 0;
}
