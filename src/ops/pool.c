/* ops/pool.c - kernels of the pool family. */
#include "ops/kernel.h"

const toplu_kernel_t toplu_kernels_pool[] = {
    {NULL, NULL, NULL, NULL, NULL, 0},
};
