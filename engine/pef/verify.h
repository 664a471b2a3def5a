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
// of a non-alias base of their dtype; ops known to the registry, with a
// kernel, attributes that resolve against their schema, input/output counts
// that fit it and the outputs their inference gives; strided views only as
// inputs of ops that read strides; argin bindings naming a run-time
// attribute of the op, once, and an argin of its kind and a fitting type;
// kernels' reads/writes covering their ops' tensors, each listed once;
// sections (each kernel in one section, once), the schedule (each section once) and graphs
// referring to what exists with the right roles; micro-batched sections
// touching only batch buffers held for their micro-batch count; blobs
// holding exactly their tensors' bytes; materializers well formed. The
// invariant this gives is in docs/ARCHITECTURE.md ("What the verifier
// guarantees").
//
// Throws CorruptFile on the first problem, naming the field and the index
// ("tensor 12 'gemm1.weight': arena_offset 4096 + nbytes 8192 exceeds the
// DDR arena of 10000 bytes"). The reader runs it on every PEF; the compiler
// runs it on what it is about to write.
void verify_program(const ProgramDesc& program);

}  // namespace samba::pef
