/* The library's version (include/cgrt/cgrt_version.h). */
#include "cgrt/cgrt_version.h"

int cgrt_version(void) { return CGRT_VERSION; }
