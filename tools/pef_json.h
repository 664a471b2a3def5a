// The JSON form of a program, for `sambaflow pef dump --json`: every field of
// ProgramDesc under its own name; enums as their names; blobs as their size
// and XXH64 checksum instead of their bytes.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/pef/program.h"

namespace samba::tool {

nlohmann::ordered_json program_json(const pef::ProgramDesc& program);

}  // namespace samba::tool
