/* tools/toplu.c - the toplu command line. */
#include <stdio.h>
#include <string.h>

#include "toplu/toplu.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: toplu info MODEL\n");
    return 2;
  }
  toplu_model_t *m = NULL;
  toplu_error_t err;
  if (toplu_model_load(argv[2], NULL, &m, &err)) {
    fprintf(stderr, "toplu: %s\n", err.message);
    return 1;
  }
  for (int i = 0; i < toplu_model_input_count(m); i++) printf("input %s\n", toplu_model_input(m, i)->name);
  toplu_model_destroy(m);
  return 0;
}
