// The adversarial suite's runner (see harness.h): selects the cases, runs them in forked
// children, turns crashes, hangs, sanitizer reports, leaks and failed expectations into
// misbehaviours, and prints the counts.
//
// Usage: adversarial [--full] [--seed=N] [--only=PREFIX[,PREFIX...]] [--shard=K/N] [--list]
//                    [--no-fork]
//   (no flag)  the CI slice: every case, with bounded fault sweeps, threads and soak;
//   --full     every fault point in both modes, the 10^5-step soak, longer thread runs;
//   --only     cases whose "category/name" starts with one of the prefixes;
//   --shard    the K-th of N parts (by a hash of the case name; plans always run);
//   --no-fork  run in this process (a crash ends the run; for debuggers).
#include "tests/adversarial/harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_status.h"
#include "tests/adversarial/fixture.h"

#if defined(__SANITIZE_ADDRESS__)
#define ADV_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADV_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define ADV_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ADV_TSAN 1
#endif
#endif

extern "C" int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

// A huge size handed to malloc is a failure cgrt must handle (a NULL), not a sanitizer
// report: the library's answer (a status) is what the cases check.
extern "C" const char *__asan_default_options() { return "allocator_may_return_null=1"; }
extern "C" const char *__tsan_default_options() { return "allocator_may_return_null=1"; }

namespace adv {

namespace {

const char *const kCategories[] = {"args", "lifecycle", "fault", "threads", "soak"};

struct Case {
  std::string cat, name, arg;
  CaseFn fn;
  CaseOpts opts;
  int gen = -1;  // >= 0: the plan case of generator `gen`
};

struct Gen {
  std::string cat;
  std::function<std::vector<std::string>(Ctx &)> plan;
  CaseFn run;
  CaseOpts opts;
};

std::vector<Case> &cases() {
  static std::vector<Case> v;
  return v;
}
std::vector<Gen> &gens() {
  static std::vector<Gen> v;
  return v;
}

struct Options {
  bool full = false, list = false, fork = true;
  uint64_t seed = 1;
  std::vector<std::string> only;
  unsigned shard = 0, shards = 1;  // --shard=K/N: the cases whose name hashes to K mod N
};

std::string clip(std::string s, size_t n = 400) {
  for (char &ch : s)
    if (ch == '\n' || ch == '\r') ch = ' ';
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

int scale_timeout(int s) {
#if defined(ADV_TSAN)
  return s * 6;
#elif defined(ADV_ASAN)
  return s * 3;
#else
  return s;
#endif
}

void write_line(int fd, const std::string &line) {
  std::string l = line + "\n";
  const char *p = l.data();
  size_t n = l.size();
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

// New text of the child's stderr file since `*off`.
std::string read_new(const std::string &path, off_t *off) {
  std::string out;
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return out;
  char buf[8192];
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof buf, *off);
    if (n <= 0) break;
    out.append(buf, (size_t)n);
    *off += n;
  }
  close(fd);
  return out;
}

// The first sanitizer report in `text`: its headline and its SUMMARY line.
std::string sanitizer_report(const std::string &text) {
  static const char *const kMarks[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
                                       "ERROR: ThreadSanitizer", "runtime error:", "ERROR: UndefinedBehaviorSanitizer"};
  size_t best = std::string::npos;
  for (const char *m : kMarks) best = std::min(best, text.find(m));
  if (best == std::string::npos) return "";
  size_t bol = text.rfind('\n', best);
  bol = bol == std::string::npos ? 0 : bol + 1;
  std::string head = text.substr(bol, text.find('\n', best) - bol);
  size_t s = text.find("SUMMARY:", best);
  if (s != std::string::npos) head += " / " + text.substr(s, text.find('\n', s) - s);
  // Object paths (" (/.../libx.so+0x1234)") say less than the function after them.
  for (size_t p; (p = head.find(" (/")) != std::string::npos;) {
    size_t e = head.find(')', p);
    head.erase(p, e == std::string::npos ? std::string::npos : e - p + 1);
  }
  return clip(head, 500);
}

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

bool selected(const Options &o, const std::string &full_name, const std::string &cat, bool plan) {
  if (!plan && fnv1a(full_name) % o.shards != o.shard) return false;
  if (o.only.empty()) return true;
  for (const std::string &p : o.only) {
    if (full_name.compare(0, p.size(), p) == 0) return true;
    // A generator's plan runs when any of its generated cases may be wanted.
    if (plan && (p == cat || p.compare(0, cat.size() + 1, cat + "/") == 0)) return true;
  }
  return false;
}

std::string full_name(const Case &k) { return k.cat + "/" + k.name; }

// ---- one case, in whichever process runs it -------------------------------------------

struct Outcome {
  std::string kind;  // clean, bad, skip
  std::string text;
  std::vector<std::string> generated;
  double seconds = 0;
};

// LeakSanitizer now: "" or its report (ASan builds; reports every leak still present).
std::string leak_check(const std::string &errpath, off_t *erroff) {
  if (__lsan_do_recoverable_leak_check == nullptr || __lsan_do_recoverable_leak_check() == 0) return "";
  std::string rep = errpath.empty() ? "" : sanitizer_report(read_new(errpath, erroff));
  return "LeakSanitizer: host memory leaked" + (rep.empty() ? std::string() : ": " + rep);
}

Outcome run_one(const Case &k, const Options &o, const std::string &errpath, off_t *erroff) {
  Ctx c;
  c.full = o.full;
  c.seed = o.seed;
  c.arg = k.arg;
  Outcome out;
  cgrt_runtime *kp = keeper();
  c.emulated = keeper_emulated();
  if (kp == nullptr) {
    c.bad("the keeper runtime could not be created: " + keeper_error());
  } else if (k.opts.emu_only != nullptr && !c.emulated) {
    c.skip(std::string("emulation only: ") + k.opts.emu_only);
  } else {
    size_t free0 = c.emulated ? device_free() : 0;
    alarm((unsigned)scale_timeout(k.opts.timeout_s));
    if (k.gen >= 0)
      out.generated = gens()[(size_t)k.gen].plan(c);
    else
      k.fn(c);
    alarm(0);
    // Hygiene between cases, and what the case left behind.
    cgrt_fault_set(nullptr);
    cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
    if (c.skip_reason().empty()) {
      if (!errpath.empty()) {
        std::string rep = sanitizer_report(read_new(errpath, erroff));
        if (!rep.empty()) c.bad("sanitizer: " + rep);
      }
      if (c.emulated && !c.device_leak_ok()) {
        size_t free1 = device_free();
        if (free1 != free0)
          c.bad("device memory: " + std::to_string((long long)free0 - (long long)free1) +
                " bytes still allocated after the case (emulation's free memory before/after)");
      }
      cgrt_status st = cgrt_runtime_synchronize(kp);
      if (st != CGRT_SUCCESS)
        c.bad("after the case this thread cannot use cgrt: cgrt_runtime_synchronize -> " + name_of(st) + ": " +
              clip(cgrt_last_error()));
    }
  }
  if (!c.skip_reason().empty()) {
    out.kind = "skip";
    out.text = clip(c.skip_reason());
  } else if (!c.misbehaviours().empty()) {
    out.kind = "bad";
    for (size_t i = 0; i < c.misbehaviours().size(); i++) out.text += (i ? " ;; " : "") + clip(c.misbehaviours()[i]);
    out.text = clip(out.text, 4000);
  } else {
    out.kind = "clean";
  }
  return out;
}

// LeakSanitizer's check costs tens of milliseconds: a child checks after every
// kLeakBatch cases (and before it exits); when that finds a leak, the cases since the
// last clean check run again one per check ("isolate").
constexpr size_t kLeakBatch = 32;

// Child protocol, one line each: "H <driver>", "B <case>" (begun), "G <spec>" (a plan's
// generated case), "R <case> <clean|bad|skip> <text>", "L <case,case,...> <report>" (a
// leak among those cases), "D" (done).
[[noreturn]] void child_main(const std::vector<size_t> &list, size_t pos, int wfd, const std::string &errpath,
                             const Options &o, bool isolate) {
  off_t erroff = 0;
  // Whatever a report before the first case says belongs to no case: skip it.
  read_new(errpath, &erroff);
  write_line(wfd, std::string("H ") + (keeper() == nullptr ? "none" : keeper_emulated() ? "emulated" : "cuda"));
  std::vector<size_t> pending;
  for (; pos < list.size(); pos++) {
    const Case &k = cases()[list[pos]];
    write_line(wfd, "B " + std::to_string(list[pos]));
    Outcome out = run_one(k, o, errpath, &erroff);
    pending.push_back(list[pos]);
    // A fresh process after a misbehaviour (no state carries over) and after a plan
    // (the parent inserts the generated cases).
    bool last = out.kind == "bad" || k.gen >= 0 || pos + 1 == list.size();
    std::string leak;
    if (isolate || last || pending.size() >= kLeakBatch) {
      leak = leak_check(errpath, &erroff);
      if (!leak.empty() && (isolate || pending.size() == 1)) {
        out.text = out.kind == "bad" ? out.text + " ;; " + leak : leak;
        out.kind = "bad";
        leak.clear();
        last = true;
      }
    }
    for (const std::string &g : out.generated) write_line(wfd, "G " + clip(g, 1000));
    write_line(wfd, "R " + std::to_string(list[pos]) + " " + out.kind + " " + out.text);
    if (!leak.empty()) {
      std::string ids;
      for (size_t i : pending) ids += (ids.empty() ? "" : ",") + std::to_string(i);
      write_line(wfd, "L " + ids + " " + clip(leak, 600));
      _exit(0);
    }
    if (isolate || last || pending.size() >= kLeakBatch) pending.clear();
    if (last) _exit(0);
  }
  write_line(wfd, "D");
  _exit(0);
}

struct Tally {
  int tried = 0, clean = 0, bad = 0, skipped = 0;
  double seconds = 0;
};

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    int s = WTERMSIG(status);
    if (s == SIGALRM) return "hung: no result before its time limit (deadlock or livelock?)";
    return std::string("crashed: signal ") + std::to_string(s) + " (" + strsignal(s) + ")";
  }
  if (WIFEXITED(status)) return "the process exited with status " + std::to_string(WEXITSTATUS(status));
  return "the process ended abnormally";
}

void dump_file(const std::string &path, const std::string &why) {
  FILE *f = fopen(path.c_str(), "r");
  if (!f) return;
  char line[4096];
  int n = 0;
  bool header = false;
  while (fgets(line, sizeof line, f)) {
    if (!header) {
      fprintf(stderr, "---- stderr of the child process (%s) ----\n", why.c_str());
      header = true;
    }
    if (++n > 300) {
      fprintf(stderr, "... (cut)\n");
      break;
    }
    fputs(line, stderr);
  }
  if (header) fprintf(stderr, "---- end ----\n");
  fclose(f);
}

class Runner {
 public:
  explicit Runner(const Options &o) : o_(o) {
    const char *tmp = getenv("TEST_TMPDIR");
    errpath_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/adversarial_child_stderr." + std::to_string(getpid());
  }
  ~Runner() { unlink(errpath_.c_str()); }

  // Runs list[] (the main selection: generated cases are inserted into it).
  void run(std::vector<size_t> &list, bool isolate) {
    if (!o_.fork) return run_here(list);
    size_t pos = 0;
    while (pos < list.size()) pos = run_child(list, pos, isolate);
  }

  int report(double total_s) {
    std::map<std::string, Tally> tally;
    std::vector<std::string> bad_lines, skip_lines;
    for (const auto &kv : results_) {
      const Case &k = cases()[kv.first];
      const Outcome &r = kv.second;
      Tally &t = tally[k.cat];
      t.seconds += r.seconds;
      if (r.kind == "skip") {
        t.skipped++;
        skip_lines.push_back(full_name(k) + ": " + r.text);
        continue;
      }
      t.tried++;
      if (r.kind == "clean") {
        t.clean++;
      } else {
        t.bad++;
        bad_lines.push_back(full_name(k) + ": " + r.text);
      }
    }
    Tally all;
    printf("\n== adversarial suite: %s driver, %s, seed %llu, %.1f s\n", driver_.c_str(),
           o_.full ? "full run" : "CI slice (--full runs everything)", (unsigned long long)o_.seed, total_s);
    for (const char *cat : kCategories) {
      auto it = tally.find(cat);
      if (it == tally.end()) continue;
      const Tally &t = it->second;
      printf("%-10s tried %d, clean %d, misbehaved %d, skipped %d (%.1f s)\n", cat, t.tried, t.clean, t.bad,
             t.skipped, t.seconds);
      all.tried += t.tried, all.clean += t.clean, all.bad += t.bad, all.skipped += t.skipped;
    }
    if (!skip_lines.empty()) {
      printf("skipped (not counted as tried):\n");
      for (const std::string &l : skip_lines) printf("  SKIPPED %s\n", l.c_str());
    }
    if (!bad_lines.empty()) {
      printf("misbehaviours:\n");
      for (const std::string &l : bad_lines) printf("  MISBEHAVED %s\n", l.c_str());
    }
    printf("tried %d, clean %d, misbehaved %d\n", all.tried, all.clean, all.bad);
    fflush(stdout);
    return all.bad == 0 && all.tried > 0 ? 0 : 1;
  }

 private:
  const Options &o_;
  std::string errpath_, driver_ = "?";
  std::map<size_t, Outcome> results_;

  void record(size_t idx, Outcome r) {
    if (r.kind == "bad") {
      printf("MISBEHAVED %s: %s\n", full_name(cases()[idx]).c_str(), r.text.c_str());
      fflush(stdout);
    }
    results_[idx] = std::move(r);
  }

  // Inserts a plan's generated cases after position `at` of the main list.
  void insert_generated(std::vector<size_t> &list, size_t at, size_t plan_idx, const std::vector<std::string> &g) {
    const Gen &gen = gens()[(size_t)cases()[plan_idx].gen];
    std::vector<size_t> add_idx;
    for (const std::string &spec : g) {
      Case c2{gen.cat, spec, spec, gen.run, gen.opts, -1};
      if (!selected(o_, full_name(c2), gen.cat, false)) continue;
      cases().push_back(c2);
      add_idx.push_back(cases().size() - 1);
    }
    list.insert(list.begin() + (long)at, add_idx.begin(), add_idx.end());
  }

  void run_here(std::vector<size_t> &list) {
    off_t off = 0;
    for (size_t pos = 0; pos < list.size(); pos++) {
      auto t0 = std::chrono::steady_clock::now();
      Outcome out = run_one(cases()[list[pos]], o_, "", &off);
      out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (driver_ == "?") driver_ = keeper() == nullptr ? "none" : keeper_emulated() ? "emulated" : "cuda";
      std::vector<std::string> g = std::move(out.generated);
      size_t idx = list[pos];
      record(idx, std::move(out));
      if (!g.empty()) insert_generated(list, pos + 1, idx, g);
    }
  }

  // One child from list[pos]; returns where the next child starts.
  size_t run_child(std::vector<size_t> &list, size_t pos, bool isolate) {
    int fds[2];
    if (pipe(fds) != 0) {
      perror("pipe");
      exit(2);
    }
    int efd = open(errpath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      exit(2);
    }
    if (pid == 0) {
      close(fds[0]);
      if (efd >= 0) dup2(efd, 2);
      child_main(list, pos, fds[1], efd >= 0 ? errpath_ : "", o_, isolate);
    }
    close(fds[1]);
    if (efd >= 0) close(efd);
    FILE *in = fdopen(fds[0], "r");
    long cur = -1;  // case begun without a result
    size_t next = pos;
    bool any_bad = false;
    std::vector<std::string> generated;
    std::vector<size_t> rerun;
    std::string leak;
    auto t0 = std::chrono::steady_clock::now();
    auto advance_past = [&](size_t idx) {
      while (next < list.size() && list[next] != idx) next++;
      next++;
    };
    char *line = nullptr;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, in)) > 0) {
      std::string l(line, (size_t)len);
      if (!l.empty() && l.back() == '\n') l.pop_back();
      if (l.compare(0, 2, "H ") == 0) {
        driver_ = l.substr(2);
      } else if (l.compare(0, 2, "B ") == 0) {
        cur = atol(l.c_str() + 2);
        t0 = std::chrono::steady_clock::now();
      } else if (l.compare(0, 2, "G ") == 0) {
        generated.push_back(l.substr(2));
      } else if (l.compare(0, 2, "R ") == 0) {
        char *end = nullptr;
        size_t idx = strtoul(l.c_str() + 2, &end, 10);
        std::string rest = end && *end ? std::string(end + 1) : "";
        size_t sp = rest.find(' ');
        Outcome r;
        r.kind = rest.substr(0, sp);
        r.text = sp == std::string::npos ? "" : rest.substr(sp + 1);
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        any_bad |= r.kind == "bad";
        record(idx, std::move(r));
        cur = -1;
        advance_past(idx);
        if (!generated.empty() && !isolate) insert_generated(list, next, idx, generated);
        generated.clear();
      } else if (l.compare(0, 2, "L ") == 0) {
        size_t sp = l.find(' ', 2);
        std::string ids = l.substr(2, sp - 2);
        leak = sp == std::string::npos ? "LeakSanitizer" : l.substr(sp + 1);
        for (size_t p = 0; p < ids.size();) {
          size_t comma = ids.find(',', p);
          rerun.push_back(strtoul(ids.c_str() + p, nullptr, 10));
          p = comma == std::string::npos ? ids.size() : comma + 1;
        }
      }
    }
    free(line);
    fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    if (cur >= 0) {
      Outcome r;
      r.kind = "bad";
      r.text = describe_exit(status);
      off_t off = 0;
      std::string rep = sanitizer_report(read_new(errpath_, &off));
      if (!rep.empty()) r.text += "; " + rep;
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      record((size_t)cur, std::move(r));
      any_bad = true;
      advance_past((size_t)cur);
    } else if (next == pos) {
      // The child died before its first case (e.g. making the keeper runtime).
      Outcome r;
      r.kind = "bad";
      r.text = "the child process died before the case began: " + describe_exit(status);
      record(list[pos], std::move(r));
      any_bad = true;
      next = pos + 1;
    }
    if (any_bad) dump_file(errpath_, "misbehaviour above");
    if (!rerun.empty()) {
      // Which of these cases leaks: each again, alone, with a check after it.
      run(rerun, true);
      bool found = false;
      for (size_t i : rerun) found |= results_[i].text.find("LeakSanitizer") != std::string::npos;
      if (!found) {
        Outcome r = results_[rerun.back()];
        r.text = (r.kind == "bad" ? r.text + " ;; " : "") + leak + " (among cases run together; none leaks alone)";
        r.kind = "bad";
        record(rerun.back(), std::move(r));
      }
    }
    return next;
  }
};

int run_all(const Options &o) {
  std::vector<size_t> sel;
  for (const char *cat : kCategories)
    for (size_t i = 0; i < cases().size(); i++)
      if (cases()[i].cat == cat && selected(o, full_name(cases()[i]), cat, cases()[i].gen >= 0)) sel.push_back(i);
  if (o.list) {
    for (size_t i : sel) printf("%s\n", full_name(cases()[i]).c_str());
    return 0;
  }
  auto t_start = std::chrono::steady_clock::now();
  Runner r(o);
  r.run(sel, false);
  return r.report(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
}

}  // namespace

bool Ctx::expect(cgrt_status got, std::initializer_list<cgrt_status> want, const std::string &what) {
  return expect(got, std::vector<cgrt_status>(want), what);
}

bool Ctx::expect(cgrt_status got, const std::vector<cgrt_status> &want, const std::string &what) {
  return expect_msg(got, cgrt_last_error(), want, what);
}

bool Ctx::expect_msg(cgrt_status got, const std::string &msg, const std::vector<cgrt_status> &want,
                     const std::string &what) {
  bool in = false;
  for (cgrt_status w : want) in |= w == got;
  if (!in) {
    std::string exp;
    for (cgrt_status w : want) exp += (exp.empty() ? "" : " or ") + name_of(w);
    bad(what + ": returned " + name_of(got) + (got != CGRT_SUCCESS ? " (\"" + clip(msg, 200) + "\")" : "") +
        ", expected " + exp);
    return false;
  }
  if (got != CGRT_SUCCESS && msg.empty()) {
    bad(what + ": returned " + name_of(got) + " with an empty cgrt_last_error()");
    return false;
  }
  return true;
}

bool Ctx::check(bool ok, const std::string &what) {
  if (!ok) bad(what);
  return ok;
}

void Ctx::bad(const std::string &what) {
  // The same misbehaviour again (a loop, a thread): counted on its first report.
  for (size_t i = 0; i < bad_.size(); i++) {
    if (bad_[i] == what || bad_[i].compare(0, what.size() + 2, what + " (") == 0) {
      size_t n = bad_count_[i] = (bad_count_[i] ? bad_count_[i] : 1) + 1;
      bad_[i] = what + " (" + std::to_string(n) + " times)";
      return;
    }
  }
  bad_.push_back(what);
  bad_count_.push_back(0);
}

void Ctx::skip(const std::string &reason) { skip_ = reason; }

void add(const std::string &category, const std::string &name, CaseFn fn, CaseOpts opts) {
  cases().push_back(Case{category, name, "", std::move(fn), opts, -1});
}

void add_generator(const std::string &category, std::function<std::vector<std::string>(Ctx &)> plan, CaseFn run,
                   CaseOpts opts) {
  gens().push_back(Gen{category, std::move(plan), std::move(run), opts});
  CaseOpts plan_opts = opts;
  plan_opts.timeout_s = opts.timeout_s * 4;
  cases().push_back(Case{category, "plan", "", nullptr, plan_opts, (int)gens().size() - 1});
}

std::string name_of(cgrt_status st) { return cgrt_status_name(st); }

std::vector<std::string> case_names() {
  std::vector<std::string> v;
  for (const Case &k : cases()) v.push_back(full_name(k));
  return v;
}

}  // namespace adv

int main(int argc, char **argv) {
  adv::Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--full") {
      o.full = true;
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--no-fork") {
      o.fork = false;
    } else if (a.compare(0, 7, "--seed=") == 0) {
      o.seed = strtoull(a.c_str() + 7, nullptr, 10);
    } else if (a.compare(0, 8, "--shard=") == 0 &&
               sscanf(a.c_str() + 8, "%u/%u", &o.shard, &o.shards) == 2 && o.shards > 0 && o.shard < o.shards) {
    } else if (a.compare(0, 7, "--only=") == 0) {
      std::string s = a.substr(7);
      size_t p;
      while ((p = s.find(',')) != std::string::npos) {
        o.only.push_back(s.substr(0, p));
        s = s.substr(p + 1);
      }
      if (!s.empty()) o.only.push_back(s);
    } else {
      fprintf(stderr,
              "usage: %s [--full] [--seed=N] [--only=PREFIX[,PREFIX...]] [--shard=K/N] [--list] [--no-fork]\n"
              "  categories: args, lifecycle, fault, threads, soak\n",
              argv[0]);
      return 2;
    }
  }
  return adv::run_all(o);
}
