// The readable companion of a PEF: <name>.pef.log, written beside it.
#pragma once

#include <string>

#include "engine/pef/program.h"

namespace samba::pef {

// The program as text, one line per thing so it reads top to bottom and
// greps well: a header (name, format, compiler, opt level, counts), graphs
// (batch, micro-batch, mapping, inputs, outputs, parameters, signature),
// sections with their kernels and ops (estimated FLOPs and bytes), the
// schedule, argins, tensors as a table (name, role, dtype, shape, memory
// type, offset, size, region, alias), the memory plan, the data-parallel
// buckets and the metadata.
// Safe on unverified programs: out-of-range references print as such.
std::string format_pef_log(const ProgramDesc& program);

// The data-parallel part (world size, the REDUCE section, one line per
// bucket: memory, offset, size, dtype, gradients), or "" when the program is
// not data parallel. Shared by the .pef.log and `samba pef info`.
std::string format_data_parallel(const ProgramDesc& program);

// "1.5 KiB" style, for sizes a reader compares at a glance.
std::string human_bytes(uint64_t n);

// format_pef_log to `path`, atomically. Throws IoError.
void write_pef_log(const ProgramDesc& program, const std::string& path);

}  // namespace samba::pef
