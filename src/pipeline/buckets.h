/*
 * pipeline/buckets.h - length buckets: rows of different sequence lengths
 * padded up to a few lengths, so that a chunk of mixed lengths runs as a few
 * batches instead of one batch per length, without padding everything to the
 * longest row (toplu_job_options_t.length_buckets).
 *
 * The sequence dim is the one symbolic dim besides the batch of the model's
 * per-row inputs (input_ids [batch, sequence], attention_mask [batch,
 * sequence]); every such input must name it alike.  A row of length L is
 * padded with zeros to the first bucket >= L: zero is BERT's and most
 * tokenizers' pad id and the masked value of an attention mask, so a model
 * with an attention mask gives its real positions the results of the
 * unpadded row (to float rounding).  Outputs whose dim after the batch is the
 * same symbol (last_hidden_state [batch, sequence, hidden]) are cut back to L
 * per row when written; other outputs (a pooled [batch, hidden]) are written
 * as they are.  A model without an attention mask input sees the padding as
 * tokens: length buckets are for models that mask.  A key padding mask
 * (PyTorch's src_key_padding_mask: an integer or bool input whose name holds
 * both "pad" and "mask", True where a position is padding) is padded with
 * ones instead; a float mask is padded with zeros and named in the note,
 * since zero masks a position only in a 1/0 mask (an additive mask, 0 to
 * attend and -inf to mask, would let the rows see the padding).  A row whose
 * sequence is empty fails (padding alone would give made-up results).
 */
#ifndef TOPLU_PIPELINE_BUCKETS_H
#define TOPLU_PIPELINE_BUCKETS_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/chunk.h"
#include "toplu/model.h"
#include "toplu/session.h"
#include "toplu/status.h"

/* Most buckets in an explicit list. */
#define PL_BUCKETS_MAX 64

typedef struct pl_buckets {
  int on;
  int64_t len[PL_BUCKETS_MAX]; /* ascending; n 0 with on: "auto", powers of two from 16 */
  int n;
  int *in_axis;           /* per model input: the row tensor's axis padded (sequence dim), -1 none */
  unsigned char *out_seq; /* per model output: 1 when its dim 1 is the sequence dim (cut back per row) */
  char symbol[64];        /* the sequence dim's name in the model */
  int has_mask;           /* a padded input is named like an attention mask */
  /* per model input: 0 padded with zeros; 1 an integer or bool mask named like a key padding mask
   * (PyTorch's src_key_padding_mask, True at padding), 2 another integer or bool mask (attention_mask, 1 at
   * tokens).  A mask's fill is read off each row's own values (pl_buckets_pad_row): a row all nonzero is
   * tokens marked 1, padded with 0; all zero is tokens marked 0, padded with 1 (for a name of kind 2: 0);
   * mixed, the row carries its own padding, and its last value is the fill. */
  unsigned char *in_pad_one;
} pl_buckets_t;

/*
 * Parse spec ("auto" or ascending lengths "16,32,64,128") and find the
 * sequence dim of model m.  in_whole[i] 1 marks inputs passed whole (not
 * padded).  NULL or "" spec: b->on 0.  note (may be NULL) gets a line for the
 * job's log when the model has no input named like an attention mask.
 * Errors, TOPLU_ERR_INVALID_ARGUMENT naming length_buckets: a bad list (not
 * a number, < 1, not ascending, more than PL_BUCKETS_MAX); no input with a
 * symbolic dim besides the batch; an input with two; inputs naming the dim
 * differently; an output whose sequence dim is not its dim 1 (of those in
 * `outputs`, bit j output j, bit 63 for 63 and above: the ones the job
 * writes or reads).  TOPLU_ERR_OUT_OF_MEMORY.  Free with pl_buckets_free.
 */
toplu_status_t pl_buckets_setup(pl_buckets_t *b, const char *spec, const toplu_model_t *m, const int *in_whole,
                                uint64_t outputs, char *note, size_t note_size, toplu_error_t *err);
/* The padded length of a row of length len: the first bucket >= len; beyond
 * an explicit list, the next multiple of its last length (16,32,64: a row
 * of 100 pads to 128). */
int64_t pl_buckets_pick(const pl_buckets_t *b, int64_t len);
/*
 * Pad row r's sequence inputs (n_in of them, model m) to their bucket and set
 * r->seq_len.  0, or -1 with why filled: the row's sequence inputs disagree
 * on the length, the sequence is empty, or out of memory.  Thread-safe on distinct rows.
 */
int pl_buckets_pad_row(const pl_buckets_t *b, pl_row_t *r, const toplu_model_t *m, int n_in, char *why,
                       size_t why_size);
void pl_buckets_free(pl_buckets_t *b);

/* Outputs whose dim 1 follows the padded sequence length though the model names it otherwise (torch's
 * export with dynamic axes on the inputs alone names it "Addlast_hidden_state_dim_1"), found by s's shape
 * inference at two lengths (inputs of zeros; whole inputs as given): they are marked out_seq, so their rows
 * are cut back too (before 2026-12-06 they were written padded, without a word).  Returns how many, their
 * names into names ("'a', 'b'").  Thread-safe as toplu_session_output_shapes. */
int pl_buckets_probe_outputs(pl_buckets_t *b, toplu_session_t *s, const toplu_model_t *m, const toplu_tensor_t *whole,
                             char *names, size_t names_size);

#endif
