// The adversarial suite's harness: a registry of named cases in categories, each run in
// a forked child process (a crash, a hang or a sanitizer report is a misbehaviour of the
// case that caused it, and the run goes on), and the counts printed at the end:
// "tried N, clean N, misbehaved N". A case calls cgrt through the public headers only and
// reports what it saw through its Ctx: every expectation that does not hold is one
// misbehaviour, named by the case and saying what happened.
#ifndef CGRT_TESTS_ADVERSARIAL_HARNESS_H
#define CGRT_TESTS_ADVERSARIAL_HARNESS_H

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "cgrt/cgrt_runtime.h"

namespace adv {

// What a case is told and what it reports.
class Ctx {
 public:
  bool full = false;       // --full: the whole run, not the CI slice
  uint64_t seed = 1;       // --seed
  bool emulated = true;    // the driver the environment selects is the emulation
  std::string arg;         // generated cases: their spec

  // `got` must be one of `want`; a failure status must come with a non-empty
  // cgrt_last_error() (read here, so call this right after the call under test).
  // Returns true when both hold.
  bool expect(cgrt_status got, std::initializer_list<cgrt_status> want, const std::string &what);
  bool expect(cgrt_status got, const std::vector<cgrt_status> &want, const std::string &what);
  // The same for a status and message read earlier (e.g. inside a callback).
  bool expect_msg(cgrt_status got, const std::string &msg, const std::vector<cgrt_status> &want,
                  const std::string &what);
  bool expect_ok(cgrt_status got, const std::string &what) { return expect(got, {CGRT_SUCCESS}, what); }
  // A check of the case's own: false records `what` as a misbehaviour.
  bool check(bool ok, const std::string &what);
  void bad(const std::string &what);
  // The case does not apply here (stated reason); a skipped case is not counted as tried.
  void skip(const std::string &reason);
  // Device memory the case cannot free (e.g. a driver release call it made fail): the
  // runner's device-memory check is off for this case.
  void allow_device_leak() { device_leak_ok_ = true; }
  bool device_leak_ok() const { return device_leak_ok_; }

  const std::vector<std::string> &misbehaviours() const { return bad_; }
  const std::string &skip_reason() const { return skip_; }

 private:
  std::vector<std::string> bad_;
  std::vector<size_t> bad_count_;
  std::string skip_;
  bool device_leak_ok_ = false;
};

using CaseFn = std::function<void(Ctx &)>;

struct CaseOpts {
  int timeout_s = 60;          // per case, before sanitizer scaling; a case past it "hangs"
  const char *emu_only = nullptr;  // reason the case applies to the emulation only
};

// Registers a case "category/name". Categories print in the order of kCategories.
void add(const std::string &category, const std::string &name, CaseFn fn, CaseOpts opts = {});

// A category whose cases are computed at run time (in a child process, so that it may
// call cgrt): `plan` returns one spec per case (the case's name); each case then runs
// `run` with ctx.arg = its spec. The plan itself is a case named "plan" of the category.
void add_generator(const std::string &category, std::function<std::vector<std::string>(Ctx &)> plan, CaseFn run,
                   CaseOpts opts = {});

// Registers cases from a static initializer: `static Register r([] { add(...); });`.
struct Register {
  explicit Register(void (*f)()) { f(); }
};

// The status's name, e.g. "CGRT_ERROR_INVALID_ARGUMENT".
std::string name_of(cgrt_status st);

// Every registered case's full name (for the coverage check of public functions).
std::vector<std::string> case_names();

}  // namespace adv

#endif
