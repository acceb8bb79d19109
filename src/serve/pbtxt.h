/*
 * serve/pbtxt.h - Triton's config.pbtxt (a ModelConfig in protobuf text
 * format) converted to the protobuf-JSON text that srv_config_parse reads,
 * so config.json and config.pbtxt are checked by one parser with the same
 * messages.
 *
 * Spec: protobuf text format, https://protobuf.dev/reference/protobuf/textformat-spec/
 * (fields `name: value` and `name { ... }` / `name: { ... }` / `name < ... >`,
 * lists `name: [a, b]` and `name [ {..}, {..} ]`, optional ',' or ';' after a
 * field, '#' comments, strings in double or single quotes with C escapes and
 * adjacent strings joined, decimal, octal and hex integers, floats with an
 * optional f suffix, bools true/True/t/false/False/f, enum values as
 * identifiers).  Text format has no schema of its own: one occurrence of a
 * repeated field reads like a singular one, and a map is written as repeated
 * { key: K value: V } entries.  The converter therefore carries the repeated
 * and map fields of Triton's model_config.proto (ModelConfig and the messages
 * under it) and writes those as JSON arrays and objects, as protobuf's JSON
 * mapping does:
 *   parameters { key: "k" value: { string_value: "v" } }  ->  "parameters": {"k": {"string_value": "v"}}
 *   dims: 3                                                ->  "dims": [3]
 * Also from the schema: 0 and 1 for the bool fields toplu reads become false
 * and true, and enum numbers of data_type, kind, format and timeout_action
 * become their names.  Map keys are JSON strings ("1" for priority level 1).
 * Integers beyond int64 are written as decimal strings (srv_config_parse
 * then names the field and value).  A non-repeated field given twice is an
 * error, as in protobuf; a list given to a field the schema does not know as
 * repeated becomes a JSON array (srv_config_parse names the field when it
 * wants a single value).  Extension and Any field names ([...]) are errors:
 * ModelConfig has neither.
 */
#ifndef TOPLU_SERVE_PBTXT_H
#define TOPLU_SERVE_PBTXT_H

#include <stddef.h>

/* Nesting and size limits of srv_pbtxt_to_json. */
#define SRV_PBTXT_MAX_DEPTH 32
#define SRV_PBTXT_MAX_VALUES 100000

/*
 * Convert len bytes of protobuf text (need not be NUL-terminated; NUL bytes
 * outside strings are errors) to compact JSON text.  path names the file in
 * messages only.  Returns a malloc'ed NUL-terminated string (the caller
 * frees it), or NULL with err holding "PATH: line L column C: WHAT" (line
 * and column 1-based, the column counting bytes) for a syntax error, a
 * string that is not UTF-8 after its escapes, a number out of range, a
 * non-repeated field or a map key given twice, nesting deeper than
 * SRV_PBTXT_MAX_DEPTH or more than SRV_PBTXT_MAX_VALUES values, or "PATH:
 * out of memory", or "PATH: over 1 GiB ..." for len > 1 GiB.  Never reads outside text[0..len).
 *
 * Pure function: thread-safe.
 */
char *srv_pbtxt_to_json(const char *text, size_t len, const char *path, char *err, size_t err_size);

#endif
