/* graph/schema_conv.c - schemas of the conv family. */
#include "graph/schema.h"

const toplu_schema_t toplu_schemas_conv[] = {
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
};
