/*
 * plan/profiles.h - shape profiles against a model (the parsing and the
 * per-profile planner are public, in toplu/planner.h).
 */
#ifndef TOPLU_PLAN_PROFILES_H
#define TOPLU_PLAN_PROFILES_H

#include "toplu/model.h"
#include "toplu/planner.h"

/* Refuse what only the model shows to be wrong: a set in dim 0 of an input
 * whose dim 0 is the batch (plan and tune choose the batch; every profile
 * would be the same).  sp may be NULL or empty.  Errors:
 * TOPLU_ERR_INVALID_ARGUMENT ("shapes: x={1,2}x3: dim 0 is the batch ..."). */
toplu_status_t toplu__shape_profiles_check(const toplu_model_t *m, const toplu_shape_profiles_t *sp,
                                           toplu_error_t *err);

#endif
