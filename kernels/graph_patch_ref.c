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

/* sites: cgrt__dpatch_site[] (any alignment); start: unsigned[] (any alignment). */
static void patch(const unsigned char *sites, const unsigned char *start, unsigned char *ring, unsigned cap,
                  unsigned slots) {
  cgrt__dpatch_ring *hdr = (cgrt__dpatch_ring *)(void *)ring;
  const unsigned q = hdr->consumed; /* one read on the GPU */
  const unsigned long long moved = hdr->moved;
  const unsigned last = (unsigned)moved;
  unsigned n = 0;
  const unsigned char *slot =
      ring + CGRT__DPATCH_HEADER + (size_t)(q % slots) * CGRT__DPATCH_SLOT_BYTES(cap);
  if (last == q + 1u)
    n = (unsigned)(moved >> 32); /* launch q is the latest with moves */
  else if (last - q - 1u < slots)
    memcpy(&n, slot, sizeof n); /* a later launch has moves too: the slot's count */
  if (n > cap) n = cap;
  for (unsigned j = 0; j < n; j++) {
    unsigned long long value;
    unsigned g, first, end;
    memcpy(&value, slot + 8 + 8 * (size_t)j, sizeof value);
    memcpy(&g, slot + 8 + 8 * (size_t)cap + 4 * (size_t)j, sizeof g);
    memcpy(&first, start + 4 * (size_t)g, sizeof first);
    memcpy(&end, start + 4 * (size_t)g + 4, sizeof end);
    for (unsigned i = first; i < end; i++) {
      cgrt__dpatch_site s;
      memcpy(&s, sites + (size_t)i * sizeof s, sizeof s);
      unsigned long long v = value + s.delta;
      /* Little-endian: a 4-byte site takes the low half. */
      if (cgrt__emu_graph_kernel_node_set_param != NULL)
        (void)cgrt__emu_graph_kernel_node_set_param(s.node, s.offset, &v, s.size);
    }
  }
  hdr->consumed = q + 1;
}

static void patch_ptr_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  (void)l;
  const unsigned char *sites, *start;
  unsigned char *ring;
  unsigned cap, slots;
  memcpy(&sites, p + off[0], sizeof sites);
  memcpy(&start, p + off[1], sizeof start);
  memcpy(&ring, p + off[2], sizeof ring);
  memcpy(&cap, p + off[3], sizeof cap);
  memcpy(&slots, p + off[4], sizeof slots);
  if (sites == NULL || ring == NULL || slots == 0) return;
  patch(sites, start, ring, cap, slots);
}

/* cgrt__dpatch_params_<class>: the same header for every class. */
static void patch_params_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  (void)l;
  const unsigned char *base = p + off[0];
  unsigned long long ring;
  unsigned cap, slots, sites_off;
  memcpy(&ring, base, sizeof ring);
  memcpy(&cap, base + 8, sizeof cap);
  memcpy(&slots, base + 12, sizeof slots);
  memcpy(&sites_off, base + 16, sizeof sites_off);
  if (ring == 0 || slots == 0) return;
  const unsigned char *table = base + CGRT__DPATCH_PARAMS_HEAD;
  patch(table + sites_off, table, (unsigned char *)(uintptr_t)ring, cap, slots);
}

#define CGRT__DPATCH_REF_ROW(name, bytes) {"cgrt_graph_patch_" #name, 1, {bytes}, patch_params_ref},
const cgrt__ref_kernel cgrt__ref_table_graph_patch[] = {
    {"cgrt_graph_patch", 5, {8, 8, 8, 4, 4}, patch_ptr_ref},
    CGRT__DPATCH_PARAM_CLASSES(CGRT__DPATCH_REF_ROW){0},
};
#undef CGRT__DPATCH_REF_ROW
