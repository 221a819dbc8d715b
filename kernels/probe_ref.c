/* Reference of kernels/probe.cu: cgrt_probe(int *out, int value) writes value + i to
 * out[i] for every thread i of the grid. The runtime launches it at creation to check
 * that the embedded code runs on the device. */
#include <stdint.h>

#include "kernels/ref_tables.h"

static void probe_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  int *out = (int *)(uintptr_t)CGRT__REF_PARAM(uint64_t, p, off, 0);
  int value = CGRT__REF_PARAM(int, p, off, 1);
  unsigned n = l->grid[0] * l->block[0];
  for (unsigned i = 0; i < n; i++) out[i] = value + (int)i;
}

const cgrt__ref_kernel cgrt__ref_table_probe[] = {
    {"cgrt_probe", 2, {8, 4}, probe_ref},
    {0},
};
