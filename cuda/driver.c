/*
 * Loading the Driver API table (see driver.h): dlopen libcuda.so.1, then
 * each entry by base name and ABI version through cuGetProcAddress, falling
 * back to dlsym of the versioned symbol.
 */
#include "cuda/driver.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* ---- Compile-time check of every entry's ABI -------------------------------
 * PFN_<name>_v<version> is NVIDIA's own type for the ABI introduced in that
 * version. If an entry's version or parameters are wrong, this fails to
 * compile, instead of cuGetProcAddress handing back a function of another
 * signature at run time. */
#define SLC__CHECK_ABI(name, sym, ver, params)                                \
  _Static_assert(                                                             \
      __builtin_types_compatible_p(__typeof__(((slc_driver *)0)->pfn_##name), \
                                   PFN_##name##_v##ver),                      \
      #name " does not have the ABI of " #sym " (CUDA " #ver ")");
SLC_DRIVER_ENTRIES(SLC__CHECK_ABI)
#undef SLC__CHECK_ABI

/* ---- Stubs ------------------------------------------------------------- */

/* One per entry, of the entry's own type, so that a call through a table
 * that is not loaded is well defined and returns an error. */
#define SLC__STUB(name, sym, ver, params)           \
  static CUresult CUDAAPI slc__stub_##name params { \
    return CUDA_ERROR_NOT_INITIALIZED;              \
  }
SLC_DRIVER_ENTRIES(SLC__STUB)
#undef SLC__STUB

typedef void (*slc__any_fn)(void);

struct slc__entry {
  const char *name;   /* base name, as given to cuGetProcAddress */
  const char *symbol; /* exported symbol of the ABI, for dlsym */
  int version;        /* CUDA version of the ABI */
  size_t offset;      /* of the member in slc_driver */
  slc__any_fn stub;
};

static const struct slc__entry slc__entries[] = {
#define SLC__ENTRY(name, sym, ver, params)             \
  {#name, #sym, ver, offsetof(slc_driver, pfn_##name), \
   (slc__any_fn)slc__stub_##name},
    SLC_DRIVER_ENTRIES(SLC__ENTRY)
#undef SLC__ENTRY
};

#define SLC__N_ENTRIES (sizeof(slc__entries) / sizeof(slc__entries[0]))

size_t slc_driver_entry_count(void) { return SLC__N_ENTRIES; }

const char *slc_driver_entry_name(size_t i) {
  return i < SLC__N_ENTRIES ? slc__entries[i].name : NULL;
}

bool slc_driver_entry_is_stub(const slc_driver *d, size_t i) {
  if (d == NULL || i >= SLC__N_ENTRIES) return false;
  slc__any_fn fn;
  /* Every member is a function pointer of the same representation. */
  memcpy(&fn, (const char *)d + slc__entries[i].offset, sizeof(fn));
  return fn == slc__entries[i].stub;
}

void slc_driver_init_unloaded(slc_driver *d) {
  memset(d, 0, sizeof(*d));
#define SLC__SET_STUB(name, sym, ver, params) d->pfn_##name = slc__stub_##name;
  SLC_DRIVER_ENTRIES(SLC__SET_STUB)
#undef SLC__SET_STUB
  snprintf(d->origin, sizeof(d->origin), "none");
}

/* cuGetProcAddress of CUDA >= 12.0 (5 arguments) and of 11.3 .. 11.8 (4). */
typedef CUresult(CUDAAPI *slc__gpa_v2_fn)(const char *, void **, int,
                                          cuuint64_t,
                                          CUdriverProcAddressQueryResult *);
typedef CUresult(CUDAAPI *slc__gpa_v1_fn)(const char *, void **, int,
                                          cuuint64_t);
typedef CUresult(CUDAAPI *slc__getver_fn)(int *);

struct slc__resolver {
  void *handle;
  slc__gpa_v2_fn gpa_v2;
  slc__gpa_v1_fn gpa_v1;
  size_t by_dlsym; /* entries cuGetProcAddress did not give */
};

/* The entry's function for its ABI version, or NULL. Legacy default-stream
 * semantics: the layer never uses stream 0, but the synchronous copies of
 * the settle paths rely on the legacy stream's implicit synchronisation
 * with blocking streams (see sl_cuda.h). */
static void *slc__resolve(struct slc__resolver *r, const struct slc__entry *e) {
  void *fn = NULL;
  if (r->gpa_v2 != NULL) {
    CUdriverProcAddressQueryResult status =
        CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (r->gpa_v2(e->name, &fn, e->version, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                  &status) != CUDA_SUCCESS ||
        status != CU_GET_PROC_ADDRESS_SUCCESS)
      fn = NULL;
  } else if (r->gpa_v1 != NULL) {
    if (r->gpa_v1(e->name, &fn, e->version,
                  CU_GET_PROC_ADDRESS_LEGACY_STREAM) != CUDA_SUCCESS)
      fn = NULL;
  }
  if (fn == NULL) {
    fn = dlsym(r->handle, e->symbol);
    if (fn != NULL) r->by_dlsym++;
  }
  return fn;
}

int slc_driver_load(slc_driver *d, const char *path) {
  slc_driver_init_unloaded(d);
  const char *lib = path != NULL ? path : "libcuda.so.1";
  (void)dlerror();
  void *handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char *why = dlerror();
    d->library_missing = true;
    snprintf(d->load_error, sizeof(d->load_error), "%s not found (%s)", lib,
             why != NULL ? why : "dlopen failed");
    return -1;
  }

  struct slc__resolver r = {.handle = handle};
  /* Not through the table yet: these two are how the table is filled.
   * dlsym returns an object pointer; POSIX guarantees the conversion. */
  r.gpa_v2 = (slc__gpa_v2_fn)dlsym(handle, "cuGetProcAddress_v2");
  if (r.gpa_v2 == NULL)
    r.gpa_v1 = (slc__gpa_v1_fn)dlsym(handle, "cuGetProcAddress");
  slc__getver_fn getver = (slc__getver_fn)dlsym(handle, "cuDriverGetVersion");
  int version = 0;
  if (getver == NULL || getver(&version) != CUDA_SUCCESS) version = 0;

  for (size_t i = 0; i < SLC__N_ENTRIES; i++) {
    const struct slc__entry *e = &slc__entries[i];
    void *fn = slc__resolve(&r, e);
    if (fn == NULL) {
      snprintf(d->load_error, sizeof(d->load_error),
               "%s: %s has no %s (CUDA %d.%d ABI) and no symbol %s; "
               "driver version %d",
               lib, e->name,
               r.gpa_v2 || r.gpa_v1 ? "entry" : "cuGetProcAddress",
               e->version / 1000, (e->version % 1000) / 10, e->symbol, version);
      dlclose(handle);
      char saved[sizeof(d->load_error)];
      memcpy(saved, d->load_error, sizeof(saved));
      slc_driver_init_unloaded(d);
      memcpy(d->load_error, saved, sizeof(saved));
      return -1;
    }
    slc__any_fn any = (slc__any_fn)fn;
    memcpy((char *)d + e->offset, &any, sizeof(any));
  }
  d->loaded = true;
  d->dl_handle = handle;
  d->driver_version = version;
  snprintf(d->origin, sizeof(d->origin), "%s (%s; %zu of %zu entries by dlsym)",
           lib,
           r.gpa_v2   ? "cuGetProcAddress_v2"
           : r.gpa_v1 ? "cuGetProcAddress"
                      : "dlsym only",
           r.by_dlsym, SLC__N_ENTRIES);
  return 0;
}

void slc_driver_unload(slc_driver *d) {
  if (d == NULL) return;
  if (d->dl_handle != NULL) dlclose(d->dl_handle);
  slc_driver_init_unloaded(d);
}
