/* ops/reduce.c - kernels of the reduce family. */
#include "ops/kernel.h"

const toplu_kernel_t toplu_kernels_reduce[] = {
    {NULL, NULL, NULL, NULL, NULL, 0},
};
