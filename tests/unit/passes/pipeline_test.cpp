// The optimization levels: which passes each runs, in which order, that the
// user guide says the same, and that every PEF records them.
#include "compiler/passes/pipeline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <sstream>

#include "engine/pef/pef_log.h"
#include "pass_test_util.h"

namespace samba::compiler::testing {
namespace {

std::string joined_pass_names(int level) {
  return fmt::format("{}", fmt::join(pass_names(level), ", "));
}

TEST(CompilerPipeline, EachLevelIsAnOrderedListOfPasses) {
  EXPECT_EQ(pass_names(0), (std::vector<std::string_view>{"eliminate_dead_code"}));
  EXPECT_EQ(pass_names(1),
            (std::vector<std::string_view>{"fold_constants", "eliminate_common_subexpressions",
                                           "fuse_gemm_epilogues", "eliminate_dead_code"}));
  EXPECT_FALSE(opt_level(0).fuse_elementwise);
  EXPECT_TRUE(opt_level(1).fuse_elementwise);
  try {
    opt_level(2);
    FAIL() << "o2 does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("expected 0 (o0) or 1 (o1)"), std::string::npos)
        << e.what();
  }
}

TEST(CompilerPipeline, TheUserGuideListsTheSamePasses) {
  std::ifstream file(SAMBA_SOURCE_DIR "/docs/user-guide.md");
  ASSERT_TRUE(file) << "cannot read docs/user-guide.md";
  std::stringstream text;
  text << file.rdbuf();
  for (int level : {0, 1}) {
    const std::string line = fmt::format("o{}: {}\n", level, joined_pass_names(level));
    EXPECT_NE(text.str().find(line), std::string::npos)
        << "the user guide lacks the line: " << line;
  }
}

Graph drop_outputs_producer(Graph g) {
  g.outputs.push_back(static_cast<ValueId>(g.values.size()));  // a value that does not exist
  return g;
}

TEST(CompilerPipeline, ABrokenGraphIsReportedWithThePassThatBrokeIt) {
  Graph g = record({named("x", {2}, 1)}, [](std::span<const Tensor> in) -> std::vector<Tensor> {
    return {call1("exp", {in[0]})};
  });
  const Pass passes[] = {{"eliminate_dead_code", eliminate_dead_code},
                         {"breaks_outputs", drop_outputs_producer}};
  try {
    run_passes(std::move(g), passes);
    FAIL() << "the second pass leaves an output that is never computed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::Internal);
    EXPECT_NE(std::string(e.what()).find("after pass 'breaks_outputs'"), std::string::npos)
        << e.what();
  }
}

GraphSpec tiny_model(const Tensor& w) {
  GraphSpec s;
  s.inference = true;
  s.inputs = {named("x", {2, 3}, 1)};
  s.model = [w](std::span<const Tensor> in) -> std::vector<Tensor> {
    return {call1("relu", {call1("linear", {in[0], w})})};
  };
  return s;
}

TEST(CompilerPipeline, ThePefRecordsThePassesOfItsLevel) {
  const Tensor w = parameter("w", {4, 3}, 2);
  for (int level : {0, 1}) {
    CompileOptions o;
    o.opt_level = level;
    const pef::ProgramDesc p = compile_program({tiny_model(w)}, o);
    const auto entry = std::find_if(p.metadata.begin(), p.metadata.end(),
                                    [](const auto& kv) { return kv.first == "compiler.passes"; });
    ASSERT_NE(entry, p.metadata.end()) << "o" << level;
    EXPECT_EQ(entry->second, joined_pass_names(level));
    const std::string log = pef::format_pef_log(p);
    EXPECT_NE(log.find("compiler.passes = " + joined_pass_names(level)), std::string::npos) << log;
  }
  // A value the app chose for the key is its own.
  CompileOptions o;
  o.metadata = {{"compiler.passes", "hand-tuned"}};
  const pef::ProgramDesc p = compile_program({tiny_model(w)}, o);
  EXPECT_EQ(p.metadata, o.metadata);
}

}  // namespace
}  // namespace samba::compiler::testing
