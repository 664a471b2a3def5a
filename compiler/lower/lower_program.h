// Lowering: the compiled graphs, their kernels, sections and memory plan,
// written out as the program a PEF holds (engine/pef/program.h). Persistent
// tensors with the same name in several graphs become one tensor; the
// intermediates of each graph are prefixed with its name when there are
// several graphs.
#pragma once

#include <vector>

#include "compiler/compile.h"

namespace samba::compiler {

pef::ProgramDesc lower_program(const std::vector<CompiledGraph>& graphs,
                               const std::vector<GraphSpec>& specs, const CompileOptions& opts);

}  // namespace samba::compiler
