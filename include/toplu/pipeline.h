/*
 * toplu/pipeline.h - batch inference jobs: files in, stored results out.
 *
 * A job runs one model over every row of its inputs and stores one result
 * per row, in input order, keyed by the row's id:
 *
 *   sources   a .npy file (rows along dim 0, converted to the input's
 *             dtype), a directory or glob of JPEG and PNG images, a .csv file
 *             (one input row flattened per line, numeric, optional header)
 *             or a .jsonl file (one object per line, one key per model
 *             input, each a nested array for one row without the batch
 *             dim).  Ids: an image's path relative to the directory (or to
 *             the glob's fixed leading directories); otherwise the 0-based
 *             row number (blank lines of CSV and JSONL are not counted).
 *   preprocessing  declared as text (see toplu_job_options_t.preprocess).
 *   batching  rows are read in chunks of batch_size rows; inside a chunk rows
 *             of equal shape are stacked into one batch (shape buckets).
 *   postprocessing raw, softmax, argmax, topk=K (with a labels file).
 *   sinks     by the output's name: .jsonl, .csv, .sqlite (or .db), or a
 *             directory with one .npy per output plus ids.txt (an existing
 *             directory, a name without a word extension, or one ending in
 *             '/'; "results.json" is refused).
 *
 * Stages run on threads joined by a bounded window of chunks: read/decode
 * and preprocess (`workers` threads), inference (`infer_workers` threads
 * calling toplu_session_run on one session), postprocess (one thread) and
 * write (the thread calling toplu_job_run).  At most prefetch +
 * infer_workers + 2 chunks are held at once (prefetch 0: one, the stages
 * run one after another), so memory is bounded whatever the input size.
 *
 * Crash safety: results are appended to a hidden part file beside the
 * output (".NAME.part"; for a directory sink, ".OUT.npy.part" files inside
 * it) and, at most every checkpoint_seconds and at the end, made durable
 * (fdatasync) and recorded in a checkpoint (".NAME.toplu-state", written to
 * a temporary file, fsynced and renamed; for SQLite a row of the table
 * toplu_job committed in the same transaction as the results).  The output
 * appears under its own name only when complete (rename).  After a crash or
 * SIGKILL at any moment, running the same job with resume set truncates the
 * part files to the checkpoint and continues from its row: the result is
 * byte for byte what an uninterrupted run writes.  The checkpoint stays
 * after the job, marked complete, so resuming a finished job does nothing.
 *
 * Bad rows (a corrupt image, a wrong shape, an input or output holding NaN
 * or Inf) are written to the errors file (JSON lines: id, row, stage, error)
 * and left out of the results; with fail_fast the job stops at the first one.
 *
 * The checkpoint records the identities of the model, sources and labels
 * (size, modification time, a hash of the first and last MiB), so resume
 * continues only the same job however its paths are spelled, and
 * toplu_job_merge joins only shards of one job.
 *
 * Sharding: shard K of N takes rows [K*T/N, (K+1)*T/N) of the T rows;
 * toplu_job_merge joins the shards' outputs in input order.
 */
#ifndef TOPLU_PIPELINE_H
#define TOPLU_PIPELINE_H

#include <stdint.h>
#include <stddef.h>

#include "toplu/log.h"
#include "toplu/session.h"
#include "toplu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct toplu_job toplu_job_t;

/* How a CSV source's first line is taken (options.csv_header). */
typedef enum toplu_csv_header {
  TOPLU_CSV_HEADER_AUTO = 0, /* a header when every field is a name (non-empty, not a number), or the line is
                                exactly the column indices 0,1,...,n-1 (pandas' header of unnamed columns; a
                                note says so); a line mixing numbers and names, or with an empty field, is data */
  TOPLU_CSV_HEADER_YES = 1,  /* the first line is a header */
  TOPLU_CSV_HEADER_NO = 2    /* the first line is data */
} toplu_csv_header_t;

/* How the caller wants progress shown (options.progress_mode).  The library
 * draws nothing: it records the mode (a job file's "progress" key sets it)
 * and reports through options.progress and options.log; `toplu run` draws
 * a bar or lines from them. */
typedef enum toplu_progress_mode {
  TOPLU_PROGRESS_AUTO = 0,  /* a bar on a terminal, else lines */
  TOPLU_PROGRESS_BAR = 1,   /* one line redrawn in place */
  TOPLU_PROGRESS_LINES = 2, /* a plain line every progress_seconds */
  TOPLU_PROGRESS_NONE = 3   /* only the final report */
} toplu_progress_mode_t;

/* options.batch_size values other than a row count. */
/* TOPLU_JOB_BATCH_DEFAULT: .npy sources into a .npy directory: TOPLU_JOB_BATCH_ALL, but a shard of more rows than
 * about 8 MiB of input holds (16 to 1024 rows) runs in chunks of that many rows where the model keeps the rows apart
 * and its outputs follow them (the results are the whole batch's; memory stays bounded), all at once otherwise;
 * other jobs: 16. */
#define TOPLU_JOB_BATCH_DEFAULT 0
#define TOPLU_JOB_BATCH_AUTO (-1) /* from options.tune_file, else a short timing sweep */
#define TOPLU_JOB_BATCH_ALL (-2)  /* every row of the shard in one chunk: the inputs run as one batch */
/* The largest batch_size (rows per chunk): TOPLU_MAX_ELEMENTS (2^40), since a batch is one tensor; a larger one is
 * TOPLU_ERR_INVALID_ARGUMENT.  A batch_size above the shard's rows runs them in one chunk, as TOPLU_JOB_BATCH_ALL. */
#define TOPLU_JOB_BATCH_MAX TOPLU_MAX_ELEMENTS

/* The default of options.max_line_bytes: 64 MiB. */
#define TOPLU_JOB_MAX_LINE_DEFAULT ((int64_t)64 << 20)
/* The largest labels file (options.labels): 64 MiB. */
#define TOPLU_JOB_LABELS_MAX_BYTES ((int64_t)64 << 20)

struct toplu_job_stats;

/* Called with a snapshot of the counters every progress_seconds while a job
 * runs and once at its end (from the thread in toplu_job_run; never from two
 * threads at once).  It must not call into the job. */
typedef void (*toplu_job_progress_fn)(void *user, const struct toplu_job_stats *stats);

typedef struct toplu_job_options {
  /* The ONNX model's path.  Required. */
  const char *model;
  /* Input specs "[NAME=]SOURCE", one per model input; NAME may be left out
   * when the model has one input, or for a JSONL source (its keys name the
   * inputs).  SOURCE: .npy, .csv, .jsonl, a directory or a glob of images.
   * All sources must have the same number of rows, except .npy files that
   * feed an input the model gives no batch dim (a scalar, or a fixed dim 0
   * while another input's dim 0 is free): those are passed whole to every
   * batch.  When no input has rows, the job is one run on the inputs as
   * given (one result, id 0). */
  const char *const *inputs;
  int n_inputs;
  /* The sink: NAME.jsonl, NAME.csv, NAME.sqlite / NAME.db, or a directory. */
  const char *output;
  /* SQLite outputs only: write the results into the table of this name
   * inside the database output (an existing one, a user's, or a new file),
   * leaving its other tables untouched, instead of writing the whole
   * database (table results) and renaming it into place.  NULL: the whole
   * database.  NAME is an SQL identifier: a letter or '_', then letters,
   * digits and '_', at most 64 bytes, not toplu_job nor starting with
   * sqlite_ (else TOPLU_ERR_INVALID_ARGUMENT naming sqlite_table; also
   * when the output is not .sqlite/.sqlite3/.db).  SQLite compares names
   * without regard to ASCII case, and so does toplu.  The table is
   * created by the job (id TEXT PRIMARY KEY and the result columns of the
   * results table); a table NAME that no toplu job wrote (no checkpoint for
   * it) is refused unless overwrite, which drops and recreates that table
   * only; a view or index NAME is refused.  The checkpoint is the row
   * 'state:name' (name in lower case) of the table toplu_job(key TEXT
   * PRIMARY KEY, value TEXT), created if missing and committed in the same
   * transaction as the rows, so resume continues exactly; the table is
   * created in the transaction of the first checkpoint, so a job killed
   * before it leaves the database as it was.  The database's journal mode
   * is left as it is.  The job's lock is the database's (".NAME.toplu-lock"):
   * two jobs on one database run one at a time whatever their tables.
   * toplu_job_merge does not join such outputs (it refuses them). */
  const char *sqlite_table;
  /* Rows per chunk (and largest batch), 1..TOPLU_JOB_BATCH_MAX, or one of TOPLU_JOB_BATCH_DEFAULT
   * (0), TOPLU_JOB_BATCH_AUTO (the tune result named by tune_file, else a
   * short sweep over 1, 2, 4, ... 64 timing the model), TOPLU_JOB_BATCH_ALL
   * (all the shard's rows at once).  With .npy sources, an output whose dim 0
   * does not follow the rows (a Reshape to [-1]) is written whole to a .npy
   * directory when the job is one chunk, and refused otherwise. */
  int64_t batch_size;
  /* Comma-separated preprocessing, NULL or "" for none:
   *   resize=WxH            bilinear (antialiased when shrinking) to W x H
   *   resize=WxH:letterbox  keep the aspect ratio, pad to W x H (centered)
   *   resize=S              shorter side to S, keeping the aspect ratio
   *   crop=WxH              center crop (padded when the image is smaller)
   *   pad-multiple=M        pad right and bottom to multiples of M
   *   pad-value=V           value of padded pixels, 0..255 (default 0)
   *   color=rgb|bgr|gray    channels and their order (default rgb, or gray
   *                         for a model with one channel)
   *   layout=nchw|nhwc      (default: from the model's input dims)
   *   dtype=float32|uint8   (default: the model input's)
   *   scale=S               multiply (S may be a fraction, "1/255")
   *   mean=R/G/B, std=R/G/B per channel, in R/G/B order whatever the color
   *                         order; (x*scale - mean) / std
   * The operations apply in this fixed order: color, resize, crop,
   * pad-multiple, then scale/mean/std, dtype and layout.  Images only,
   * except scale, which also multiplies numeric sources. */
  const char *preprocess;
  /* Comma-separated postprocessing of the first output (or the one named
   * with output=NAME): raw (default), softmax (over the last axis),
   * argmax, topk=K; "softmax,topk=5" applies both in order.  raw writes
   * every output, or output=NAME's alone ("raw,output=logits"); outputs not
   * written are not checked (NaN, shapes).  Each item once; an empty item,
   * raw with another, or a second output= is TOPLU_ERR_INVALID_ARGUMENT, as
   * are argmax/topk of an output of one value a row ([N]) and labels with
   * raw. */
  const char *postprocess;
  /* Labels file for argmax/topk: line k names class k (lines end at LF or
   * CR LF).  NULL: none.  A regular file of at most TOPLU_JOB_LABELS_MAX_BYTES
   * (a FIFO, device or larger file: TOPLU_ERR_INVALID_ARGUMENT). */
  const char *labels;
  /* Read/decode/preprocess threads (0: 1 on up to 4 cores, else cores/4). */
  int workers;
  /* Chunks decoded and stacked ahead of inference (default 2; 0: none). */
  int prefetch;
  /* Threads calling toplu_session_run at once (default 1; 0 means 1). */
  int infer_workers;
  /* Threads inside one run (0: all cores / infer_workers; at most TOPLU_MAX_THREADS). */
  int threads;
  /* Shard shard_index of shard_count; shard_count 0: from the environment
   * (JOB_COMPLETION_INDEX and JOB_COMPLETIONS of a Kubernetes Indexed Job,
   * or SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT and SLURM_ARRAY_TASK_MIN),
   * else 0 of 1.  This is the only place toplu reads those variables. */
  int shard_index, shard_count;
  /* Continue from the checkpoint if there is one (else start). */
  int resume;
  /* 1: a fresh start may replace files that no toplu job wrote: an output
   * file without its checkpoint beside it, a database that is not toplu's
   * (other tables, no checkpoint row; it is replaced whole, its tables
   * gone; with sqlite_table only that table is replaced), NAME.npy or ids.txt in a directory without .toplu-state, and an
   * errors file whose first line is not a toplu errors line.  0 (default):
   * toplu_job_create refuses such a job (TOPLU_ERR_INVALID_ARGUMENT naming
   * the file); the earlier output of a toplu job is always replaced. */
  int overwrite;
  /* Errors file (JSON lines); NULL: bad rows are only counted.  It, the
   * output and the output's hidden files may not be (or lie inside, or
   * match) anything the job reads: toplu_job_create refuses that. */
  const char *errors;
  /* Stop at the first bad row (TOPLU_ERR_INVALID_ARGUMENT names it). */
  int fail_fast;
  /* 1: NaN and Inf in inputs and outputs are passed through instead of
   * making the row bad (models that test for them: IsNaN, IsInf).  The
   * default refuses them because oneDNN's ReLU and max pooling can turn NaN
   * into numbers (docs/design.md, known limitations). */
  int allow_nonfinite;
  /* The most pixels (width x height, as declared in the file's header) an
   * image source's file may have; a file declaring more is a bad row
   * ("... above the limit"), refused before anything is decoded, so a small
   * file claiming a huge image (a decompression bomb) costs neither memory
   * nor time.  0: the default, 2^28 = 268435456 (16384 x 16384; 768 MiB
   * decoded as RGB); negative: TOPLU_ERR_INVALID_ARGUMENT. */
  int64_t max_image_pixels;
  /* Engine settings for the job's session (NULL: the defaults): its
   * backends, plan_dump, no_blocked, allocator, log, max_plan_bytes,
   * choose_threads, choose_threads_max_ms and choose_kernels are used (so
   * by default each batch shape's threads are chosen by measurement on its
   * third run, unless fewer than TOPLU_CHOOSE_MIN_RUNS batches of the job
   * are left then (toplu_run_options_t.runs_left: a timing would cost more
   * than it could win back), and its kernels where two are close when its
   * plan is built);
   * threads, batch_override and max_plans are the job's own.  The
   * session's notes (a thread choice, a plan that runs uncached, a model run
   * one row at a time) go to its log where it has one, else to the job's
   * log (options.log), serialised with the job's own lines.  Not owned; read by
   * toplu_job_create (the strings must outlive the job). */
  const toplu_session_options_t *session;
  /* Seconds between checkpoints (default 1; <= 0: after every chunk; NaN:
   * TOPLU_ERR_INVALID_ARGUMENT). */
  double checkpoint_seconds;
  /* A tune.json whose recommended_batch_size TOPLU_JOB_BATCH_AUTO takes.
   * The library looks nowhere else (not in the working directory). */
  const char *tune_file;
  /* CSV sources: is the first line a header?  Default auto. */
  toplu_csv_header_t csv_header;
  /* CSV sources: the field delimiter, one of ',' ';' '\t' '|' ' ' (0, the
   * default: the one of ',', ';' and tab that the first line holds most of,
   * ',' on a tie; a note names any other).  Other values:
   * TOPLU_ERR_INVALID_ARGUMENT. */
  char csv_delimiter;
  /* CSV and JSONL sources: the longest line in bytes; a longer line is a bad
   * row ("line 7: N bytes, above the line limit of M bytes"), never read into
   * memory, and a first line that long is TOPLU_ERR_INVALID_ARGUMENT (it
   * decides the columns or keys).  0: TOPLU_JOB_MAX_LINE_DEFAULT (64 MiB);
   * negative: TOPLU_ERR_INVALID_ARGUMENT. */
  int64_t max_line_bytes;
  /* Notes, warnings and progress lines, one message per call, in the
   * library's terms (option fields such as batch_size, not flags); NULL:
   * nothing is said.  See toplu/log.h; calls are serialised per job. */
  toplu_log_fn log;
  void *log_user;
  /* Counters every progress_seconds and at the end; NULL: none. */
  toplu_job_progress_fn progress;
  void *progress_user;
  /* Seconds between progress calls and TOPLU_LOG_PROGRESS lines (default 10;
   * 0: the default; negative or NaN: TOPLU_ERR_INVALID_ARGUMENT). */
  double progress_seconds;
  /* Recorded for the caller (see toplu_progress_mode_t); not used by the library. */
  toplu_progress_mode_t progress_mode;
  /* A file for the Chrome trace of the job's profile (toplu/profile.h), or
   * NULL (the default): no profile.  The session times every plan step; at
   * the end of a successful run the job writes the trace of the last run at
   * the shapes of its first batch (which it runs again, twice at most, when
   * fewer than 3 runs had those shapes: one cold run counts first-touch
   * costs; the first batch's inputs are copied for that), and says through log (TOPLU_LOG_NOTE,
   * one message per line) which 10 steps took the most time: name, op
   * type, implementation, ms per run, GFLOP/s, GB/s and share of the
   * machine's fp32 peak (toplu_cpu_fp32_peak_gflops).  Like the errors file
   * it may not be anything the job reads or writes besides.  Not a job file
   * key. */
  const char *profile;
  /* Length buckets for sequence models, NULL or "" (the default): none, rows
   * are batched with rows of exactly their shapes.  "auto" (powers of two
   * from 16) or ascending lengths "16,32,64,128": each row's inputs that
   * have the model's sequence dim (the one symbolic dim besides the batch,
   * named alike in every such input: input_ids and attention_mask [batch,
   * sequence]) are padded with zeros up to the first length >= the row's
   * (beyond the list, the next multiple of its last length), so the rows of a chunk form a batch per
   * bucket instead of one per length, and none is padded to the chunk's
   * longest.  Zero is the attention mask's "masked" and BERT's pad id: a
   * model that masks gives each row its unpadded results (to float
   * rounding).  Outputs whose dim 1 is the sequence dim (last_hidden_state
   * [batch, sequence, hidden]) are written cut back to each row's own
   * length; other outputs as they are.  A model with no input named like a
   * mask gets a warning through log (it would see the zeros as tokens).
   * toplu_job_create refuses (TOPLU_ERR_INVALID_ARGUMENT naming
   * length_buckets) a bad list, a model without such a dim, an input with
   * two, inputs naming it differently, and an output with it at another
   * axis than 1; a row whose sequence inputs disagree on the length is a bad
   * row.  Part of the job's identity (a resumed job keeps it). */
  const char *length_buckets;
  /* 1: load the model with toplu_model_options_t.qdq_int8_all (every QDQ
   * Conv of a quantized model as an integer convolution, on a CPU with
   * VNNI; results then differ from ONNX Runtime's by a few quantization
   * steps).  Part of the job's identity (a resumed job keeps it). */
  int qdq_int8_all;
  /* 1: load the model with toplu_model_options_t.no_fuse_attention
   * (attention left as separate steps; a debugging switch: results equal
   * the fused ones to rounding).  Not part of the job's identity, not a job
   * file key. */
  int no_fuse_attention;
  /* 1: load the model with toplu_model_options_t.no_fuse_qdq_residual (a
   * QDQ model's residual Adds as separate steps; a debugging switch).  Not
   * part of the job's identity, not a job file key. */
  int no_fuse_qdq_residual;
  /* 1: load the model with toplu_model_options_t.no_fuse_depthwise (a 1x1
   * and the depthwise convolution after it as separate steps; a debugging
   * switch).  Not part of the job's identity, not a job file key. */
  int no_fuse_depthwise;
  /* 1: load the model with toplu_model_options_t.no_fuse_qdq_lookup (a QDQ
   * model's functions between quantizations as float steps; a debugging
   * switch).  Not part of the job's identity, not a job file key. */
  int no_fuse_qdq_lookup;
  /* 1: load the model with toplu_model_options_t.no_fuse_projection (an
   * inverted residual block's projection as its own step; a debugging
   * switch).  Not part of the job's identity, not a job file key. */
  int no_fuse_projection;
} toplu_job_options_t;

/* Defaults: prefetch 2, infer_workers 1, checkpoint_seconds 1,
 * progress_seconds 10, everything else 0 / NULL. */
void toplu_job_options_init(toplu_job_options_t *opts);

/* The strings a job file's options point to (see toplu_job_options_from_json). */
typedef struct toplu_job_file toplu_job_file_t;

/*
 * Read a job file (JSON) into opts.  Its keys are the options' names:
 * model, input (a string "[NAME=]SOURCE", a list of them, or an object
 * {"NAME": "SOURCE"}; "inputs" is the same key), output, batch_size (a
 * whole number >= 1, "auto" or "all"), preprocess, postprocess, labels,
 * workers, prefetch, infer_workers, threads, shard ("K/N"), resume,
 * fail_fast, allow_nonfinite and qdq_int8_all (true or false), errors,
 * checkpoint_every (seconds), tune,
 * progress ("auto", "bar", "lines" or "none"), csv_header ("auto", "yes" or
 * "no"), overwrite (true or false), max_image_pixels (a whole number >= 1),
 * csv_delimiter ("," ";" "\t" "|" " "), max_line_bytes (a whole number >= 1),
 * sqlite_table (a string), length_buckets ("auto" or ascending lengths,
 * "32,64,128": checked by toplu_job_create).  Only the keys present are set; opts keeps the rest (so call
 * toplu_job_options_init first, and override with the caller's own settings
 * after).  Relative paths (model, the sources, output, labels, errors,
 * tune) are taken relative to the job file's directory.  The strings opts
 * gets live in *file until toplu_job_file_free (toplu_job_create copies
 * what it keeps, so the file may be freed once the job is created).
 * Errors (nothing set in opts, *file NULL): TOPLU_ERR_IO (cannot read),
 * TOPLU_ERR_PARSE (not JSON, a key given twice: the message names the
 * line), TOPLU_ERR_INVALID_ARGUMENT (a folder, FIFO or device instead of
 * a file, a file over 16 MiB, every unknown key named at once, or a
 * value of the wrong type: 'PATH: "batch_size": 8.7 is not a whole
 * number'), TOPLU_ERR_OUT_OF_MEMORY.  Thread-safe.
 */
toplu_status_t toplu_job_options_from_json(const char *path, toplu_job_options_t *opts, toplu_job_file_t **file,
                                           toplu_error_t *err);
/* Free what toplu_job_options_from_json kept.  NULL-safe. */
void toplu_job_file_free(toplu_job_file_t *file);

/*
 * Create a job: load the model, open the sources (listing images, indexing
 * CSV/JSONL lines), parse the specs, resolve the shard and batch size, and
 * check everything that can be checked before running (inputs present and
 * of the right rank and dtype, output kind supported, labels readable,
 * preprocessing that fits a model's fixed image size, nothing written over
 * a file the job reads, no file replaced that no toplu job wrote unless
 * overwrite, and with resume a checkpoint of the same job whose complete
 * output still has the size or row count the checkpoint records).
 * The only thing written is the output's lock file (".NAME.toplu-lock"
 * beside it, creating its directory): the job holds an exclusive flock on it
 * until toplu_job_destroy, so a second job on the same output is refused.
 * Errors: TOPLU_ERR_INVALID_ARGUMENT (bad options or specs, another job
 * writing the output, a checkpoint for other settings naming the setting),
 * TOPLU_ERR_IO, TOPLU_ERR_PARSE, TOPLU_ERR_NOT_FOUND (unknown input name),
 * TOPLU_ERR_SHAPE, model loading errors.  err gets the reason.
 */
toplu_status_t toplu_job_create(const toplu_job_options_t *opts, toplu_job_t **out, toplu_error_t *err);

/*
 * Run the job to the end (or to toplu_job_cancel).  With resume, continues
 * from the checkpoint, or does nothing when the checkpoint says the job is
 * complete.  Bad rows do not fail the job (unless fail_fast); a job whose
 * every row failed returns TOPLU_ERR_INVALID_ARGUMENT.  Errors:
 * TOPLU_ERR_IO (sink or source I/O), inference errors that are not tied to
 * one row, TOPLU_ERR_CANCELLED (toplu_job_cancel).  On failure or cancel
 * the last checkpoint stays, so the job can be resumed.  Call once per job.
 * Reports through options.log and options.progress from this thread and
 * the job's stage threads.
 */
toplu_status_t toplu_job_run(toplu_job_t *job, toplu_error_t *err);

/* Ask a running job to stop: a batch being inferred stops before its next
 * plan step (toplu_session_run_with's cancel flag), the writer commits a
 * checkpoint of every row written; toplu_job_run then returns
 * TOPLU_ERR_CANCELLED, and the job can be finished by running it again with
 * resume.  May be called from any thread or a signal handler
 * (async-signal-safe: it only stores flags). */
void toplu_job_cancel(toplu_job_t *job);

/* Stage of the pipeline, for toplu_job_stats_t.busy_s. */
typedef enum toplu_job_stage {
  TOPLU_STAGE_READ = 0,       /* reading and decoding source rows */
  TOPLU_STAGE_PREPROCESS = 1, /* preprocessing and stacking batches */
  TOPLU_STAGE_INFER = 2,      /* toplu_session_run */
  TOPLU_STAGE_POSTPROCESS = 3,/* postprocessing and formatting results */
  TOPLU_STAGE_WRITE = 4,      /* appending, fsync and checkpoints */
  TOPLU_STAGE_COUNT = 5
} toplu_job_stage_t;

struct toplu_job_stats {
  int64_t rows_total;     /* rows of this shard */
  int64_t rows_processed; /* rows this run wrote results for (not those of earlier runs) */
  int64_t rows_failed;    /* rows this run wrote to the errors file */
  int64_t rows_skipped;   /* rows this run did not redo: committed by an earlier run
                             (processed + failed + skipped = total once complete) */
  int64_t batches;        /* session runs in this run */
  int64_t batch_size;     /* rows per chunk (resolved when auto) */
  double wall_s;          /* seconds of this run, from the first read to the last commit */
  double busy_s[TOPLU_STAGE_COUNT]; /* seconds each stage worked, summed over its threads */
  int threads[TOPLU_STAGE_COUNT];   /* threads of each stage */
  int64_t shard_index, shard_count, row_first, row_end; /* this shard's rows [row_first, row_end) */
  int complete;           /* 1 once the output is in place */
  int nothing_to_do;      /* 1 when resume found the output complete already */
};
typedef struct toplu_job_stats toplu_job_stats_t;

/* Counters so far (during a run from another thread, or after).  Thread-safe. */
void toplu_job_get_stats(toplu_job_t *job, toplu_job_stats_t *stats);

/* Name of a stage ("read", "preprocess", "infer", "postprocess", "write"). */
const char *toplu_job_stage_name(toplu_job_stage_t stage);

/* Free a job (not while toplu_job_run runs).  NULL-safe. */
void toplu_job_destroy(toplu_job_t *job);

/* toplu_job_merge flags. */
#define TOPLU_MERGE_FORCE 1u     /* join shard outputs without checkpoints, in the order given */
#define TOPLU_MERGE_OVERWRITE 2u /* replace an existing output that no toplu job or merge wrote */

/*
 * Join shard outputs into one output, in input order.  All shards must be
 * of the output's kind (.jsonl, .csv, .sqlite/.db or directories).  Every
 * shard output must have its job checkpoint (beside it, or inside the SQLite
 * database): they are ordered by shard index and checked to be complete
 * (and of the byte length, row count or file sizes their checkpoint
 * records: a shard cut short after its job is refused), to
 * come from one job (the same model, inputs, rows, pre- and postprocessing,
 * labels and number of shards N; the batch size may differ) and to cover
 * shards 0..N-1 each exactly once.  A shard output without a checkpoint is
 * refused unless flags has TOPLU_MERGE_FORCE, which joins every output in
 * the order given, unchecked.  The output is written to a part file and
 * renamed when complete, with a checkpoint saying it was merged (beside a
 * file, .toplu-state in a directory, the toplu_job table of a database).
 * An existing output that no toplu job or merge wrote (a file without a
 * checkpoint beside it, a user's database, a directory without
 * .toplu-state holding a NAME.npy or ids.txt the merge writes) is refused
 * unless flags has TOPLU_MERGE_OVERWRITE.  A database holding results a
 * job wrote with sqlite_table (a checkpoint row 'state:NAME' and no row
 * 'state') is refused, with TOPLU_MERGE_FORCE too: merge joins only whole
 * databases (table results).  Errors:
 * TOPLU_ERR_INVALID_ARGUMENT (kinds differ, a shard missing, incomplete,
 * given twice or from another job, no checkpoint, CSV headers or NPY
 * shapes differ, a foreign output), TOPLU_ERR_NOT_FOUND (a
 * shard output does not exist), TOPLU_ERR_IO, TOPLU_ERR_PARSE.  note (may
 * be NULL) gets a line for the user ("ordered by shard index", or
 * "TOPLU_MERGE_FORCE: ..." when unchecked), then the rows the shards'
 * checkpoints count ("...; 640 rows: 638 with results, 2 failed"; 0 and 0
 * under TOPLU_MERGE_FORCE without checkpoints).
 */
toplu_status_t toplu_job_merge(const char *output, const char *const *shards, int n_shards, unsigned flags, char *note,
                               size_t note_size, toplu_error_t *err);

/*
 * A reader: a job's inputs without the job.  The same sources ("[NAME=]SOURCE"
 * specs), preprocessing and row checks as toplu_job_create, giving batches
 * of stacked, preprocessed input tensors in input order, with no model run
 * and nothing written.  For calibration (toplu_quantize) and anything else
 * that needs a model's real inputs.
 */
typedef struct toplu_reader toplu_reader_t;

/*
 * Open the sources of opts->inputs for model (borrowed: it must outlive the
 * reader).  Used from opts: inputs, n_inputs, preprocess, batch_size (rows
 * per batch, >= 1; TOPLU_JOB_BATCH_DEFAULT: 16; _AUTO and _ALL:
 * TOPLU_ERR_INVALID_ARGUMENT), csv_header, csv_delimiter, max_line_bytes,
 * max_image_pixels, allow_nonfinite, log and log_user; the rest is ignored.
 * max_rows > 0 reads only the first max_rows rows (0: all).  Errors: those
 * of toplu_job_create for the same inputs (a missing input, rows that differ
 * between sources, an unknown source kind, a bad preprocessing spec),
 * TOPLU_ERR_OUT_OF_MEMORY.  Thread-safe (one reader per thread).
 */
toplu_status_t toplu_reader_create(const toplu_model_t *model, const toplu_job_options_t *opts, int64_t max_rows,
                                   toplu_reader_t **out, toplu_error_t *err);

/* The rows the reader will give (after max_rows), bad rows included; 1 when
 * every input is passed whole (a model without a batch dim: one batch). */
int64_t toplu_reader_rows(const toplu_reader_t *r);

/* Rows left out so far as bad (a corrupt image, a wrong shape, NaN or Inf);
 * each is said through the log (TOPLU_LOG_WARNING, the row's id and why). */
int64_t toplu_reader_bad_rows(const toplu_reader_t *r);

/*
 * The next batch: inputs[i] (one per model input, in the model's order) is
 * set to a tensor of *rows rows (dim 0; an input passed whole, without a
 * batch dim, as it is), owned by the reader and valid until the next call
 * or toplu_reader_destroy.  Rows of one batch have equal shapes (rows of
 * other shapes come in later batches).  When every input is passed whole
 * (no input has rows), one batch of those tensors, *rows 1.  *rows is 0 at
 * the end.  A model
 * without inputs gives nothing.  Errors: TOPLU_ERR_IO (a source vanished),
 * TOPLU_ERR_OUT_OF_MEMORY; bad rows are not errors.  Not thread-safe.
 */
toplu_status_t toplu_reader_next(toplu_reader_t *r, toplu_tensor_t *inputs, int64_t *rows, toplu_error_t *err);

/* The id of row k (0-based, k < *rows) of the batch toplu_reader_next gave last: an image's file name, a
 * CSV or JSONL row's id, or the row number of an array; valid until the next call.  NULL when k is out of
 * range or no batch was given.  For naming the rows a failed run had (toplu_quantize does).  Not
 * thread-safe. */
const char *toplu_reader_row_id(const toplu_reader_t *r, int64_t k);

/* Close the sources and free everything.  NULL-safe. */
void toplu_reader_destroy(toplu_reader_t *r);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_PIPELINE_H */
