// A structure-aware PEF mutator: edits a valid PEF through its FlatBuffers
// schema (unpack to the object API, edit, repack), so the result parses and
// reaches the verifier's semantic checks and the runtime instead of being
// refused by the FlatBuffers verifier. Each mutation class is one kind of
// damage a compiler bug or an attacker could write: consistent shape and
// dtype changes (a tensor resized and the ones that follow from it), swapped
// kernel operands, micro-batch fields, schedule ids, region offsets and
// sizes, blob sizes, plus raw byte flips and truncation.
//
// Deterministic: the same bytes, class and seed give the same result on any
// machine (no std distributions, whose output is implementation-defined).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace samba::testing {

enum class PefMutation : int {
  MicroBatchedFlag,    // a section marked micro-batched in a graph that is not split
  MicroBatchSize,      // micro_batch_size 0, negative, larger or not dividing the batch
  BatchWrap,           // batch sizes whose buffer sizes wrap (2^61 split in micro-batches of 2)
  ResizeConsistent,    // one dim value changed in every tensor that has it at that axis
  ResizeInputs,        // graph inputs and parameters resized, what they feed left as it was
  ResizeOne,           // one tensor resized
  DTypeOne,            // one tensor's dtype changed (its bytes re-planned)
  DTypeConsistent,     // every tensor of one dtype changed to another
  OutputRankLower,     // an op output's dims merged or dropped (lower rank than its inputs)
  RankChange,          // a tensor gains a unit dim or loses one
  SwapOperands,        // two operands of an op call swapped (inputs, or an input and an output)
  ReplaceOperand,      // an operand replaced by another tensor, -1 or an index out of range
  ScheduleIds,         // call ids 2^30, INT_MIN, 1000, -1, duplicated
  ScheduleSections,    // calls naming other, repeated or missing sections
  SectionKernels,      // a section listing its kernels thousands of times, or wrong ones
  RegionOffset,        // arena_offset and nbytes moved, unaligned, huge
  ArenaBytes,          // the memory plan's arena sizes shrunk, grown, dropped
  BlobSizes,           // declared and stored blob sizes, compression, checksum, blob index
  AliasView,           // an alias's strides, view_offset, shape or base changed
  Attributes,          // op attribute values changed in type and range, or removed
  OpName,              // an op call's op replaced by another one of the file
  KernelAccess,        // a kernel's reads and writes lists edited
  GraphLists,          // graph inputs, outputs, output_grads, parameters, sections; no graphs
  Argins,              // argin defaults NaN, huge, negative; kinds; bindings
  TensorRoles,         // tensor roles changed
  EnumCodes,           // enum fields holding codes the schema does not define
  FormatVersion,       // format major and minor
  ByteFlips,           // 1 to 8 bytes of the file changed
  Truncate,            // the file cut short
  kCount
};

constexpr int kNumPefMutations = static_cast<int>(PefMutation::kCount);

// "micro_batched_flag", "resize_inputs", ...: names files of the corpus.
std::string_view mutation_name(PefMutation m);

// The PEF `pef` mutated by class `m` with `seed`. Empty when `pef` is not a
// PEF the schema can read, or the class has nothing to edit in it (a
// micro-batch edit of a PEF whose graphs have no sections).
std::vector<uint8_t> mutate_pef_as(std::span<const uint8_t> pef, PefMutation m, uint64_t seed);

}  // namespace samba::testing

// libFuzzer's custom mutator shape: mutates data[0, size) in place into at
// most max_size bytes and returns the new size. The class comes from the
// seed; a buffer the schema cannot read gets byte flips.
size_t mutate_pef(uint8_t* data, size_t size, size_t max_size, unsigned seed);
