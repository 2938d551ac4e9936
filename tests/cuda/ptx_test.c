/*
 * ptx_test: the PTX embedded in kernels.c assembles for sm_90 with the
 * toolkit's ptxas (when one is installed here), so an edit that breaks it is
 * caught without a GPU. Skips (exit 0, saying so) without ptxas.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/cuda/kernels.h"

int main(void) {
  const char *ptxas = "/usr/local/cuda/bin/ptxas";
  if (access(ptxas, X_OK) != 0) {
    printf("SKIPPED: no %s\n", ptxas);
    return 0;
  }
  const char *tmp = getenv("TEST_TMPDIR");
  char path[512], out[512], cmd[1600];
  snprintf(path, sizeof(path), "%s/kernels.ptx", tmp ? tmp : "/tmp");
  snprintf(out, sizeof(out), "%s/kernels.cubin", tmp ? tmp : "/tmp");
  FILE *f = fopen(path, "w");
  if (f == NULL || fputs(slc_test_ptx, f) < 0 || fclose(f) != 0) {
    perror(path);
    return 1;
  }
  const char *archs[] = {"sm_90", "sm_100"};
  for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++) {
    snprintf(cmd, sizeof(cmd), "%s -arch=%s -o %s %s", ptxas, archs[i], out,
             path);
    int rc = system(cmd);
    printf("%s: %s\n", cmd, rc == 0 ? "ok" : "FAILED");
    if (rc != 0) return 1;
  }
  if (strstr(slc_test_ptx, ".version 7.8") == NULL) {
    printf("the PTX must stay at ISA 7.8 for older drivers\n");
    return 1;
  }
  return 0;
}
