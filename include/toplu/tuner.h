/*
 * toplu/tuner.h - the empirical batch-size tuner (`toplu tune`).
 *
 * For each batch size B the tuner builds toplu's plan, allocates the input
 * and output buffers through the session's byte-counting allocator, runs a
 * warm-up, then measures windows of runs (each at least 0.3 s and one run)
 * until three consecutive windows agree within 10% on throughput and on p99
 * latency, or a time cap passes.  It records p50/p90/p99 latency (ms, over
 * the last three windows), throughput (inferences per second: B x runs /
 * seconds), the peak bytes and the process's peak RSS growth, and the
 * planner's predictions for the same B, then frees everything (plans, I/O)
 * so memory returns to its baseline before the next size.
 *
 * "Peak bytes" and "predicted bytes" count the same things:
 *   measured  = the allocator's peak while the batch size was planned and run
 *               (repacked weights, kernel state, the arena with activations
 *               and workspace, the input and output buffers)
 *             + the constants the plan reads in place from the model (not
 *               allocator-counted; weights_bytes + kernel_bytes minus what
 *               building the batch-1 plan took from the allocator)
 *   predicted = weights + activations + workspace + inputs + outputs +
 *               kernel state, from toplu_session_memory's report at B
 *               (the planner's row for B on the cpu device).
 * A memory limit applies to the measured sum: the allocator's limit is the
 * limit less the in-place constants.
 *
 * Sweep: with no list, B doubles from 1; on out-of-memory everything is
 * freed and a binary search between the last size that fit and the first
 * that did not finds the largest that fits (fit tests: plan and one run),
 * which is then measured.  The sweep stops at a plateau (less than 5% more
 * throughput than half the batch), at the latency budget (p99 over it), at
 * the memory limit, at max_batch (measured itself when doubling would
 * pass it: 1, 2, 3 for max_batch 3) or at the time limit.  With a list every
 * size is measured; one that runs out of memory is recorded as "oom" and
 * the sweep goes on.  The recommended batch is the smallest measured size
 * within the latency budget whose throughput is within 3% of the best
 * measured (closer is measurement noise; smaller is less latency and
 * memory).
 *
 * Messages name option fields ("batch_sizes: 0 is not a batch size",
 * "inputs: x=a.npy: the model has no input 'x'", "inputs: x=a.npy: the
 * file's array is [10, 1, 28, 27]: dim 3 is 27, the model fixes it to 28",
 * "inputs: x=p: p is a FIFO; toplu reads only regular files", "shapes: x: ...");
 * progress goes to the log callback in the options, nothing is printed.
 *
 * Thread-safety: toplu_tune_model uses the CPU fully; run one at a time.
 * It touches process-wide state on purpose, to measure: before each size
 * it returns freed heap to the system (malloc_trim) and resets the
 * process's peak RSS counter (writing 5 to /proc/self/clear_refs), so
 * another thread's peak RSS readings are disturbed while it runs.
 * The log callback is called on the calling thread.  Other functions are
 * pure.
 */
#ifndef TOPLU_TUNER_H
#define TOPLU_TUNER_H

#include <stdint.h>
#include <stdio.h>

#include "toplu/log.h"
#include "toplu/model.h"
#include "toplu/planner.h"
#include "toplu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An input's data: rows of FILE.npy, repeated to fill each batch. */
typedef struct toplu_tune_input {
  const char *name;
  const char *path;
} toplu_tune_input_t;

typedef struct toplu_tune_options {
  const int64_t *batch_sizes; /* sizes to measure; NULL: the automatic sweep */
  int n_batch_sizes;
  double latency_budget_ms;   /* p99 limit per batch, ms; 0: none */
  uint64_t memory_limit_bytes;/* limit on measured bytes (see above); 0: none */
  const toplu_tune_input_t *inputs; /* data files; inputs without one get random data */
  int n_inputs;
  const toplu_input_shape_t *shapes; /* dims for symbolic non-batch dims */
  int n_shapes;
  int threads;                /* 0: all cores */
  int profile;                /* profile the recommended batch: top ops and a Chrome trace */
  double max_seconds_per_batch; /* measuring cap per size, s (default 10): measuring stops once this much
                                 * has passed and at least two windows of >= 0.3 s are done, or at 3x it;
                                 * before it stops when the windows agree (stable) */
  double max_seconds;         /* whole sweep, s (default 600), setup included; 0: no limit.  Checked before each
                               * size but the first and after each measuring window: a size that starts is
                               * planned, run once (untimed: the arena) and measured for one window of one run at
                               * least (warm-up skipped past the limit), so the sweep may pass it by that */
  int64_t max_batch;          /* the automatic sweep stops here (default 4096), measured itself when doubling
                               * would pass it */
  double plateau;             /* stop when doubling B gains less than this share of throughput
                               * (default 0.05); 0: never stop at a plateau */
  /* Progress, through the caller's callback (toplu/log.h), on the calling
   * thread, one line per call without a newline: TOPLU_LOG_PROGRESS for
   * "batch 16: measuring ..." when a size starts and "batch 16: window 3,
   * 812.4 inferences/s, p99 12.3 ms, 2 s elapsed" after every measuring
   * window (a live status: each replaces the one before), TOPLU_LOG_NOTE
   * for a finished size ("batch 16: ok, 812.4 inferences/s, p50 11.80 ms,
   * p99 12.30 ms (240 runs, 3.1 s)", "batch 32: out of memory (...)") and
   * a binary-search fit test ("batch 24: fits (fit test)").  NULL: quiet. */
  toplu_log_fn log;
  void *log_user;             /* passed to log */
  const toplu_shape_profiles_t *profiles; /* toplu_tune_profiles: one sweep per shape profile
                               * (toplu/planner.h); NULL or none added: one sweep at `shapes`.
                               * Give profiles or shapes, not both.  Ignored by toplu_tune_model. */
} toplu_tune_options_t;

/* Defaults as documented above.  NULL-safe. */
void toplu_tune_options_init(toplu_tune_options_t *o);

typedef enum toplu_tune_status {
  TOPLU_TUNE_OK = 0,          /* fit and within the latency budget */
  TOPLU_TUNE_OOM = 1,         /* out of memory (limit or a real allocation failure) */
  TOPLU_TUNE_OVER_BUDGET = 2  /* fit, but p99 latency over the budget */
} toplu_tune_status_t;

/* "ok", "oom", "over_budget". */
const char *toplu_tune_status_name(toplu_tune_status_t s);

typedef struct toplu_tune_row {
  int64_t batch_size;
  toplu_tune_status_t status;
  double p50_ms, p90_ms, p99_ms; /* latency of one batch (0 for oom) */
  double min_ms;                 /* the fastest run after the first (warm-up included) */
  double throughput;             /* inferences per second (0 for oom) */
  int64_t runs;                  /* timed runs the statistics come from */
  int windows;                   /* measuring windows */
  int stable;                    /* 1: three consecutive windows agreed within 10% */
  double seconds;                /* time spent on this size, warm-up included */
  uint64_t peak_bytes;           /* measured (see above); for oom: what was in use when it failed */
  uint64_t predicted_bytes;      /* the planner's total for this size (0 when planning itself failed) */
  double predicted_latency_ms;   /* the planner's uncalibrated roofline latency */
  uint64_t rss_growth_bytes;     /* peak RSS during this size less RSS before it */
  uint64_t after_bytes;          /* allocator bytes in use after freeing (0: back to baseline) */
  char message[256];             /* why it failed (oom) */
} toplu_tune_row_t;

/* One op type's share of the profiled run time. */
typedef struct toplu_tune_op {
  char op_type[64];
  double total_ms;  /* summed over the profiled runs */
  double share;     /* of all nodes' time */
  int nodes;
} toplu_tune_op_t;

/* A node of the last profiled run (for the Chrome trace). */
typedef struct toplu_tune_event {
  char name[96];
  char op_type[64];
  double start_us, dur_us;
  int64_t flops;
} toplu_tune_event_t;

typedef struct toplu_tune_result {
  char model[1024];
  /* The model file measured (tune.json "model_identity"): its name, size
   * and FNV-1a 64 hash of its bytes; model_hashed 0 when the file could not
   * be read again (a model loaded from memory). */
  char model_file[256];
  uint64_t model_bytes;
  uint64_t model_fnv1a64;
  int model_hashed;
  char inputs[512];                /* "x: [B, 3, 224, 224] float32" */
  toplu_device_info_t device;      /* the local CPU, as probed */
  int threads;
  int automatic;                   /* 1: the automatic sweep, 0: an explicit list */
  double latency_budget_ms;
  uint64_t memory_limit_bytes;
  uint64_t in_place_bytes;         /* constants the plan reads from the model (in every peak) */
  int64_t recommended_batch_size;  /* the smallest size within 3% of the best ok throughput; when no size
                                      met the latency budget, the one with the lowest p99 (a note says so);
                                      0 when no size ran */
  int64_t max_fitting_batch_size;  /* largest size found to fit (0: none) */
  int64_t smallest_oom_batch_size; /* smallest size that did not fit (0: none) */
  int64_t planned_max_batch_size;  /* the planner's max under the memory limit (0: no limit) */
  char stop_reason[256];
  int batchable;
  int n_rows;
  toplu_tune_row_t *rows;          /* measured sizes, ascending */
  int n_probes;
  int64_t *probe_batch;            /* binary-search fit tests: size ... */
  int *probe_fits;                 /* ... and whether it fit */
  int n_ops;                       /* --profile: op types by time, descending */
  toplu_tune_op_t *ops;
  int n_events;
  toplu_tune_event_t *events;
  int64_t profile_batch_size;
  int n_notes;
  char notes[TOPLU_PLAN_MAX_NOTES][256];
  /* With a profile: the Chrome trace of the profiled run as JSON text
   * (toplu_profile_trace_json, toplu/profile.h; freed with the result),
   * written as dir/trace.json; NULL otherwise. */
  char *trace_json;
} toplu_tune_result_t;

/*
 * Run the sweep on model m.  Errors: TOPLU_ERR_INVALID_ARGUMENT (bad
 * options; impossible settings: the memory limit below what batch 1 needs,
 * or the latency budget below batch 1's fastest run, reported with the
 * result still filled in *out so it can be written; a budget that only
 * batch 1's p99 exceeds is a result, over_budget, not an error), TOPLU_ERR_NOT_FOUND /
 * TOPLU_ERR_SHAPE (inputs and shapes), TOPLU_ERR_IO / TOPLU_ERR_PARSE (input
 * files), and errors of running the model.  On an error *out may still hold
 * a result (free it); NULL otherwise.
 */
toplu_status_t toplu_tune_model(const toplu_model_t *m, const toplu_tune_options_t *o, toplu_tune_result_t **out,
                                toplu_error_t *err);

/* The result as one JSON object (tune.json; malloc'ed, free with free()):
 * model, model_identity{file, bytes, fnv1a64, inputs, threads},
 * recommended_batch_size, latency_budget_ms, memory_limit_bytes,
 * planned_max_batch_size, results[{batch_size, status, p50_ms, p90_ms,
 * p99_ms, throughput, peak_bytes, predicted_bytes, predicted_latency_ms,
 * rss_growth_bytes, ...}], search[], profile{}, device{}, notes[].  NULL
 * for a NULL result. */
char *toplu_tune_json(const toplu_tune_result_t *r);

/*
 * Write dir/tune.json, dir/tune.csv (the results' columns), dir/tune.dat and
 * dir/tune.gp (data and gnuplot script) and render dir/tune.png with gnuplot
 * (throughput and p99 latency against batch size, the budget line, the
 * chosen batch); with a profile, dir/trace.json (Chrome trace format).
 * dir is created.  When gnuplot is missing, plot_note says how to render
 * the plot later (else it says where the plot is).  Errors: TOPLU_ERR_IO;
 * TOPLU_ERR_INVALID_ARGUMENT for a NULL result or dir.
 */
toplu_status_t toplu_tune_write(const toplu_tune_result_t *r, const char *dir, char *plot_note, size_t note_size,
                                toplu_error_t *err);

/* The terminal table, measurements beside the plan's predictions (nothing
 * for a NULL result or file). */
void toplu_tune_print(const toplu_tune_result_t *r, FILE *f);

void toplu_tune_result_free(toplu_tune_result_t *r);

/* The sweeps of every shape profile (toplu_tune_profiles). */
typedef struct toplu_tune_profiles_result {
  int n;                           /* profiles swept (results[0 .. n-1]); fewer than n_profiles after an error */
  int n_profiles;                  /* profiles asked for */
  toplu_tune_result_t **results;   /* one per profile, as toplu_tune_model gives it */
  char (*labels)[256];             /* "x=1x3x48x320"; "" at the default shapes */
  /* The batch that fits every profile under the memory limit (0 without a limit, or when a
   * profile fit no size): the smallest of the profiles' max_fitting_batch_size, and of the
   * planner's planned_max_batch_size; bounding_profile (0-based) is the profile that bounds
   * the measured one (the largest profile). */
  int64_t max_fitting_batch_size;
  int64_t planned_max_batch_size;
  int bounding_profile;
} toplu_tune_profiles_result_t;

/*
 * Run toplu_tune_model once per profile of o->profiles (with that
 * profile's shapes; every other option applies to each sweep, the time
 * limits too, per profile), or once at o->shapes without profiles.  The
 * log callback gets each line prefixed "profile K of N (LABEL): " when
 * there are several, and a note as each profile starts.  Errors: those of
 * toplu_tune_model for the first profile that fails, prefixed "profile K
 * of N (LABEL): " when there are several; *out then holds the profiles
 * swept so far (the failing one's partial result included when
 * toplu_tune_model gave one), or NULL; TOPLU_ERR_INVALID_ARGUMENT when
 * both profiles and shapes are given.  Thread-safety: as toplu_tune_model.
 */
toplu_status_t toplu_tune_profiles(const toplu_model_t *m, const toplu_tune_options_t *o,
                                   toplu_tune_profiles_result_t **out, toplu_error_t *err);

/* JSON (malloc'ed; free with free()): one profile: toplu_tune_json's object;
 * several: {"profiles": [each tune.json object with "profile" (1-based),
 * "shapes" and "dir" (its directory under toplu_tune_profiles_write's dir)
 * first], "max_fitting_batch_size_all_profiles", "planned_max_batch_size_all_profiles",
 * "bounding_profile" (1-based), "bounding_shapes", "pairing"}. */
char *toplu_tune_profiles_json(const toplu_tune_profiles_result_t *r);

/* Write the results: one profile: toplu_tune_write(dir) as before; several:
 * each profile's files in dir/profile-K (K from 1; its tune.json is
 * what toplu_tune_write writes, usable as --calibration for that shape) and
 * dir/profiles.json (toplu_tune_profiles_json).  note: as toplu_tune_write
 * (the last profile's).  Errors: TOPLU_ERR_IO, TOPLU_ERR_OUT_OF_MEMORY. */
toplu_status_t toplu_tune_profiles_write(const toplu_tune_profiles_result_t *r, const char *dir, char *note,
                                         size_t note_size, toplu_error_t *err);

/* Text: one profile as toplu_tune_print; several: a section per profile
 * ("=== profile 2 of 3: x=1x3x48x640 ===" and its table), then a summary:
 * each profile's recommended batch and largest fit, and the batch that fits
 * every profile under the memory limit. */
void toplu_tune_profiles_print(const toplu_tune_profiles_result_t *r, FILE *f);

void toplu_tune_profiles_free(toplu_tune_profiles_result_t *r);

/*
 * Was the tune.json at tune_json_path measured on the model file at
 * model_path?  Use it before trusting a tune result for another run
 * (`toplu plan --calibration`, `toplu run --batch-size auto --tune`).
 * tune.json's "model_identity" records the measured file's size and the
 * FNV-1a 64 hash of its bytes: the model matches when both agree (a renamed
 * or moved copy is the same model); *checked = 1.  A tune.json without that
 * record (an older toplu, or written by hand) cannot be checked: TOPLU_OK
 * with *checked = 0, unless its "model" names a file of another name (a
 * mismatch).  checked may be NULL.  Input shapes and threads are not
 * compared here (they are in the record for callers that care).
 * Errors: TOPLU_ERR_INVALID_ARGUMENT: another model (the message names
 * both, e.g. "T is a tune result of another model: it was measured on 'a'
 * (N bytes, FNV-1a 64 H), this model is 'b' (M bytes, ...)"), TOPLU_ERR_IO:
 * either file cannot be read ("T: No such file or directory"),
 * TOPLU_ERR_PARSE: not JSON, or a malformed record.  Reads both files
 * whole (the model once, to hash it); thread-safe.
 */
toplu_status_t toplu_tune_result_matches_model(const char *tune_json_path, const char *model_path, int *checked,
                                               toplu_error_t *err);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_TUNER_H */
