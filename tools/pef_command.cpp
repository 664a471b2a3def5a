// `sambaflow pef info|dump|verify FILE`: what a PEF holds, read through the
// verifying reader, so every command also checks the file.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "engine/pef/pef_log.h"
#include "engine/pef/reader.h"
#include "tools/command.h"
#include "tools/pef_json.h"

namespace samba::tool {
namespace {

using namespace samba::pef;


// One screen: what a person wants to know before opening the full dump.
std::string summary(const std::string& path, uint64_t file_bytes, const ProgramDesc& p) {
  std::string s;
  auto line = [&](std::string_view key, const std::string& value) {
    s += fmt::format("{:<13} {}\n", key, value);
  };
  line("file", fmt::format("{} ({})", path, human_bytes(file_bytes)));
  line("program", p.name);
  line("format", fmt::format("PEF {}.{}", p.format_major, p.format_minor));
  std::string precision;  // set by a mixed-precision compile only
  for (const auto& [key, value] : p.metadata)
    if (key == "compiler.mixed_precision") precision = ", mixed precision " + value;
  line("compiler",
       fmt::format("{} (o{}{})", p.compiler_version.empty() ? "unknown" : p.compiler_version,
                   p.opt_level, precision));
  for (size_t g = 0; g < p.graphs.size(); ++g) {
    const GraphDesc& gd = p.graphs[g];
    line(
        g == 0 ? "graphs" : "",
        fmt::format(
            "{} '{}': {} inputs, {} outputs, {} parameters, batch {}, micro-batch {}, {} mapping{}",
            g, gd.name, gd.inputs.size(), gd.outputs.size(), gd.parameters.size(), gd.batch_size,
            gd.micro_batch_size == 0 ? gd.batch_size : gd.micro_batch_size,
            mapping_name(gd.mapping), gd.inference ? ", inference" : ""));
  }
  std::vector<std::string> secs;
  for (const auto& sd : p.sections)
    secs.push_back(fmt::format("{}:{}", sd.id, section_type_name(sd.type)));
  line("sections", fmt::format("{} [{}]", p.sections.size(), fmt::join(secs, " ")));
  line("schedule", fmt::format("{} calls", p.schedule.size()));
  size_t ops = 0;
  double flops = 0;
  for (const auto& k : p.kernels) {
    ops += k.ops.size();
    flops += k.flops;
  }
  line("kernels", fmt::format("{} ({} ops, {:.3g} FLOPs estimated)", p.kernels.size(), ops, flops));
  std::map<std::string_view, size_t> roles;
  for (const auto& t : p.tensors) ++roles[tensor_role_name(t.role)];
  std::vector<std::string> by_role;
  for (const auto& [r, n] : roles) by_role.push_back(fmt::format("{} {}", n, r));
  line("tensors", fmt::format("{} ({})", p.tensors.size(), fmt::join(by_role, ", ")));
  std::vector<std::string> argins;
  for (const auto& a : p.argins)
    argins.push_back(fmt::format("{}={}", a.name, attr_value_str(a.default_value)));
  line("argins", argins.empty() ? "none" : fmt::format("{}", fmt::join(argins, ", ")));
  uint64_t blob_bytes = 0;
  for (const auto& b : p.blobs) blob_bytes += b.data.size();
  line("blobs", fmt::format("{} ({} uncompressed)", p.blobs.size(), human_bytes(blob_bytes)));
  line("materializers", fmt::format("{}", p.materializers.size()));
  line("memory",
       fmt::format("DDR {}, HBM {}, HOST {}; peak {}, lower bound {}",
                   human_bytes(p.memory.arena_bytes[0]), human_bytes(p.memory.arena_bytes[1]),
                   human_bytes(p.memory.arena_bytes[2]), human_bytes(p.memory.peak_bytes),
                   human_bytes(p.memory.lower_bound_bytes)));
  if (p.data_parallel.world_size > 0) {
    // One line per bucket under the key, as the graphs above.
    std::string dp = format_data_parallel(p);
    bool first = true;
    for (size_t at = 0; at < dp.size();) {
      const size_t nl = dp.find('\n', at);
      line(first ? "data parallel" : "", dp.substr(at, nl - at));
      first = false;
      at = nl + 1;
    }
  }
  line("metadata", fmt::format("{} entries", p.metadata.size()));
  return s;
}

void print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

}  // namespace

void add_pef_command(CLI::App& app, CommandAction& action) {
  CLI::App* pef = app.add_subcommand("pef", "Inspect and check PEF files");
  pef->require_subcommand(1);

  // Options outlive parsing: the callbacks run after app.parse returns.
  struct Options {
    std::string file;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();

  CLI::App* info = pef->add_subcommand("info", "One-screen summary of a PEF");
  info->add_option("file", opts->file, "the PEF file")->required();
  info->callback([&action, opts] {
    action = [opts] {
      ProgramDesc p = read_pef(opts->file);
      std::error_code ec;
      uint64_t size = std::filesystem::file_size(opts->file, ec);
      print(summary(opts->file, ec ? 0 : size, p));
      return 0;
    };
  });

  CLI::App* dump = pef->add_subcommand("dump", "Everything a PEF holds, as text or JSON");
  dump->add_option("file", opts->file, "the PEF file")->required();
  dump->add_flag("--json", opts->json, "print JSON instead of the .pef.log text");
  dump->callback([&action, opts] {
    action = [opts] {
      ProgramDesc p = read_pef(opts->file);
      if (opts->json)
        print(
            program_json(p).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
            "\n");
      else
        print(format_pef_log(p));
      return 0;
    };
  });

  CLI::App* verify =
      pef->add_subcommand("verify", "Check a PEF completely; prints ok or what is wrong");
  verify->add_option("file", opts->file, "the PEF file")->required();
  verify->callback([&action, opts] {
    action = [opts] {
      read_pef(opts->file);
      print("ok\n");
      return 0;
    };
  });
}

}  // namespace samba::tool
