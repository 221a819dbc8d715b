// The case of include/cgrt/cgrt_version.h: cgrt_version takes nothing, so its case checks
// the one thing it promises.
#include <string>

#include "cgrt/cgrt_version.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

void version_case() {
  A("cgrt_version/matches the headers and can be called before anything else", [](Ctx &c) {
    c.check(cgrt_version() == CGRT_VERSION, "cgrt_version() is " + std::to_string(cgrt_version()) +
                                                ", the headers say " + std::to_string(CGRT_VERSION));
  });
}

Register reg([] {
  version_case();
});

}  // namespace
}  // namespace adv
