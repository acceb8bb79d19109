/* TEMPORARY until ops/ref/ref.c lands: an empty reference kernel table. */
#include "ops/kernel.h"
__attribute__((weak)) const toplu_kernel_t toplu_kernels_ref[] = {{.op_type = NULL}};
