/* graph/schema_quant.c - schemas of the quant family. */
#include "graph/schema.h"

const toplu_schema_t toplu_schemas_quant[] = {
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
};
