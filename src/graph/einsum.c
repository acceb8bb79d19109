/* graph/einsum.c - parsing Einsum equations (see graph/einsum.h). */
#include <stdio.h>
#include <string.h>

#include "graph/einsum.h"

static int letter_id(char c) {
  if (c >= 'A' && c <= 'Z') return TOPLU_EINSUM_ELLIPSIS_LABELS + (c - 'A');
  if (c >= 'a' && c <= 'z') return TOPLU_EINSUM_ELLIPSIS_LABELS + 26 + (c - 'a');
  return -1;
}

/* One term [start, end): letters and at most one "..."; spaces skipped.
 * Fills ids (TOPLU_EINSUM_ELLIPSIS_LABELS for the ellipsis' place). */
static int parse_term(const char *s, const char *end, int *ids, int *n, int *ell, char *why, size_t ws) {
  *n = 0;
  *ell = -1;
  for (const char *p = s; p < end; p++) {
    if (*p == ' ') continue;
    if (*p == '.') {
      if (end - p < 3 || p[1] != '.' || p[2] != '.' || *ell >= 0) {
        snprintf(why, ws, "a '.' that is not one \"...\" per term");
        return -1;
      }
      *ell = *n;
      p += 2;
      continue;
    }
    int id = letter_id(*p);
    if (id < 0) {
      snprintf(why, ws, "character '%c' is not a letter", *p);
      return -1;
    }
    if (*n >= TOPLU_EINSUM_MAX_LABELS) {
      snprintf(why, ws, "a term is too long");
      return -1;
    }
    ids[(*n)++] = id;
  }
  return 0;
}

int toplu__einsum_parse(const char *eq, int n, const int *ranks, toplu__einsum_t *e, char *why, size_t ws) {
  memset(e, 0, sizeof *e);
  e->n_labels = TOPLU_EINSUM_MAX_LABELS;
  if (n > TOPLU_EINSUM_MAX_IN) {
    snprintf(why, ws, "more than %d inputs", TOPLU_EINSUM_MAX_IN);
    return -1;
  }
  const char *arrow = strstr(eq, "->"), *lhs_end = arrow ? arrow : eq + strlen(eq);
  int ids[TOPLU_EINSUM_MAX_LABELS], cnt, ell, ell_rank_max = 0, ell_rank[TOPLU_EINSUM_MAX_IN];
  int uses[TOPLU_EINSUM_MAX_LABELS] = {0};
  const char *p = eq;
  for (int i = 0; i < n; i++) {
    const char *q = p;
    while (q < lhs_end && *q != ',') q++;
    if (i < n - 1 ? q >= lhs_end : q != lhs_end) {
      snprintf(why, ws, "the equation has a different number of terms than the %d inputs", n);
      return -1;
    }
    if (parse_term(p, q, ids, &cnt, &ell, why, ws)) return -1;
    if (ell < 0 ? cnt != ranks[i] : cnt > ranks[i]) {
      snprintf(why, ws, "term %d has %d labels for a rank-%d input", i, cnt, ranks[i]);
      return -1;
    }
    int er = ell < 0 ? 0 : ranks[i] - cnt;
    if (ranks[i] > TOPLU_MAX_DIMS || er > TOPLU_EINSUM_ELLIPSIS_LABELS) {
      snprintf(why, ws, "rank above %d", TOPLU_MAX_DIMS);
      return -1;
    }
    ell_rank[i] = er;
    if (er > ell_rank_max) ell_rank_max = er;
    int d = 0;
    for (int k = 0; k <= cnt; k++) {
      if (k == ell)
        for (int j = 0; j < er; j++) e->in_label[i][d++] = -1 - j; /* placed below */
      if (k < cnt) {
        e->in_label[i][d++] = ids[k];
        uses[ids[k]]++;
      }
    }
    p = q + 1;
  }
  /* Ellipsis dims aligned to the right over ell_rank_max ids. */
  for (int i = 0; i < n; i++)
    for (int d = 0; d < ranks[i]; d++)
      if (e->in_label[i][d] < 0) e->in_label[i][d] = ell_rank_max - ell_rank[i] + (-1 - e->in_label[i][d]);
  if (arrow) {
    const char *o = arrow + 2;
    if (parse_term(o, o + strlen(o), ids, &cnt, &ell, why, ws)) return -1;
    int d = 0;
    for (int k = 0; k <= cnt; k++) {
      if (k == ell)
        for (int j = 0; j < ell_rank_max; j++) e->out_label[d++] = j;
      if (k < cnt) {
        if (!uses[ids[k]]) {
          snprintf(why, ws, "an output label is in no input");
          return -1;
        }
        for (int j = 0; j < d; j++)
          if (e->out_label[j] == ids[k]) {
            snprintf(why, ws, "an output label is repeated");
            return -1;
          }
        e->out_label[d++] = ids[k];
      }
    }
    if (ell < 0 && ell_rank_max > 0) {
      snprintf(why, ws, "inputs have \"...\" dims the output drops without saying \"...\"");
      return -1;
    }
    e->out_rank = d;
  } else {
    int d = 0;
    for (int j = 0; j < ell_rank_max; j++) e->out_label[d++] = j;
    for (int id = TOPLU_EINSUM_ELLIPSIS_LABELS; id < TOPLU_EINSUM_MAX_LABELS; id++)
      if (uses[id] == 1) e->out_label[d++] = id;
    e->out_rank = d;
  }
  return 0;
}
