/* ops/quant.c - kernels of the quant family. */
#include "ops/kernel.h"

const toplu_kernel_t toplu_kernels_quant[] = {
    {NULL, NULL, NULL, NULL, NULL, 0},
};
