/*
 * toplu/toplu.h - the whole public API of libtoplu.
 *
 * toplu ("toplu çıkarım": batch inference) loads ONNX models, plans their
 * memory per batch size and runs them at any batch size on the CPU; the
 * planner and tuner answer which batch size to use.
 */
#ifndef TOPLU_TOPLU_H
#define TOPLU_TOPLU_H

#include "toplu/alloc.h"
#include "toplu/log.h"
#include "toplu/model.h"
#include "toplu/npy.h"
#include "toplu/perf.h"
#include "toplu/pipeline.h"
#include "toplu/planner.h"
#include "toplu/profile.h"
#include "toplu/quantize.h"
#include "toplu/serve.h"
#include "toplu/session.h"
#include "toplu/status.h"
#include "toplu/tensor.h"
#include "toplu/tuner.h"

/* TOPLU_VERSION_STRING and toplu_version(): toplu/status.h. */

#endif /* TOPLU_TOPLU_H */
