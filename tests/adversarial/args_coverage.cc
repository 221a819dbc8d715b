// Every function the public headers declare has bad-argument cases (the "args" cases of
// args_*.cc are named "<function>/<what is wrong>").
#include <set>
#include <string>

#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

const char *const kPublicFunctions[] = {
#include "tests/adversarial/public_functions.inc"
};

void coverage_case() {
  A("every public function has bad-argument cases", [](Ctx &c) {
    std::set<std::string> covered;
    for (const std::string &n : case_names()) {
      if (n.compare(0, 5, "args/") != 0) continue;
      size_t slash = n.find('/', 5);
      if (slash != std::string::npos) covered.insert(n.substr(5, slash - 5));
    }
    size_t declared = 0;
    for (const char *f : kPublicFunctions) {
      declared++;
      c.check(covered.count(f) > 0, std::string(f) + " (declared in include/cgrt/) has no case in tests/adversarial");
    }
    c.check(declared >= 50, "only " + std::to_string(declared) + " public functions found in include/cgrt/*.h");
  });
}

Register reg([] {
  coverage_case();
});

}  // namespace
}  // namespace adv
