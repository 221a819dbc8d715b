// Bad-argument cases of include/cgrt/cgrt_status.h (statuses, messages, logging).
#include <climits>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "cgrt/cgrt_status.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

void status_cases() {
  A("cgrt_status_name/every status and values outside the list", [](Ctx &c) {
    std::set<std::string> seen;
    for (int s = 0; s <= CGRT_ERROR_INTERNAL; s++) {
      const char *n = cgrt_status_name((cgrt_status)s);
      if (!c.check(n != nullptr && strncmp(n, "CGRT_", 5) == 0, "status " + std::to_string(s) + " has no CGRT_ name"))
        continue;
      c.check(seen.insert(n).second, std::string("two statuses are named ") + n);
    }
    for (int s : {-1, (int)CGRT_ERROR_INTERNAL + 1, 1000, INT_MAX, INT_MIN}) {
      const char *n = cgrt_status_name((cgrt_status)s);
      c.check(n != nullptr && strcmp(n, "CGRT_STATUS_UNKNOWN") == 0,
              "cgrt_status_name(" + std::to_string(s) + ") is not CGRT_STATUS_UNKNOWN");
    }
  });
  A("cgrt_status_string/every status and values outside the list", [](Ctx &c) {
    for (int s : {0, 1, 7, (int)CGRT_ERROR_INTERNAL, -1, (int)CGRT_ERROR_INTERNAL + 1, INT_MAX, INT_MIN}) {
      const char *n = cgrt_status_string((cgrt_status)s);
      c.check(n != nullptr && n[0] != 0, "cgrt_status_string(" + std::to_string(s) + ") is NULL or empty");
    }
  });
  A("cgrt_last_error/empty on a thread without failures, set after one", [](Ctx &c) {
    std::string fresh = "?", after;
    std::thread t([&] {
      fresh = cgrt_last_error();
      cgrt_runtime_create(nullptr, nullptr);
      after = cgrt_last_error();
    });
    t.join();
    c.check(fresh.empty(), "a new thread's cgrt_last_error() is \"" + fresh + "\", not \"\"");
    c.check(!after.empty(), "cgrt_last_error() is empty after a failing call");
  });
  A("cgrt_set_log_callback/NULL callback and levels outside the enum", [](Ctx &c) {
    static int calls;
    calls = 0;
    auto fn = [](void *, cgrt_log_level, const char *m) { calls += m != nullptr; };
    cgrt_set_log_callback(nullptr, nullptr, (cgrt_log_level)99);
    cgrt_set_log_callback(fn, nullptr, (cgrt_log_level)-7);
    cgrt_set_log_callback(fn, nullptr, (cgrt_log_level)INT_MAX);
    World w(c);  // logs at INFO: must reach the sink without crashing
    cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
    c.check(w.rt != nullptr, "no runtime with a log sink at level INT_MAX");
  });
}

Register reg([] {
  status_cases();
});

}  // namespace
}  // namespace adv
