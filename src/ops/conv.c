/* ops/conv.c - kernels of the conv family. */
#include "ops/kernel.h"

const toplu_kernel_t toplu_kernels_conv[] = {
    {NULL, NULL, NULL, NULL, NULL, 0},
};
