/* runtime/pool.h - toplu's own worker threads for runs split into slices.
 *
 * Why not an OpenMP parallel region: its closing barrier waits for every
 * thread of the team, including one the OS has not yet scheduled since the
 * region began.  On cores shared with other work, a thread woken for a run
 * may wait a whole scheduler slice (several ms) behind another process
 * before it runs at all; the caller, which has already done every slice
 * itself, waits for it anyway.  Here a run waits only for the tasks that
 * were taken: a worker that wakes after the last task was taken finds
 * nothing and goes back to waiting.  Waiting threads spin for a bounded time
 * (TOPLU_POOL_SPIN_US, default below) and then sleep on a condition
 * variable, so they do not hold cores that other work needs.
 *
 * One job at a time per pool: a second caller while a job runs gets
 * TOPLU__POOL_BUSY and runs its own way.  After fork() the child has no
 * workers: a job there runs every task on the caller's thread, and destroy
 * frees the pool without joining.  Internal to libtoplu.
 */
#ifndef TOPLU_RUNTIME_POOL_H
#define TOPLU_RUNTIME_POOL_H

typedef struct toplu__pool toplu__pool_t;

/* A job's task: `task` in 0..n_tasks-1.  Runs on the caller's thread or a
 * worker's, several tasks of one job at once on different threads. */
typedef void (*toplu__pool_fn)(void *arg, int task);

/* A pool of `workers` threads (>= 1), each with OpenMP's thread count set to
 * 1 (omp_set_num_threads), waiting for jobs.  spin_us: how long a waiting
 * thread spins before it sleeps (< 0: TOPLU_POOL_SPIN_US from the
 * environment, else the default).  Returns NULL when a thread cannot be
 * started or memory runs out.  Thread-safe. */
toplu__pool_t *toplu__pool_create(int workers, int spin_us);

/* Stops and joins the workers, frees the pool.  No job may be running.
 * NULL is a no-op. */
void toplu__pool_destroy(toplu__pool_t *p);

#define TOPLU__POOL_BUSY 1

/* Runs fn(arg, 0..n_tasks-1) on the caller's thread and the workers, each
 * task once, each thread taking the next task until none is left, and
 * returns once every task has returned (0).  A worker that wakes after
 * every task was taken is not waited for.  Returns TOPLU__POOL_BUSY, running
 * nothing, when another caller's job is running on this pool.  Thread-safe. */
int toplu__pool_run(toplu__pool_t *p, int n_tasks, toplu__pool_fn fn, void *arg);

/* The workers' thread count (p's `workers`); 0 for NULL. */
int toplu__pool_workers(const toplu__pool_t *p);

#endif
