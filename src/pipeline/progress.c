/* pipeline/progress.c - progress bar, periodic lines and the final report. */
#include "pipeline/progress.h"

#include <string.h>
#include <unistd.h>

#include "pipeline/buf.h"

void pl_progress_init(pl_progress_t *p, FILE *f, toplu_progress_mode_t mode, double every, int64_t total, int64_t base) {
  memset(p, 0, sizeof *p);
  p->f = f;
  if (mode == TOPLU_PROGRESS_AUTO) mode = f && isatty(fileno(f)) ? TOPLU_PROGRESS_BAR : TOPLU_PROGRESS_LINES;
  p->mode = f ? mode : TOPLU_PROGRESS_NONE;
  p->every = mode == TOPLU_PROGRESS_BAR ? 0.5 : every > 0 ? every : 10;
  p->t0 = p->last = pl_now();
  p->total = total;
  p->base = base;
}

/* Busy percent of stage k over the wall time and its threads. */
static double busy_pct(const toplu_job_stats_t *s, int k, double wall) {
  int th = s->threads[k] > 0 ? s->threads[k] : 1;
  return wall > 0 ? 100.0 * s->busy_s[k] / (wall * th) : 0;
}

void pl_progress_tick(pl_progress_t *p, const toplu_job_stats_t *s, int64_t done, int force) {
  if (p->mode == TOPLU_PROGRESS_NONE) return;
  double now = pl_now();
  if (!force && now - p->last < p->every) return;
  p->last = now;
  double el = now - p->t0, rate = el > 0 ? (double)(done - p->base) / el : 0;
  double eta = rate > 0 ? (double)(p->total - done) / rate : -1;
  char etas[32] = "?";
  if (eta >= 0) snprintf(etas, sizeof etas, "%d:%02d", (int)(eta / 60), (int)eta % 60);
  char stages[200];
  size_t n = 0;
  stages[0] = '\0';
  for (int k = 0; k < TOPLU_STAGE_COUNT && n < sizeof stages; k++)
    n += (size_t)snprintf(stages + n, sizeof stages - n, " %s %.0f%%", toplu_job_stage_name((toplu_job_stage_t)k),
                          busy_pct(s, k, s->wall_s));
  double pct = p->total > 0 ? 100.0 * (double)done / (double)p->total : 100;
  if (p->mode == TOPLU_PROGRESS_BAR) {
    char bar[31];
    int fill = (int)(pct * 30 / 100);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = '\0';
    fprintf(p->f, "\r[%s] %lld/%lld rows %3.0f%%  %.1f rows/s  ETA %s %s\033[K", bar, (long long)done,
            (long long)p->total, pct, rate, etas, stages);
    p->bar_drawn = 1;
  } else {
    fprintf(p->f, "toplu run: %lld/%lld rows (%.0f%%), %.1f rows/s, ETA %s, busy:%s\n", (long long)done,
            (long long)p->total, pct, rate, etas, stages);
  }
  fflush(p->f);
}

void pl_progress_end(pl_progress_t *p) {
  if (p->bar_drawn) {
    fputc('\n', p->f);
    fflush(p->f);
    p->bar_drawn = 0;
  }
}

void pl_progress_report(FILE *f, const toplu_job_stats_t *s, const char *output) {
  if (!f) return;
  int64_t ran = s->rows_total - s->rows_skipped;
  double rate = s->wall_s > 0 ? (double)ran / s->wall_s : 0;
  fprintf(f,
          "toplu run: %lld rows -> %s: %lld processed, %lld failed, %lld skipped (done before --resume); %lld "
          "batches of up to %lld in %.2f s, %.1f rows/s",
          (long long)s->rows_total, output, (long long)s->rows_processed, (long long)s->rows_failed,
          (long long)s->rows_skipped, (long long)s->batches, (long long)s->batch_size, s->wall_s, rate);
  if (s->shard_count > 1)
    fprintf(f, "; shard %lld/%lld (rows %lld..%lld)", (long long)s->shard_index, (long long)s->shard_count,
            (long long)s->row_first, (long long)s->row_end - 1);
  fputc('\n', f);
  if (s->wall_s <= 0) return;
  fprintf(f, "  stage        threads  busy s  busy %% of wall\n");
  int worst = 0;
  for (int k = 0; k < TOPLU_STAGE_COUNT; k++) {
    double pct = busy_pct(s, k, s->wall_s);
    if (pct > busy_pct(s, worst, s->wall_s)) worst = k;
    fprintf(f, "  %-12s %7d %7.2f %6.1f%%\n", toplu_job_stage_name((toplu_job_stage_t)k), s->threads[k], s->busy_s[k],
            pct);
  }
  fprintf(f, "  bottleneck: %s\n", toplu_job_stage_name((toplu_job_stage_t)worst));
}
