/* core/clock.c - toplu_monotonic_ns (toplu/session.h): the one clock of deadlines and of timings made in
 * any layer (the session's, the kernels' choices). */
#include <stdint.h>
#include <time.h>

#include "toplu/session.h"

int64_t toplu_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
