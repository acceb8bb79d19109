/* graph/schema_norm.c - schemas of the norm family. */
#include "graph/schema.h"

const toplu_schema_t toplu_schemas_norm[] = {
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
};
