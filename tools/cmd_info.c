/*
 * tools/cmd_info.c - `toplu info MODEL [--shape NAME=DIMS]...`
 *
 * Prints what toplu knows about a model: file, IR version, producer, opset,
 * whether the file fixes the batch to 1, inputs and outputs with symbolic
 * dims by name, the op histogram, node counts, parameters, and FLOPs per
 * sample from the plan at batch 1 (symbolic dims other than the batch dim
 * must be bound with --shape; info says which when they are not).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char cmd_info_usage[] =
    "usage: toplu info MODEL [--shape NAME=DIMS]...\n"
    "\n"
    "Describe an ONNX model: file, IR version, producer, opset, inputs and\n"
    "outputs (symbolic dims by name), op histogram, nodes before and after\n"
    "optimisation, parameters, and FLOPs per sample at batch 1.\n"
    "\n"
    "options:\n"
    "  --shape NAME=DIMS  bind input NAME's dims for the FLOPs count, e.g.\n"
    "                     --shape x=1,3,640,640; needed when dims other than\n"
    "                     the batch dim are symbolic (repeatable)\n"
    "\n"
    "Exit status: 0 done, 2 bad usage or a model toplu cannot read or run (missing\n"
    "file, not ONNX, an unsupported op or opset, bad --shape),\n"
    "1 other failures.\n";

#define INFO_MAX_SHAPES 64

/* A --shape argument. */
typedef struct shape_arg {
  const char *name;
  int input; /* model input index */
  int ndim;
  int64_t dims[TOPLU_MAX_DIMS];
} shape_arg_t;

/* A symbol bound to a value by --shape (or to 1 as the batch dim). */
typedef struct binding {
  const char *name;
  int64_t value;
} binding_t;

/* Value bound to a named symbol, or -1. */
static int64_t lookup(const binding_t *b, int n, const char *name) {
  if (!name || !strcmp(name, "?")) return -1;
  for (int i = 0; i < n; i++)
    if (!strcmp(b[i].name, name)) return b[i].value;
  return -1;
}

/* Remember name = value unless the name is anonymous or bound already. */
static void bind(binding_t *b, int *n, int cap, const char *name, int64_t value) {
  if (!name || !strcmp(name, "?") || lookup(b, *n, name) >= 0 || *n >= cap) return;
  b[*n].name = name;
  b[*n].value = value;
  (*n)++;
}

/* Print n with thousands separators. */
static void print_grouped(int64_t n) {
  char digits[32], out[48];
  int len = snprintf(digits, sizeof digits, "%lld", (long long)(n < 0 ? -n : n)), k = 0;
  if (n < 0) out[k++] = '-';
  for (int i = 0; i < len; i++) {
    if (i && (len - i) % 3 == 0) out[k++] = ',';
    out[k++] = digits[i];
  }
  out[k] = '\0';
  fputs(out, stdout);
}

/* Sort op counts: most frequent first, then by name. */
static int cmp_ops(const void *a, const void *b) {
  const toplu_op_count_t *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? 1 : -1;
  return strcmp(x->op_type, y->op_type);
}

/* "float32", or "sequence(float32)", "optional(sequence(float32))" for ONNX sequences and optionals. */
static const char *type_name(const toplu_value_info_t *v, char *buf, size_t size) {
  const char *t = toplu_dtype_name(v->dtype);
  if (v->kind == TOPLU_KIND_SEQUENCE) snprintf(buf, size, "sequence(%s)", t);
  else if (v->kind == TOPLU_KIND_OPTIONAL && v->elem_kind == TOPLU_KIND_SEQUENCE)
    snprintf(buf, size, "optional(sequence(%s))", t);
  else if (v->kind == TOPLU_KIND_OPTIONAL) snprintf(buf, size, "optional(%s)", t);
  else snprintf(buf, size, "%s", t);
  return buf;
}

/* Widest name and dtype name over the inputs and outputs (names capped at 48). */
static void value_widths(const toplu_model_t *m, int *wname, int *wtype) {
  *wname = *wtype = 1;
  for (int k = 0; k < 2; k++) {
    int n = k ? toplu_model_output_count(m) : toplu_model_input_count(m);
    for (int i = 0; i < n; i++) {
      const toplu_value_info_t *v = k ? toplu_model_output(m, i) : toplu_model_input(m, i);
      char tb[64];
      int a = (int)strlen(v->name), b = (int)strlen(type_name(v, tb, sizeof tb));
      if (a > *wname) *wname = a;
      if (b > *wtype) *wtype = b;
    }
  }
  if (*wname > 48) *wname = 48;
}

/* Print the input or output table, columns aligned across both. */
static void print_values(const char *title, const toplu_model_t *m, int is_input) {
  int n = is_input ? toplu_model_input_count(m) : toplu_model_output_count(m);
  int wname, wtype;
  value_widths(m, &wname, &wtype);
  printf("%s (%d):\n", title, n);
  for (int i = 0; i < n; i++) {
    const toplu_value_info_t *v = is_input ? toplu_model_input(m, i) : toplu_model_output(m, i);
    char dims[512], tb[64];
    printf("  %-*s  %-*s  %s\n", wname, v->name, wtype, type_name(v, tb, sizeof tb),
           cli_format_info_dims(v, dims, sizeof dims));
  }
}

/* Describe how the model treats the batch dim. */
static void print_batch(const toplu_model_t *m) {
  int n = toplu_model_input_count(m);
  printf("batch:         ");
  if (toplu_model_fixed_batch(m)) {
    printf("fixed to 1 in the file (toplu runs other batch sizes by freeing dim 0 or row by row)\n");
    return;
  }
  int64_t fb = toplu_model_fixed_batch_size(m);
  if (fb > 1) {
    printf("fixed to %lld in the file, every input (a static batch: toplu run takes other row counts where the "
           "ops keep the rows of dim 0 apart, else %lld rows at a time)\n",
           (long long)fb, (long long)fb);
    return;
  }
  if (n == 0) {
    printf("the model has no inputs\n");
    return;
  }
  const toplu_value_info_t *v = toplu_model_input(m, 0);
  /* an input that is a scalar or fixes its dim 0 beside a free one: run passes it whole, serve does not batch */
  for (int i = 1; i < n && v->ndim >= 1 && v->dims[0] < 0; i++) {
    const toplu_value_info_t *w = toplu_model_input(m, i);
    if (w->ndim == 0 || (w->ndim >= 1 && w->dims[0] >= 0)) {
      char dims[256];
      printf("free (dim 0 of '%s' is %s), but input '%s' is %s: toplu run passes it whole to every batch, and toplu "
             "serve gives the model max_batch_size 0\n",
             v->name, v->dim_names[0] ? v->dim_names[0] : "?", w->name,
             w->ndim == 0 ? "a scalar" : cli_format_info_dims(w, dims, sizeof dims));
      return;
    }
  }
  if (v->ndim < 0) printf("unknown (the rank of '%s' is unknown)\n", v->name);
  else if (v->ndim == 0) printf("none ('%s' is a scalar)\n", v->name);
  else if (v->dims[0] < 0) printf("free (dim 0 of '%s' is %s)\n", v->name, v->dim_names[0] ? v->dim_names[0] : "?");
  else printf("dim 0 of '%s' is fixed to %lld\n", v->name, (long long)v->dims[0]);
}

/* Parse the --shape arguments; CLI_OK or a usage error. */
static int parse_shape_arg(const toplu_model_t *m, const char *arg, shape_arg_t *s) {
  const char *eq = strrchr(arg, '=');
  if (!eq) return cli_usage_error("info", "--shape '%s': expected NAME=DIMS, e.g. x=1,3,224,224", arg);
  /* The name may itself contain '=': take the longest input name that fits. */
  s->input = -1;
  for (int i = 0; i < toplu_model_input_count(m); i++) {
    const char *nm = toplu_model_input(m, i)->name;
    size_t len = strlen(nm);
    if (!strncmp(arg, nm, len) && arg[len] == '=' &&
        (s->input < 0 || len > strlen(toplu_model_input(m, s->input)->name)))
      s->input = i;
  }
  if (s->input < 0) {
    int len = (int)(eq - arg);
    if (toplu_model_input_count(m) == 0) {
      cli_error("info", "--shape: the model has no input '%.*s': it has no inputs at all", len, arg);
      return CLI_USAGE;
    }
    cli_error("info", "--shape: the model has no input '%.*s'; its inputs are:", len, arg);
    for (int i = 0; i < toplu_model_input_count(m); i++) fprintf(stderr, "  %s\n", toplu_model_input(m, i)->name);
    return CLI_USAGE;
  }
  const toplu_value_info_t *v = toplu_model_input(m, s->input);
  s->name = v->name;
  char why[256];
  s->ndim = cli_parse_shape_dims(arg + strlen(v->name) + 1, s->dims, why, sizeof why);
  if (s->ndim < 0) return cli_usage_error("info", "--shape %s: %s", arg, why);
  char want[512], got[256];
  if (v->ndim >= 0 && s->ndim != v->ndim)
    return cli_usage_error("info", "--shape %s: %d dims given %s, the model's input is %s (rank %d)", v->name,
                           s->ndim, toplu_shape_format(s->ndim, s->dims, got, sizeof got),
                           cli_format_info_dims(v, want, sizeof want), v->ndim);
  for (int d = 0; d < s->ndim && v->ndim >= 0; d++)
    if (v->dims[d] >= 0 && v->dims[d] != s->dims[d] && !(d == 0 && toplu_model_fixed_batch(m)))
      return cli_usage_error("info", "--shape %s: dim %d is %lld, the model fixes it to %lld (input %s)", v->name, d,
                             (long long)s->dims[d], (long long)v->dims[d],
                             cli_format_info_dims(v, want, sizeof want));
  double elements = 1;
  for (int d = 0; d < s->ndim; d++) {
    if (s->dims[d] == 0 && !(v->ndim >= 0 && v->dims[d] == 0))
      return cli_usage_error("info",
                             "--shape %s: dim %d is 0: sizes must be >= 1 (an empty tensor has nothing to count; the "
                             "model does not declare this dim empty)",
                             v->name, d);
    elements *= (double)s->dims[d];
  }
  if (elements > (double)TOPLU_MAX_ELEMENTS)
    return cli_usage_error("info", "--shape %s: %s is %.4g elements, more than toplu plans for (" TOPLU_MAX_ELEMENTS_TEXT "): check the dims",
                           v->name, toplu_shape_format(s->ndim, s->dims, got, sizeof got), elements);
  return CLI_OK;
}

/* Append printf text to buf (truncating). */
static void hint_append(char *buf, size_t size, const char *fmt, ...) CLI_PRINTF(3, 4);
static void hint_append(char *buf, size_t size, const char *fmt, ...) {
  size_t l = strlen(buf);
  if (l + 1 >= size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + l, size - l, fmt, ap);
  va_end(ap);
}

/* An example size for symbolic dim d of a rank-r input (the planner's
 * defaults): 3 channels and 224 x 224 pixels for images, else 128. */
static int64_t example_dim(int r, int d) {
  if (r == 4 && d == 1) return 3;
  if (r == 4 && d >= 2) return 224;
  return 128;
}

/*
 * FLOPs per sample and the batch-1 plan's numbers.  Inputs are bound at
 * batch 1: dims from --shape, symbols shared with a --shape dim, dim 0 = 1;
 * any other symbolic dim makes info say which --shape is needed.
 */
/* Whether batches keep the rows of dim 0 apart (toplu_session_rows_apart_probe on two made-up rows of these
 * shapes), for a model whose batch dim is free: what toplu run and toplu serve decide by the same check. */
static void print_rows(const toplu_model_t *m, toplu_session_t *s, const toplu_tensor_t *in, int n) {
  if (n < 1 || n > 64 || toplu_model_fixed_batch_size(m) || toplu_model_input(m, 0)->ndim < 1 ||
      toplu_model_input(m, 0)->dims[0] >= 0)
    return;
  toplu_tensor_t two[64];
  for (int i = 0; i < n; i++) {
    two[i] = in[i];
    const toplu_value_info_t *v = toplu_model_input(m, i);
    if (v->ndim >= 1 && v->dims[0] < 0 && two[i].ndim >= 1) two[i].dims[0] = 2;
  }
  int apart = 1;
  char why[512];
  if (toplu_session_rows_apart_probe(s, two, n, &apart, why, sizeof why) != TOPLU_OK) return;
  if (apart)
    printf("rows:          kept apart along dim 0 (checked on two made-up rows): any batch size gives each row "
           "its own results\n");
  else
    printf("rows:          mixed along dim 0: %s; toplu run does not split such rows (JSON Lines rows run one at a "
           "time) and toplu serve does not batch the model\n",
           why);
}

static void print_flops(const toplu_model_t *m, const shape_arg_t *shapes, int n_shapes) {
  int n = toplu_model_input_count(m);
  toplu_tensor_t *in = calloc((size_t)(n ? n : 1), sizeof *in);
  binding_t bindings[256];
  int nb = 0, missing_any = 0, n_examples = 0;
  char example[1024] = "", which[1024] = "";
  if (!in) {
    printf("FLOPs per sample: unavailable (out of memory)\n");
    return;
  }
  /* Symbols named in --shape inputs get their values. */
  for (int k = 0; k < n_shapes; k++) {
    const toplu_value_info_t *v = toplu_model_input(m, shapes[k].input);
    for (int d = 0; d < v->ndim && d < shapes[k].ndim; d++)
      if (v->dims[d] < 0) bind(bindings, &nb, 256, v->dim_names[d], shapes[k].dims[d]);
  }
  int64_t batch = 1;
  for (int i = 0; i < n; i++) {
    const toplu_value_info_t *v = toplu_model_input(m, i);
    const shape_arg_t *given = NULL;
    for (int k = 0; k < n_shapes; k++)
      if (shapes[k].input == i) given = &shapes[k];
    in[i].dtype = v->dtype;
    if (given) {
      in[i].ndim = given->ndim;
      memcpy(in[i].dims, given->dims, sizeof given->dims);
      if (i == 0 && given->ndim > 0 && (v->dims[0] < 0 || toplu_model_fixed_batch(m)) && given->dims[0] > 0)
        batch = given->dims[0];
      continue;
    }
    in[i].ndim = v->ndim;
    if (v->ndim > 0 && v->dims[0] < 0) {
      int64_t b = lookup(bindings, nb, v->dim_names[0]);
      in[i].dims[0] = b >= 0 ? b : 1;
      bind(bindings, &nb, 256, v->dim_names[0], in[i].dims[0]);
    }
  }
  /* Fill the remaining dims; collect what is missing. */
  for (int i = 0; i < n; i++) {
    const toplu_value_info_t *v = toplu_model_input(m, i);
    int given = 0;
    for (int k = 0; k < n_shapes; k++) given |= shapes[k].input == i;
    if (given) continue;
    int miss[TOPLU_MAX_DIMS], nm = 0;
    for (int d = 0; d < v->ndim; d++) {
      if (v->dims[d] >= 0) in[i].dims[d] = v->dims[d];
      else if (d > 0) {
        int64_t b = lookup(bindings, nb, v->dim_names[d]);
        if (b >= 0) in[i].dims[d] = b;
        else miss[nm++] = d;
      }
    }
    if (v->ndim < 0 || nm) {
      /* An example that works as given: the missing dims get sizes (the
       * planner's defaults), marked as examples in the explanation. */
      missing_any = 1;
      if (v->ndim < 0) {
        hint_append(example, sizeof example, " --shape %s=DIMS", v->name);
        hint_append(which, sizeof which, "%sthe rank of %s is unknown: give all its dims", which[0] ? "; " : "",
                    v->name);
        continue;
      }
      for (int k = 0; k < nm; k++) {
        int d = miss[k];
        int64_t val = lookup(bindings, nb, v->dim_names[d]);
        if (val < 0) val = example_dim(v->ndim, d);
        in[i].dims[d] = val;
        bind(bindings, &nb, 256, v->dim_names[d], val);
        n_examples++;
      }
      hint_append(example, sizeof example, " --shape %s=", v->name);
      for (int d = 0; d < v->ndim; d++) hint_append(example, sizeof example, "%s%lld", d ? "," : "", (long long)in[i].dims[d]);
      hint_append(which, sizeof which, "%sdim%s ", which[0] ? "; " : "", nm > 1 ? "s" : "");
      for (int k = 0; k < nm; k++)
        hint_append(which, sizeof which, "%s%d", k == 0 ? "" : k == nm - 1 ? " and " : ", ", miss[k]);
      hint_append(which, sizeof which, " of %s", v->name);
      int named = 0;
      for (int k = 0; k < nm; k++) {
        const char *sym = v->dim_names[miss[k]];
        if (!sym || !sym[0] || !strcmp(sym, "?")) continue;
        hint_append(which, sizeof which, "%s%s", named ? ", " : " (", sym);
        named = 1;
      }
      if (named) hint_append(which, sizeof which, ")");
    }
  }
  /* an input whose values decide shapes or branches (Silero VAD's sr): no --shape can give a count, so none is
   * suggested (the hint sent users to shapes that then said "unavailable"; a fresh user's finding, 2026-12-05) */
  for (int i = 0; missing_any && i < n; i++)
    if (toplu_model_input_values_decide(m, i)) {
      printf("FLOPs per sample: unavailable (input '%s' decides tensor shapes or which branch runs: they depend on its "
             "values, not only on the shapes)\n",
             toplu_model_input(m, i)->name);
      free(in);
      return;
    }
  if (missing_any) {
    printf("FLOPs per sample: give the symbolic dims a size, e.g.%s (symbolic: %s", example, which);
    if (n_examples > 1) printf("; the sizes shown for them are only examples: use your data's)");
    else if (n_examples) printf("; the size shown for it is only an example: use your data's)");
    else
      printf(")");
    printf("\n");
    free(in);
    return;
  }
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.batch_override = toplu_model_fixed_batch(m);
  cli_session_env(&so);
  toplu_session_t *s = NULL;
  toplu_error_t err;
  toplu_memory_report_t r;
  if (toplu_session_create(m, &so, &s, &err)) {
    printf("FLOPs per sample: unavailable (%s)\n", err.message);
  } else if (toplu_session_memory(s, in, n, &r)) {
    printf("FLOPs per sample: unavailable (%s)\n", toplu_session_last_error(s));
  } else {
    char h[32], a[32], b[32], c[32];
    int64_t per = r.flops / (batch > 0 ? batch : 1);
    printf("FLOPs per sample: ");
    print_grouped(per);
    if (per >= 1000) printf(" (%sFLOP)", cli_human((double)per, h, sizeof h));
    if (batch > 1) printf(" (%lld at batch %lld)", (long long)r.flops, (long long)batch);
    printf("\n");
    printf("plan at batch %lld: %d node%s per run%s; weights %s, activations %s, workspace %s\n", (long long)batch,
           r.n_nodes, cli_plural(r.n_nodes), r.per_sample ? " (row by row)" : "", cli_human_bytes((double)r.weights_bytes, a, sizeof a),
           cli_human_bytes((double)r.activation_bytes, b, sizeof b),
           cli_human_bytes((double)r.workspace_bytes, c, sizeof c));
    print_rows(m, s, in, n);
  }
  toplu_session_destroy(s);
  free(in);
}

int cmd_info(int argc, char **argv) {
  const char *model_path = NULL;
  shape_arg_t shapes[INFO_MAX_SHAPES];
  const char *shape_text[INFO_MAX_SHAPES];
  int n_shapes = 0;
  for (int i = 1; i < argc;) {
    const char *val;
    int r = cli_option("info", argc, argv, &i, "--shape", &val);
    if (r < 0) return CLI_USAGE;
    if (r > 0) {
      if (n_shapes == INFO_MAX_SHAPES) return cli_usage_error("info", "too many --shape options");
      shape_text[n_shapes++] = val;
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("info", "unknown option '%s'", argv[i]);
    if (model_path) return cli_usage_error("info", "unexpected argument '%s' (one MODEL only)", argv[i]);
    model_path = argv[i++];
  }
  if (!model_path) return cli_usage_error("info", "no MODEL given");
  int rc0 = cli_check_input_file("info", "model", model_path);
  if (rc0 != CLI_OK) return rc0;

  if ((rc0 = cli_no_fuse_check("info")) != CLI_OK) return rc0;
  toplu_model_t *m = NULL;
  toplu_error_t err;
  toplu_model_options_t mo;
  memset(&mo, 0, sizeof mo);
  cli_model_env(&mo); /* TOPLU_NO_FUSE */
  toplu_status_t st = toplu_model_load(model_path, &mo, &m, &err);
  if (st) {
    cli_error("info", "%s", err.message);
    return cli_status_exit(st);
  }
  { /* a bad TOPLU_BACKENDS is a usage error here as in toplu run, not a line of the report */
    toplu_session_options_t so;
    toplu_session_options_init(&so);
    cli_session_env(&so);
    toplu_session_t *probe = NULL;
    if (so.backends && (st = toplu_session_create(m, &so, &probe, &err)) == TOPLU_ERR_INVALID_ARGUMENT) {
      cli_error("info", "TOPLU_BACKENDS: %s", err.message);
      toplu_model_destroy(m);
      return CLI_USAGE;
    }
    toplu_session_destroy(probe);
  }
  for (int k = 0; k < n_shapes; k++) {
    int rc = parse_shape_arg(m, shape_text[k], &shapes[k]);
    for (int j = 0; j < k && rc == CLI_OK; j++)
      if (shapes[j].input == shapes[k].input)
        rc = cli_usage_error("info", "--shape %s given twice", shapes[k].name);
    if (rc != CLI_OK) {
      toplu_model_destroy(m);
      return rc;
    }
  }

  const char *producer = toplu_model_producer(m);
  printf("file:          %s\n", toplu_model_path(m));
  printf("IR version:    %lld\n", (long long)toplu_model_ir_version(m));
  printf("producer:      %s\n", producer[0] ? producer : "(not given)");
  printf("opset:         %lld\n", (long long)toplu_model_opset(m));
  print_batch(m);
  print_values("inputs", m, 1);
  print_values("outputs", m, 0);

  int n_ops = toplu_model_op_histogram(m, NULL, 0);
  toplu_op_count_t *ops = calloc((size_t)(n_ops > 0 ? n_ops : 1), sizeof *ops);
  if (ops) {
    n_ops = toplu_model_op_histogram(m, ops, n_ops);
    qsort(ops, (size_t)n_ops, sizeof *ops, cmp_ops);
    int w = 1;
    for (int i = 0; i < n_ops; i++)
      if ((int)strlen(ops[i].op_type) > w) w = (int)strlen(ops[i].op_type);
    int nn = toplu_model_node_count(m, 0);
    printf("ops (%d type%s, %d node%s):\n", n_ops, cli_plural(n_ops), nn, cli_plural(nn));
    for (int i = 0; i < n_ops; i++) printf("  %-*s  %d\n", w, ops[i].op_type, ops[i].count);
    free(ops);
  }
  printf("nodes:         %d in the file, %d after optimisation\n", toplu_model_node_count(m, 0),
         toplu_model_node_count(m, 1));
  char hb[32], hc[32];
  printf("parameters:    ");
  print_grouped(toplu_model_param_count(m));
  if (toplu_model_param_count(m) >= 1000) printf(" (%s)", cli_human((double)toplu_model_param_count(m), hc, sizeof hc));
  printf(", %s\n", cli_human_bytes((double)toplu_model_param_bytes(m), hb, sizeof hb));
  fflush(stdout);
  print_flops(m, shapes, n_shapes);
  toplu_model_destroy(m);
  return CLI_OK;
}
