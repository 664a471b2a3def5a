// A built-in materializer as data: kind ("kaiming_uniform", ...) and its
// parameters. PEF files store these (engine/pef/program.h), so a PEF can
// materialize its own lazy parameters; materializer.h lists the kinds and
// fills tensors from them.
#pragma once

#include <string>

#include "engine/core/attrs.h"

namespace samba::rng {

struct MaterializerDesc {
  std::string kind;
  Attrs params;

  bool operator==(const MaterializerDesc&) const = default;
};

}  // namespace samba::rng
