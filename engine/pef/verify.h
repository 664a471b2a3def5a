// Semantic checks of a program: what the FlatBuffers verifier cannot know.
#pragma once

#include "engine/pef/program.h"

namespace samba::pef {

// Checks that `program` is safe and consistent to run: every index in range;
// names present and unique where they identify something; enum codes valid;
// shapes of rank <= 16 with non-negative dims whose element and byte counts
// fit in 64 bits; owning tensors' nbytes equal to numel * element size and
// inside their arena; tensors of one region at one place; persistent tensors
// not overlapping each other or any intermediate; aliases viewing only bytes
// of a non-alias base; ops known to the registry with attributes that
// resolve against their schema and input/output counts that fit it; argin
// bindings naming an attribute of the op and an argin of a fitting type;
// kernels' reads/writes covering their ops' tensors; sections, the schedule
// and graphs referring to what exists with the right roles; blobs holding
// exactly their tensors' bytes; materializers well formed.
//
// Throws CorruptFile on the first problem, naming the field and the index
// ("tensor 12 'gemm1.weight': arena_offset 4096 + nbytes 8192 exceeds the
// DDR arena of 10000 bytes"). The reader runs it on every PEF; the compiler
// runs it on what it is about to write.
void verify_program(const ProgramDesc& program);

}  // namespace samba::pef
