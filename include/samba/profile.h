/* samba/profile.h: profiles (Chrome trace JSON) and performance measurement.
 * Part of the C interface; include <samba.h>, which includes every part and
 * states the conventions (ownership, errors, thread safety) they all follow. */
#ifndef SAMBA_PROFILE_H
#define SAMBA_PROFILE_H

#include "run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Profiling ------------------------------------------------------------ */

/* start_samba_profile / end_samba_profile(filename): records every event
 * (SAMBA_SET_PEF, SAMBA_INIT_RUNTIME, SAMBA_SESSION_RUN_<TYPES>, the
 * runtime's PyRT_* events, sections and kernels) and writes them as a Chrome
 * trace-event JSON file that Perfetto and chrome://tracing open. `filename`
 * may be NULL or "" to discard. Errors: NULL_POINTER, INVALID_STATE (start
 * while running), IO (the file cannot be written). */
SAMBA_API samba_status samba_session_start_profile(samba_session* session);
SAMBA_API samba_status samba_session_end_profile(samba_session* session, const char* filename);

/* start_runtime_profile / end_runtime_profile(log_file): when the
 * environment variable ENABLE_RUNTIME_PERF is SUMMARY or DETAILED, records
 * the runtime's events and, at the end, writes a summary table (per event:
 * count, total, mean, p50, p99, max, share) to `log_file` (NULL or "": not
 * written) and to the log (info level), with the wall time when
 * `timer_enabled`. Otherwise both calls do nothing. Errors: NULL_POINTER,
 * INVALID_STATE, IO. */
SAMBA_API samba_status samba_session_start_runtime_profile(samba_session* session,
                                                           int32_t timer_enabled);
SAMBA_API samba_status samba_session_end_runtime_profile(samba_session* session,
                                                         const char* log_file);

/* ---- Measuring ------------------------------------------------------------ */

/* What samba_session_measure_performance / _measure_sections report. The
 * caller sets struct_size to sizeof(samba_perf_report); the library fills
 * the fields that fit, so the struct can grow. */
typedef struct samba_perf_report {
  size_t struct_size;        /* set by the caller: sizeof(samba_perf_report) */
  int32_t section_id;        /* measure_sections: the section; -1 for a whole run */
  int64_t iterations;        /* timed runs */
  int64_t batch_size;        /* samples per run (the graph's batch size) */
  double samples_per_second; /* batch_size * iterations / total time */
  double latency_mean_ms;    /* mean time of one run */
  double latency_p50_ms;     /* median time of one run */
  double latency_p99_ms;     /* 99th percentile of the runs' times */
  double latency_max_ms;     /* slowest run */
} samba_perf_report;

/* utils.measure_performance: runs `warmup` untimed then `iterations` timed
 * runs with `inputs` and `opts` (NULL: the whole schedule, which trains the
 * model) and reports throughput and latency. With data_parallel in `opts`
 * (a collective: every rank calls it) the report is the job's: batch_size
 * is every rank's batch together and samples_per_second divides it by the
 * slowest rank's time. Errors: those of samba_session_run, NULL_POINTER (out), INVALID_ARGUMENT (iterations < 1,
 * warmup < 0, out->struct_size too small for section_id). */
SAMBA_API samba_status samba_session_measure_performance(samba_session* session,
                                                         samba_tensor* const* inputs,
                                                         size_t n_inputs,
                                                         const samba_run_options* opts,
                                                         int64_t iterations, int64_t warmup,
                                                         samba_perf_report* out);

/* utils.measure_sections: for each section of the schedule in order, runs
 * it alone (after the whole schedule once with `inputs`, so every section
 * has its inputs) `warmup` + `iterations` times and reports it in
 * reports[i] (capacity entries, each with struct_size set); *n_sections
 * gets the number of sections. Sections that update the model (OPT) do so.
 * Errors: as samba_session_measure_performance, OUT_OF_RANGE (capacity
 * too small: *n_sections says how many are needed; nothing runs). */
SAMBA_API samba_status samba_session_measure_sections(samba_session* session,
                                                      samba_tensor* const* inputs, size_t n_inputs,
                                                      int64_t iterations, int64_t warmup,
                                                      samba_perf_report* reports, size_t capacity,
                                                      size_t* n_sections);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_PROFILE_H */
