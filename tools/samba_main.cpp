// The `samba` command line: `samba pef info|dump|verify FILE`. Errors are a
// one-line message on stderr and a non-zero exit code, never a trace.
#include <cstdio>
#include <exception>

#include "engine/core/error.h"
#include "tools/command.h"

int main(int argc, char** argv) {
  CLI::App app{"samba: compile, inspect and run Samba programs (PEF files)", "samba"};
  app.require_subcommand(1);
  samba::tool::CommandAction action;
  samba::tool::add_pef_command(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return action ? action() : 0;
  } catch (const samba::Error& e) {
    std::fprintf(stderr, "samba: error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "samba: internal error: %s\n", e.what());
  }
  return 1;
}
