/*
 * plan/plan_report.h - formatting shared by the planner's and the tuner's
 * reports (toplu_batch_plan_json / toplu_batch_plan_print are public, in
 * toplu/planner.h).
 */
#ifndef TOPLU_PLAN_PLAN_REPORT_H
#define TOPLU_PLAN_PLAN_REPORT_H

#include <jansson.h>
#include <stddef.h>

#include "toplu/planner.h"

/* "12.3 MiB" (binary units) into buf; returns buf. */
const char *toplu__fmt_bytes(double bytes, char *buf, size_t size);

/* "45.2 GFLOP/s" style (decimal prefixes) into buf; returns buf. */
const char *toplu__fmt_rate(double v, const char *unit, char *buf, size_t size);

/* A device as a JSON object (new reference). */
json_t *toplu__device_json(const toplu_device_info_t *d);

/* toplu_batch_plan_json's object (new reference; NULL when out of memory). */
json_t *toplu__batch_plan_json_object(const toplu_batch_plan_t *p);

/* How plans are dumped: indented, keys in order, reals to 10 digits. */
#define TOPLU__PLAN_JSON_FLAGS (JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10))

#endif
