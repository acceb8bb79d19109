/*
 * fuzz/libfuzzer_main.c - the libFuzzer entry point of one target, chosen
 * at compile time: -DFZ_TARGET=fz_model (fuzz-model), fz_npy, ...  With
 * -DFZ_MODEL_MUTATOR the structure-aware model mutator (fuzz/mutate.h) is
 * libFuzzer's custom mutator: 3 times in 4 it decodes the input as a
 * ModelProto and changes one field, falling back to libFuzzer's own byte
 * mutations when the input does not decode (a truncated file) or the
 * mutant does not fit in max_size.  See docs/reliability.md.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz.h"
#ifdef FZ_MODEL_MUTATOR
#include "mutate.h"
#endif

#ifndef FZ_TARGET
#error "define FZ_TARGET (the target function, e.g. fz_model)"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return FZ_TARGET(data, size); }

/* oneDNN keeps process-wide caches (primitive cache, JIT code) by design. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libdnnl\nleak:libgomp\n"; }

#ifdef FZ_MODEL_MUTATOR
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  if (seed % 4 != 0) {
    size_t n = fz_mutate_model(data, size, max_size, seed, NULL, 0);
    if (n) return n;
  }
  return LLVMFuzzerMutate(data, size, max_size);
}
#endif
