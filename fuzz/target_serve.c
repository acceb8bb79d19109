/*
 * fuzz/target_serve.c - the serveconfig target: a model's configuration as
 * toplu serve reads it from a model repository (src/serve/config.c,
 * src/serve/pbtxt.c).  The bytes are read as config.json (srv_config_parse)
 * and as config.pbtxt (srv_pbtxt_to_json, then srv_config_parse on the JSON
 * it writes).  Traps when a failure has no message, when a converter error
 * does not name the line ("PATH: line L column C: ...") and when the
 * converter's JSON is not valid JSON.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "serve/config.h"
#include "serve/pbtxt.h"

#define MAX_INPUT_BYTES ((size_t)1 << 20)

static srv_config_t g_cfg; /* large: off the stack */

int fz_serveconfig(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT_BYTES) return 0;
  char err[1024];
  err[0] = 0;
  if (srv_config_parse((const char *)data, size, "m/config.json", &g_cfg, err, sizeof err)) fz_require_message(err);
  err[0] = 0;
  char *json = srv_pbtxt_to_json((const char *)data, size, "m/config.pbtxt", err, sizeof err);
  if (!json) {
    if (strncmp(err, "m/config.pbtxt: line ", 21) != 0 && !strstr(err, "out of memory")) __builtin_trap();
    return 0;
  }
  json_error_t je;
  json_t *v = json_loads(json, 0, &je);
  if (!v || !json_is_object(v)) __builtin_trap(); /* the converter writes one JSON object */
  json_decref(v);
  err[0] = 0;
  if (srv_config_parse(json, strlen(json), "m/config.pbtxt", &g_cfg, err, sizeof err)) {
    fz_require_message(err);
    if (strstr(err, "not valid JSON")) __builtin_trap();
  }
  free(json);
  return 0;
}
