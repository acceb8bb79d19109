/*
 * ops/choice.h - kernel choices made by timing, remembered per session
 * (toplu_session_options_t.choose_kernels, toplu/session.h).
 *
 * Where two kernels of one op are close and which is faster depends on the
 * CPU and the shape (toplu's own GEMM against oneDNN's sgemm: 0.85-0.92x
 * at N = 768 and 1.06-1.20x at N = 3072 on an Intel Xeon with AVX-512,
 * the other way round on AMD Zen 3 and Zen 5; docs/performance.md), a
 * kernel's prepare times both on scratch data of the node's shapes and keeps
 * the faster.  The result is cached here under a key naming the kernel
 * family, the shapes, the threads and the fused post-ops, so plans built
 * later for the same shapes (a plan evicted and built again, the split
 * plan's slices, another batch size's plan with the same products) reuse
 * it without timing again.
 *
 * Lives in the ops layer (the kernels consult it); the session creates one
 * (runtime/session.c) and hands it to each plan build, which sets
 * toplu__kernel_ctx_t.choices.  All functions are thread-safe (one mutex);
 * plans of one session may be built by several threads at once, and two
 * may time the same key: the later result replaces the earlier.
 */
#ifndef TOPLU_OPS_CHOICE_H
#define TOPLU_OPS_CHOICE_H

#include "toplu/log.h"

typedef struct toplu__choices toplu__choices_t;

/* A cache whose notes ("chose ... over ...") go to log (may be NULL).
 * NULL when out of memory. */
toplu__choices_t *toplu__choices_create(toplu_log_fn log, void *log_user);
void toplu__choices_destroy(toplu__choices_t *c); /* NULL: no-op */

/* The candidate chosen under key (0 = the kernel's first candidate), or -1
 * when it was not timed yet.  c NULL: -1. */
int toplu__choice_get(toplu__choices_t *c, const char *key);

/* Remember winner for key (keys over 255 bytes are cut there) and log a
 * note at TOPLU_LOG_NOTE: what (a phrase naming the node and its shapes),
 * the winner's name and seconds a run, the other's; what NULL: no note
 * (a choice made without timing, remembered so it is not tried again).  Out of memory: not
 * remembered (the next plan times again).  c NULL: no-op. */
void toplu__choice_put(toplu__choices_t *c, const char *key, int winner, const char *what, const char *win_name,
                       double win_s, const char *lose_name, double lose_s);

/* TOPLU_CHOOSE_KERNELS from the environment: "first" -> 0, "alt" -> 1 (the
 * choice forced after the timing, for A/B measurement and tests, as
 * TOPLU_CHOOSE_THREADS=whole|alt is for threads), otherwise -1. */
int toplu__choice_forced(void);

#endif
