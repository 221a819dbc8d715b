/* C reference of kernels/graph_patch.cu (device-side patching of kernel nodes). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/graph_patch.h"
#include "kernels/ref_tables.h"

/* The emulation's device-side cudaGraphKernelNodeSetParam (runtime/emu/emu.h): writes
 * into the node of the executable graph that the calling thread is running. Weak, like
 * cgrt__emu_set_conditional in graph_meta_ref.c: a binary without the emulation never
 * runs these references. */
extern int cgrt__emu_graph_kernel_node_set_param(uint64_t node, size_t offset, const void *value,
                                                 size_t size) __attribute__((weak));

static void patch_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  (void)l;
  const cgrt__dpatch_site *sites;
  const unsigned *start;
  unsigned *launches;
  unsigned char *ring;
  unsigned cap, slots;
  memcpy(&sites, p + off[0], sizeof sites);
  memcpy(&start, p + off[1], sizeof start);
  memcpy(&launches, p + off[2], sizeof launches);
  memcpy(&ring, p + off[3], sizeof ring);
  memcpy(&cap, p + off[4], sizeof cap);
  memcpy(&slots, p + off[5], sizeof slots);
  if (sites == NULL || slots == 0) return;
  const unsigned q = (*launches)++;
  const unsigned char *slot =
      ring + CGRT__DPATCH_HEADER + (size_t)(q % slots) * CGRT__DPATCH_SLOT_BYTES(cap);
  unsigned n;
  memcpy(&n, slot, sizeof n);
  if (n > cap) n = cap;
  for (unsigned j = 0; j < n; j++) {
    unsigned long long value;
    unsigned g;
    memcpy(&value, slot + 8 + 8 * (size_t)j, sizeof value);
    memcpy(&g, slot + 8 + 8 * (size_t)cap + 4 * (size_t)j, sizeof g);
    for (unsigned i = start[g]; i < start[g + 1]; i++) {
      unsigned long long v = value + sites[i].delta;
      /* Little-endian: a 4-byte site takes the low half. */
      if (cgrt__emu_graph_kernel_node_set_param != NULL)
        (void)cgrt__emu_graph_kernel_node_set_param(sites[i].node, sites[i].offset, &v, sites[i].size);
    }
  }
  ((cgrt__dpatch_ring *)(void *)ring)->consumed = q + 1;
}

const cgrt__ref_kernel cgrt__ref_table_graph_patch[] = {
    {"cgrt_graph_patch", 6, {8, 8, 8, 8, 4, 4}, patch_ref},
    {0},
};
