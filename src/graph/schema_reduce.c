/* graph/schema_reduce.c - schemas of the reduce family. */
#include "graph/schema.h"

const toplu_schema_t toplu_schemas_reduce[] = {
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
};
