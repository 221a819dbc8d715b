/* The emulated driver table: every entry of CGRT_DRIVER_API filled with its
 * cgrt__emu_<symbol> implementation (a missing one is a link error, a wrong signature
 * an incompatible-pointer diagnostic). */
#include "runtime/emu/emu_internal.h"

#define EMU_DECLARE(sym, ver, req, params, args) CUresult cgrt__emu_##sym params;
CGRT_DRIVER_API(EMU_DECLARE)
#undef EMU_DECLARE

static const cgrt__driver g_emulated = {
    .name = "emulated",
    .is_emulated = 1,
#define EMU_ENTRY(sym, ver, req, params, args) .sym = cgrt__emu_##sym,
    CGRT_DRIVER_API(EMU_ENTRY)
#undef EMU_ENTRY
};

const cgrt__driver *cgrt__driver_emulated(void) { return &g_emulated; }
