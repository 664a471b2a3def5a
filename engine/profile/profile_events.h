// The names of the events the runtime records, as SambaFlow's profilers name
// them, so profiles read the same as on hardware.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace samba::profile_events {

// Samba profile (frontend) events.
inline constexpr std::string_view kSetPef = "SAMBA_SET_PEF";  // parsing and verifying a PEF
inline constexpr std::string_view kInitRuntime =
    "SAMBA_INIT_RUNTIME";  // building the runtime for it
inline constexpr std::string_view kSessionRun =
    "SAMBA_SESSION_RUN";  // run(); see session_run_name()

// Runtime events.
inline constexpr std::string_view kGetTensors = "PyRT_GET_TENSORS";  // device -> host tensor reads
inline constexpr std::string_view kSetTensors = "PyRT_SET_TENSORS";  // host -> device tensor writes
inline constexpr std::string_view kSetTensorsBroadcast =
    "PyRT_SET_TENSORS_BROADCAST";  // rank 0's device values to every rank
inline constexpr std::string_view kGetTensorsGather =
    "PyRT_GET_TENSORS_GATHER";  // every rank's device values to rank 0
inline constexpr std::string_view kSetPinnedInputTensors =
    "PyRT_SET_PINNED_INPUT_TENSORS";  // copies into pinned memory
inline constexpr std::string_view kRun =
    "PyRT_RUN";  // running the schedule, without frontend overhead
inline constexpr std::string_view kPrepackWeights =
    "SAMBA_PREPACK_WEIGHTS";  // weights packed for the GEMM after a write (arg: bytes)

// Argument keys of section and kernel events.
inline constexpr std::string_view kArgSectionId = "section_id";
inline constexpr std::string_view kArgCallId = "call_id";
inline constexpr std::string_view kArgMicroBatch = "micro_batch";
// A kernel's bytes are what it loads and stores in memory (runtime::kernel_bytes_moved),
// its flops the compiler's estimate.
inline constexpr std::string_view kArgBytes = "bytes";
inline constexpr std::string_view kArgFlops = "flops";
inline constexpr std::string_view kArgKernel = "kernel";

// "SAMBA_SESSION_RUN_FWD_BCKWD_OPT" for section types {"fwd", "BCKWD", "Opt"}:
// the types upper-cased, in the order given, joined by '_'. With no types
// (the whole schedule) the name is "SAMBA_SESSION_RUN". The result is a new
// string: intern it once per distinct list rather than per run.
std::string session_run_name(std::span<const std::string_view> section_types);
std::string session_run_name(std::span<const std::string> section_types);

}  // namespace samba::profile_events
