/*
 * ops/choice.c - kernel choices made by timing, per session (ops/choice.h).
 */
#include "ops/choice.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#define CHOICE_KEY 256

typedef struct choice_entry {
  struct choice_entry *next;
  int winner;
  char key[CHOICE_KEY];
} choice_entry_t;

struct toplu__choices {
  pthread_mutex_t mu;
  choice_entry_t *head;
  toplu_log_fn log;
  void *log_user;
};

toplu__choices_t *toplu__choices_create(toplu_log_fn log, void *log_user) {
  toplu__choices_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  if (pthread_mutex_init(&c->mu, NULL)) {
    free(c);
    return NULL;
  }
  c->log = log;
  c->log_user = log_user;
  return c;
}

void toplu__choices_destroy(toplu__choices_t *c) {
  if (!c) return;
  for (choice_entry_t *e = c->head, *nx; e; e = nx) {
    nx = e->next;
    free(e);
  }
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static choice_entry_t *find(toplu__choices_t *c, const char *key) {
  for (choice_entry_t *e = c->head; e; e = e->next)
    if (!strncmp(e->key, key, CHOICE_KEY - 1)) return e;
  return NULL;
}

int toplu__choice_get(toplu__choices_t *c, const char *key) {
  if (!c || !key) return -1;
  pthread_mutex_lock(&c->mu);
  choice_entry_t *e = find(c, key);
  int w = e ? e->winner : -1;
  pthread_mutex_unlock(&c->mu);
  return w;
}

void toplu__choice_put(toplu__choices_t *c, const char *key, int winner, const char *what, const char *win_name,
                       double win_s, const char *lose_name, double lose_s) {
  if (!c || !key) return;
  pthread_mutex_lock(&c->mu);
  choice_entry_t *e = find(c, key);
  if (!e && (e = calloc(1, sizeof *e))) {
    size_t n = strlen(key);
    if (n > CHOICE_KEY - 1) n = CHOICE_KEY - 1;
    memcpy(e->key, key, n);
    e->next = c->head;
    c->head = e;
  }
  if (e) e->winner = winner;
  toplu_log_fn log = c->log;
  void *user = c->log_user;
  pthread_mutex_unlock(&c->mu);
  if (what)
      toplu__logf(log, user, TOPLU_LOG_NOTE, "%s: chose %s (%.3f ms a run) over %s (%.3f ms) (choose_kernels)", what,
                win_name, win_s * 1e3, lose_name, lose_s * 1e3);
}

int toplu__choice_forced(void) {
  const char *v = getenv("TOPLU_CHOOSE_KERNELS");
  if (!v) return -1;
  if (!strcmp(v, "first")) return 0;
  if (!strcmp(v, "alt")) return 1;
  return -1;
}
