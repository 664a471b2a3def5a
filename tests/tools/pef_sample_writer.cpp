// Writes the PEFs the `samba` tool test runs on, into the directory given:
// resffn.pef (with its resffn.pef.log), newer.pef (format 2.0), cut.pef
// (truncated) and bad_index.pef (an op input out of range).
#include <cstdio>
#include <exception>
#include <string>

#include "engine/io/atomic_file.h"
#include "engine/pef/pef_log.h"
#include "engine/pef/writer.h"
#include "pef_sample_program.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pef_sample_writer DIR\n");
    return 2;
  }
  using namespace samba::pef;
  using samba::write_file_atomically;
  try {
    std::string dir = argv[1];
    ProgramDesc p = sample::resffn_program();
    write_pef(p, dir + "/resffn.pef");
    write_pef_log(p, dir + "/resffn.pef.log");

    ProgramDesc newer = p;
    newer.format_major = 2;
    write_pef(newer, dir + "/newer.pef");

    std::vector<uint8_t> bytes = serialize_pef(p);
    bytes.resize(bytes.size() * 3 / 4);
    write_file_atomically(dir + "/cut.pef", bytes);

    ProgramDesc bad = p;
    bad.kernels[0].ops[0].inputs[0] = 999;
    write_pef(bad, dir + "/bad_index.pef");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pef_sample_writer: %s\n", e.what());
    return 1;
  }
  return 0;
}
