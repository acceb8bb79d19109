/* tools/cli_text.c - library text for users of the command line (see cli_text.h). */
#include "cli_text.h"

#include <ctype.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "toplu/planner.h"

static int word_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '-'; }

const char *cli_flag_names(const char *msg, const cli_flag_name_t *names, char *out, size_t size) {
  if (!names || !msg) return msg ? msg : "";
  size_t o = 0;
  for (const char *p = msg; *p && o + 1 < size;) {
    const cli_flag_name_t *hit = NULL;
    if (p == msg || !word_char(p[-1])) {
      for (const cli_flag_name_t *n = names; n->field && !hit; n++) {
        size_t l = strlen(n->field);
        if (strncmp(p, n->field, l)) continue;
        char last = n->field[l - 1];
        if ((isalnum((unsigned char)last) || last == '_') && (isalnum((unsigned char)p[l]) || p[l] == '_')) continue;
        hit = n;
      }
    }
    if (hit) {
      for (const char *f = hit->flag; *f && o + 1 < size; f++) out[o++] = *f;
      p += strlen(hit->field);
    } else {
      out[o++] = *p++;
    }
  }
  out[size ? o : 0] = '\0';
  return out;
}

void cli_library_error(const char *cmd, const cli_flag_name_t *names, const char *msg) {
  char buf[4096];
  cli_error(cmd, "%s", cli_flag_names(msg, names, buf, sizeof buf));
}

void cli_log_init(cli_log_t *l, const char *cmd, const cli_flag_name_t *names, FILE *f) {
  memset(l, 0, sizeof *l);
  l->cmd = cmd;
  l->names = names;
  l->f = f;
  l->tty = f && isatty(fileno(f));
}

void cli_log_end(cli_log_t *l) {
  if (l->live) fprintf(l->f, "\r%*s\r", 100, "");
  l->live = 0;
  fflush(l->f);
}

void cli_log(void *user, toplu_log_level_t level, const char *msg) {
  cli_log_t *l = user;
  if (!l || !l->f || level == TOPLU_LOG_DEBUG) return;
  char buf[4096];
  msg = cli_flag_names(msg, l->names, buf, sizeof buf);
  if (level == TOPLU_LOG_PROGRESS) {
    if (l->tty) {
      fprintf(l->f, "\rtoplu %s: %s   ", l->cmd, msg);
      l->live = 1;
    } else {
      double now = cli_now();
      if (l->last_progress && now - l->last_progress_t < 10.0) return;
      fprintf(l->f, "toplu %s: %s\n", l->cmd, msg);
      l->last_progress = 1;
      l->last_progress_t = now;
    }
    fflush(l->f);
    return;
  }
  if (l->live) cli_log_end(l);
  const char *what = level == TOPLU_LOG_ERROR ? "error: " : level == TOPLU_LOG_WARNING ? "warning: " : "";
  fprintf(l->f, "toplu %s: %s%s\n", l->cmd, what, msg);
  l->last_progress = 0;
  fflush(l->f);
}

void cli_print_device_catalog(FILE *f) {
  fprintf(f, "  %-14s %-31s %8s %10s %8s %8s %8s %8s %8s\n", "name", "device", "memory", "bandwidth", "fp32", "tf32",
          "fp16", "bf16", "int8");
  for (int i = 0; i < toplu_device_catalog_size(); i++) {
    toplu_device_info_t d;
    if (toplu_device_catalog_entry(i, &d)) continue;
    char pk[TOPLU_PRECISION_COUNT][16];
    for (int k = 0; k < TOPLU_PRECISION_COUNT; k++) {
      if (d.peak_flops[k] > 0) snprintf(pk[k], sizeof pk[k], "%.1fT", d.peak_flops[k] / 1e12);
      else snprintf(pk[k], sizeof pk[k], "-");
    }
    fprintf(f, "  %-14s %-31s %5.0f GiB %5.0f GB/s %8s %8s %8s %8s %8s\n", d.name, d.description,
            (double)d.memory_bytes / (1024.0 * 1024.0 * 1024.0), d.bandwidth / 1e9, pk[TOPLU_PRECISION_FP32],
            pk[TOPLU_PRECISION_TF32], pk[TOPLU_PRECISION_FP16], pk[TOPLU_PRECISION_BF16], pk[TOPLU_PRECISION_INT8]);
  }
  fprintf(f, "  %-14s %s\n", "cpu", "this machine's CPU (probed: memory available to this process, sgemm and copy rates)");
  fprintf(f, "  (peaks in TFLOPS, int8 in TOPS, dense; '-': not supported, planned with the fp32 peak)\n");
}
