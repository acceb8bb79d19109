/*
 * fuzz/mutate.h - a structure-aware mutator for ONNX models.
 *
 * fz_mutate_model decodes the bytes as an onnx.ModelProto (protobuf-c, the
 * bindings the loader uses), changes one field the way an adversarial user
 * or a broken exporter would, and encodes it again:
 *   dim        a graph input/output/value_info dim: 0, -1, huge (2^31,
 *              2^62, INT64_MAX), +-1, a symbol, dropped or added
 *   init-dims  an initializer's (or a Constant's) dims: the same values,
 *              a dim dropped or added, so data and shape disagree
 *   attr       an attribute's int, ints element, float (NaN, Inf, huge),
 *              type, name, or the attribute dropped or added
 *   dtype      an initializer's data_type or a value's elem_type (0..23, 99)
 *   name       a node input or output renamed (another value, "", a new
 *              name), an input dropped or added, a graph input renamed
 *   op         a node's op type (another op, an unknown one) or domain
 *   init-size  raw_data cut or grown, typed data (float_data...) cut
 *   external   a tensor moved to external data: location (../, /etc/passwd,
 *              w..bin, itself, empty), offset and length (negative, huge,
 *              2^63-1, past the end), keys repeated or unknown
 *   graph      a node dropped, two nodes swapped, an initializer dropped,
 *              an output dropped, the opset or IR version changed
 * The result is written back into data (up to max_size bytes).  Returns the
 * new size, or 0 when the bytes do not decode as a model with a graph, or
 * the mutant would not fit: then data is unchanged and the caller mutates
 * bytes instead (fz_mutate_bytes).  desc (may be NULL) gets what was done
 * ("attr node[3] Conv 'group' i: 1 -> 4611686018427387904").  seed decides
 * everything: the same bytes and seed give the same mutant.  Thread-safe.
 */
#ifndef TOPLU_FUZZ_MUTATE_H
#define TOPLU_FUZZ_MUTATE_H

#include <stddef.h>
#include <stdint.h>

size_t fz_mutate_model(uint8_t *data, size_t size, size_t max_size, uint64_t seed, char *desc, size_t desc_size);

/* Byte-level mutation of a file: truncation (at a random point, or in the
 * last 64 bytes), 1-8 byte flips, a run of bytes set to 0x00/0xff, or a
 * block copied over another.  Returns the new size (<= size).  desc as above. */
size_t fz_mutate_bytes(uint8_t *data, size_t size, uint64_t seed, char *desc, size_t desc_size);

#endif
