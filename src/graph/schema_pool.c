/* graph/schema_pool.c - schemas of the pool family. */
#include "graph/schema.h"

const toplu_schema_t toplu_schemas_pool[] = {
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
};
