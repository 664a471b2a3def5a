// How the `sambaflow` tool is put together: each command family (pef;
// compile and run) lives in its own file and adds its subcommands to the app.
// A subcommand's callback stores what to run in `action`; samba_main runs it
// after parsing and turns errors into a message on stderr and exit code 1.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace samba::tool {

// Returns the process exit code.
using CommandAction = std::function<int()>;

// `sambaflow pef info|dump|verify` (pef_command.cpp).
void add_pef_command(CLI::App& app, CommandAction& action);

// `sambaflow compile MODEL.onnx -o MODEL.pef` and `sambaflow run MODEL.pef
// --input NAME=FILE.npy` (model_command.cpp).
void add_model_commands(CLI::App& app, CommandAction& action);

}  // namespace samba::tool
