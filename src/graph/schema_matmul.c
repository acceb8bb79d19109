/* graph/schema_matmul.c - schemas of the matmul family. */
#include "graph/schema.h"

const toplu_schema_t toplu_schemas_matmul[] = {
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
};
