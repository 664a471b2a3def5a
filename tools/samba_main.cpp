// The `sambaflow` command line: `sambaflow pef info|dump|verify FILE`,
// `sambaflow compile MODEL.onnx -o MODEL.pef` and `sambaflow run MODEL.pef`. It is
// not called `samba` because Debian's file-sharing suite installs
// /usr/sbin/samba. Exit codes follow the usual convention: 0 success, 1 the
// command failed (the message says why), 2 the command line was wrong. Errors
// are a one-line message on stderr, never a trace.
#include <cstdio>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "samba.h"
#include "tools/command.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// CLI11 reports `sambaflow pef bogus` as "A subcommand is required"; this
// names the word it did not know and what it expected instead. Empty when
// every word that should be a command is one.
std::string unknown_command(const CLI::App& app, int argc, char** argv) {
  const CLI::App* at = &app;
  std::string path = app.get_name();
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') continue;
    const auto subs = at->get_subcommands(std::function<bool(const CLI::App*)>{});
    if (subs.empty()) return "";
    const CLI::App* next = nullptr;
    std::string names;
    for (const CLI::App* sub : subs) {
      if (sub->check_name(word)) next = sub;
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!next) return fmt::format("{}: unknown command '{}'; expected one of: {}", path, word, names);
    at = next;
    path += " " + next->get_name();
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "sambaflow: compile ONNX models into Samba programs (PEF files), run, inspect and check them",
      "sambaflow"};
  app.set_version_flag("--version", std::string("sambaflow ") + samba_version());
  app.require_subcommand(1);
  samba::tool::CommandAction action;
  samba::tool::add_pef_command(app, action);
  samba::tool::add_model_commands(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; everything else
    // is a usage error, reported with CLI11's message and the usage hint.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
      std::fprintf(stderr, "%s\nRun with --help for more information.\n", unknown.c_str());
      return kExitUsage;
    }
    app.exit(e);
    return kExitUsage;
  }
  try {
    return action ? action() : 0;
  } catch (const samba::Error& e) {
    std::fprintf(stderr, "sambaflow: error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sambaflow: internal error: %s\n", e.what());
  }
  return kExitFailure;
}
