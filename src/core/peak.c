/*
 * core/peak.c - the machine's measured fp32 peak: a register-only FMA probe
 * (toplu_cpu_fp32_peak_* in toplu/profile.h).
 *
 * Each thread runs independent chains of fused multiply-adds on values held
 * in vector registers (a = a * b + c, which converges to 1, so no denormals
 * and no memory traffic): 12 chains of _mm256_fmadd_ps on AVX2 + FMA, 16 of
 * _mm512_fmadd_ps on AVX-512F, chosen at run time with
 * __builtin_cpu_supports (the functions carry target attributes, so the
 * library need not be built for the CPU).  Enough chains hide the FMA
 * latency (4-5 cycles) on both FMA ports of current x86 cores.  The rate is
 * the best over short chunks (~0.1-0.3 ms each), so an interrupt or another
 * process taking the core costs a chunk, not the figure.  Without either
 * ISA (or off x86) a plain float loop stands in: a lower bound, named "scalar".
 *
 * The int8 probe (toplu_cpu_int8_peak_*) is the same with u8 x s8 products
 * summed into s32 lanes, the instructions int8 convolution and GEMM kernels
 * use: 16 chains of vpdpbusd on 512 bits with AVX512-VNNI (64 products an
 * instruction), 12 on 256 bits with AVX-VNNI, else 12 chains of vpmaddubsw +
 * vpmaddwd + vpaddd on AVX2 (32 products per three instructions); each
 * product counts 2 ops (multiply and add), as the fp32 probe counts an FMA.
 * AMX tiles are not probed (they need the kernel's permission per process):
 * on a CPU with AMX-INT8 the rate is what VNNI gives, a lower bound.
 */
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "toplu/profile.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define PEAK_X86 1
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile float peak_sink; /* keeps the chains' results alive */

#ifdef PEAK_X86
#define AVX2_CHAINS 12
/* iters rounds of 12 x 8-lane FMAs; returns flops done */
__attribute__((target("avx2,fma"))) static double chunk_avx2(int64_t iters) {
  __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(0.000001f);
  __m256 a0 = _mm256_set1_ps(0.5f), a1 = _mm256_set1_ps(0.6f), a2 = _mm256_set1_ps(0.7f), a3 = _mm256_set1_ps(0.8f);
  __m256 a4 = _mm256_set1_ps(0.9f), a5 = _mm256_set1_ps(1.1f), a6 = _mm256_set1_ps(1.2f), a7 = _mm256_set1_ps(1.3f);
  __m256 a8 = _mm256_set1_ps(1.4f), a9 = _mm256_set1_ps(1.5f), a10 = _mm256_set1_ps(1.6f), a11 = _mm256_set1_ps(1.7f);
  for (int64_t i = 0; i < iters; i++) {
    a0 = _mm256_fmadd_ps(a0, b, c); a1 = _mm256_fmadd_ps(a1, b, c); a2 = _mm256_fmadd_ps(a2, b, c);
    a3 = _mm256_fmadd_ps(a3, b, c); a4 = _mm256_fmadd_ps(a4, b, c); a5 = _mm256_fmadd_ps(a5, b, c);
    a6 = _mm256_fmadd_ps(a6, b, c); a7 = _mm256_fmadd_ps(a7, b, c); a8 = _mm256_fmadd_ps(a8, b, c);
    a9 = _mm256_fmadd_ps(a9, b, c); a10 = _mm256_fmadd_ps(a10, b, c); a11 = _mm256_fmadd_ps(a11, b, c);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  peak_sink = _mm256_cvtss_f32(s);
  return (double)iters * AVX2_CHAINS * 8 * 2;
}

#define AVX512_CHAINS 16
__attribute__((target("avx512f"))) static double chunk_avx512(int64_t iters) {
  __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(0.000001f);
  __m512 a[AVX512_CHAINS];
  for (int k = 0; k < AVX512_CHAINS; k++) a[k] = _mm512_set1_ps(0.5f + 0.05f * (float)k);
  for (int64_t i = 0; i < iters; i++) {
    /* a fixed-count loop the compiler unrolls; the array stays in zmm registers */
    for (int k = 0; k < AVX512_CHAINS; k++) a[k] = _mm512_fmadd_ps(a[k], b, c);
  }
  __m512 s = a[0];
  for (int k = 1; k < AVX512_CHAINS; k++) s = _mm512_add_ps(s, a[k]);
  peak_sink = _mm512_reduce_add_ps(s);
  return (double)iters * AVX512_CHAINS * 16 * 2;
}

#define VNNI512_CHAINS 16
/* iters rounds of 16 x 64 u8 x s8 products (vpdpbusd zmm); returns ops (2 per product) */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double chunk_vnni512(int64_t iters) {
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  __m512i acc[VNNI512_CHAINS];
  for (int k = 0; k < VNNI512_CHAINS; k++) acc[k] = _mm512_set1_epi32(k);
  for (int64_t i = 0; i < iters; i++)
    for (int k = 0; k < VNNI512_CHAINS; k++) acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
  __m512i s = acc[0];
  for (int k = 1; k < VNNI512_CHAINS; k++) s = _mm512_add_epi32(s, acc[k]);
  peak_sink = (float)_mm512_reduce_add_epi32(s);
  return (double)iters * VNNI512_CHAINS * 64 * 2;
}

#define VNNI256_CHAINS 12
/* iters rounds of 12 x 32 products (AVX-VNNI vpdpbusd ymm) */
__attribute__((target("avx2,avxvnni"))) static double chunk_avxvnni(int64_t iters) {
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
  __m256i acc[VNNI256_CHAINS];
  for (int k = 0; k < VNNI256_CHAINS; k++) acc[k] = _mm256_set1_epi32(k);
  for (int64_t i = 0; i < iters; i++)
    for (int k = 0; k < VNNI256_CHAINS; k++) acc[k] = _mm256_dpbusd_avx_epi32(acc[k], a, b);
  __m256i s = acc[0];
  for (int k = 1; k < VNNI256_CHAINS; k++) s = _mm256_add_epi32(s, acc[k]);
  peak_sink = (float)_mm256_extract_epi32(s, 0);
  return (double)iters * VNNI256_CHAINS * 32 * 2;
}

#define AVX2_I8_CHAINS 12
/* iters rounds of 12 x 32 products as int8 kernels without VNNI make them: vpmaddubsw (u8 x s8 pairs into
 * s16), vpmaddwd by ones (into s32), vpaddd; each chain reads its own sum, so nothing is hoisted */
__attribute__((target("avx2"))) static double chunk_avx2_i8(int64_t iters) {
  __m256i b = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
  __m256i acc[AVX2_I8_CHAINS];
  for (int k = 0; k < AVX2_I8_CHAINS; k++) acc[k] = _mm256_set1_epi32(k);
  for (int64_t i = 0; i < iters; i++)
    for (int k = 0; k < AVX2_I8_CHAINS; k++)
      acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(acc[k], b), ones));
  __m256i s = acc[0];
  for (int k = 1; k < AVX2_I8_CHAINS; k++) s = _mm256_add_epi32(s, acc[k]);
  peak_sink = (float)_mm256_extract_epi32(s, 0);
  return (double)iters * AVX2_I8_CHAINS * 32 * 2;
}
#endif

#define SCALAR_I8_CHAINS 8
static double chunk_scalar_i8(int64_t iters) {
  uint32_t acc[SCALAR_I8_CHAINS]; /* unsigned: the sums wrap, as the vector lanes do */
  volatile int8_t vb = -5;
  const uint32_t b = (uint32_t)(int32_t)vb;
  for (int k = 0; k < SCALAR_I8_CHAINS; k++) acc[k] = (uint32_t)k;
  for (int64_t i = 0; i < iters; i++)
    for (int k = 0; k < SCALAR_I8_CHAINS; k++) acc[k] += (uint32_t)(uint8_t)acc[k] * b;
  uint32_t s = 0;
  for (int k = 0; k < SCALAR_I8_CHAINS; k++) s += acc[k];
  peak_sink = (float)s;
  return (double)iters * SCALAR_I8_CHAINS * 2;
}

#define SCALAR_CHAINS 8
static double chunk_scalar(int64_t iters) {
  float a[SCALAR_CHAINS], b = 0.999999f, c = 0.000001f;
  for (int k = 0; k < SCALAR_CHAINS; k++) a[k] = 0.5f + 0.1f * (float)k;
  for (int64_t i = 0; i < iters; i++)
    for (int k = 0; k < SCALAR_CHAINS; k++) a[k] = a[k] * b + c;
  float s = 0;
  for (int k = 0; k < SCALAR_CHAINS; k++) s += a[k];
  peak_sink = s;
  return (double)iters * SCALAR_CHAINS * 2;
}

typedef double (*chunk_fn)(int64_t);

static chunk_fn pick(const char **isa) {
#ifdef PEAK_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    *isa = "avx512f";
    return chunk_avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *isa = "avx2+fma";
    return chunk_avx2;
  }
#endif
  *isa = "scalar";
  return chunk_scalar;
}

#ifdef PEAK_X86
/* AVX-VNNI (CPUID leaf 7 subleaf 1, EAX bit 4; Intel SDM vol. 2A, CPUID): read directly, as clang 14's
 * __builtin_cpu_supports does not know the name; AVX2 checked first for the OS's saved ymm state. */
static int has_avxvnni(void) {
  unsigned a, b, c, d;
  if (!__builtin_cpu_supports("avx2") || __get_cpuid_max(0, NULL) < 7) return 0;
  __cpuid_count(7, 1, a, b, c, d);
  return (int)((a >> 4) & 1u);
}
#endif

static chunk_fn pick_int8(const char **isa) {
#ifdef PEAK_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) {
    *isa = "avx512_vnni";
    return chunk_vnni512;
  }
  if (has_avxvnni()) {
    *isa = "avx_vnni";
    return chunk_avxvnni;
  }
  if (__builtin_cpu_supports("avx2")) {
    *isa = "avx2";
    return chunk_avx2_i8;
  }
#endif
  *isa = "scalar";
  return chunk_scalar_i8;
}

/* Best chunk rate (FLOP/s) of this thread over about `seconds`. */
static double probe_thread(chunk_fn f, double seconds) {
  const int64_t iters = 20000; /* 240-320 k FMAs a chunk: ~0.1 ms at 3 GHz */
  double best = 0, t_end = now_s() + seconds;
  f(iters); /* warm up: wake the vector units and the clock */
  do {
    double t0 = now_s();
    double flops = f(iters);
    double dt = now_s() - t0;
    if (dt > 0 && flops / dt > best) best = flops / dt;
  } while (now_s() < t_end);
  return best;
}

static double measure(chunk_fn f, int threads, double seconds) {
  if (!(seconds > 0)) seconds = 0.03;
  if (seconds > 10) seconds = 10;
  if (threads <= 0) threads = toplu_cpu_count(NULL, 0);
  if (threads < 1) threads = 1;
  if (threads > TOPLU_MAX_THREADS) threads = TOPLU_MAX_THREADS;
  if (threads == 1) return probe_thread(f, seconds) / 1e9;
  double sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
  sum += probe_thread(f, seconds);
  return sum / 1e9;
}

double toplu_cpu_fp32_peak_measure(int threads, double seconds, const char **isa) {
  const char *name = "scalar";
  chunk_fn f = pick(&name);
  if (isa) *isa = name;
  return measure(f, threads, seconds);
}

double toplu_cpu_int8_peak_measure(int threads, double seconds, const char **isa) {
  const char *name = "scalar";
  chunk_fn f = pick_int8(&name);
  if (isa) *isa = name;
  return measure(f, threads, seconds);
}

static pthread_mutex_t peak_lock = PTHREAD_MUTEX_INITIALIZER;
static double peak_one_core;      /* GFLOP/s, measured once per process */
static double int8_one_core;      /* GOP/s, measured once per process */
static const char *int8_isa_name; /* its code */

double toplu_cpu_fp32_peak_gflops(int threads) {
  if (threads <= 0) threads = toplu_cpu_count(NULL, 0);
  if (threads < 1) threads = 1;
  pthread_mutex_lock(&peak_lock);
  if (peak_one_core <= 0) peak_one_core = toplu_cpu_fp32_peak_measure(1, 0.03, NULL);
  double one = peak_one_core;
  pthread_mutex_unlock(&peak_lock);
  return one * threads;
}

double toplu_cpu_int8_peak_gops(int threads, const char **isa) {
  if (threads <= 0) threads = toplu_cpu_count(NULL, 0);
  if (threads < 1) threads = 1;
  pthread_mutex_lock(&peak_lock);
  if (int8_one_core <= 0) int8_one_core = toplu_cpu_int8_peak_measure(1, 0.03, &int8_isa_name);
  double one = int8_one_core;
  if (isa) *isa = int8_isa_name;
  pthread_mutex_unlock(&peak_lock);
  return one * threads;
}
