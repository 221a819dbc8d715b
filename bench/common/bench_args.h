// The benchmarks' command-line parser: each main names its options once (a flag, an
// option with a value) and parses argv with one loop.
//   cgrt_bench::Args a;
//   a.flag("--smoke", &smoke).value("--out", &out_path).value("--reps", &reps);
//   if (!a.parse(argc, argv, cgrt_bench::Args::kStrict)) return 2;
// An option named twice keeps the last value. An option that wants a value and stands
// last has none: it counts as an unknown argument.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace cgrt_bench {

class Args {
 public:
  // What parse does with an unknown argument: kStrict prints "unknown argument X" to
  // stderr and fails; kLenient passes over it.
  enum Mode { kStrict, kLenient };

  // --name without a value: sets *out to true.
  Args &flag(const char *name, bool *out);
  // --name VALUE: *out = VALUE.
  Args &value(const char *name, std::string *out);
  // --name VALUE: *out = atoi(VALUE) (0 where VALUE is not a number, as atoi).
  Args &value(const char *name, int *out);
  // --name VALUE: calls fn(VALUE); fn returns false (after printing why) to fail parse.
  Args &value(const char *name, std::function<bool(const char *)> fn);

  // Parses argv[1..argc-1]; false after a failed value or (kStrict) an unknown argument.
  bool parse(int argc, char **argv, Mode mode) const;

 private:
  struct Option {
    std::string name;
    bool takes_value;
    std::function<bool(const char *)> fn;
  };
  std::vector<Option> options_;
};

// "1,2,,3" -> {1, 2, 3}: the comma-separated integers (atoi each; empty items skipped).
std::vector<int> int_list(const char *text);

}  // namespace cgrt_bench
