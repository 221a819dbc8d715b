/* The built-in reference tables, one per kernels/ source file that defines kernels.
 * Each table is an array of cgrt__ref_kernel ended by an entry whose name is NULL.
 * Add a line here when adding a kernels/<x>_ref.c file with a table. */
#ifndef CGRT_KERNELS_REF_TABLES_H
#define CGRT_KERNELS_REF_TABLES_H

#include "kernels/registry.h"

#define CGRT__REF_TABLES(X) \
  X(cgrt__ref_table_probe) \
  X(cgrt__ref_table_mla) \
  X(cgrt__ref_table_graph_meta) \
  X(cgrt__ref_table_graph_patch) \
  X(cgrt__ref_table_graph_launch) \
  X(cgrt__ref_table_dcp)

#define CGRT__REF_TABLE_DECL(t) extern const cgrt__ref_kernel t[];
CGRT__REF_TABLES(CGRT__REF_TABLE_DECL)
#undef CGRT__REF_TABLE_DECL

#endif
