/* ops/resize.c - kernels of the resize family. */
#include "ops/kernel.h"

const toplu_kernel_t toplu_kernels_resize[] = {
    {NULL, NULL, NULL, NULL, NULL, 0},
};
