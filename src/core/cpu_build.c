/* core/cpu_build.c - does this CPU have what the build compiled for?  (core/cpu.h) */
#include "core/cpu.h"

#include <stddef.h>
#include <stdio.h>

#include "toplu/status.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

/* One instruction-set extension the compiler was allowed to use (its feature macro is defined): where
 * CPUID says so, and the OS state it needs (XCR0 bits), if any. */
typedef struct {
  const char *name;
  unsigned leaf, sub;
  int reg; /* 0 EAX, 1 EBX, 2 ECX, 3 EDX */
  int bit;
  unsigned long long xcr0; /* state the OS must enable: AVX 0x6, AVX-512 0xe6, AMX 0x60000 */
} isa_t;

#define AVX_STATE 0x6ull
#define AVX512_STATE 0xe6ull
#define AMX_STATE 0x60000ull

static const isa_t need[] = {
#ifdef __SSSE3__
    {"SSSE3", 1, 0, 2, 9, 0},
#endif
#ifdef __SSE4_1__
    {"SSE4.1", 1, 0, 2, 19, 0},
#endif
#ifdef __SSE4_2__
    {"SSE4.2", 1, 0, 2, 20, 0},
#endif
#ifdef __POPCNT__
    {"POPCNT", 1, 0, 2, 23, 0},
#endif
#ifdef __MOVBE__
    {"MOVBE", 1, 0, 2, 22, 0},
#endif
#ifdef __AVX__
    {"AVX", 1, 0, 2, 28, AVX_STATE},
#endif
#ifdef __F16C__
    {"F16C", 1, 0, 2, 29, AVX_STATE},
#endif
#ifdef __FMA__
    {"FMA", 1, 0, 2, 12, AVX_STATE},
#endif
#ifdef __BMI__
    {"BMI1", 7, 0, 1, 3, 0},
#endif
#ifdef __BMI2__
    {"BMI2", 7, 0, 1, 8, 0},
#endif
#ifdef __LZCNT__
    {"LZCNT", 0x80000001u, 0, 2, 5, 0},
#endif
#ifdef __AVX2__
    {"AVX2", 7, 0, 1, 5, AVX_STATE},
#endif
#ifdef __AVX512F__
    {"AVX-512F", 7, 0, 1, 16, AVX512_STATE},
#endif
#ifdef __AVX512DQ__
    {"AVX-512DQ", 7, 0, 1, 17, AVX512_STATE},
#endif
#ifdef __AVX512IFMA__
    {"AVX-512IFMA", 7, 0, 1, 21, AVX512_STATE},
#endif
#ifdef __AVX512CD__
    {"AVX-512CD", 7, 0, 1, 28, AVX512_STATE},
#endif
#ifdef __AVX512BW__
    {"AVX-512BW", 7, 0, 1, 30, AVX512_STATE},
#endif
#ifdef __AVX512VL__
    {"AVX-512VL", 7, 0, 1, 31, AVX512_STATE},
#endif
#ifdef __AVX512VBMI__
    {"AVX-512VBMI", 7, 0, 2, 1, AVX512_STATE},
#endif
#ifdef __AVX512VBMI2__
    {"AVX-512VBMI2", 7, 0, 2, 6, AVX512_STATE},
#endif
#ifdef __GFNI__
    {"GFNI", 7, 0, 2, 8, 0},
#endif
#ifdef __VAES__
    {"VAES", 7, 0, 2, 9, AVX_STATE},
#endif
#ifdef __VPCLMULQDQ__
    {"VPCLMULQDQ", 7, 0, 2, 10, AVX_STATE},
#endif
#ifdef __AVX512VNNI__
    {"AVX-512 VNNI", 7, 0, 2, 11, AVX512_STATE},
#endif
#ifdef __AVX512BITALG__
    {"AVX-512BITALG", 7, 0, 2, 12, AVX512_STATE},
#endif
#ifdef __AVX512VPOPCNTDQ__
    {"AVX-512VPOPCNTDQ", 7, 0, 2, 14, AVX512_STATE},
#endif
#ifdef __AVX512FP16__
    {"AVX-512FP16", 7, 0, 3, 23, AVX512_STATE},
#endif
#ifdef __AMX_BF16__
    {"AMX-BF16", 7, 0, 3, 22, AMX_STATE},
#endif
#ifdef __AMX_TILE__
    {"AMX-TILE", 7, 0, 3, 24, AMX_STATE},
#endif
#ifdef __AMX_INT8__
    {"AMX-INT8", 7, 0, 3, 25, AMX_STATE},
#endif
#ifdef __AVXVNNI__
    {"AVX-VNNI", 7, 1, 0, 4, AVX_STATE},
#endif
#ifdef __AVX512BF16__
    {"AVX-512BF16", 7, 1, 0, 5, AVX512_STATE},
#endif
    {NULL, 0, 0, 0, 0, 0}};

/* Compiled for the baseline x86-64 whatever the build's -march, so that it runs on any CPU. */
__attribute__((target("arch=x86-64"), noinline)) const char *toplu__cpu_build_missing(void) {
  unsigned r[4], max_leaf = __get_cpuid_max(0, NULL), max_ext = __get_cpuid_max(0x80000000u, NULL);
  unsigned long long xcr0 = 0;
  if (__get_cpuid(1, &r[0], &r[1], &r[2], &r[3]) && (r[2] >> 27 & 1)) { /* OSXSAVE: XGETBV is there */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (unsigned long long)hi << 32 | lo;
  }
  for (const isa_t *f = need; f->name; f++) {
    unsigned top = f->leaf >= 0x80000000u ? max_ext : max_leaf;
    if (f->leaf > top) return f->name;
    __cpuid_count(f->leaf, f->sub, r[0], r[1], r[2], r[3]);
    if (!(r[f->reg] >> f->bit & 1)) return f->name;
    if ((xcr0 & f->xcr0) != f->xcr0) return f->name; /* the CPU has it, the OS does not keep its registers */
  }
  return NULL;
}
#define BASELINE __attribute__((target("arch=x86-64"), noinline))
#else
const char *toplu__cpu_build_missing(void) { return NULL; }
#define BASELINE
#endif

BASELINE toplu_status_t toplu__cpu_build_check(toplu_error_t *err) {
  const char *isa = toplu__cpu_build_missing();
  if (!isa) return TOPLU_OK;
  if (err) {
    err->status = TOPLU_ERR_UNSUPPORTED;
    snprintf(err->message, sizeof err->message,
             "libtoplu was built for a CPU with %s (-march=native: CMake's TOPLU_NATIVE, on by default), which this "
             "CPU lacks; build it with TOPLU_NATIVE off to run on any x86-64", isa);
  }
  return TOPLU_ERR_UNSUPPORTED;
}
