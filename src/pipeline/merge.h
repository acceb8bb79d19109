/*
 * pipeline/merge.h - joining shard outputs (toplu_job_merge of toplu/pipeline.h).
 *
 * JSONL: the files concatenated.  CSV: the same, each header but the first
 * dropped (all must be equal).  SQLite: the rows of every shard's results
 * table inserted in rowid order into a new database with the first shard's
 * table definition, and a toplu_job state marked complete (shards whose
 * jobs wrote into a table of their own, sqlite_table, are refused).  Directories:
 * every .npy concatenated along dim 0 (same dtype and row shape) and
 * ids.txt concatenated.  The output is written beside its name and renamed
 * when complete.
 */
#ifndef TOPLU_PIPELINE_MERGE_H
#define TOPLU_PIPELINE_MERGE_H

#include "toplu/pipeline.h"

#endif
