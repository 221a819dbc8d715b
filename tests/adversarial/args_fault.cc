// Bad-argument cases of include/cgrt/cgrt_fault.h (fault injection).
#include <cstddef>
#include <cstring>
#include <string>

#include "cgrt/cgrt_fault.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

void fault_cases() {
  for (size_t size : {(size_t)0, (size_t)1, offsetof(cgrt_fault_plan, sticky)})
    A("cgrt_fault_set/plan->size " + std::to_string(size), [size](Ctx &c) {
      cgrt_fault_plan p;
      memset(&p, 0, sizeof p);
      p.size = size;
      c.expect(cgrt_fault_set(&p), {IA}, "cgrt_fault_set with size " + std::to_string(size));
    });
  A("cgrt_fault_set/NULL clears", [](Ctx &c) { c.expect_ok(cgrt_fault_set(nullptr), "cgrt_fault_set(NULL)"); });
  A("cgrt_fault_set/symbol of 100000 characters", [](Ctx &c) {
    std::string s(100000, 'c');
    cgrt_fault_plan p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.symbol = s.c_str();
    p.fail_at = 1;
    c.expect(cgrt_fault_set(&p), {OK, IA}, "cgrt_fault_set with a long symbol");
    World w(c, 1);  // no call has that name: nothing fails
    cgrt_fault_set(nullptr);
  });
  A("cgrt_fault_set/symbol that is a prefix of a driver call (\"cuMem\")", [](Ctx &c) {
    cgrt_fault_plan p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.symbol = "cuMem";
    p.fail_at = 1;
    p.sticky = 1;
    c.expect_ok(cgrt_fault_set(&p), "cgrt_fault_set(\"cuMem\")");
    World w(c, 1);  // must create: no call is named "cuMem"
    c.check(cgrt_fault_injected() == 0, "a plan for \"cuMem\" failed some other call");
    cgrt_fault_set(nullptr);
  });
  A("cgrt_fault_calls/counts nothing without a fault-injected runtime", [](Ctx &c) {
    c.expect_ok(cgrt_fault_set(nullptr), "cgrt_fault_set(NULL)");
    World w(c, 0);
    c.check(cgrt_fault_calls() == 0, "calls of a runtime without fault injection were counted");
  });
  A("cgrt_fault_injected/0 after a cleared plan", [](Ctx &c) {
    cgrt_fault_set(nullptr);
    World w(c, 1);
    c.check(cgrt_fault_injected() == 0, "faults injected without a plan");
  });
  A("cgrt_fault_last_symbol/never NULL", [](Ctx &c) {
    cgrt_fault_set(nullptr);
    const char *s = cgrt_fault_last_symbol();
    c.check(s != nullptr && s[0] == 0, "cgrt_fault_last_symbol() after a reset is not \"\"");
    World w(c, 1);
    s = cgrt_fault_last_symbol();
    c.check(s != nullptr && strncmp(s, "cu", 2) == 0, "cgrt_fault_last_symbol() does not name a driver call");
  });
}

Register reg([] {
  fault_cases();
});

}  // namespace
}  // namespace adv
