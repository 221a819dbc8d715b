// Shared pieces of the adversarial cases: runtimes, handles that are not live (destroyed,
// foreign, misaligned), the keeper runtime of a child process, and device-memory
// accounting on the emulation. Public headers only.
#ifndef CGRT_TESTS_ADVERSARIAL_FIXTURE_H
#define CGRT_TESTS_ADVERSARIAL_FIXTURE_H

#include <cstddef>
#include <cstdint>
#include <string>

#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_workspace.h"
#include "tests/adversarial/harness.h"

namespace adv {

// The runtime every child process holds for its whole life (created before its first
// case): it keeps the primary context retained, so that the cases' own runtimes come and
// go cheaply on a GPU, and it answers the device-memory questions below. NULL when it
// could not be created (then every case misbehaves with the reason).
cgrt_runtime *keeper();
const std::string &keeper_error();
// The driver the environment selects (CGRT_DRIVER) is the CPU emulation.
bool keeper_emulated();
// Free device memory as the keeper's runtime reports it (0 on failure). On the emulation
// it is exact, so a case that frees all it made leaves it unchanged.
size_t device_free();

// A runtime on the driver the environment selects; NULL (with a misbehaviour recorded)
// on failure.
cgrt_runtime *new_runtime(Ctx &c, int fault_injection = 0);

// Handles that are not live. dead_*: made and destroyed again (the value stays, the
// object is gone; cgrt must not read it). foreign(): a block of junk that was never a
// handle of any kind (readable: 4 KiB of 0xA5 ending in a 0 byte, 64-byte aligned). misaligned(p): p + 1.
cgrt_runtime *dead_runtime(Ctx &c);
void *foreign();
template <class T>
T *misaligned(T *p) {
  return reinterpret_cast<T *>(reinterpret_cast<uintptr_t>(p) + 1);
}

// The four kinds of handle that are not live, and one of each given a live and a dead one.
enum Bad { B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED };
extern const char *const kBadNames[4];
template <class T>
T *bad_handle(Bad b, T *live, T *dead) {
  switch (b) {
    case B_NULL: return nullptr;
    case B_DEAD: return dead;
    case B_FOREIGN: return static_cast<T *>(foreign());
    case B_MISALIGNED: return misaligned(live);
  }
  return nullptr;
}

// One dense 1-D tensor.
cgrt_tensor_desc desc1(int64_t n, cgrt_dtype t);

}  // namespace adv

#endif
