/*
 * tune/tune_report.h - writing a tune result (toplu_tune_json,
 * toplu_tune_write and toplu_tune_print are public, in toplu/tuner.h).
 * The plot is drawn by gnuplot (Debian package gnuplot-nox), run as a
 * subprocess on the data file and script the tuner writes.
 */
#ifndef TOPLU_TUNE_TUNE_REPORT_H
#define TOPLU_TUNE_TUNE_REPORT_H

#include "toplu/tuner.h"

#endif
