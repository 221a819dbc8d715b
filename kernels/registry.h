/* The reference registry, as kernels/ and its tests see it. The registry and its
 * interface belong to runtime/ (runtime/ref_registry.h), below kernels/; kernels/ fills
 * its built-in tables (kernels/registry.c, from the list in kernels/ref_tables.h). */
#ifndef CGRT_KERNELS_REGISTRY_H
#define CGRT_KERNELS_REGISTRY_H

#include "runtime/ref_registry.h"

#endif
