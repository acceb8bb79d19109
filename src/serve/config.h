/*
 * serve/config.h - a model's configuration: Triton's model configuration
 * (model_config.proto) field names, read from DIR/<name>/config.json
 * (config.pbtxt is converted to this JSON first: serve/pbtxt.h).
 *
 * Spec: Triton Inference Server "Model Configuration" and model_config.proto
 * (protobuf JSON mapping: int64 fields may be numbers or decimal strings,
 * enums are their names).  Fields toplu reads:
 *   name, max_batch_size,
 *   dynamic_batching { preferred_batch_size [], max_queue_delay_microseconds,
 *     preserve_ordering, priority_levels, default_priority_level,
 *     default_queue_policy { timeout_action (REJECT | DELAY),
 *       default_timeout_microseconds, allow_timeout_override, max_queue_size },
 *     priority_queue_policy { "<level>": { same fields } } },
 *   instance_group [ { count, kind (KIND_CPU | KIND_AUTO) } ],
 *   response_cache { enable },
 *   version_policy { latest { num_versions } | all {} | specific { versions [] } },
 *   model_warmup [ { name, batch_size, count, inputs { "<input>": { data_type,
 *     dims, zero_data | random_data | input_data_file } } } ],
 *   input [], output [] (name, data_type TYPE_FP32.., dims, reshape { shape };
 *     checked against the model when given), parameters { "<key>": { string_value } }.
 * Other Triton fields (platform, backend, optimization, ...) are accepted and
 * reported in srv_config_t.ignored (the server logs them once per load of
 * the model); sequence_batching and ensemble_scheduling are errors
 * (serving such a model as a stateless single model would answer wrongly);
 * a field Triton does not have is an error naming it (a typo must not be
 * silently dropped).
 *
 * Pure functions: thread-safe.
 */
#ifndef TOPLU_SERVE_CONFIG_H
#define TOPLU_SERVE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/buf.h"
#include "toplu/model.h"
#include "toplu/tensor.h"

#define SRV_MAX_PRIORITY_LEVELS 16
#define SRV_MAX_PREFERRED 16
#define SRV_MAX_VERSIONS 64
#define SRV_MAX_WARMUP 16
/* default_timeout_microseconds and max_queue_delay_microseconds are held
 * to this (about 146 years, so 2^63-1, a common "no timeout", keeps its
 * meaning): in nanoseconds, added to a monotonic clock reading, they stay
 * inside int64 (2^63-1 overflowed and rejected every queued request at
 * once; fresh users' findings of 2026-12-06). */
#define SRV_MAX_MICROSECONDS (INT64_MAX / 2000)
/* The most elements a warm-up input may have (rows times its dims), as a
 * request's shape (2^40). */
#define SRV_MAX_WARMUP_ELEMENTS ((int64_t)1 << 40)
#define SRV_NAME_MAX 256
#define SRV_MAX_IO 32
/* The platform toplu names in model metadata and in /config (Triton's field):
 * not Triton's "onnxruntime_onnx", since toplu's own engine runs the model. */
#define SRV_PLATFORM "toplu_onnx"

/* An input[] or output[] entry: name, data_type, dims (without the batch
 * dim when max_batch_size > 0; -1 for a variable dim), and Triton's
 * reshape { shape }: the shape the model takes (input) or gives (output)
 * when it differs from dims, the shape clients send or get (the batch dim
 * prepended to both when batching; [] a scalar).  dims and reshape.shape
 * hold the same elements: split at their -1s, the pieces have equal
 * products, and the k-th -1 of one takes the size of the k-th -1 of the
 * other (row-major data is unchanged: a change of shape, not a copy). */
typedef struct srv_config_io {
  char name[SRV_NAME_MAX];
  toplu_dtype_t dtype;
  int ndim;
  int64_t dims[TOPLU_MAX_DIMS];
  int has_reshape;
  int reshape_ndim;
  int64_t reshape[TOPLU_MAX_DIMS];
} srv_config_io_t;

typedef enum srv_timeout_action { SRV_TIMEOUT_REJECT = 0, SRV_TIMEOUT_DELAY = 1 } srv_timeout_action_t;

typedef struct srv_queue_policy {
  srv_timeout_action_t timeout_action;  /* REJECT: a request past its timeout gets 503 */
  int64_t default_timeout_us;           /* 0: no timeout */
  int allow_timeout_override;           /* a request's parameters.timeout may replace it */
  int64_t max_queue_size;               /* 0: unbounded; more queued requests get 503 at once */
} srv_queue_policy_t;

typedef enum srv_version_policy { SRV_VERSIONS_LATEST = 0, SRV_VERSIONS_ALL = 1, SRV_VERSIONS_SPECIFIC = 2 } srv_version_policy_t;

typedef struct srv_warmup_input {
  char name[SRV_NAME_MAX];
  toplu_dtype_t dtype;                  /* from data_type "TYPE_FP32" */
  int ndim;                             /* dims without the batch dim when batching */
  int64_t dims[TOPLU_MAX_DIMS];
  int kind;                             /* 0 zero_data, 1 random_data, 2 input_data_file */
  char file[SRV_NAME_MAX];              /* input_data_file, relative to DIR/<name>/warmup/ */
} srv_warmup_input_t;

typedef struct srv_warmup {
  char name[SRV_NAME_MAX];
  int64_t batch_size;                   /* default 1 */
  int64_t count;                        /* default 1 */
  int n_inputs;
  srv_warmup_input_t inputs[8];
} srv_warmup_t;

typedef struct srv_config {
  char name[SRV_NAME_MAX];              /* "" when absent (the folder name is used) */
  int64_t max_batch_size;               /* 0: no batching */
  int max_batch_size_set;               /* 0: absent (the server takes the planner's batch size) */
  int dynamic_batching;                 /* 1 when the object is present */
  int64_t preferred_batch_size[SRV_MAX_PREFERRED];
  int n_preferred;
  int64_t max_queue_delay_us;           /* default 0 */
  int preserve_ordering;
  int priority_levels;                  /* 0: one level */
  int default_priority_level;           /* 1..priority_levels (0 when priority_levels is 0) */
  srv_queue_policy_t default_queue_policy;
  srv_queue_policy_t priority_queue_policy[SRV_MAX_PRIORITY_LEVELS + 1]; /* by level; [0] unused */
  int priority_policy_set[SRV_MAX_PRIORITY_LEVELS + 1];
  int instance_count;                   /* sum of instance_group counts; default 1 */
  int response_cache;                   /* response_cache.enable */
  int qdq_int8_all;                     /* parameters.qdq_int8_all.string_value "true": toplu_model_options_t.qdq_int8_all */
  int allow_nonfinite;                  /* parameters.allow_nonfinite.string_value "true": NaN and Inf inputs are run */
  srv_version_policy_t version_policy;
  int64_t num_versions;                 /* latest: default 1 */
  int64_t versions[SRV_MAX_VERSIONS];   /* specific */
  int n_versions;
  int n_warmup;
  srv_warmup_t warmup[SRV_MAX_WARMUP];
  int n_inputs, n_outputs;              /* input[] and output[] entries as given (0: none) */
  srv_config_io_t inputs[SRV_MAX_IO], outputs[SRV_MAX_IO];
  char ignored[512];                    /* comma-separated Triton fields read but not used (", ..." when cut) */
  char model_filename[256];             /* default_model_filename: the model file in each version folder
                                           ("" : model.onnx) */
  char parameters_json[4096];           /* parameters as given, each ",\"key\":{\"string_value\":...}" (for GET
                                           .../config; entries past 4 KiB are left out of it) */
  char source[32];                      /* where the configuration came from, for max_batch_size_source: "config.json",
                                           "config.pbtxt", "parameters.config" (a load request's); "" when no file
                                           (srv_config_parse leaves it "": its caller sets it) */
} srv_config_t;

/* Triton's defaults: no batching set, one instance, latest version, no cache. */
void srv_config_defaults(srv_config_t *c);

/*
 * Parse config.json text (len bytes; need not be NUL-terminated).  path is
 * used in messages only.  Returns 0, or -1 with err holding
 * "PATH: dynamic_batching.max_queue_delay_microseconds: must be a
 * non-negative integer, not -5" (the field's full path, the value found).
 * Checks values: max_batch_size >= 0; preferred sizes in 1..max_batch_size;
 * priority levels <= SRV_MAX_PRIORITY_LEVELS, default level within them;
 * counts >= 1; version numbers >= 1; an input/output reshape.shape holds
 * the elements of its dims ("input[0].reshape.shape: [4] has 4 elements,
 * but dims [2, 3] has 6 ...").
 */
int srv_config_parse(const char *text, size_t len, const char *path, srv_config_t *out, char *err, size_t err_size);

/*
 * Check a config against its model: input/output entries name real tensors
 * with their dtype and dims (without the batch dim when max_batch_size > 0;
 * a -1 in the config or a symbolic model dim matches any size; an entry's
 * reshape.shape instead of its dims where it has one), warm-up inputs
 * likewise (against the config's dims for an input with a reshape) and
 * every model input has warm-up data.  Returns 0 or -1
 * with err naming the field ("input[0].dims[1]: ...", no file prefix).
 */
int srv_config_check_model(const srv_config_t *c, const toplu_model_t *m, char *err, size_t err_size);

/*
 * The dims of model input vi as served: the model's, with a free (-1) dim
 * taken from the config's input[] entry of that name where it is fixed
 * there (the batch dim excluded when max_batch_size > 0).  dims holds
 * vi->ndim entries (vi->ndim >= 0).
 */
void srv_config_input_dims(const srv_config_t *c, const toplu_value_info_t *vi, int64_t *dims);

/* The same for model output vi and the config's output[] entry (/config and the metadata show the configured
 * dims, as Triton does; they showed the model's free dims until 2026-12-06). */
void srv_config_output_dims(const srv_config_t *c, const toplu_value_info_t *vi, int64_t *dims);

/*
 * Check a request input's shape (ndim dims, the batch dim included when
 * there is one) against the config's input[] entry named name, as Triton
 * does: dims without the batch dim when max_batch_size > 0, a -1 matching
 * any size.  An input the config does not list passes.  Returns 0, or -1
 * with err holding "FIELD_PATH: [1, 3, 5] does not match the config's input
 * 'x' dims [3, 4] ...".
 */
int srv_config_check_request_shape(const srv_config_t *c, const char *field_path, const char *name, int ndim,
                                   const int64_t *dims, char *err, size_t err_size);

/* 1 when an input[] or output[] entry has a reshape. */
int srv_config_has_reshape(const srv_config_t *c);

/*
 * The shape clients see of model input (is_output 0) or output (1) vi, the
 * batch dim included (as -1) when max_batch_size > 0, into dims (room for
 * TOPLU_MAX_DIMS); returns its rank (-1: unknown).  The config's dims
 * where the entry has a reshape; else the model's dims, an input's free
 * dims narrowed by the config (srv_config_input_dims).
 */
int srv_config_served_dims(const srv_config_t *c, const toplu_value_info_t *vi, int is_output, int64_t *dims);

/*
 * 1 when model output `name` is served: the config lists no output[] (every
 * model output is), or lists this one.  As in Triton, whose ONNX Runtime
 * backend fills in output[] only when the config has none: a config that
 * lists some outputs serves those alone (a request without "outputs" gets
 * them, one that names another is refused, metadata shows them).
 */
int srv_config_serves_output(const srv_config_t *c, const char *name);

/*
 * A request input's shape (*ndim dims, the batch dim first when batching),
 * already checked against the config's dims (srv_config_check_request_shape),
 * changed in place into the shape the model takes: the config's reshape of
 * input name, its -1s from the request's -1 dims in order.  No entry or no
 * reshape: unchanged.  batching: whether dim 0 is the batch dim.  Returns 0,
 * or -1 when the shape does not fit the config's dims (unchanged then).
 */
int srv_config_reshape_input(const srv_config_t *c, const char *name, int batching, int *ndim, int64_t *dims);

/*
 * The inverse for an output: the shape the model gave for output name
 * (*ndim dims, the batch dim first when batching) into the shape clients
 * get (the config's dims).  Returns 0, or -1 with err holding "output
 * 'NAME': the model gave [..], which does not fit the config's output[i].reshape.shape [..]".
 * An output[] entry without a reshape checks the shape against its dims
 * (-1: any; after the batch dim when batching), leaving it as it is:
 * -1 with "... does not fit the config's output[i].dims [..]" otherwise.
 */
int srv_config_reshape_output(const srv_config_t *c, const char *name, int batching, int *ndim, int64_t *dims, char *err,
                              size_t err_size);

/*
 * The config as Triton's GET /v2/models/{name}/config JSON (model_config.proto
 * JSON: name, platform "onnxruntime_onnx"-like "toplu_onnx", max_batch_size,
 * input/output with data_type "TYPE_FP32" and dims (-1 for symbolic),
 * dynamic_batching, instance_group, response_cache, version_policy), with
 * "parameters": {"max_batch_size_source": {"string_value": SOURCE}} when
 * source is not NULL.  Appended to out as text.  Inputs and outputs come
 * from m (from the config's entries when m is NULL); 64-bit numbers are
 * written as JSON numbers (protobuf JSON readers take both forms);
 * model_warmup when given; instance_group is one group "<name>_0" of
 * instance_count KIND_CPU instances.
 */
void srv_config_json(const srv_config_t *c, const toplu_model_t *m, const char *source, pl_buf_t *out);

#endif
