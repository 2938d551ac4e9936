/*
 * streamledger's version, at compile time (these macros) and at run time
 * (ldg_version), so that a program can tell which library it was built
 * against and which one it runs with.
 *
 * MAJOR changes with every incompatible change to the ABI, and with it the
 * shared library's soname (libstreamledger.so.MAJOR); MINOR adds API
 * compatibly; PATCH fixes without changing the API. CHANGELOG.md lists them.
 * This header is the one place the version is written: the install step reads
 * it for the shared library's name, the pkg-config and the CMake files.
 */
#ifndef STREAMLEDGER_VERSION_H
#define STREAMLEDGER_VERSION_H

#define STREAMLEDGER_VERSION_MAJOR 1
#define STREAMLEDGER_VERSION_MINOR 0
#define STREAMLEDGER_VERSION_PATCH 0

/* One number that compares: MAJOR * 10000 + MINOR * 100 + PATCH. */
#define STREAMLEDGER_VERSION                                                   \
  (STREAMLEDGER_VERSION_MAJOR * 10000 + STREAMLEDGER_VERSION_MINOR * 100 +     \
   STREAMLEDGER_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library linked at run time, as STREAMLEDGER_VERSION
 * encodes it; compare with the macro to detect a mismatched shared library.
 * Never blocks, takes no lock, runs nothing. */
int ldg_version(void);

/* The same as "MAJOR.MINOR.PATCH", static storage. Never NULL. */
const char *ldg_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_VERSION_H */
