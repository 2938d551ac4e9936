/*
 * The run-time side of version.h: the numbers the library was compiled with.
 */
#include "ledger/version.h"

#define LDG__STR2(x) #x
#define LDG__STR(x) LDG__STR2(x)

int ldg_version(void) { return STREAMLEDGER_VERSION; }

const char *ldg_version_string(void) {
  return LDG__STR(STREAMLEDGER_VERSION_MAJOR) "." LDG__STR(
      STREAMLEDGER_VERSION_MINOR) "." LDG__STR(STREAMLEDGER_VERSION_PATCH);
}
