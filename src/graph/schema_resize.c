/* graph/schema_resize.c - schemas of the resize family. */
#include "graph/schema.h"

const toplu_schema_t toplu_schemas_resize[] = {
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
};
