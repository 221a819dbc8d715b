/* cgrt: the library's version.
 *
 * The shared library's soname carries the major version (libcgrt.so.1): it changes only
 * when the ABI of a public header breaks (a struct layout, a signature, a status value).
 * Minor versions add functions or struct fields at their end. */
#ifndef CGRT_VERSION_H
#define CGRT_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

#define CGRT_VERSION_MAJOR 1
#define CGRT_VERSION_MINOR 0
#define CGRT_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch */
#define CGRT_VERSION (CGRT_VERSION_MAJOR * 10000 + CGRT_VERSION_MINOR * 100 + CGRT_VERSION_PATCH)

/* The version of the library linked or loaded (CGRT_VERSION of its build), for hosts that
 * load libcgrt.so at run time and check that it matches the headers they were written
 * against. Thread-safe; may be called during capture. */
int cgrt_version(void);

#ifdef __cplusplus
}
#endif
#endif
