/* ops/matmul.c - kernels of the matmul family. */
#include "ops/kernel.h"

const toplu_kernel_t toplu_kernels_matmul[] = {
    {NULL, NULL, NULL, NULL, NULL, 0},
};
