/*
 * bench/peak.c - the machine's measured fp32 peak, for docs/performance.md.
 *
 *   toplu_peak [--seconds S] [--threads T]
 *
 * Runs the library's register-only FMA probe (toplu_cpu_fp32_peak_measure,
 * toplu/profile.h: independent chains of AVX-512F or AVX2 FMAs held in
 * registers, the best rate over short chunks) on one core, then on T cores
 * at once (default: every core the process may use), S seconds each
 * (default 0.5), and prints one JSON line:
 *   {"isa":"avx2+fma","one_core_gflops":...,"threads":T,"all_core_gflops":...,
 *    "one_core_times_threads_gflops":...,"int8_isa":"avx512_vnni","int8_one_core_gops":...,
 *    "int8_all_core_gops":...}
 * The int8 figures are the int8 probe's (toplu_cpu_int8_peak_measure: vpdpbusd
 * on VNNI CPUs, vpmaddubsw + vpmaddwd on AVX2), run the same way; GOP/s counts
 * a u8 x s8 multiply-add as 2.
 * all_core_gflops is measured with every thread running at once (shared
 * clocks and power limits show there); one_core_times_threads_gflops is what
 * the profiler's share of peak uses (toplu_cpu_fp32_peak_gflops).  GFLOP/s =
 * 1e9 FLOP/s, a multiply-add counted as 2.  Exit 0, 2 on usage.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toplu/profile.h"

int main(int argc, char **argv) {
  double seconds = 0.5;
  long threads = 0;
  for (int i = 1; i < argc; i++) {
    char *end = NULL;
    if (i + 1 < argc && !strcmp(argv[i], "--seconds")) seconds = strtod(argv[++i], &end);
    else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = strtol(argv[++i], &end, 10);
    if (!end || *end || seconds <= 0 || seconds > 10 || threads < 0 || threads > TOPLU_MAX_THREADS) {
      fprintf(stderr, "usage: toplu_peak [--seconds S (0-10]] [--threads T (0: every core)]\n");
      return 2;
    }
  }
  if (threads == 0) threads = omp_get_num_procs();
  const char *isa = NULL;
  double one = toplu_cpu_fp32_peak_measure(1, seconds, &isa);
  double all = toplu_cpu_fp32_peak_measure((int)threads, seconds, NULL);
  const char *isa8 = NULL;
  double one8 = toplu_cpu_int8_peak_measure(1, seconds, &isa8);
  double all8 = toplu_cpu_int8_peak_measure((int)threads, seconds, NULL);
  printf("{\"isa\":\"%s\",\"one_core_gflops\":%.1f,\"threads\":%ld,\"all_core_gflops\":%.1f,"
         "\"one_core_times_threads_gflops\":%.1f,\"int8_isa\":\"%s\",\"int8_one_core_gops\":%.1f,"
         "\"int8_all_core_gops\":%.1f}\n",
         isa, one, threads, all, one * (double)threads, isa8, one8, all8);
  return 0;
}
