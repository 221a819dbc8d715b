/* Device-side patching (cgrt_graphs_options.device_patch).
 *
 * Host patching costs one cuGraphExecKernelNodeSetParams per moved kernel node. Here the
 * graph starts with a patch node (kernels/graph_patch.cu) and every kernel node that
 * points into a registered buffer (and every metadata node, for num_reqs) is made
 * device-updatable (CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, CUDA 12.4+) before
 * instantiation. The sites of those nodes, grouped by buffer, are written once into the
 * patch node's kernel parameters (the smallest size class that holds them; device memory
 * only for a table past the largest class). Before each launch the host writes the
 * groups that moved since the bucket's previous launch (buffer id and new address;
 * num_reqs) into that launch's slot of a mailbox in pinned memory: no driver call at all.
 * The patch node finds its launch number in the mailbox too (kernels/graph_patch.h),
 * reads its slot over the bus when something moved, and rewrites the nodes' parameters
 * on the device before they launch. So a bucket's device patching allocates no device
 * memory of its own. Memcpy/memset nodes and nodes in WHILE bodies keep host patching. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "graphs/graphs_internal.h"
#include "kernels/graph_patch.h"

cgrt_status gx_dpatch_launch(cgrt_graphs *set, CUstream s) {
  CUdeviceptr none = 0;
  unsigned cap = 0, slots = 0;
  void *args[5] = {&none, &none, &none, &cap, &slots}; /* a no-op until gx_dpatch_finish */
  return CGRT__CU(set->drv, cuLaunchKernel, (set->f_patch, 1, 1, 1, 256, 1, 1, 0, s, args, NULL),
                  CGRT_ERROR_DRIVER, "graph set: launching the patch kernel");
}

static int is_meta(const gx_exec *e, uint32_t k) {
  for (size_t i = 0; i < e->nmeta; i++)
    if (e->meta_k[i] == k) return 1;
  return 0;
}

cgrt_status gx_dpatch_mark(cgrt_graphs *set, gx_exec *e) {
  const cgrt__driver *drv = set->drv;
  e->dpatch = 0;
  if (set->f_patch == NULL || e->is_while) return CGRT_SUCCESS;
  size_t marked = 0;
  int found = 0;
  for (size_t i = 0; i < e->nk; i++) {
    if (e->knodes[i].p.func == set->f_patch) {
      e->patch_k = (uint32_t)i;
      found = 1;
      break;
    }
  }
  if (!found) return CGRT_SUCCESS;
  for (size_t i = 0; i < e->nk; i++) {
    gx_knode *k = &e->knodes[i];
    if (i == e->patch_k || k->in_body || (k->nsites == 0 && !is_meta(e, (uint32_t)i))) continue;
    CUlaunchAttributeValue v;
    memset(&v, 0, sizeof(v));
    v.deviceUpdatableKernelNode.deviceUpdatable = 1;
    const char *call = "cuGraphKernelNodeSetAttribute";
    CUresult r = drv->cuGraphKernelNodeSetAttribute(k->node, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v);
    if (r == CUDA_SUCCESS) {
      memset(&v, 0, sizeof(v));
      call = "cuGraphKernelNodeGetAttribute";
      r = drv->cuGraphKernelNodeGetAttribute(k->node, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v);
      if (r == CUDA_SUCCESS && v.deviceUpdatableKernelNode.devNode == NULL) r = CUDA_ERROR_NOT_SUPPORTED;
    }
    if (r != CUDA_SUCCESS) {
      for (size_t j = 0; j < i; j++) e->knodes[j].devnode = 0;
      if (marked == 0) {
        /* Nothing changed in the graph: this bucket patches on the host. */
        if (!set->dpatch_refused_logged) {
          cgrt__log(CGRT_LOG_INFO, "cgrt graphs: device patching unavailable (%s on kernel '%s'); "
                    "pointer-updated replay patches on the host", cgrt__curesult_name(r),
                    k->name ? k->name : "?");
          set->dpatch_refused_logged = 1;
        }
        return CGRT_SUCCESS;
      }
      cgrt__fail_cu(CGRT_ERROR_DRIVER, r, call, "making a kernel node device-updatable");
      cgrt__error_prefix("kernel node %zu (kernel '%s')", i, k->name ? k->name : "?");
      return CGRT_ERROR_DRIVER;
    }
    k->devnode = (uint64_t)(uintptr_t)v.deviceUpdatableKernelNode.devNode;
    marked++;
  }
  e->dpatch = marked > 0; /* else the patch node stays a no-op (its table pointer is NULL) */
  return CGRT_SUCCESS;
}

static const size_t class_bytes[GX_DPATCH_CLASSES] = {
#define GX_DPATCH_CLASS_BYTES(name, bytes) bytes,
    CGRT__DPATCH_PARAM_CLASSES(GX_DPATCH_CLASS_BYTES)
#undef GX_DPATCH_CLASS_BYTES
};

/* Sets the patch node's parameters in the executable: the table in the parameters of
 * the class kernel f (params: the packed struct), or the pointer kernel's. */
static CUresult set_patch_node(cgrt_graphs *set, gx_exec *e, CUfunction f, void **args) {
  CUDA_KERNEL_NODE_PARAMS p = e->knodes[e->patch_k].p;
  p.func = f;
  p.kernelParams = args;
  p.extra = NULL;
  return set->drv->cuGraphExecKernelNodeSetParams(e->exec, e->knodes[e->patch_k].node, &p);
}

cgrt_status gx_dpatch_finish(cgrt_graphs *set, gx_exec *e) {
  if (!e->dpatch) return CGRT_SUCCESS;
  const cgrt__driver *drv = set->drv;
  const size_t ngroups = set->nbuf + 1; /* buffers, then num_reqs */
  size_t n = 0;
  for (size_t i = 0; i < e->nsites; i++)
    if (e->sites[i].kind == GX_SITE_KPARAM && e->knodes[e->sites[i].node].devnode != 0) n++;
  for (size_t i = 0; i < e->nmeta; i++)
    if (e->knodes[e->meta_k[i]].devnode != 0) n++;
  /* The table: group starts, then (8-aligned) the sites. */
  const size_t start_bytes = ((ngroups + 1) * sizeof(uint32_t) + 7) & ~(size_t)7;
  const size_t site_bytes = n * sizeof(cgrt__dpatch_site);
  const size_t table = start_bytes + site_bytes;
  /* About 64 KB of slots: a bucket can have that many launches queued before a step
   * waits for the GPU to read the oldest. */
  uint32_t nslots = CGRT__DPATCH_MIN_SLOTS;
  while (nslots < CGRT__DPATCH_MAX_SLOTS && (size_t)nslots * 2 * CGRT__DPATCH_SLOT_BYTES(ngroups) <= 65536) nslots *= 2;
  const size_t ring_bytes = CGRT__DPATCH_HEADER + (size_t)nslots * CGRT__DPATCH_SLOT_BYTES(ngroups);
  /* The smallest parameter class that holds the table (kernels/graph_patch.h). */
  size_t cls = GX_DPATCH_CLASSES;
  for (size_t c = 0; c < GX_DPATCH_CLASSES; c++)
    if (set->f_patch_cls[c] != NULL && CGRT__DPATCH_PARAMS_HEAD + table <= class_bytes[c]) {
      cls = c;
      break;
    }
  /* One buffer: the class's parameter struct (header, then the table), or the table alone. */
  const size_t buf_bytes = cls < GX_DPATCH_CLASSES ? class_bytes[cls] : table;
  unsigned char *buf = (unsigned char *)calloc(1, buf_bytes ? buf_bytes : 1);
  e->dgroup_n = (uint32_t *)calloc(ngroups, sizeof(uint32_t));
  cgrt_status st = CGRT_SUCCESS;
  if (!buf || !e->dgroup_n) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: device patch table");
    goto out;
  }
  unsigned char *tab = cls < GX_DPATCH_CLASSES ? buf + CGRT__DPATCH_PARAMS_HEAD : buf;
  uint32_t *start = (uint32_t *)(void *)tab;
  cgrt__dpatch_site *sites = (cgrt__dpatch_site *)(void *)(tab + start_bytes);
  /* e->sites is grouped by buffer already (site_start); keep that order. */
  n = 0;
  for (size_t b = 0; b < set->nbuf; b++) {
    start[b] = (uint32_t)n;
    for (uint32_t i = e->site_start[b]; i < e->site_start[b + 1]; i++) {
      const gx_site *s = &e->sites[i];
      if (s->kind != GX_SITE_KPARAM) continue;
      const gx_knode *k = &e->knodes[s->node];
      if (k->devnode == 0) continue;
      sites[n].node = k->devnode;
      sites[n].delta = s->delta;
      sites[n].offset = s->offset; /* a word of any parameter, struct words too */
      sites[n].size = 8;
      n++;
    }
    e->dgroup_n[b] = (uint32_t)n - start[b];
  }
  start[set->nbuf] = (uint32_t)n;
  for (size_t i = 0; i < e->nmeta; i++) {
    const gx_knode *k = &e->knodes[e->meta_k[i]];
    if (k->devnode == 0) continue;
    sites[n].node = k->devnode;
    sites[n].delta = 0;
    sites[n].offset = k->offsets[CGRT__META_NUM_REQS]; /* kernels/graph_meta.h */
    sites[n].size = CGRT__META_NUM_REQS_BYTES;
    n++;
  }
  e->dgroup_n[set->nbuf] = (uint32_t)n - start[set->nbuf];
  start[ngroups] = (uint32_t)n;
  e->dcap = (uint32_t)ngroups;
  st = CGRT__CU(drv, cuMemAllocHost, ((void **)&e->ring, ring_bytes), CGRT_ERROR_DRIVER,
                "graph set: device patch mailbox (pinned)");
  if (st != CGRT_SUCCESS) goto out;
  e->pinned_bytes = ring_bytes;
  memset(e->ring, 0, ring_bytes); /* consumed = 0: the next launch is launch 0 */
  ((cgrt__dpatch_ring *)(void *)e->ring)->cap = e->dcap;
  ((cgrt__dpatch_ring *)(void *)e->ring)->stride = CGRT__DPATCH_SLOT_BYTES(ngroups);
  ((cgrt__dpatch_ring *)(void *)e->ring)->slots = nslots;
  e->dslots = nslots;
  e->launches = 0;
  const unsigned long long ring = (unsigned long long)(uintptr_t)e->ring; /* unified addressing */
  unsigned cap = e->dcap, slots = e->dslots;
  if (cls < GX_DPATCH_CLASSES) {
    /* The table travels in the patch node's parameters: no device memory. */
    const unsigned hdr[4] = {cap, slots, (unsigned)start_bytes, (unsigned)n};
    memcpy(buf, &ring, 8);
    memcpy(buf + 8, hdr, sizeof hdr);
    void *args[1] = {buf};
    CUresult r = set_patch_node(set, e, set->f_patch_cls[cls], args);
    if (r == CUDA_SUCCESS) {
      e->param_bytes = class_bytes[cls];
      goto out;
    }
    /* A driver that refuses the class kernel here: the table goes to device memory. */
    if (!set->dpatch_params_refused_logged) {
      cgrt__log(CGRT_LOG_INFO, "cgrt graphs: the patch node's parameters refused (%s, %zu bytes); device patch "
                "tables go to device memory", cgrt__curesult_name(r), class_bytes[cls]);
      set->dpatch_params_refused_logged = 1;
    }
    memmove(buf, tab, table);
    tab = buf;
  }
  /* Too large for the parameters: the table in device memory, counted in table_bytes. */
  st = CGRT__CU(drv, cuMemAlloc, (&e->dmem, table), CGRT_ERROR_DRIVER, "graph set: device patch table");
  if (st != CGRT_SUCCESS) goto out;
  e->table_bytes = table;
  st = CGRT__CU(drv, cuMemcpyHtoD, (e->dmem, tab, table), CGRT_ERROR_DRIVER, "graph set: device patch table");
  if (st == CGRT_SUCCESS) {
    CUdeviceptr dsites = e->dmem + start_bytes, dstarts = e->dmem;
    CUdeviceptr dring = (CUdeviceptr)ring;
    void *args[5] = {&dsites, &dstarts, &dring, &cap, &slots};
    CUresult r = set_patch_node(set, e, set->f_patch, args);
    if (r != CUDA_SUCCESS)
      st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphExecKernelNodeSetParams", "setting up the patch node");
  }
out:
  free(buf);
  return st;
}

/* The mailbox slot of the bucket's next launch, once the GPU has read what it held
 * (*out NULL on failure). */
static cgrt_status next_slot(cgrt_graphs *set, gx_exec *e, unsigned char **out) {
  volatile cgrt__dpatch_ring *hdr = (volatile cgrt__dpatch_ring *)(void *)e->ring;
  *out = NULL;
  /* This launch's slot was last read by launch (launches - slots), if any: make sure the
   * GPU has taken it (only when that many launches of this bucket are queued). Spin a
   * little, then wait for the stream. */
  if (e->launches >= e->dslots) {
    for (int spin = 0; (uint32_t)((uint32_t)e->launches - hdr->consumed) >= e->dslots; spin++) {
      if (spin < (1 << 16)) {
        sched_yield();
        continue;
      }
      cgrt_status st = CGRT__CU(set->drv, cuStreamSynchronize, (set->stream), CGRT_ERROR_DRIVER,
                                "device patch: waiting for a free mailbox slot");
      if (st != CGRT_SUCCESS) return st;
      if ((uint32_t)((uint32_t)e->launches - hdr->consumed) >= e->dslots)
        return cgrt__fail(CGRT_ERROR_INTERNAL, "device patch: the GPU did not read the mailbox of %s bucket %d "
                          "rows (%u of %llu launches)", gx_mode_name(e), e->rows, hdr->consumed,
                          (unsigned long long)e->launches);
      break;
    }
  }
  *out = e->ring + CGRT__DPATCH_HEADER + (size_t)(e->launches % e->dslots) * CGRT__DPATCH_SLOT_BYTES(e->dcap);
  return CGRT_SUCCESS;
}

cgrt_status gx_dpatch_reserve(cgrt_graphs *set, gx_exec *e, unsigned launches) {
  if (!e->dpatch) return CGRT_SUCCESS;
  for (unsigned i = 0; i < launches; i++) {
    unsigned char *slot;
    cgrt_status st = next_slot(set, e, &slot);
    if (st != CGRT_SUCCESS) return st;
    *(volatile unsigned *)(void *)slot = 0; /* nothing to patch: the launch runs as the last step left it */
    e->launches++; /* moves not delivered yet stay pending for the next step */
  }
  return CGRT_SUCCESS;
}

cgrt_status gx_dpatch_before_launch(cgrt_graphs *set, gx_exec *e) {
  unsigned char *slot;
  cgrt_status st = next_slot(set, e, &slot);
  if (st != CGRT_SUCCESS) return st;
  unsigned long long *value = (unsigned long long *)(void *)(slot + 8);
  unsigned *group = (unsigned *)(void *)(slot + 8 + 8 * (size_t)e->dcap);
  unsigned n = 0;
  for (size_t i = 0; i < e->nmoved; i++) {
    const uint32_t b = e->moved[i];
    if (e->dgroup_n[b] == 0) continue;
    group[n] = b;
    value[n] = e->applied[b];
    n++;
  }
  if (e->reqs_moved && e->dgroup_n[set->nbuf] > 0) {
    group[n] = (unsigned)set->nbuf;
    value[n] = (unsigned long long)(unsigned)e->last_reqs;
    n++;
  }
  /* Plain stores: cuGraphLaunch orders them before the GPU reads the slot. */
  *(volatile unsigned *)(void *)slot = n;
  if (n > 0) {
    /* After the slot, before the launch, one 8-byte store: the patch node reads its slot
     * only when a launch at or after its own has moves (kernels/graph_patch.h). */
    ((cgrt__dpatch_ring *)(void *)e->ring)->moved = ((unsigned long long)n << 32) | (uint32_t)(e->launches + 1);
    set->st.device_patches++;
  }
  return CGRT_SUCCESS;
}

void gx_dpatch_launched(gx_exec *e) {
  e->launches++;
  e->nmoved = 0;
  e->reqs_moved = 0;
}

void gx_dpatch_free(cgrt_graphs *set, gx_exec *e) {
  if (e->dmem != 0) CGRT__CU_WARN(set->drv, cuMemFree, (e->dmem), "releasing a bucket's device patch table");
  if (e->ring != NULL) CGRT__CU_WARN(set->drv, cuMemFreeHost, (e->ring), "releasing a bucket's patch mailbox");
  e->dmem = 0;
  e->ring = NULL;
  e->dpatch = 0;
  e->table_bytes = e->pinned_bytes = e->param_bytes = 0;
}
