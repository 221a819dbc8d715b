/* The built-in reference tables of kernels/ (kernels/ref_tables.h), handed to the
 * registry of runtime/ (runtime/ref_registry.h), which looks kernels up in them. */
#include "kernels/ref_tables.h"

const cgrt__ref_kernel *const cgrt__ref_builtin_tables[] = {
#define CGRT__REF_TABLE_PTR(t) t,
    CGRT__REF_TABLES(CGRT__REF_TABLE_PTR)
#undef CGRT__REF_TABLE_PTR
};

const size_t cgrt__ref_builtin_table_count = sizeof cgrt__ref_builtin_tables / sizeof cgrt__ref_builtin_tables[0];
