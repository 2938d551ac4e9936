/*
 * A program of the CUDA layer built against the installed tree: no driver is
 * needed to build or run it. Loading a driver that does not exist must fail
 * cleanly, with the loader's message, and leave a table whose every entry is
 * a stub; a context over that table must be refused with SLC_ENODRIVER and
 * the load error, not crash.
 */
#include <stdio.h>
#include <string.h>

#include "cuda/sl_cuda.h"

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "cuda consumer: FAILED %s (line %d)\n", #cond,         \
              __LINE__);                                                       \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(void) {
  CHECK(ldg_version() == STREAMLEDGER_VERSION);
  CHECK(slc_driver_entry_count() > 0);

  slc_driver d;
  CHECK(slc_driver_load(&d, "/nonexistent/libcuda.so.1") != 0);
  CHECK(!d.loaded && d.library_missing && strlen(d.load_error) > 0);
  for (size_t i = 0; i < slc_driver_entry_count(); i++)
    CHECK(slc_driver_entry_is_stub(&d, i));

  slc_context *c = NULL;
  CHECK(slc_context_create(&d, &c) == SLC_ENODRIVER);
  CHECK(strstr(slc_last_error_message(), "not found") != NULL);
  slc_driver_unload(&d);
  printf("cuda consumer: OK (%zu driver entries)\n", slc_driver_entry_count());
  return 0;
}
