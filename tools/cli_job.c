/*
 * tools/cli_job.c - how `toplu run` shows a batch job: the library's
 * messages on stderr in flag words, the progress bar or lines, the report.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The library names option fields; the command line names flags.  mode 0:
 * every occurrence; 1: only at the start of the message; 2: the first
 * occurrence as a word gets the flag added in parentheses. */
static const struct {
  const char *from, *to;
  int mode;
  const char *cmd; /* the command whose messages these are; NULL: every one; "run-job": run with a job file */
  const char *flag; /* "run-job": the flag that, given on the command line, leaves the word to the entries below */
} words[] = {
    /* a job file's keys where the library's field is named otherwise */
    {"tune_file ", "tune ", 1, "run-job", "--tune"},
    {"checkpoint_seconds", "checkpoint_every", 0, "run-job", "--checkpoint-every"},
    {"the force flag (TOPLU_MERGE_FORCE)", "--force", 0, "merge", NULL},
    {"force: ", "--force: ", 1, "merge", NULL},
    {"set the overwrite flag (TOPLU_MERGE_OVERWRITE) to replace it", "give --overwrite to replace it", 0, "merge", NULL},
    {"no errors file: name one", "no --errors file: give --errors FILE", 0, "run", NULL},
    {"name an errors file", "give --errors FILE", 0, "run", NULL},
    {"errors file ", "--errors ", 0, "run", NULL},
    {"the labels file", "the --labels file", 0, "run", NULL},
    {"the tune file", "the --tune file", 0, "run", NULL},
    {"csv_header=", "--csv-header ", 0, "run", NULL},
    {"without resume", "without --resume", 0, "run", NULL},
    {"(fail_fast)", "(--fail-fast)", 0, "run", NULL},
    {"set overwrite to replace it", "give --overwrite to replace it", 0, "run", NULL},
    {"smaller batch_size", "smaller --batch-size", 0, "run", NULL},
    {"resume: ", "--resume: ", 1, "run", NULL},
    {"batch_size ", "--batch-size ", 1, "run", NULL},
    {"tune_file ", "--tune ", 1, "run", NULL},
    {"preprocess", "--preprocess", 1, "run", NULL},
    {"postprocess", "--postprocess", 1, "run", NULL},
    {"labels ", "--labels ", 1, "run", NULL},
    {"labels: ", "--labels: ", 1, "run", NULL},
    {"shard ", "--shard ", 1, "run", NULL},
    {"output /", "--output /", 1, "run", NULL},
    {"output .", "--output .", 1, "run", NULL},
    {"batch_size", "--batch-size", 2, "run", NULL},
    {"infer_workers", "--infer-workers", 2, "run", NULL},
    {"checkpoint_seconds", "--checkpoint-every", 2, "run", NULL},
    {"allow_nonfinite", "--allow-nonfinite", 2, "run", NULL},
    {"max_image_pixels", "--max-image-pixels", 2, "run", NULL},
    {"(max_line_bytes)", "(--max-line-bytes)", 0, "run", NULL},
    {"set csv_delimiter to choose", "give --csv-delimiter to choose", 0, "run", NULL},
    {"the csv_delimiter", "the --csv-delimiter", 0, "run", NULL},
    {"set shard_index and shard_count", "give --shard K/N", 0, "run", NULL},
    {"length_buckets", "--length-buckets", 0, "run", NULL},
    {"sqlite_table '", "--sqlite-table '", 1, "run", NULL},
    {"sqlite_table", "--sqlite-table", 2, "run", NULL},
    {"with sqlite_table", "with --sqlite-table", 0, "merge", NULL},
    {"resume that job (set resume)", "resume that job (toplu run ... --resume)", 0, "merge", NULL},
    {"exclude: ", "--exclude: ", 1, "quantize", NULL},
    {"op_types: ", "--op-types: ", 1, "quantize", NULL},
    {"calibration: ", "--calibration: ", 1, "quantize", NULL},
    {"preprocess", "--preprocess", 1, "quantize", NULL},
    {"percentile ", "--method percentile=", 1, "quantize", NULL},
    {"output ", "--output ", 1, "quantize", NULL},
    {"report ", "--report ", 1, "quantize", NULL},
    {"and report ", "and --report ", 0, "quantize", NULL},
    {"above max_node_error ", "above --max-node-error ", 0, "quantize", NULL},
    {"above max_node_error ", "above toplu quantize's --max-node-error ", 0, "plan", NULL},
    {"(the report lists every node)", "(toplu quantize --report lists every node)", 0, "plan", NULL},
    {"without sqlite_table", "without --sqlite-table", 0, "merge", NULL},
};

/* 1 when c may be part of an option word. */
static int word_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

/* `toplu run --job FILE`: the command line's words, so that a field whose
 * value came from the job file keeps the library's word (which is the job
 * file's key) and only the flags actually given are named as flags. */
static int job_argc;
static char **job_argv;

void cli_flag_words_job(int argc, char **argv) {
  job_argc = argc;
  job_argv = argv;
}

/* 1 when the flag that `to` names ("give --overwrite to ...": --overwrite)
 * was given on the command line, or no job file is in use. */
static int flag_given(const char *cmd, const char *to) {
  if (!job_argv || strcmp(cmd, "run")) return 1;
  const char *f = strstr(to, "--");
  if (!f) return 1;
  size_t l = 2;
  while (f[l] == '-' || word_char(f[l])) l++;
  for (int i = 1; i < job_argc; i++)
    if (!strncmp(job_argv[i], f, l) && (job_argv[i][l] == '\0' || job_argv[i][l] == '=')) return 1;
  return 0;
}


const char *cli_flag_words(const char *cmd, const char *msg, char *buf, size_t size) {
  size_t n = 0;
  int done2[sizeof words / sizeof words[0]] = {0};
  for (const char *p = msg; *p && n + 1 < size;) {
    int hit = 0;
    for (size_t k = 0; k < sizeof words / sizeof words[0] && !hit; k++) {
      size_t l = strlen(words[k].from);
      if (strncmp(p, words[k].from, l)) continue;
      if (words[k].flag) { /* a job file's key: in a run with --job, unless the flag overrides the file */
        if (strcmp(cmd, "run") || !job_argv || flag_given(cmd, words[k].flag)) continue;
      } else if (words[k].cmd && strcmp(words[k].cmd, cmd)) {
        continue;
      } else if (!flag_given(cmd, words[k].to)) {
        continue; /* from the job file: its key is the library's word */
      }
      if (words[k].mode == 1 && p != msg) continue;
      if (words[k].mode == 2 && (done2[k] || (p > msg && word_char(p[-1])) || word_char(p[l]))) continue;
      const char *to = words[k].to;
      if (words[k].mode == 2) { /* the flag already named earlier in this message: the field alone */
        buf[n] = '\0';
        if (strstr(buf, to)) {
          done2[k] = 1;
          continue;
        }
      }
      int w = words[k].mode == 2 ? snprintf(buf + n, size - n, "%s (%s)", words[k].from, to)
                                 : snprintf(buf + n, size - n, "%s", to);
      if (w < 0) break;
      n += (size_t)w < size - n ? (size_t)w : size - n - 1;
      p += l;
      done2[k] = 1;
      hit = 1;
    }
    if (!hit) buf[n++] = *p++;
  }
  buf[n < size ? n : size - 1] = '\0';
  return buf;
}

void cli_job_log(void *user, toplu_log_level_t level, const char *message) {
  const cli_job_view_t *v = user;
  if (level == TOPLU_LOG_PROGRESS || level == TOPLU_LOG_DEBUG) return; /* drawn by cli_job_progress */
  if (v->quiet && level == TOPLU_LOG_NOTE) return;
  char text[2 * TOPLU_ERROR_MESSAGE_MAX];
  cli_flag_words("run", message, text, sizeof text);
  if (atomic_exchange(&((cli_job_view_t *)user)->drawn, 0)) fputc('\n', stderr);
  fprintf(stderr, "toplu run: %s%s\n", level == TOPLU_LOG_WARNING ? "warning: " : level == TOPLU_LOG_NOTE ? "note: " : "",
          text);
}

/* Busy percent of stage k over the wall time and its threads. */
static double busy_pct(const toplu_job_stats_t *s, int k) {
  int th = s->threads[k] > 0 ? s->threads[k] : 1;
  return s->wall_s > 0 ? 100.0 * s->busy_s[k] / (s->wall_s * th) : 0;
}

void cli_job_progress(void *user, const toplu_job_stats_t *s) {
  cli_job_view_t *v = user;
  if (v->mode == TOPLU_PROGRESS_NONE || s->complete) return;
  int64_t done = s->rows_processed + s->rows_failed + s->rows_skipped;
  double rate = s->wall_s > 0 ? (double)(done - s->rows_skipped) / s->wall_s : 0;
  double eta = rate > 0 ? (double)(s->rows_total - done) / rate : -1;
  char etas[32] = "?", stages[200] = "";
  if (eta >= 0) snprintf(etas, sizeof etas, "%d:%02d", (int)(eta / 60), (int)eta % 60);
  size_t n = 0;
  for (int k = 0; k < TOPLU_STAGE_COUNT && n < sizeof stages; k++)
    n += (size_t)snprintf(stages + n, sizeof stages - n, " %s %.0f%%", toplu_job_stage_name((toplu_job_stage_t)k),
                          busy_pct(s, k));
  double pct = s->rows_total > 0 ? 100.0 * (double)done / (double)s->rows_total : 100;
  if (v->mode == TOPLU_PROGRESS_BAR) {
    char bar[31];
    int fill = (int)(pct * 30 / 100);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = '\0';
    fprintf(stderr, "\r[%s] %lld/%lld rows %3.0f%%  %.1f rows/s  ETA %s %s\033[K", bar, (long long)done,
            (long long)s->rows_total, pct, rate, etas, stages);
    atomic_store(&v->drawn, 1);
  } else {
    fprintf(stderr, "toplu run: %lld/%lld rows (%.0f%%), %.1f rows/s, ETA %s, busy:%s\n", (long long)done,
            (long long)s->rows_total, pct, rate, etas, stages);
  }
  fflush(stderr);
}

void cli_job_view_init(cli_job_view_t *v, toplu_progress_mode_t mode, int quiet) {
  memset(v, 0, sizeof *v);
  v->quiet = quiet;
  if (mode == TOPLU_PROGRESS_AUTO) mode = isatty(STDERR_FILENO) ? TOPLU_PROGRESS_BAR : TOPLU_PROGRESS_LINES;
  v->mode = quiet ? TOPLU_PROGRESS_NONE : mode;
}

void cli_job_report(cli_job_view_t *v, const toplu_job_stats_t *s, const char *output, int stopped) {
  if (atomic_exchange(&v->drawn, 0)) fputc('\n', stderr);
  if (v->quiet || s->nothing_to_do) return;
  int64_t ran = s->rows_processed + s->rows_failed; /* rows this run finished (not those a cancel left) */
  double rate = s->wall_s > 0 ? (double)ran / s->wall_s : 0;
  /* a job that stopped says so first, and how many rows it left (the summary read as a finished job's before the
   * error line: a fresh user's finding of 2026-12-06) */
  int64_t left = s->rows_total - s->rows_processed - s->rows_failed - s->rows_skipped;
  char stop[96] = "";
  if (stopped) snprintf(stop, sizeof stop, "%s: ", stopped == 2 ? "interrupted" : "stopped by the error below");
  fprintf(stderr,
          "toplu run: %lld rows -> %s: %s%lld processed, %lld failed, %lld skipped (done before --resume)", (long long)s->rows_total,
          output, stop, (long long)s->rows_processed, (long long)s->rows_failed, (long long)s->rows_skipped);
  if (stopped && left > 0) fprintf(stderr, ", %lld not done", (long long)left);
  fprintf(stderr, "; %lld batch%s of up to %lld in %.2f s, %.1f rows/s", (long long)s->batches,
          s->batches == 1 ? "" : "es", (long long)s->batch_size, s->wall_s, rate);
  if (s->shard_count > 1)
    fprintf(stderr, "; shard %lld/%lld (rows %lld..%lld)", (long long)s->shard_index, (long long)s->shard_count,
            (long long)s->row_first, (long long)s->row_end - 1);
  fputc('\n', stderr);
  if (s->wall_s <= 0) return;
  fprintf(stderr, "  stage        threads  busy s  busy %% of wall\n");
  int worst = 0;
  for (int k = 0; k < TOPLU_STAGE_COUNT; k++) {
    if (busy_pct(s, k) > busy_pct(s, worst)) worst = k;
    fprintf(stderr, "  %-12s %7d %7.2f %6.1f%%\n", toplu_job_stage_name((toplu_job_stage_t)k), s->threads[k],
            s->busy_s[k], busy_pct(s, k));
  }
  fprintf(stderr, "  bottleneck: %s\n", toplu_job_stage_name((toplu_job_stage_t)worst));
}
