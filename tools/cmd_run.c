/*
 * tools/cmd_run.c - `toplu run`: a model over inputs, in batches.
 *
 * Two paths share the command:
 *
 *  - .npy inputs, a directory output and none of the job options: the
 *    engine's direct path (run_npy).  Without --batch-size the inputs run
 *    once, as given (any rank, scalars too).  With --batch-size N every
 *    input is split along dim 0 into batches of N rows (the last may be
 *    smaller), read from its file batch by batch, and each output is
 *    streamed to DIR/<name>.npy: the header with the total shape first, then
 *    each batch's rows in input order.  Everything that can be checked is
 *    checked before the first inference.  Outputs are written to
 *    DIR/.<name>.npy.part and renamed when complete.
 *
 *  - anything else (image folders, CSV, JSONL, .jsonl/.csv/.sqlite outputs,
 *    --preprocess, --postprocess, --resume, --shard, --job ...): a batch job
 *    of the pipeline library (toplu/pipeline.h), with prefetching stages,
 *    checkpoints and resume.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "toplu/pipeline.h"

const char cmd_run_usage[] =
    "usage: toplu run MODEL --input [NAME=]SOURCE [--input ...] --output SINK\n"
    "                 [--batch-size N|auto] [--threads T] [--quiet] [job options]\n"
    "       toplu run --job JOB.json [options that override it]\n"
    "\n"
    "Run MODEL over every row of its inputs and store one result per row.\n"
    "SOURCE: a .npy file (rows along dim 0), a directory or quoted glob of\n"
    "JPEG/PNG images, a .csv (one input row flattened per line) or a .jsonl\n"
    "(one object per line, a key per model input holding a row).  SINK:\n"
    "NAME.jsonl, NAME.csv, NAME.sqlite (table results), or a directory with one\n"
    "<output name>.npy per output (an existing one, a name without an extension,\n"
    "or one ending in '/'; other extensions are refused).  With .npy inputs, a\n"
    "directory and no job options the inputs go straight to the model: without\n"
    "--batch-size they run once, as given; with it they are split along dim 0\n"
    "(inputs whose dim 0 the model fixes, and scalars, go whole to every\n"
    "batch).  See docs/pipeline.md.\n"
    "\n"
    "options:\n"
    "  --input [NAME=]SOURCE  model input NAME (repeat per input; NAME may be left\n"
    "                         out for the only input left, or for a .jsonl)\n"
    "  --output SINK          where the results go\n"
    "  --batch-size N|auto    rows per batch (job default 16; auto: --tune FILE's\n"
    "                         recommended_batch_size, else a short timing sweep)\n"
    "  --threads T            threads per run (default: all cores)\n"
    "  --quiet, -q            no progress or summary on stderr\n"
    "job options:\n"
    "  --preprocess SPEC      resize=WxH[:letterbox], resize=S, crop=WxH,\n"
    "                         pad-multiple=M, pad-value=V, color=rgb|bgr|gray,\n"
    "                         layout=nchw|nhwc, dtype=float32|uint8, scale=S,\n"
    "                         mean=R/G/B, std=R/G/B: (x*scale-mean)/std\n"
    "  --postprocess SPEC     raw, softmax, argmax, topk=K (softmax,topk=5 does\n"
    "                         both; output=NAME picks the output)\n"
    "  --labels FILE          class names, line k = class k\n"
    "  --workers W            read/decode threads (default 1 on up to 4 cores)\n"
    "  --prefetch K           batches read ahead of inference (default 2; 0: none)\n"
    "  --infer-workers S      batches run at once (default 1)\n"
    "  --shard K/N            part K of N of the rows (default from\n"
    "                         JOB_COMPLETION_INDEX/JOB_COMPLETIONS or SLURM_ARRAY_*);\n"
    "                         join parts with toplu merge\n"
    "  --resume               continue an interrupted job from its checkpoint\n"
    "  --errors FILE          bad rows as JSON lines (id, row, stage, error)\n"
    "  --fail-fast            stop at the first bad row\n"
    "  --checkpoint-every S   seconds between checkpoints (default 1)\n"
    "  --tune FILE            tune result for --batch-size auto\n"
    "  --progress MODE        auto, bar, lines or none\n"
    "  --csv-header MODE      CSV sources: is line 1 a header? auto (a non-number\n"
    "                         field, or exactly the column indices 0,1,...), yes, no\n"
    "  --job FILE             these settings as JSON keys (model, input, output,\n"
    "                         batch_size, preprocess, postprocess, labels, ...;\n"
    "                         relative paths are relative to FILE's directory)\n"
    "\n"
    "Results appear under SINK's name only when complete.  SIGINT/SIGTERM stop a\n"
    "job after a checkpoint; rerun with --resume to finish it.\n"
    "Exit status: 0 done, 1 failed while running (or interrupted, or every row\n"
    "failed), 2 bad usage or bad input (checked before anything runs: also a\n"
    "--resume checkpoint of other settings, or another job writing SINK).\n";

#define RUN_MAX_ARGS 256

/* One model input: where it comes from and its buffer. */
typedef struct run_input {
  const toplu_value_info_t *info;
  const char *file;     /* NULL until given */
  toplu_tensor_t file_t; /* dtype and shape in the file (data NULL) */
  toplu_tensor_t t;      /* what is passed to the session */
  int batched;           /* split along dim 0 by --batch-size (else passed whole) */
} run_input_t;

/* One model output: its file and buffer. */
typedef struct run_output {
  const toplu_value_info_t *info;
  char path[4096], part[4096];
  FILE *f;
  int ndim;
  int64_t total[TOPLU_MAX_DIMS]; /* shape of the whole output file */
  toplu_tensor_t shape;           /* shape for the first batch */
  toplu_tensor_t t;               /* buffer the session writes */
} run_output_t;

/* Everything one `toplu run` holds, freed by run_free. */
typedef struct run_state {
  toplu_model_t *model;
  toplu_session_t *session;
  run_input_t *in;
  run_output_t *out;
  toplu_tensor_t *in_t, *out_t;
  int n_in, n_out;
} run_state_t;

/* Free everything; remove partial output files. */
static void run_free(run_state_t *s) {
  for (int j = 0; s->out && j < s->n_out; j++) {
    if (s->out[j].f) {
      fclose(s->out[j].f);
      remove(s->out[j].part);
    }
    toplu_tensor_free(&s->out[j].t);
  }
  for (int i = 0; s->in && i < s->n_in; i++) toplu_tensor_free(&s->in[i].t);
  free(s->in);
  free(s->out);
  free(s->in_t);
  free(s->out_t);
  toplu_session_destroy(s->session);
  toplu_model_destroy(s->model);
}


/* List the model's inputs on stderr. */
static void list_inputs(const toplu_model_t *m) {
  fprintf(stderr, "the model's inputs:\n");
  for (int i = 0; i < toplu_model_input_count(m); i++) {
    const toplu_value_info_t *v = toplu_model_input(m, i);
    char dims[512];
    fprintf(stderr, "  %s  %s  %s\n", v->name, toplu_dtype_name(v->dtype), cli_format_info_dims(v, dims, sizeof dims));
  }
}

/* Give each input its file from the specs; CLI_OK or CLI_USAGE with a message. */
static int assign_inputs(run_state_t *s, const char **specs, int n_specs) {
  const toplu_model_t *m = s->model;
  const char *bare[RUN_MAX_ARGS];
  int n_bare = 0;
  for (int k = 0; k < n_specs; k++) {
    const char *spec = specs[k];
    int i = toplu_model_input_for_spec(m, spec);
    if (i >= 0) {
      if (s->in[i].file) {
        cli_error("run", "input '%s' is given twice ('%s' and '%s')", s->in[i].info->name, s->in[i].file,
                  spec + strlen(s->in[i].info->name) + 1);
        return CLI_USAGE;
      }
      s->in[i].file = spec + strlen(s->in[i].info->name) + 1;
      if (!*s->in[i].file) {
        cli_error("run", "--input %s=: no file given", s->in[i].info->name);
        return CLI_USAGE;
      }
      continue;
    }
    const char *eq = strchr(spec, '=');
    const char *slash = strchr(spec, '/');
    if (eq && (!slash || slash > eq) && access(spec, F_OK) != 0) {
      cli_error("run", "the model has no input '%.*s' (in '%s')", (int)(eq - spec), spec, spec);
      list_inputs(m);
      return CLI_USAGE;
    }
    bare[n_bare++] = spec;
  }
  int unassigned = -1, n_unassigned = 0;
  for (int i = 0; i < s->n_in; i++)
    if (!s->in[i].file) {
      unassigned = i;
      n_unassigned++;
    }
  if (n_bare > 0) {
    if (n_bare == 1 && n_unassigned == 1) {
      s->in[unassigned].file = bare[0];
    } else {
      cli_error("run", "'%s' does not say which input it is for; use --input NAME=%s", bare[0], bare[0]);
      list_inputs(m);
      return CLI_USAGE;
    }
  }
  for (int i = 0; i < s->n_in; i++)
    if (!s->in[i].file) {
      char dims[512];
      cli_error("run", "missing input '%s' (%s %s): give --input %s=FILE.npy", s->in[i].info->name,
                toplu_dtype_name(s->in[i].info->dtype), cli_format_info_dims(s->in[i].info, dims, sizeof dims),
                s->in[i].info->name);
      return CLI_USAGE;
    }
  return CLI_OK;
}

/* Read every input's header and check dtype, rank, fixed dims and shared
 * symbols against the model; CLI_OK or CLI_USAGE. */
static int check_inputs(run_state_t *s) {
  int fixed = toplu_model_fixed_batch(s->model);
  for (int i = 0; i < s->n_in; i++) {
    run_input_t *in = &s->in[i];
    const toplu_value_info_t *v = in->info;
    toplu_error_t err;
    if (toplu_npy_read_header(in->file, &in->file_t, NULL, &err)) {
      cli_error("run", "input '%s': %s", v->name, err.message);
      return CLI_USAGE;
    }
    char got[256], want[512];
    toplu_shape_format(in->file_t.ndim, in->file_t.dims, got, sizeof got);
    cli_format_info_dims(v, want, sizeof want);
    if (in->file_t.dtype != v->dtype && v->dtype != TOPLU_DTYPE_UNDEFINED) {
      cli_error("run", "input '%s' (%s): dtype %s, the model expects %s %s (convert it, e.g. numpy's a.astype('%s'))",
                v->name, in->file, toplu_dtype_name(in->file_t.dtype), toplu_dtype_name(v->dtype), want,
                toplu_dtype_name(v->dtype));
      return CLI_USAGE;
    }
    if (v->ndim < 0) continue;
    if (in->file_t.ndim != v->ndim) {
      cli_error("run", "input '%s' (%s): shape %s has rank %d, the model expects rank %d: %s", v->name, in->file, got,
                in->file_t.ndim, v->ndim, want);
      return CLI_USAGE;
    }
    for (int d = 0; d < v->ndim; d++) {
      if (v->dims[d] >= 0 && in->file_t.dims[d] != v->dims[d] && !(d == 0 && fixed)) {
        cli_error("run", "input '%s' (%s): shape %s, the model expects %s (dim %d must be %lld)", v->name, in->file,
                  got, want, d, (long long)v->dims[d]);
        return CLI_USAGE;
      }
      /* A named symbol must have one value across all inputs. */
      if (v->dims[d] >= 0 || !v->dim_names[d] || !strcmp(v->dim_names[d], "?")) continue;
      for (int i2 = 0; i2 < i; i2++) {
        const toplu_value_info_t *v2 = s->in[i2].info;
        for (int d2 = 0; d2 < v2->ndim && d2 < s->in[i2].file_t.ndim; d2++)
          if (v2->dims[d2] < 0 && v2->dim_names[d2] && !strcmp(v2->dim_names[d2], v->dim_names[d]) &&
              s->in[i2].file_t.dims[d2] != in->file_t.dims[d]) {
            cli_error("run", "input '%s' (%s): dim %d ('%s') is %lld, but input '%s' (%s) has %s = %lld", v->name,
                      in->file, d, v->dim_names[d], (long long)in->file_t.dims[d], v2->name, s->in[i2].file,
                      v->dim_names[d], (long long)s->in[i2].file_t.dims[d2]);
            return CLI_USAGE;
          }
      }
    }
  }
  return CLI_OK;
}

/*
 * Which inputs --batch-size splits: those whose dim 0 the model leaves
 * symbolic (or, in a model whose file fixes batch 1, every input of rank
 * >= 1).  Inputs whose dim 0 the model fixes, and scalars, are passed whole
 * to every batch.  When no input has a symbolic dim 0, every input is split,
 * as asked, and *all_fixed is set.  CLI_OK or CLI_USAGE.
 */
static int choose_batched(run_state_t *s, int *all_fixed) {
  int fixed = toplu_model_fixed_batch(s->model), any = 0;
  for (int i = 0; i < s->n_in; i++) {
    const toplu_value_info_t *v = s->in[i].info;
    s->in[i].batched = s->in[i].file_t.ndim >= 1 && (fixed || v->ndim < 0 || (v->ndim >= 1 && v->dims[0] < 0));
    any |= s->in[i].batched;
  }
  *all_fixed = !any;
  if (any) return CLI_OK;
  for (int i = 0; i < s->n_in; i++) {
    if (s->in[i].file_t.ndim < 1) {
      cli_error("run", "input '%s' (%s) is a scalar; --batch-size splits the inputs along dim 0", s->in[i].info->name,
                s->in[i].file);
      return CLI_USAGE;
    }
    s->in[i].batched = 1;
  }
  if (s->n_in == 0) {
    cli_error("run", "--batch-size: the model has no inputs to split");
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* Output shapes for the file shapes with dim 0 of the batched inputs set to rows (when >= 0). */
static toplu_status_t shapes_for(run_state_t *s, int64_t rows, toplu_tensor_t *outs) {
  for (int i = 0; i < s->n_in; i++) {
    s->in_t[i] = s->in[i].file_t;
    s->in_t[i].data = NULL;
    if (rows >= 0 && s->in[i].batched) s->in_t[i].dims[0] = rows;
    /* Inputs passed whole are already read: planning may need their values
     * (a Reshape target or Slice starts given as an input). */
    if (!s->in[i].batched && s->in[i].t.data) s->in_t[i] = s->in[i].t;
  }
  return toplu_session_output_shapes(s->session, s->in_t, s->n_in, outs, s->n_out);
}

/* Open DIR/.<name>.npy.part for every output and write its header; CLI_OK, CLI_USAGE or CLI_FAIL. */
static int open_outputs(run_state_t *s, const char *dir) {
  if (cli_mkdir_p(dir) != 0) {
    cli_error("run", "--output %s: cannot create the directory: %s", dir, strerror(errno));
    return CLI_USAGE;
  }
  for (int j = 0; j < s->n_out; j++) {
    run_output_t *o = &s->out[j];
    char name[1024];
    toplu_npy_file_stem(o->info->name, name, sizeof name);
    if (!name[0]) snprintf(name, sizeof name, "output_%d", j);
    snprintf(o->path, sizeof o->path, "%s/%s.npy", dir, name);
    snprintf(o->part, sizeof o->part, "%s/.%s.npy.part", dir, name);
    for (int k = 0; k < j; k++)
      if (!strcmp(s->out[k].path, o->path)) {
        cli_error("run", "outputs '%s' and '%s' would both be written to %s", s->out[k].info->name, o->info->name,
                  o->path);
        return CLI_USAGE;
      }
  }
  for (int j = 0; j < s->n_out; j++) {
    run_output_t *o = &s->out[j];
    toplu_error_t err;
    o->f = fopen(o->part, "wb");
    if (!o->f) {
      cli_error("run", "cannot create %s: %s", o->part, strerror(errno));
      return CLI_USAGE;
    }
    if (toplu_npy_write_header(o->f, o->shape.dtype, o->ndim, o->total, &err)) {
      cli_error("run", "output '%s' (%s): %s", o->info->name, o->path, err.message);
      return err.status == TOPLU_ERR_UNSUPPORTED ? CLI_FAIL : CLI_USAGE;
    }
  }
  return CLI_OK;
}

/* 1 when the host is little-endian (npy data is written little-endian). */
static int host_little_endian(void) {
  const uint16_t one = 1;
  unsigned char c;
  memcpy(&c, &one, 1);
  return c == 1;
}

/* Append the first `bytes` of output j's buffer to its file; 0 or -1. */
static int append_output(run_output_t *o, size_t bytes) {
  size_t es = toplu_dtype_size(o->t.dtype);
  if (!host_little_endian() && es > 1) {
    unsigned char *p = o->t.data;
    for (size_t e = 0; e + es <= bytes; e += es)
      for (size_t a = 0, b = es - 1; a < b; a++, b--) {
        unsigned char x = p[e + a];
        p[e + a] = p[e + b];
        p[e + b] = x;
      }
  }
  return bytes && fwrite(o->t.data, 1, bytes, o->f) != bytes ? -1 : 0;
}

/* Close and rename every output file; CLI_OK or CLI_FAIL. */
static int finish_outputs(run_state_t *s) {
  for (int j = 0; j < s->n_out; j++) {
    run_output_t *o = &s->out[j];
    int bad = fclose(o->f) != 0;
    o->f = NULL;
    if (bad || rename(o->part, o->path) != 0) {
      cli_error("run", "cannot write %s: %s", o->path, strerror(errno));
      remove(o->part);
      for (int k = j + 1; k < s->n_out; k++) {
        fclose(s->out[k].f);
        s->out[k].f = NULL;
        remove(s->out[k].part);
      }
      return CLI_FAIL;
    }
  }
  return CLI_OK;
}

/* Say once how a model whose file fixes batch 1 runs at another batch. */
static void note_fixed_batch(run_state_t *s, int64_t rows) {
  toplu_memory_report_t r;
  const char *how = "";
  if (toplu_session_memory(s->session, s->in_t, s->n_in, &r) == TOPLU_OK)
    how = r.per_sample ? ": it runs each batch one row at a time"
                       : ": it runs each batch in one go, with the batch dim freed";
  fprintf(stderr, "toplu run: note: %s fixes the batch dim to 1; toplu runs batches of %lld rows anyway%s\n",
          toplu_model_path(s->model), (long long)rows, how);
}

/* `toplu run` with .npy inputs and a directory output and none of the job
 * options: the engine's direct path, unchanged. */
static int run_npy(int argc, char **argv) {
  const char *model_path = NULL, *out_dir = NULL, *specs[RUN_MAX_ARGS];
  int64_t batch = 0, threads = 0;
  int n_specs = 0, quiet = 0, first_batched = 0;
  for (int i = 1; i < argc;) {
    const char *val;
    int r;
    if ((r = cli_option("run", argc, argv, &i, "--input", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (n_specs == RUN_MAX_ARGS) return cli_usage_error("run", "too many inputs");
      specs[n_specs++] = val;
    } else if ((r = cli_option("run", argc, argv, &i, "--output", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (out_dir) return cli_usage_error("run", "--output given twice");
      if (!*val) return cli_usage_error("run", "--output needs a directory");
      out_dir = val;
    } else if ((r = cli_option("run", argc, argv, &i, "--batch-size", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (cli_parse_int(val, 1, INT64_MAX, &batch))
        return cli_usage_error("run", "--batch-size '%s': expected a whole number >= 1", val);
    } else if ((r = cli_option("run", argc, argv, &i, "--threads", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (cli_parse_int(val, 0, 65536, &threads))
        return cli_usage_error("run", "--threads '%s': expected a whole number >= 0 (0: all cores)", val);
    } else if (cli_flag(argv, &i, "--quiet") || cli_flag(argv, &i, "-q")) {
      quiet = 1;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return cli_usage_error("run", "unknown option '%s'", argv[i]);
    } else if (!model_path) {
      model_path = argv[i++];
    } else {
      if (n_specs == RUN_MAX_ARGS) return cli_usage_error("run", "too many inputs");
      specs[n_specs++] = argv[i++];
    }
  }
  if (!model_path) return cli_usage_error("run", "no MODEL given");
  if (!out_dir) return cli_usage_error("run", "no --output DIR given");

  run_state_t s;
  memset(&s, 0, sizeof s);
  toplu_error_t err;
  toplu_status_t st = toplu_model_load(model_path, NULL, &s.model, &err);
  if (st) {
    cli_error("run", "%s", err.message);
    return cli_status_exit(st);
  }
  int rc = CLI_OK;
  s.n_in = toplu_model_input_count(s.model);
  s.n_out = toplu_model_output_count(s.model);
  s.in = calloc((size_t)s.n_in + 1, sizeof *s.in);
  s.out = calloc((size_t)s.n_out + 1, sizeof *s.out);
  s.in_t = calloc((size_t)s.n_in + 1, sizeof *s.in_t);
  s.out_t = calloc((size_t)s.n_out + 1, sizeof *s.out_t);
  if (!s.in || !s.out || !s.in_t || !s.out_t) {
    cli_error("run", "out of memory for the lists of %d inputs and %d outputs", s.n_in, s.n_out);
    run_free(&s);
    return CLI_FAIL;
  }
  for (int i = 0; i < s.n_in; i++) s.in[i].info = toplu_model_input(s.model, i);
  for (int j = 0; j < s.n_out; j++) s.out[j].info = toplu_model_output(s.model, j);
  if ((rc = assign_inputs(&s, specs, n_specs)) || (rc = check_inputs(&s))) {
    run_free(&s);
    return rc;
  }

  /* Rows and batches. */
  int64_t rows = 1, step = 0, n_batches = 1;
  int all_fixed = 0;
  if (batch > 0) {
    if ((rc = choose_batched(&s, &all_fixed))) {
      run_free(&s);
      return rc;
    }
    rows = -1;
    for (int i = 0; i < s.n_in; i++) {
      if (!s.in[i].batched) continue;
      if (rows < 0) {
        rows = s.in[i].file_t.dims[0];
        first_batched = i;
      } else if (s.in[i].file_t.dims[0] != rows) {
        const run_input_t *a = &s.in[first_batched], *b = &s.in[i];
        cli_error("run", "--batch-size needs the same dim 0 in every batched input: '%s' (%s) has %lld rows, '%s' (%s) has %lld",
                  a->info->name, a->file, (long long)a->file_t.dims[0], b->info->name, b->file,
                  (long long)b->file_t.dims[0]);
        run_free(&s);
        return CLI_USAGE;
      }
    }
    if (rows == 0) { /* as without --batch-size: one run on the empty inputs, empty outputs */
      batch = 0;
      for (int i = 0; i < s.n_in; i++) s.in[i].batched = 0;
    }
  }
  if (batch > 0) {
    step = batch < rows ? batch : rows;
    n_batches = (rows + step - 1) / step;
    if (all_fixed && n_batches > 1) {
      char want[512];
      cli_error("run",
                "--batch-size %lld: the model fixes dim 0 of its inputs ('%s' is %s), so they cannot be split into "
                "batches; run without --batch-size",
                (long long)batch, s.in[0].info->name, cli_format_info_dims(s.in[0].info, want, sizeof want));
      run_free(&s);
      return CLI_USAGE;
    }
  } else {
    /* Rows for the summary: dim 0 of the first input with a batch dim. */
    int pick = -1;
    for (int i = 0; i < s.n_in && pick < 0; i++)
      if (s.in[i].file_t.ndim > 0 && (toplu_model_fixed_batch(s.model) || s.in[i].info->ndim < 0 ||
                                      (s.in[i].info->ndim > 0 && s.in[i].info->dims[0] < 0)))
        pick = i;
    if (pick < 0 && s.n_in && s.in[0].file_t.ndim > 0) pick = 0;
    if (pick >= 0) rows = s.in[pick].file_t.dims[0];
  }
  if (rows == 0 && !quiet)
    fprintf(stderr, "toplu run: note: no rows: the inputs' dim 0 is 0, so the outputs are empty (the model runs once "
                    "on the inputs as given)\n");

  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = (int)threads;
  so.batch_override = toplu_model_fixed_batch(s.model);
  if ((st = toplu_session_create(s.model, &so, &s.session, &err))) {
    cli_error("run", "%s", err.message);
    run_free(&s);
    return CLI_FAIL;
  }

  /* Inputs passed whole are read now. */
  for (int i = 0; i < s.n_in; i++) {
    run_input_t *in = &s.in[i];
    if (in->batched) continue;
    if ((st = toplu_npy_read(in->file, &in->t, &err))) {
      cli_error("run", "input '%s': %s", in->info->name, err.message);
      run_free(&s);
      return CLI_USAGE;
    }
  }

  /* Output shapes for the first batch (and the last, when smaller): this
   * builds the plans, so shape errors show before anything runs. */
  for (int j = 0; j < s.n_out; j++) s.out_t[j] = (toplu_tensor_t){0};
  if ((st = shapes_for(&s, batch > 0 ? step : -1, s.out_t))) {
    cli_error("run", "%s", toplu_session_last_error(s.session));
    run_free(&s);
    return cli_status_exit(st);
  }
  for (int j = 0; j < s.n_out; j++) {
    run_output_t *o = &s.out[j];
    o->shape = s.out_t[j];
    o->ndim = o->shape.ndim;
    memcpy(o->total, o->shape.dims, sizeof o->total);
    if (n_batches > 1) {
      char sh[256];
      if (o->ndim < 1 || o->shape.dims[0] != step) {
        cli_error("run",
                  "output '%s' has shape %s for a batch of %lld rows: its dim 0 does not follow the batch, so "
                  "--batch-size cannot split this model's inputs; run it without --batch-size",
                  o->info->name, toplu_shape_format(o->ndim, o->shape.dims, sh, sizeof sh), (long long)step);
        run_free(&s);
        return CLI_USAGE;
      }
      o->total[0] = rows;
    }
  }
  int64_t last = rows - (n_batches - 1) * step;
  if (n_batches > 1 && last != step) {
    if ((st = shapes_for(&s, last, s.out_t))) {
      cli_error("run", "last batch (%lld rows): %s", (long long)last, toplu_session_last_error(s.session));
      run_free(&s);
      return cli_status_exit(st);
    }
    for (int j = 0; j < s.n_out; j++) {
      int same = s.out_t[j].ndim == s.out[j].ndim && s.out_t[j].dtype == s.out[j].shape.dtype &&
                 s.out_t[j].dims[0] == last;
      for (int d = 1; same && d < s.out[j].ndim; d++) same = s.out_t[j].dims[d] == s.out[j].shape.dims[d];
      if (!same) {
        char a[256], b[256];
        cli_error("run",
                  "output '%s' has shape %s for a batch of %lld rows but %s for the last batch of %lld: its dims "
                  "other than dim 0 depend on the batch, so the batches cannot be concatenated; run without "
                  "--batch-size",
                  s.out[j].info->name, toplu_shape_format(s.out[j].ndim, s.out[j].shape.dims, a, sizeof a),
                  (long long)step, toplu_shape_format(s.out_t[j].ndim, s.out_t[j].dims, b, sizeof b),
                  (long long)last);
        run_free(&s);
        return CLI_USAGE;
      }
    }
  }
  int64_t first_rows = batch > 0 ? step : rows;
  if (toplu_model_fixed_batch(s.model) && first_rows > 1) {
    shapes_for(&s, batch > 0 ? step : -1, s.out_t);
    if (!quiet) note_fixed_batch(&s, first_rows);
  }

  /* Buffers: inputs for one batch, outputs for the first (largest) batch. */
  for (int i = 0; i < s.n_in && batch > 0; i++) {
    run_input_t *in = &s.in[i];
    if (!in->batched) continue;
    int64_t dims[TOPLU_MAX_DIMS];
    memcpy(dims, in->file_t.dims, sizeof dims);
    dims[0] = step;
    if (toplu_tensor_alloc(&in->t, in->file_t.dtype, in->file_t.ndim, dims)) {
      cli_error("run", "out of memory for a batch of input '%s'", in->info->name);
      run_free(&s);
      return CLI_FAIL;
    }
  }
  for (int j = 0; j < s.n_out; j++) {
    run_output_t *o = &s.out[j];
    if (toplu_tensor_alloc(&o->t, o->shape.dtype, o->shape.ndim, o->shape.dims)) {
      cli_error("run", "out of memory for output '%s'", o->info->name);
      run_free(&s);
      return CLI_FAIL;
    }
  }
  if ((rc = open_outputs(&s, out_dir))) {
    run_free(&s);
    return rc;
  }

  double t0 = cli_now();
  for (int64_t b = 0; b < n_batches; b++) {
    int64_t r0 = b * step, nr = batch > 0 ? (b == n_batches - 1 ? last : step) : rows;
    for (int i = 0; i < s.n_in; i++) {
      run_input_t *in = &s.in[i];
      if (in->batched) {
        in->t.dims[0] = nr;
        st = toplu_npy_read_rows(in->file, r0, nr, in->t.data, toplu_tensor_nbytes(&in->t), &err);
      }
      if (st) {
        cli_error("run", "input '%s': %s", in->info->name, err.message);
        run_free(&s);
        return CLI_FAIL;
      }
      s.in_t[i] = in->t;
    }
    for (int j = 0; j < s.n_out; j++) s.out_t[j] = s.out[j].t;
    if ((st = toplu_session_run(s.session, s.in_t, s.n_in, s.out_t, s.n_out))) {
      if (n_batches > 1)
        cli_error("run", "batch %lld of %lld (rows %lld..%lld): %s", (long long)(b + 1), (long long)n_batches,
                  (long long)r0, (long long)(r0 + nr - 1), toplu_session_last_error(s.session));
      else
        cli_error("run", "%s", toplu_session_last_error(s.session));
      run_free(&s);
      return CLI_FAIL;
    }
    for (int j = 0; j < s.n_out; j++) {
      run_output_t *o = &s.out[j];
      toplu_tensor_t *t = &s.out_t[j];
      int ok = t->ndim == o->ndim && t->dtype == o->shape.dtype && t->data == o->t.data;
      for (int d = 0; ok && d < t->ndim; d++)
        ok = t->dims[d] == (n_batches > 1 && d == 0 ? nr : o->shape.dims[d]);
      if (!ok) {
        char a[256];
        cli_error("run", "output '%s': the run gave shape %s, not the one planned; stopping", o->info->name,
                  toplu_shape_format(t->ndim, t->dims, a, sizeof a));
        run_free(&s);
        return CLI_FAIL;
      }
      if (append_output(o, toplu_tensor_nbytes(t))) {
        cli_error("run", "cannot write %s: %s", o->part, strerror(errno));
        run_free(&s);
        return CLI_FAIL;
      }
    }
  }
  if ((rc = finish_outputs(&s))) {
    run_free(&s);
    return rc;
  }
  double secs = cli_now() - t0;
  if (!quiet) {
    double rate = secs > 0 ? (double)rows / secs : 0;
    if (batch > 0)
      fprintf(stderr, "toplu run: %lld rows in %lld batch%s of up to %lld, %.3f s, %.1f inferences/s, %d threads\n",
              (long long)rows, (long long)n_batches, n_batches == 1 ? "" : "es", (long long)step, secs, rate,
              toplu_session_threads(s.session));
    else
      fprintf(stderr, "toplu run: %lld row%s in 1 run, %.3f s, %.1f inferences/s, %d threads\n", (long long)rows,
              rows == 1 ? "" : "s", secs, rate, toplu_session_threads(s.session));
  }
  run_free(&s);
  return CLI_OK;
}

/* ---- batch jobs (toplu/pipeline.h) ---- */

/* The job being run, for the SIGINT/SIGTERM handler. */
static toplu_job_t *volatile run_job;

/* First SIGINT/SIGTERM: stop after a checkpoint; a second one kills. */
static void on_stop_signal(int sig) {
  toplu_job_t *j = run_job;
  if (j) toplu_job_cancel(j);
  signal(sig, SIG_DFL);
}

/* Options (with a value) and flags only a job takes. */
static const char *const job_value_options[] = {"--preprocess", "--postprocess",      "--labels", "--workers",
                                                "--prefetch",   "--infer-workers",    "--shard",  "--errors",
                                                "--checkpoint-every", "--tune", "--progress", "--job",
                                                "--csv-header", NULL};
static const char *const job_flags[] = {"--resume", "--fail-fast", NULL};

/* 1 when name ends with ext (ASCII case-insensitive). */
static int ends_with_ci(const char *name, const char *ext) {
  size_t n = strlen(name), e = strlen(ext);
  if (n < e) return 0;
  for (size_t i = 0; i < e; i++) {
    char a = name[n - e + i], b = ext[i];
    if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
    if (a != b) return 0;
  }
  return 1;
}

/* 1 when the output names a file sink rather than a directory of .npy files. */
static int is_file_sink(const char *out) {
  return ends_with_ci(out, ".jsonl") || ends_with_ci(out, ".ndjson") || ends_with_ci(out, ".csv") ||
         ends_with_ci(out, ".sqlite") || ends_with_ci(out, ".sqlite3") || ends_with_ci(out, ".db");
}

/* 1 when the output's name has an extension of letters that no sink writes
 * ("results.json", "out.txt") and it is not an existing directory or a name
 * ending in '/': the job path refuses it, listing the sink kinds, rather
 * than the direct path making a directory of that name. */
static int is_unknown_sink(const char *out) {
  size_t n = strlen(out);
  struct stat sb;
  if (!n || out[n - 1] == '/' || is_file_sink(out) || (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode))) return 0;
  const char *base = strrchr(out, '/');
  base = base ? base + 1 : out;
  const char *dot = strrchr(base, '.');
  if (!dot || dot == base || !dot[1]) return 0;
  for (const char *q = dot + 1; *q; q++)
    if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'))) return 0;
  return 1;
}

/* 1 when `toplu run ARGS` needs the job pipeline (see the file comment). */
static int wants_job(int argc, char **argv) {
  const char *k8s = getenv("JOB_COMPLETION_INDEX"), *slurm = getenv("SLURM_ARRAY_TASK_ID");
  if ((k8s && *k8s) || (slurm && *slurm)) return 1;
  int have_model = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    for (int k = 0; job_flags[k]; k++)
      if (!strcmp(a, job_flags[k])) return 1;
    for (int k = 0; job_value_options[k]; k++) {
      size_t n = strlen(job_value_options[k]);
      if (!strncmp(a, job_value_options[k], n) && (a[n] == '\0' || a[n] == '=')) return 1;
    }
    const char *names[] = {"--input", "--output", "--batch-size", "--threads"};
    const char *val = NULL;
    int opt = -1;
    for (int k = 0; k < 4 && opt < 0; k++) {
      size_t n = strlen(names[k]);
      if (!strncmp(a, names[k], n) && a[n] == '=') {
        opt = k;
        val = a + n + 1;
      } else if (!strcmp(a, names[k])) {
        opt = k;
        val = i + 1 < argc ? argv[++i] : NULL;
      }
    }
    if (opt < 0) {
      if (a[0] == '-' && a[1]) continue; /* unknown: the direct path reports it */
      if (!have_model) {
        have_model = 1;
        continue;
      }
      opt = 0;
      val = a;
    }
    if (!val) continue;
    if (opt == 0 && !ends_with_ci(val, ".npy")) return 1;
    if (opt == 1 && (is_file_sink(val) || is_unknown_sink(val))) return 1;
    if (opt == 2 && !strcmp(val, "auto")) return 1;
  }
  return 0;
}

/* Settings of a job command: from --job FILE, then the command line. */
typedef struct job_args {
  toplu_job_options_t o;
  const char *inputs[RUN_MAX_ARGS];
  int n_inputs, n_cli_inputs;
  const char *cli_inputs[RUN_MAX_ARGS];
  int batch_auto, quiet;
  char *owned[RUN_MAX_ARGS + 16]; /* strings made for the options (job file paths, inputs) */
  int n_owned;
  json_t *file;
} job_args_t;

/* Keep a malloc'ed string until the job ends; NULL when out of memory or full. */
static const char *keep(job_args_t *a, char *str) {
  if (!str || a->n_owned == (int)(sizeof a->owned / sizeof a->owned[0])) {
    free(str);
    return NULL;
  }
  return a->owned[a->n_owned++] = str;
}

/* Print a bad option's message: with the usage for a command-line option,
 * without for a job-file key (shown starts with "--job "); returns CLI_USAGE. */
static int bad_option(const char *shown, const char *fmt, ...) CLI_PRINTF(2, 3);
static int bad_option(const char *shown, const char *fmt, ...) {
  char msg[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!strncmp(shown, "--job ", 6)) {
    cli_error("run", "%s", msg);
    return CLI_USAGE;
  }
  return cli_usage_error("run", "%s", msg);
}

/* Set one option from text; CLI_OK or CLI_USAGE with a message.  shown
 * names the setting in messages ("--batch-size '0'" or "--job F: "batch_size": 0"). */
static int set_job_option(job_args_t *a, const char *name, const char *val, const char *shown) {
  int64_t v;
  toplu_job_options_t *o = &a->o;
  if (!strcmp(name, "--batch-size")) {
    if (!strcmp(val, "auto")) {
      a->batch_auto = 1;
      o->batch_size = 0;
    } else if (cli_parse_int(val, 1, INT64_MAX, &v)) {
      return bad_option(shown, "%s: expected a whole number >= 1 or auto", shown);
    } else {
      a->batch_auto = 0;
      o->batch_size = v;
    }
  } else if (!strcmp(name, "--threads") || !strcmp(name, "--workers") || !strcmp(name, "--prefetch") ||
             !strcmp(name, "--infer-workers")) {
    int64_t lo = !strcmp(name, "--infer-workers") || !strcmp(name, "--workers") ? 1 : 0;
    if (cli_parse_int(val, lo, 65536, &v)) {
      return bad_option(shown, "%s: expected a whole number >= %lld", shown, (long long)lo);
    }
    if (!strcmp(name, "--threads")) o->threads = (int)v;
    else if (!strcmp(name, "--workers")) o->workers = (int)v;
    else if (!strcmp(name, "--prefetch")) o->prefetch = (int)v;
    else o->infer_workers = (int)v;
  } else if (!strcmp(name, "--shard")) {
    const char *slash = strchr(val, '/');
    int64_t k, n;
    char kb[32];
    int ok = slash && (size_t)(slash - val) < sizeof kb;
    if (ok) {
      memcpy(kb, val, (size_t)(slash - val));
      kb[slash - val] = '\0';
      ok = !cli_parse_int(kb, 0, INT32_MAX, &k) && !cli_parse_int(slash + 1, 1, INT32_MAX, &n) && k < n;
    }
    if (!ok) {
      return bad_option(shown, "%s: expected K/N with 0 <= K < N", shown);
    }
    o->shard_index = (int)k;
    o->shard_count = (int)n;
  } else if (!strcmp(name, "--checkpoint-every")) {
    char *e;
    double sec = strtod(val, &e);
    if (e == val || *e || !(sec >= 0) || sec > 1e6) {
      return bad_option(shown, "%s: expected seconds (0 to 1000000)", shown);
    }
    o->checkpoint_seconds = sec;
  } else if (!strcmp(name, "--progress")) {
    if (!strcmp(val, "auto")) o->progress = TOPLU_PROGRESS_AUTO;
    else if (!strcmp(val, "bar")) o->progress = TOPLU_PROGRESS_BAR;
    else if (!strcmp(val, "lines")) o->progress = TOPLU_PROGRESS_LINES;
    else if (!strcmp(val, "none")) o->progress = TOPLU_PROGRESS_NONE;
    else {
      return bad_option(shown, "%s: expected auto, bar, lines or none", shown);
    }
  } else if (!strcmp(name, "--csv-header")) {
    if (!strcmp(val, "auto")) o->csv_header = TOPLU_CSV_HEADER_AUTO;
    else if (!strcmp(val, "yes")) o->csv_header = TOPLU_CSV_HEADER_YES;
    else if (!strcmp(val, "no")) o->csv_header = TOPLU_CSV_HEADER_NO;
    else {
      return bad_option(shown, "%s: expected auto, yes or no", shown);
    }
  } else if (!strcmp(name, "--output")) {
    if (!*val) {
      return bad_option(shown, "%s: needs a file or directory", shown);
    }
    o->output = val;
  } else if (!strcmp(name, "--preprocess")) {
    o->preprocess = val;
  } else if (!strcmp(name, "--postprocess")) {
    o->postprocess = val;
  } else if (!strcmp(name, "--labels")) {
    o->labels = val;
  } else if (!strcmp(name, "--errors")) {
    o->errors = val;
  } else if (!strcmp(name, "--tune")) {
    o->tune_file = val;
  } else if (!strcmp(name, "--resume")) {
    o->resume = strcmp(val, "0") != 0;
  } else if (!strcmp(name, "--fail-fast")) {
    o->fail_fast = strcmp(val, "0") != 0;
  } else {
    return cli_usage_error("run", "unknown option '%s'", name);
  }
  return CLI_OK;
}

/* A job-file number as text, in its shortest form that reads back the same. */
static void job_number(json_t *v, char *buf, size_t size) {
  if (json_is_integer(v)) {
    snprintf(buf, size, "%lld", (long long)json_integer_value(v));
    return;
  }
  double x = json_real_value(v);
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, x);
    if (strtod(buf, NULL) == x) return;
  }
}

/* path resolved against dir (the job file's directory) unless absolute; NULL when out of memory. */
static const char *job_path(job_args_t *a, const char *dir, const char *path) {
  if (path[0] == '/' || !strcmp(dir, ".")) return path;
  size_t n = strlen(dir) + strlen(path) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, path);
  return keep(a, p);
}

/* An input spec "[NAME=]SOURCE" from a job file with SOURCE resolved against dir. */
static const char *job_input(job_args_t *a, const char *dir, const char *name, const char *spec) {
  const char *eq = name ? NULL : strchr(spec, '=');
  const char *slash = strchr(spec, '/');
  if (!name && eq && (!slash || slash > eq)) { /* NAME=SOURCE */
    char nm[512];
    snprintf(nm, sizeof nm, "%.*s", (int)(eq - spec) < 511 ? (int)(eq - spec) : 511, spec);
    return job_input(a, dir, nm, eq + 1);
  }
  const char *src = job_path(a, dir, spec);
  if (!src) return NULL;
  if (!name) return src;
  size_t n = strlen(name) + strlen(src) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s=%s", name, src);
  return keep(a, p);
}

/* Read --job FILE into a: keys as the options' names with '_' for '-',
 * values of the option's type, relative paths against the file's directory. */
static int load_job_file(job_args_t *a, const char *path) {
  static const struct {
    const char *key, *opt;
    int type; /* 0 text, 1 path, 2 whole number (or "auto" for batch_size), 3 seconds, 4 boolean */
  } keys[] = {{"output", "--output", 1},        {"batch_size", "--batch-size", 2},
              {"preprocess", "--preprocess", 0}, {"postprocess", "--postprocess", 0},
              {"labels", "--labels", 1},         {"workers", "--workers", 2},
              {"prefetch", "--prefetch", 2},     {"infer_workers", "--infer-workers", 2},
              {"threads", "--threads", 2},       {"shard", "--shard", 0},
              {"resume", "--resume", 4},         {"errors", "--errors", 1},
              {"fail_fast", "--fail-fast", 4},   {"checkpoint_every", "--checkpoint-every", 3},
              {"tune", "--tune", 1},             {"progress", "--progress", 0},
              {"csv_header", "--csv-header", 0}};
  json_error_t je;
  a->file = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
  if (!a->file) {
    if (je.line > 0) cli_error("run", "--job %s: line %d: %s", path, je.line, je.text);
    else cli_error("run", "--job %s: %s", path, je.text);
    return CLI_USAGE;
  }
  if (!json_is_object(a->file)) {
    cli_error("run", "--job %s: not a JSON object", path);
    return CLI_USAGE;
  }
  char dir[4096];
  {
    const char *sl = strrchr(path, '/');
    if (!sl) snprintf(dir, sizeof dir, ".");
    else if (sl == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(sl - path), path);
  }
  /* Every unknown key at once. */
  char unknown[1024] = "";
  int n_unknown = 0;
  const char *key;
  json_t *v;
  json_object_foreach(a->file, key, v) {
    int known = !strcmp(key, "model") || !strcmp(key, "input") || !strcmp(key, "inputs");
    for (size_t k = 0; k < sizeof keys / sizeof keys[0] && !known; k++) known = !strcmp(key, keys[k].key);
    if (known) continue;
    size_t n = strlen(unknown);
    snprintf(unknown + n, sizeof unknown - n, "%s\"%s\"", n_unknown++ ? ", " : "", key);
  }
  if (n_unknown) {
    cli_error("run",
              "--job %s: unknown key%s %s (known: model, input, output, batch_size, preprocess, postprocess, labels, "
              "workers, prefetch, infer_workers, threads, shard, resume, errors, fail_fast, checkpoint_every, tune, "
              "progress, csv_header)",
              path, n_unknown == 1 ? "" : "s", unknown);
    return CLI_USAGE;
  }
  if (json_object_get(a->file, "input") && json_object_get(a->file, "inputs")) {
    cli_error("run", "--job %s: give \"input\" or \"inputs\", not both", path);
    return CLI_USAGE;
  }
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    v = json_object_get(a->file, keys[k].key);
    if (!v) continue;
    char num[64], shown[4200], *dumped = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(shown, sizeof shown, "--job %s: \"%s\": %s", path, keys[k].key, dumped ? dumped : "?");
    free(dumped);
    const char *val = NULL;
    switch (keys[k].type) {
      case 0: case 1:
        if (json_is_string(v)) val = json_string_value(v);
        if (val && keys[k].type == 1 && *val && !(val = job_path(a, dir, val))) {
          cli_error("run", "--job %s: out of memory for its paths", path);
          return CLI_FAIL;
        }
        if (!val) cli_error("run", "%s: expected a string", shown);
        break;
      case 2:
        if (json_is_string(v) && !strcmp(keys[k].key, "batch_size") && !strcmp(json_string_value(v), "auto")) {
          val = "auto";
        } else if (json_is_integer(v)) {
          job_number(v, num, sizeof num);
          val = num;
        } else if (json_is_real(v)) {
          job_number(v, num, sizeof num);
          cli_error("run", "--job %s: \"%s\": %s is not a whole number", path, keys[k].key, num);
          return CLI_USAGE;
        } else {
          cli_error("run", "%s: expected a whole number%s", shown,
                    !strcmp(keys[k].key, "batch_size") ? " or \"auto\"" : "");
        }
        break;
      case 3:
        if (json_is_number(v)) {
          job_number(v, num, sizeof num);
          val = num;
        } else {
          cli_error("run", "%s: expected a number of seconds", shown);
        }
        break;
      default:
        if (json_is_boolean(v)) val = json_is_true(v) ? "1" : "0";
        else cli_error("run", "%s: expected true or false", shown);
        break;
    }
    if (!val) return CLI_USAGE;
    if (val == num && !(val = keep(a, strdup(num)))) {
      cli_error("run", "--job %s: out of memory for its paths", path);
      return CLI_FAIL;
    }
    int rc = set_job_option(a, keys[k].opt, val, shown);
    if (rc) return rc;
  }
  json_t *m = json_object_get(a->file, "model");
  if (m && (!json_is_string(m) || !*json_string_value(m))) {
    cli_error("run", "--job %s: \"model\": expected the model's path", path);
    return CLI_USAGE;
  }
  if (m && !(a->o.model = job_path(a, dir, json_string_value(m)))) {
    cli_error("run", "--job %s: out of memory for its paths", path);
    return CLI_FAIL;
  }
  json_t *in = json_object_get(a->file, "input");
  const char *in_key = "input";
  if (!in) {
    in = json_object_get(a->file, "inputs");
    in_key = "inputs";
  }
  if (json_is_string(in)) {
    if (!(a->inputs[a->n_inputs++] = job_input(a, dir, NULL, json_string_value(in)))) {
      cli_error("run", "--job %s: out of memory for its paths", path);
      return CLI_FAIL;
    }
  } else if (json_is_array(in)) {
    for (size_t k = 0; k < json_array_size(in); k++) {
      const char *spec = json_string_value(json_array_get(in, k));
      if (!spec) {
        cli_error("run", "--job %s: \"%s\"[%zu]: expected a string \"[NAME=]SOURCE\"", path, in_key, k);
        return CLI_USAGE;
      }
      if (a->n_inputs == RUN_MAX_ARGS) {
        cli_error("run", "--job %s: \"%s\": more than %d inputs", path, in_key, RUN_MAX_ARGS);
        return CLI_USAGE;
      }
      if (!(a->inputs[a->n_inputs++] = job_input(a, dir, NULL, spec))) {
        cli_error("run", "--job %s: out of memory for its paths", path);
        return CLI_FAIL;
      }
    }
  } else if (json_is_object(in)) {
    const char *name;
    json_t *src;
    json_object_foreach(in, name, src) {
      if (!json_is_string(src)) {
        cli_error("run", "--job %s: \"%s\": \"%s\": expected the source's path (a string)", path, in_key, name);
        return CLI_USAGE;
      }
      if (a->n_inputs == RUN_MAX_ARGS) {
        cli_error("run", "--job %s: \"%s\": more than %d inputs", path, in_key, RUN_MAX_ARGS);
        return CLI_USAGE;
      }
      if (!(a->inputs[a->n_inputs++] = job_input(a, dir, name, json_string_value(src)))) {
        cli_error("run", "--job %s: out of memory for its paths", path);
        return CLI_FAIL;
      }
    }
  } else if (in) {
    cli_error("run", "--job %s: \"%s\": expected a string, a list or an object", path, in_key);
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* Free a job command's settings. */
static void job_args_free(job_args_t *a) {
  for (int k = 0; k < a->n_owned; k++) free(a->owned[k]);
  json_decref(a->file);
  free(a);
}

/* `toplu run` as a batch job. */
static int run_job_cmd(int argc, char **argv) {
  job_args_t *a = calloc(1, sizeof *a);
  if (!a) {
    cli_error("run", "out of memory for the job's settings (%zu bytes)", sizeof *a);
    return CLI_FAIL;
  }
  toplu_job_options_init(&a->o);
  a->o.batch_size = 16;
  int rc = CLI_OK;
  /* The job file first, so the command line overrides it. */
  for (int i = 1; i < argc && !rc;) {
    const char *val;
    int r = cli_option("run", argc, argv, &i, "--job", &val);
    if (r < 0) rc = CLI_USAGE;
    else if (r > 0 && a->file) rc = cli_usage_error("run", "--job given twice");
    else if (r > 0) rc = load_job_file(a, val);
    else i++;
  }
  static const char *const value_opts[] = {"--output",   "--batch-size", "--threads",  "--preprocess",
                                           "--postprocess", "--labels",  "--workers",  "--prefetch",
                                           "--infer-workers", "--shard", "--errors",   "--checkpoint-every",
                                           "--tune",     "--progress",   "--csv-header", NULL};
  const char *cli_model = NULL;
  for (int i = 1; i < argc && !rc;) {
    const char *val;
    int r = cli_option("run", argc, argv, &i, "--job", &val);
    if (r) continue;
    if ((r = cli_option("run", argc, argv, &i, "--input", &val)) != 0) {
      if (r < 0) rc = CLI_USAGE;
      else if (a->n_cli_inputs == RUN_MAX_ARGS) rc = cli_usage_error("run", "too many inputs");
      else a->cli_inputs[a->n_cli_inputs++] = val;
      continue;
    }
    int matched = 0;
    for (int k = 0; value_opts[k] && !matched && !rc; k++) {
      r = cli_option("run", argc, argv, &i, value_opts[k], &val);
      if (r < 0) rc = CLI_USAGE;
      else if (r > 0) {
        matched = 1;
        char shown[4200];
        snprintf(shown, sizeof shown, "%s '%s'", value_opts[k], val);
        rc = set_job_option(a, value_opts[k], val, shown);
      }
    }
    if (matched || rc) continue;
    if (cli_flag(argv, &i, "--resume")) a->o.resume = 1;
    else if (cli_flag(argv, &i, "--fail-fast")) a->o.fail_fast = 1;
    else if (cli_flag(argv, &i, "--quiet") || cli_flag(argv, &i, "-q")) a->quiet = 1;
    else if (argv[i][0] == '-' && argv[i][1]) rc = cli_usage_error("run", "unknown option '%s'", argv[i]);
    else if (!cli_model && !a->file) cli_model = argv[i++];
    else if (!cli_model && a->file && !a->o.model) cli_model = argv[i++];
    else if (a->n_cli_inputs == RUN_MAX_ARGS) rc = cli_usage_error("run", "too many inputs");
    else a->cli_inputs[a->n_cli_inputs++] = argv[i++];
  }
  if (!rc && cli_model) a->o.model = cli_model;
  if (!rc && a->n_cli_inputs) { /* inputs on the command line replace the job file's */
    memcpy(a->inputs, a->cli_inputs, sizeof(char *) * (size_t)a->n_cli_inputs);
    a->n_inputs = a->n_cli_inputs;
  }
  if (!rc && !a->o.model) rc = cli_usage_error("run", "no MODEL given");
  if (!rc && !a->n_inputs) rc = cli_usage_error("run", "no --input given");
  if (!rc && !a->o.output) rc = cli_usage_error("run", "no --output given");
  if (rc) {
    job_args_free(a);
    return rc;
  }
  if (a->batch_auto) a->o.batch_size = 0;
  a->o.inputs = a->inputs;
  a->o.n_inputs = a->n_inputs;
  a->o.progress_stream = a->quiet ? NULL : stderr;
  a->o.message_stream = stderr; /* warnings and notes even with --quiet */

  toplu_error_t err;
  toplu_job_t *job = NULL;
  toplu_status_t st = toplu_job_create(&a->o, &job, &err);
  if (st) {
    cli_error("run", "%s", err.message);
    job_args_free(a);
    return cli_status_exit(st);
  }
  run_job = job;
  void (*old_int)(int) = signal(SIGINT, on_stop_signal);
  void (*old_term)(int) = signal(SIGTERM, on_stop_signal);
  st = toplu_job_run(job, &err);
  signal(SIGINT, old_int);
  signal(SIGTERM, old_term);
  run_job = NULL;
  if (st) {
    if (!strcmp(err.message, "cancelled"))
      cli_error("run", "interrupted after a checkpoint; run the same command with --resume to finish");
    else cli_error("run", "%s", err.message);
    rc = CLI_FAIL;
  }
  toplu_job_destroy(job);
  job_args_free(a);
  return rc;
}

int cmd_run(int argc, char **argv) {
  if (wants_job(argc, argv)) return run_job_cmd(argc, argv);
  return run_npy(argc, argv);
}
