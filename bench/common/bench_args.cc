// The benchmarks' command-line parser (see bench_args.h).
#include "bench/common/bench_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utility>

namespace cgrt_bench {

Args &Args::flag(const char *name, bool *out) {
  options_.push_back({name, false, [out](const char *) {
                        *out = true;
                        return true;
                      }});
  return *this;
}

Args &Args::value(const char *name, std::string *out) {
  options_.push_back({name, true, [out](const char *v) {
                        *out = v;
                        return true;
                      }});
  return *this;
}

Args &Args::value(const char *name, int *out) {
  options_.push_back({name, true, [out](const char *v) {
                        *out = atoi(v);
                        return true;
                      }});
  return *this;
}

Args &Args::value(const char *name, std::function<bool(const char *)> fn) {
  options_.push_back({name, true, std::move(fn)});
  return *this;
}

bool Args::parse(int argc, char **argv, Mode mode) const {
  for (int i = 1; i < argc; i++) {
    const Option *hit = nullptr;
    for (const Option &o : options_)
      if (o.name == argv[i] && (!o.takes_value || i + 1 < argc)) {
        hit = &o;
        break;
      }
    if (hit == nullptr) {
      if (mode == kLenient) continue;
      fprintf(stderr, "unknown argument %s\n", argv[i]);
      return false;
    }
    if (!hit->fn(hit->takes_value ? argv[++i] : nullptr)) return false;
  }
  return true;
}

std::vector<int> int_list(const char *text) {
  std::vector<int> v;
  for (const char *p = text; *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n) v.push_back(atoi(std::string(p, n).c_str()));
    p += n + (end ? 1 : 0);
  }
  return v;
}

}  // namespace cgrt_bench
