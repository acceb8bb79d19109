/*
 * quantize/proto.h - editing an unpacked ONNX ModelProto (protobuf-c) in
 * place, for toplu_quantize.
 *
 * The model is unpacked with the default allocator (malloc), so every field
 * added here is malloc'ed and onnx__model_proto__free_unpacked frees old and
 * new alike.  Removed nodes and initializers are freed and their slots set to
 * NULL; qp_compact closes the gaps.  Lookups are linear scans: the models
 * quantized have at most a few thousand nodes, and each pass is O(nodes x
 * edits) at worst.
 */
#ifndef TOPLU_QUANTIZE_PROTO_H
#define TOPLU_QUANTIZE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"
#include "toplu/status.h"
#include "toplu/tensor.h"

/* Index of the initializer named name, or -1. */
int qp_init_find(const Onnx__GraphProto *g, const char *name);
/* Index of the live node producing name, or -1. */
int qp_producer(const Onnx__GraphProto *g, const char *name);
/* Node inputs reading name plus graph outputs listing it; *only (may be
 * NULL) gets the reading node when exactly one node input reads it. */
int qp_readers(const Onnx__GraphProto *g, const char *name, int *only);
int qp_is_graph_output(const Onnx__GraphProto *g, const char *name);
int qp_is_graph_input(const Onnx__GraphProto *g, const char *name);
/* Is name a node output, initializer or graph input already? */
int qp_name_used(const Onnx__GraphProto *g, const char *name);
/* A malloc'ed name base + suffix not used yet (a counter appended if need be); NULL out of memory. */
/* 1 when a node of g is named name. */
int qp_node_name_used(const Onnx__GraphProto *g, const char *name);
char *qp_unique(const Onnx__GraphProto *g, const char *base, const char *suffix);

/* The attribute name of node n, or NULL. */
Onnx__AttributeProto *qp_attr(const Onnx__NodeProto *n, const char *name);
int64_t qp_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt);
/* Remove attribute name from n (freed); 1 if it was there. */
int qp_attr_remove(Onnx__NodeProto *n, const char *name);
/* Add (or replace) an INT or STRING attribute; 0 or -1 (out of memory). */
int qp_attr_set_int(Onnx__NodeProto *n, const char *name, int64_t v);
int qp_attr_set_string(Onnx__NodeProto *n, const char *name, const char *s);

/* Set input k of n (grown with "" when k >= n_input) to a copy of name; 0 or -1. */
int qp_set_input(Onnx__NodeProto *n, int k, const char *name);

/* A new node op_type(inputs) -> output (strings copied; NULL inputs are
 * ""), default domain; NULL out of memory.  Not yet in a graph. */
Onnx__NodeProto *qp_node_new(const char *op_type, const char *name, int n_in, const char *const *in, const char *out);
/* Append node to the graph; 0 or -1. */
int qp_node_append(Onnx__GraphProto *g, Onnx__NodeProto *node);
/* Free node i and leave its slot NULL (qp_compact removes it). */
void qp_node_remove(Onnx__GraphProto *g, int i);

/* A new initializer (name and data copied, little-endian raw_data) appended
 * to g; its index or -1 (out of memory). */
int qp_init_add(Onnx__GraphProto *g, const char *name, toplu_dtype_t dtype, int ndim, const int64_t *dims,
                const void *data, size_t bytes);
/* Replace initializer i's data with float data of the given dims (raw_data). 0 or -1. */
int qp_init_set_float(Onnx__TensorProto *t, int ndim, const int64_t *dims, const float *data);
/* Remove the graph input called name, if any (freed). */
void qp_input_remove(Onnx__GraphProto *g, const char *name);
/* Free initializer i (and a graph input of its name, as files of IR < 4 list them); its slot becomes NULL. */
void qp_init_remove(Onnx__GraphProto *g, int i);

/* Drop the NULL slots of nodes and initializers.  0 or -1. */
void qp_compact(Onnx__GraphProto *g);

/* A graph output of name, a float tensor of unknown shape, appended; 0 or -1. */
int qp_output_add(Onnx__GraphProto *g, const char *name);
/* Remove the graph outputs from index keep on (freed). */
void qp_outputs_truncate(Onnx__GraphProto *g, size_t keep);

#endif
