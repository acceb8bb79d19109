/*
 * toplu/session.h - running a loaded model.
 *
 * A session binds a model to run-time settings (threads, allocator).  For
 * every distinct set of input shapes it builds a *plan* once: resolved
 * shapes, constant-folded shape arithmetic, chosen kernels (oneDNN
 * primitives with weights reordered once), and one arena laid out by tensor
 * liveness.  Plans are cached, least recently used dropped first past a
 * count and, when set, a byte bound (max_plans, max_plan_bytes; see
 * toplu_session_plan_cache); running a cached plan does no malloc.  The
 * batch dim stays symbolic in the model and is bound by the plan, so one
 * session runs any batch size, and one oneDNN call covers the whole batch.
 *
 * Sessions are re-entrant: several threads may call toplu_session_run() on
 * one session at once (each concurrent run gets its own arena).
 */
#ifndef TOPLU_SESSION_H
#define TOPLU_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "toplu/alloc.h"
#include "toplu/log.h"
#include "toplu/model.h"
#include "toplu/status.h"
#include "toplu/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct toplu_session toplu_session_t;

/* Most threads one run may use (toplu_session_options_t.threads and every
 * other threads option of the library). */
#define TOPLU_MAX_THREADS 4096

typedef struct toplu_session_options {
  /* Threads for one run (oneDNN's OpenMP threads and toplu's own loops).
   * 0: all cores available to the process. */
  int threads;
  /* Allocator to count and limit the session's bytes; NULL: the session
   * makes its own without a limit.  Not owned. */
  toplu_allocator_t *allocator;
  /*
   * For models whose file fixes dim 0 of every input (toplu_model_fixed_batch_size:
   * b = 1, or a static batch b > 1): accept inputs with another dim 0.  The
   * session first tries to re-plan the graph with dim 0 free (constant
   * Reshape targets with a leading b become "copy dim 0") and checks that
   * no op mixes rows (on a plan of 1 row, or 2 for a one-row input); when it
   * cannot prove that, a model fixed at batch 1 runs the batch one row at a
   * time, and one fixed at b > 1 is a TOPLU_ERR_SHAPE error saying why
   * (it can only run b rows at a time).  0: such inputs are a
   * TOPLU_ERR_SHAPE error.
   */
  int batch_override;
  /* Record per-node time in each run (see toplu_session_profile). */
  int profile;
  /* Cached plans kept at most (least recently used dropped); 0: 8; at most
   * TOPLU_MAX_PLANS.  Plans share the weights packed for their kernels
   * wherever they pack a constant into the same layout (oneDNN usually picks
   * the same one at every batch size), so another cached plan costs its
   * activations, workspace and kernel state; toplu_session_memory's
   * weights_bytes is what one plan needs alone.  With batch_override, the
   * batch-1 plan made to check that rows stay apart is cached too.  See
   * max_plan_bytes for what happens when a plan does not fit. */
  int max_plans;
  /* Where the session's notes go (the fixed-batch row-by-row note, plan
   * dumps at TOPLU_LOG_DEBUG when plan_dump is set); NULL: nowhere.
   * Called from the thread that builds a plan.  See toplu/log.h. */
  toplu_log_fn log;
  void *log_user;
  /* 1: describe every plan as it is built (steps, layouts, arena offsets)
   * through log at TOPLU_LOG_DEBUG.  The CLI sets it from TOPLU_PLAN_DUMP. */
  int plan_dump;
  /* Comma-separated op types whose oneDNN blocked-layout variants are not
   * used (they run on plain layouts, with reorders around them): a
   * debugging aid to bisect a wrong result.  NULL: none.  Not owned; must
   * outlive the session. */
  const char *no_blocked;
  /*
   * Backends, in order of preference, as a comma-separated list of names:
   * each node runs on the first backend with a kernel that supports it, and
   * the plan copies tensors where consecutive nodes run on backends with
   * different memory.  Names: "cpu" (also "onednn": oneDNN and toplu's own
   * CPU kernels, the default) and "reference" (plain-C float32 kernels for
   * the ops of ops/ref/ref.h, slow and exact, an oracle for tests, with
   * memory of its own).  A name may carry the op types it is used for,
   * joined by '+': "reference:Conv+MaxPool,cpu" runs Conv and MaxPool (and
   * nothing else) on the reference backend; each must be an op the backend
   * has.  Nodes are matched by their op type after fusion (a Conv with a
   * fused Relu is a Conv).  The CPU backend is added last when missing.
   * NULL or "": "cpu".  Not owned.
   */
  const char *backends;
  /*
   * How each plan uses the session's threads, chosen by measurement.
   * 0 (default): on the third run of a new input shape (a caller whose
   * shapes change every call never pays for timing); 1: on its first run (a
   * server's warm-up); when threads > 1, the plan is timed against one
   * alternative on the caller's inputs and the faster is kept:
   *  - split (data parallel): when every input and output is a tensor with
   *    the batch in dim 0, no op works along dim 0 (the check batch_override
   *    uses: every tensor's shape scales with the batch) and the batch has a
   *    divisor k with threads <= k <= 4 x threads (the smallest is taken), a
   *    one-thread plan of batch/k rows runs the k slices at once, the
   *    calling thread and threads - 1 worker threads of the session's own
   *    (started by the first split run, ended by toplu_session_destroy;
   *    they spin about 100 us when idle, then sleep) each taking the next
   *    slice.  No barrier joins the threads inside a run, and a run waits
   *    only for the slices taken, so a thread the OS preempts (other
   *    processes on the cores: a server's HTTP threads, another shard)
   *    holds the others up for one slice at most, and one not yet scheduled
   *    holds up nothing.  A second caller running a split plan of the same
   *    session at that moment runs its slices on an OpenMP team instead.
   *    Kept unless its mean run is 3% slower (means, not quartiles: on
   *    shared cores the whole batch's runs have a long tail).  PaddleOCR cls at batch 8 on 2 cores: 1.4-1.7x
   *    the whole batch's throughput idle; PaddleOCR det at batch 2 1.2x
   *    (docs/performance.md, "Threads by measurement").
   *  - otherwise (batch 1, a batch with no such divisor, rows that mix), the
   *    same plan on one thread, kept when at least 5% faster: small plans
   *    lose more at each step's thread barrier than a second thread adds
   *    (PaddleOCR cls at batch 1 on 2 cores: 0.5 ms on one thread, 1.0 ms
   *    on two).
   * Timing, for a run of up to 20 ms: on the caller's inputs at once, three
   * rounds, alternating which side goes first, up to three runs a side a
   * round, each side's first runs in a round untimed (one run and at least
   * 10 ms), compared by lower quartiles (the split by means; a split round
   * after a whole-batch round first waits, up to 50 ms, for the OpenMP team
   * to stop spinning); about 10-25 timed runs of the shape and up to about
   * 130 ms of warm-up.  A run over 20 ms is not run again: the plan's next
   * five runs, each on its own caller's inputs, are the timing (the
   * alternative's warm run, then two rounds of one timed run a side,
   * alternating which goes first), so it costs no runs beyond the callers'
   * (ResNet-50 at batch 8 on 2 cores: a 64-row job took 4.3 s with five
   * extra runs of 310 ms, 2.5 s without; a run with a deadline, or one that
   * another caller overlaps, is not a step; choose_threads_long_ms sets the
   * 20 ms, -1 times every shape at once).  Once per cached plan (a plan evicted and
   * built again is timed again), and the alternative plan's memory (a split
   * plan's arena per slice running at once; the whole-batch plan's arena
   * is then given back).  Skipped, keeping `threads` on the whole batch, for
   * a plan whose run takes over choose_threads_max_ms, when a second plan
   * of its bytes would take more than half of the memory available then
   * (MemAvailable, or the cgroup limit less its usage; a note says so), when
   * the run has a deadline (a cancel flag set while timing ends the timing; a timing
   * that a cancel or failed run ended, or that other callers overlapped
   * (a plan in use is not swapped), is tried again after as many runs, three
   * times in all), when
   * profiling (the profile describes the whole-batch plan), for a
   * fixed-batch model run row by row (batch_override where its ops mix
   * rows or its graph with dim 0 freed cannot be planned; a batch it runs in
   * one go on that graph is timed as any plan, since 2026-12-07), and when another thread
   * is running the same plan at that moment.  Outputs agree with the
   * whole-batch plan's to float rounding (the kernels may block the work
   * differently at another batch).  A note through log says what was
   * chosen and both times; toplu_session_plan_threads tells the threads.
   * Chosen again when the machine changes: a plan kept on `threads` over
   * the whole batch is timed again (on a later run, as above) once 8 more of
   * its runs have taken over twice the time it took when kept than have not
   * (or, likewise, under half of it), at least 1 s after the choice; its note
   * then ends "timed again: its runs had slowed down" (or "sped up").
   * Other processes that start after the choice preempt one thread of the
   * team at each of the plan's barriers (PaddleOCR cls at batch 8 on 2
   * cores: 2.8 ms a run idle, 16-480 ms beside busy processes, the split 3-4
   * ms); a choice timed while other work ran may keep the whole batch where
   * the alternative wins once the cores are free.  Such a re-timing is not
   * skipped for choose_threads_max_ms when the plan's earlier kept time was
   * within it.  The check costs a clock read and a lock per run of such a
   * plan.
   * -1: every plan runs on `threads` over the whole batch (the planner's and
   * tuner's sessions, whose measurements are per thread count).
   */
  int choose_threads;
  /* The run time above which choose_threads keeps `threads` on the whole
   * batch without timing, in milliseconds; 0: 1000 (one second). */
  int choose_threads_max_ms;
  /* The run time above which choose_threads times a new shape over the
   * plan's next five runs (one side a run, each on its own caller's
   * inputs) instead of running the caller's inputs again, in milliseconds;
   * 0: 20.  -1: always at once on the caller's inputs, on the timing run (a
   * server's warm-up, a benchmark's warm-up runs: the live or timed runs
   * after it then all run the chosen plan).  The alternative held between
   * those runs counts in the plan cache's bytes; when it would take the
   * cache past max_plan_bytes the shape is timed at once instead.
   * TOPLU_CHOOSE_LONG_MS in the environment overrides 0 (tests, A/B). */
  int choose_threads_long_ms;
  /*
   * Kernels chosen by measurement where two are close and which wins
   * depends on the CPU and the shape.  0 (default): when a plan is built,
   * a kernel with such a choice times both candidates on scratch data of
   * the node's shapes, on the plan's threads, and keeps the faster; the
   * choice is remembered per session by shapes, threads and fused
   * post-ops, so a plan built again or another batch size's plan with the
   * same products does not time again.  -1: every node takes its kernel's
   * first candidate (the planner's and tuner's sessions, whose predictions
   * and measurements must describe one plan).
   *
   * Today one choice is timed: a float MatMul with a constant 2-D B runs
   * either toplu's own GEMM (B packed in 16-column panels, post-ops fused
   * in its loop) or oneDNN's dnnl_sgemm (B read in place, no packed copy;
   * bias, residual sum and activations applied after it, row by row).  On
   * an Intel Xeon with AVX-512 the own GEMM measured 0.85-0.92x sgemm at
   * N = 768 and 1.06-1.20x at N = 3072 (128 rows); on AMD Zen 3 and Zen 5
   * it was the faster on every BERT-base shape (docs/performance.md,
   * "Engine speed").  Timing: one untimed call a side, then three rounds
   * alternating which goes first, one call a side a round, compared by
   * each side's fastest; sgemm is kept only when at least 3% faster.  A
   * product whose first call takes over 20 ms or under 50 us is not timed
   * (the own GEMM is kept, and remembered).  Costs one allocation of scratch A and C while the plan is
   * built and, for BERT-base at sequence 128 on 2 threads, about 40 ms
   * the first time a batch size is seen.  A note through log says what was
   * chosen and both times; the profile's impl names it ("onednn:sgemm").
   * TOPLU_CHOOSE_KERNELS=first|alt in the environment forces the choice
   * after the timing (A/B measurement, tests).
   */
  int choose_kernels;
  /*
   * Bytes the cached plans may hold together; 0 (default): no byte bound,
   * max_plans alone bounds the cache (as ONNX Runtime and Triton, which
   * bound nothing by default).  A plan's bytes are what dropping it gives
   * back (toplu_memory_report_t.plan_bytes): its arena (activations and
   * workspace) once per exec context it has made (one per run it ran at
   * the same time as another; at least one), its kernel state, weights
   * packed from constants it folded itself, constants it uploaded to
   * another backend's memory and constants folded at plan time.  Not
   * counted: the model's weights and their packed copies, which the plans
   * share and which stay while any plan needs them (toplu_session_memory's
   * weights_bytes), and what is malloc'd outside the allocator: the plan's
   * bookkeeping and its oneDNN primitives (about 130 KiB a plan for the
   * attention block of tests/test_plan_cache.c).  oneDNN also keeps
   * primitives of dropped plans in its own process-wide cache
   * (ONEDNN_PRIMITIVE_CACHE_CAPACITY, default 1024 primitives), which toplu
   * leaves alone: docs/design.md, "Plan cache".
   *
   * When a new plan is built the cache makes room for it: idle plans give
   * back exec contexts beyond one, then the least recently used plans no
   * call is using are dropped, until the cached plans and the new one fit
   * both bounds (bytes and max_plans).  A plan a call is using is never
   * dropped.  When the new plan cannot fit even so (it alone is larger than
   * max_plan_bytes, or it does not fit next to the plans other calls are
   * using), nothing is dropped for it: it runs for this call without being
   * cached and is freed when the call returns (a note through log, once
   * per session), so the next call with these shapes builds it again.
   * When a call gives a plan back the bound is enforced again, since runs
   * at the same time on one plan add exec contexts.  So with no call in
   * progress the cache holds at most max_plan_bytes; during calls, at most
   * that plus the plans and exec contexts those calls are using.
   * toplu_session_plan_cache says what it holds.
   */
  size_t max_plan_bytes;
} toplu_session_options_t;

/* Most cached plans a session keeps (toplu_session_options_t.max_plans). */
#define TOPLU_MAX_PLANS 65536

/* Defaults: threads 0, no allocator, batch_override 0, profile 0, max_plans 8,
 * max_plan_bytes 0 (no byte bound). */
void toplu_session_options_init(toplu_session_options_t *opts);

/* Create a session.  opts may be NULL.  Errors: TOPLU_ERR_INVALID_ARGUMENT
 * (threads outside 0..TOPLU_MAX_THREADS, max_plans outside 0..TOPLU_MAX_PLANS, an unknown
 * backend name or an empty op list in backends), TOPLU_ERR_OUT_OF_MEMORY,
 * TOPLU_ERR_BACKEND.  Thread-safe. */
toplu_status_t toplu_session_create(const toplu_model_t *model, const toplu_session_options_t *opts,
                                    toplu_session_t **out, toplu_error_t *err);

/* Destroy a session and its plans.  No run may be in progress.  NULL-safe. */
void toplu_session_destroy(toplu_session_t *s);

/* The model the session was made from (NULL for a NULL session).  Thread-safe. */
const toplu_model_t *toplu_session_model(const toplu_session_t *s);

/*
 * Run the model.  inputs[i] is the model's input i (toplu_model_input order),
 * n_inputs == toplu_model_input_count; dtypes must match, dims must match
 * the declared ones except symbolic dims (and dim 0 with batch_override).
 * outputs[j] receives output j: dtype and dims are set; when data is NULL it
 * is allocated with malloc (64-byte aligned; free with toplu_tensor_free),
 * otherwise it must hold at least the output's bytes.  A run that fails
 * leaves no such allocation behind (data NULL again).
 * Errors: TOPLU_ERR_INVALID_ARGUMENT, TOPLU_ERR_SHAPE (input dims or dtype
 * do not fit; the message names the tensor), TOPLU_ERR_UNSUPPORTED,
 * TOPLU_ERR_OUT_OF_MEMORY (plan or arena over the allocator's limit, or an
 * input or inferred tensor of more than 2^40 elements, named in the message),
 * TOPLU_ERR_BACKEND.  Thread-safe.
 */
toplu_status_t toplu_session_run(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                 toplu_tensor_t *outputs, int n_outputs);

/*
 * Per-call settings of toplu_session_run_with.
 *   deadline_ns  an absolute time on CLOCK_MONOTONIC, in nanoseconds
 *                (toplu_monotonic_ns() + budget); 0 or negative: none.  Checked before
 *                each plan step (and each row of a row-by-row run): a run
 *                still going when it passes stops with TOPLU_ERR_DEADLINE
 *                within one step's time.  A deadline already past when the
 *                call starts fails at once, before any plan is built.
 *                Building a plan (the first run at a set of input shapes:
 *                shape inference, kernel setup, weight packing) is not
 *                interrupted; build it ahead with toplu_session_memory.
 *   cancel       a flag another thread may set to non-zero at any time
 *                (toplu_run_cancel, or any atomic store); checked where the
 *                deadline is.  The run then stops with TOPLU_ERR_CANCELLED.
 *                NULL: not cancellable.  The caller clears it for reuse.
 *   runs_left    how many runs of these input shapes the caller expects to
 *                make from this one on, this one included (a batch job: its
 *                batches still to run); 0 or negative: not known.  With
 *                0 < runs_left < TOPLU_CHOOSE_MIN_RUNS, choose_threads does
 *                not start timing the plan on this run (a timing already
 *                under way goes on): the alternative plan's build and runs
 *                cost about what one to three of the plan's runs do, more
 *                than a few runs left could win back (ResNet-50 at batch 8
 *                on 2 cores, a job of 8 batches: 40-100 ms of its 0.5-1.5
 *                s).  The plan is timed on a later run that expects more.
 * A stopped run writes no output data that the caller may rely on, and
 * leaves the session, its plans and arenas as usable as a finished one.
 */
typedef struct toplu_run_options {
  int64_t deadline_ns;
  const int *cancel;
  int64_t runs_left;
} toplu_run_options_t;

/* Runs a caller must expect (toplu_run_options_t.runs_left) for
 * choose_threads to start timing a plan. */
#define TOPLU_CHOOSE_MIN_RUNS 32

/* Zeroes: no deadline, no cancel flag, runs left not known. */
void toplu_run_options_init(toplu_run_options_t *ro);

/* Now on CLOCK_MONOTONIC, in nanoseconds (the clock of deadline_ns).  Thread-safe. */
int64_t toplu_monotonic_ns(void);

/* Set *flag to 1 with an atomic release store: cancels the runs watching it.
 * Async-signal-safe and thread-safe. */
void toplu_run_cancel(int *flag);

/*
 * toplu_session_run with per-call settings (ro may be NULL) and a per-call
 * error: err (may be NULL) receives this call's status and message, so
 * concurrent callers never read each other's errors or thread-local state.
 * Errors: those of toplu_session_run, plus TOPLU_ERR_DEADLINE and
 * TOPLU_ERR_CANCELLED.  Thread-safe.
 */
toplu_status_t toplu_session_run_with(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                      toplu_tensor_t *outputs, int n_outputs, const toplu_run_options_t *ro,
                                      toplu_error_t *err);

/*
 * Bytes a run with these input shapes takes, exactly as its plan allocates
 * them (building and caching the plan; input data is not read, may be NULL).
 *   weights_bytes    constant tensors the plan reads: initializers, folded
 *                    constants and oneDNN-reordered weights (each counted once)
 *   activation_bytes the arena holding every intermediate tensor, laid out by
 *                    liveness (peak, not sum)
 *   workspace_bytes  the largest per-op scratch area (oneDNN scratchpads, im2col)
 *   input_bytes, output_bytes  the model's inputs and outputs
 *   kernel_bytes     per-plan kernel state (primitive descriptors and the like)
 * When choose_threads chose the batch split for these shapes
 * (toplu_session_plan_split > 0), the figures are those of the slices'
 * plan, with activation and workspace bytes times the slices that run at
 * once (min(threads, slices): an arena each) and flops and bytes_moved times
 * the slices; plan_bytes also counts the whole-batch plan the entry keeps.
 * All in bytes.  Errors as toplu_session_run.  Thread-safe.
 */
typedef struct toplu_memory_report {
  size_t weights_bytes;
  size_t activation_bytes;
  size_t workspace_bytes;
  size_t input_bytes;
  size_t output_bytes;
  size_t kernel_bytes;
  size_t constant_bytes; /* the part of weights_bytes read in place from the model's
                            constants (not taken from the session's allocator) */
  int64_t flops;       /* floating-point operations of one run (multiply-add = 2) */
  int64_t bytes_moved; /* sum over nodes of the bytes each reads and writes */
  int n_nodes;         /* nodes run per inference after folding and fusion */
  int per_sample;      /* 1 when a fixed-batch model is run one row at a time */
  /* The part of activation_bytes + workspace_bytes in memories other than
   * host memory (backends with memory of their own; 0 on the CPU alone),
   * and the part of weights_bytes uploaded there. */
  size_t device_arena_bytes;
  size_t device_weights_bytes;
  int n_copies;        /* Copy steps between memories per run */
  /* Bytes this plan counts for in the plan cache (max_plan_bytes): its
   * arena times its exec contexts (at least one), kernel state, and the
   * constants it alone holds; the model's weights are not in it. */
  size_t plan_bytes;
  int cached;          /* 1 when the plan is in the cache; 0 when it did not fit (max_plan_bytes) */
} toplu_memory_report_t;
toplu_status_t toplu_session_memory(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                    toplu_memory_report_t *report);

/*
 * Whether the rows of dim 0 of these inputs stay apart in this model, so
 * they may be run in batches of any size (a batch job's split) and stored
 * row by row: *apart 1 when every output holds the rows in dim 0 and no node
 * works along a dim 0 that holds them (an LSTM, GRU or RNN of layout 0 reads
 * dim 0 as the sequence; a Softmax, a reduction, a Gather along axis 0...,
 * graph/schema.h mixes_rows, less a Transpose, which moves the rows, a
 * seeded Random*Like and a dynamic int8 MatMul, whose per-tensor scale
 * follows its batch as ONNX Runtime's does); else 0 and why names the output or node (why
 * may be NULL).  Decided on plans of the first one and two rows (built and
 * dropped unless cached already; the data of inputs whose values decide
 * shapes are read from the first rows, so give at least two rows there;
 * an input whose dim 0 the model fixes stays as given), and, when the
 * inputs hold the data of at least two rows that differ and no node draws
 * random numbers or quantizes per batch (Random*, Bernoulli, Multinomial,
 * DynamicQuantize*), by running those two rows together and each alone:
 * every output row must agree to 1e-3 of the output's largest magnitude
 * (integers exactly), else *apart 0 and why names the output and the
 * element.  The plans alone miss rows that a layout op moved off dim 0
 * before another op combines them (a Transpose then a Conv over time, a
 * Slice of step -1 along dim 0, x @ x.T); the runs are three small ones.
 * A fixed-batch model (toplu_model_fixed_batch_size > 0), one with sequence inputs,
 * or inputs whose dim 0 differ: *apart 1 (the session's own row handling
 * applies).  Errors: TOPLU_ERR_INVALID_ARGUMENT (NULL s or apart, more
 * than 64 inputs), and the errors of toplu_session_output_shapes.
 * Thread-safe as toplu_session_run.
 */
toplu_status_t toplu_session_rows_apart(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs, int *apart,
                                        char *why, size_t why_size);

/*
 * toplu_session_rows_apart on made-up rows, for a caller that has none at
 * hand (a server loading a model, a report): shapes gives each input's
 * dtype and dims (data ignored; dim 0 of the inputs that batch is the rows,
 * 2 or more); the data are floats uniform in [-1, 1) from a fixed generator
 * (bfloat16 inputs: zeros), integers and bools 0 in the first row and 1 in
 * the others (a valid token id, mask or type id in most models).  A model
 * whose runs fail on such values (an index out of its table) is judged on
 * its plans alone.  Errors: those of toplu_session_rows_apart,
 * TOPLU_ERR_OUT_OF_MEMORY.  Thread-safe as toplu_session_run.
 */
toplu_status_t toplu_session_rows_apart_probe(toplu_session_t *s, const toplu_tensor_t *shapes, int n_inputs,
                                              int *apart, char *why, size_t why_size);

/* Output shapes (dtype and dims, data untouched) for these input shapes.
 * A sequence output gets kind TOPLU_KIND_SEQUENCE, ndim 1 and its length
 * in dims[0] (its items' shapes may differ: a run gives them); an empty
 * optional kind TOPLU_KIND_NONE. */
toplu_status_t toplu_session_output_shapes(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                           toplu_tensor_t *outputs, int n_outputs);

/*
 * The steps of the plan for these input shapes (building it if needed), in
 * run order: what the planner's latency model works from.  Fills up to cap
 * entries and returns the number of steps (negative status on failure).
 * The strings stay valid while the plan stays cached; a plan that does not
 * fit the cache (max_plan_bytes) is -TOPLU_ERR_OUT_OF_MEMORY.  Thread-safe.
 */
typedef struct toplu_step_info {
  const char *name;     /* node name ("reorder" for layout changes the plan inserted) */
  const char *op_type;  /* after fusion, e.g. "Conv+Relu"; "Reorder" */
  int64_t flops;        /* floating-point operations of this step (multiply-add = 2) */
  int64_t bytes_moved;  /* bytes it reads and writes */
  int64_t output_bytes; /* bytes of its outputs */
  const char *backend;  /* the backend that runs it ("cpu", "reference"; see toplu_session_options_t.backends) */
  int inserted;         /* 1: a Reorder or Copy step the plan inserted for its kernels' layouts or memories (it
                         * depends on the CPU and the kernels chosen, not on the model); 0: a node of the model */
  int64_t plain_bytes;  /* bytes it reads and writes at its tensors' logical sizes (dtype x dims, no blocked
                         * layout's padding), the same on every host; 0 for an inserted step or a view */
  const char *node_op_type; /* the node's own op type after fusion: "QLinearConv" for a QDQ convolution fused into
                         * an integer one, whose op_type (its label) reads "Conv+Relu+QuantizeLinear" */
  int64_t max_tensor_elements; /* elements of the largest tensor the step reads or writes (logical dims at these
                         * input shapes, constants included; a row-by-row plan's are one row's): what a GPU
                         * runtime with 32-bit element indexing must hold under 2^31 - 1 (toplu_plan_batch) */
} toplu_step_info_t;
int toplu_session_steps(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs, toplu_step_info_t *steps,
                        int cap);

/* Drop all cached plans, returning their memory to the allocator.  No run
 * may be in progress.  NULL-safe. */
void toplu_session_clear_plans(toplu_session_t *s);

/*
 * What the plan cache holds now, and what happened to it since the session
 * was made (toplu_session_options_t.max_plans, max_plan_bytes).
 *   n_plans, bytes   plans cached and the bytes they hold (max_plan_bytes'
 *                    count: toplu_memory_report_t.plan_bytes summed)
 *   peak_bytes       the most `bytes` seen, checked whenever a plan was
 *                    added and whenever a call gave a plan back
 *   n_in_use         cached plans a call is using now
 *   max_plans, max_plan_bytes  the bounds in force (after defaults; 0: no byte bound)
 *   hits, misses     lookups that found their plan cached, and that built
 *                    one (a run looks up once; a fixed-batch model run
 *                    through batch_override may look up twice)
 *   evictions        plans dropped to make room
 *   uncached         plans built that did not fit and ran uncached
 * s NULL: all zero.  Thread-safe.
 */
typedef struct toplu_plan_cache_stats {
  int n_plans;
  int n_in_use;
  size_t bytes;
  size_t peak_bytes;
  int max_plans;
  size_t max_plan_bytes;
  int64_t hits, misses, evictions, uncached;
} toplu_plan_cache_stats_t;
void toplu_session_plan_cache(toplu_session_t *s, toplu_plan_cache_stats_t *out);

/* A tensor a profiled step reads or writes (toplu_node_profile_t). */
typedef struct toplu_profile_tensor {
  toplu_dtype_t dtype;
  int ndim;                     /* -1: an absent optional input */
  int64_t dims[TOPLU_MAX_DIMS]; /* logical dims (NCHW order also when stored blocked) */
  const char *layout;           /* "plain" (row-major), or the backend's layout: oneDNN's
                                   format tag for a blocked one, "aBcd8b" = nChw8c */
} toplu_profile_tensor_t;

/*
 * Per-step profile of the last run of the plan for these input shapes
 * (requires opts.profile): one entry per plan step, in run order.  Fills
 * min(count, cap) entries and returns the plan's step count, which may be
 * more than cap (as snprintf: call with cap 0 to size the array); 0 without
 * opts.profile, when the plan cannot be built, or when it does not fit the
 * cache (max_plan_bytes).
 * Pointers (strings, tensors) stay valid while the plan
 * does: until toplu_session_clear_plans, toplu_session_destroy, or the plan
 * being dropped from the cache (max_plans, max_plan_bytes).  For a fixed-batch model run
 * row by row, times are those of the last row's run and shapes are one
 * row's; flops and bytes_moved are the whole batch's.  Thread-safe.
 */
typedef struct toplu_node_profile {
  const char *name;     /* node name (or op type and index when unnamed); "reorder", "copy" */
  const char *op_type;  /* after fusion, e.g. "Conv+Relu"; "Reorder", "Copy" */
  double total_us;      /* microseconds summed over all profiled runs */
  int64_t runs;
  int64_t flops;        /* floating-point operations of one run (multiply-add = 2) */
  double start_us;      /* start of this node in the last run, from the run's start */
  double last_us;       /* duration in the last run */
  /* Fields after this point were added for the profiler (docs/performance.md, Profiling). */
  int64_t bytes_moved;  /* bytes it reads and writes in one run (stored sizes, padding included) */
  const char *impl;     /* the kernel's implementation: oneDNN's impl_info_str ("brg:avx2",
                           "jit:avx2", "gemm:jit"), else "toplu:<backend>" ("toplu:cpu") for
                           toplu's own kernels, "toplu:view" for views, "toplu:copy" */
  const char *fused;    /* names of the graph nodes fused into this one, comma-separated
                           ("bn1,relu1"); "" when none */
  const char *backend;  /* "cpu", "reference" (toplu_session_options_t.backends) */
  int ran;              /* 0: a view the plan aliases (Reshape, Flatten ...): never run, no time */
  int n_inputs, n_outputs;
  const toplu_profile_tensor_t *inputs;  /* n_inputs entries, in the node's input order */
  const toplu_profile_tensor_t *outputs; /* n_outputs entries */
} toplu_node_profile_t;
int toplu_session_profile(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                          toplu_node_profile_t *nodes, int cap);

/* Message of the last failed call on this session: the calling thread's own
 * last failure on it when there is one (so concurrent runs each see their
 * own), else a copy of the last failure in any thread ("" if none).  The
 * pointer is to the calling thread's own storage, valid until the thread's
 * next failing call or its next toplu_session_last_error.  Thread-safe. */
const char *toplu_session_last_error(const toplu_session_t *s);

/* Threads a run uses (the session's; with choose_threads, a plan may use
 * one instead: toplu_session_plan_threads).  0 for a NULL session.
 * Thread-safe. */
int toplu_session_threads(const toplu_session_t *s);

/* Threads of the cached plan for these input shapes (1 or the session's),
 * 0 when no plan for them is cached.  Thread-safe. */
int toplu_session_plan_threads(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs);

/* Slices a run of these input shapes is split into (choose_threads' split:
 * that many one-thread runs of batch/slices rows at once), 0 when it runs
 * whole or no plan for them is cached.  Thread-safe. */
int toplu_session_plan_split(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_SESSION_H */
