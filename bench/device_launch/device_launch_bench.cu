// Device graph launch prototype: can a decode step start with no driver call on the host?
//
// Graph G: one spin kernel of D ms (clock64, one thread) followed by NODES tiny kernels
// (1 block of 32 threads, each adds 1 to a device counter element); the last one writes
// G's launch number to a host-mapped pinned word `done`. G is instantiated twice: Ga for
// host launches, Gd with cudaGraphInstantiateFlagDeviceLaunch for device launches.
//
// Modes (README.md in this folder says what each figure means):
//   host         per step: cudaGraphLaunch(Ga, stream) on the host (timed alone), then
//                poll `done`.
//   device       a scheduler graph S (device graph, one 1-thread kernel `launcher`) spins
//                on the host-mapped word `go`; when go passes its last seen value it
//                launches Gd fire-and-forget and tail-launches itself. Per step the host
//                only stores `go = n` (timed), then polls `done`.
//   device_tail  as device, but the launcher tail-launches Gd and then itself (Gd runs
//                after S returns, S again after Gd).
// Waits between steps: poll (busy), sleep (sleep 0.8 D, then poll), as host_wake.py.
//
// Timestamps: the spin kernel stores %globaltimer at its start, the last kernel before it
// writes `done`, the launcher when it sees `go`. They are converted to CLOCK_MONOTONIC
// through a ping-pong calibration before and after each row (calibrate() below).
//
//   device_launch_bench [--out PATH] [--iters N] [--nodes N] [--steps-ms 0,2.5,10,33]
//                       [--waits poll,sleep] [--modes host,device,device_tail]
//                       [--smoke] [--pin CORE] [--calib-rounds N] [--big-smem-kb KB]
//                       [--launcher-poll-ns NS]
// Statistics: median and p99 over all timed steps of a row (p99: nearest rank, as
// bench/model_decode/host_wake.py). JSON to --out, a table on stdout, progress on stderr.
#include <cuda_runtime.h>

#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

constexpr unsigned long long kQuit = ~0ull;
constexpr int kWarmup = 5;        // untimed steps before each row, as host_wake.py
constexpr int kGpuTimeReps = 20;  // event-timed host launches of Ga per D

// Host-mapped pinned memory (cudaHostAllocMapped), one 128-byte line per writer side.
struct Mapped {
  alignas(128) unsigned long long go;  // host -> launcher: step number, or kQuit
  alignas(128) unsigned long long done;  // G's last kernel -> host: G's launch number
  alignas(128) unsigned long long start_seq;  // G's spin kernel: launch number, %globaltimer, %smid
  unsigned long long start_gt;
  unsigned long long start_smid;
  unsigned long long end_gt;  // G's last kernel: %globaltimer right before `done`
  alignas(128) unsigned long long seen_go;  // launcher: the go value it acted on, and when
  unsigned long long seen_gt;
  unsigned long long launcher_runs;  // launcher instances started (each relaunch counts)
  unsigned long long launcher_smid;
  unsigned long long launcher_err;  // (where << 32) | cudaError_t of a failed device launch
  alignas(128) unsigned long long ping;  // calibration: host -> device
  alignas(128) unsigned long long pong;  // calibration: device -> host
  unsigned long long pong_gt;
  unsigned long long timer_step_ns;
  unsigned long long calib_timeout;
  alignas(128) unsigned long long probe_in;  // updatable probe: the value the patch kernel writes
  unsigned long long probe_out;  // the target kernel's parameter, as it ran
  unsigned long long probe_err;  // (where << 32) | cudaError_t of a device-side call
};

// Device memory.
struct Dev {
  unsigned long long seq;          // launches of G (spin kernel increments)
  unsigned long long spin_cycles;  // D in clock64 cycles
  unsigned long long last_go;      // launcher state: last go value acted on
  unsigned counter[32];
};

struct Probe {
  unsigned long long start, end;
  unsigned smid, pad;
};

// ---------------------------------------------------------------------------------------
// Device code.

__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned smid() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

// A load from host-mapped memory that sees the host's latest store (system scope).
__device__ __forceinline__ unsigned long long ld_acquire_sys(const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_vol(unsigned long long *p, unsigned long long v) {
  *reinterpret_cast<volatile unsigned long long *>(p) = v;
}

__device__ __forceinline__ void spin_for(long long cycles) {
  const long long c0 = clock64();
  while (clock64() - c0 < cycles) {
  }
}

// First node of G.
__global__ void spin_kernel(Dev *d, Mapped *m) {
  const unsigned long long g0 = gtimer();
  const unsigned long long n = d->seq + 1;
  d->seq = n;
  st_vol(&m->start_seq, n);
  st_vol(&m->start_gt, g0);
  st_vol(&m->start_smid, smid());
  __threadfence_system();
  spin_for(static_cast<long long>(d->spin_cycles));
}

// NODES - 1 of these follow the spin kernel.
__global__ void add_kernel(Dev *d) { d->counter[threadIdx.x] += 1u; }

// The last node: adds like the others, then publishes G's launch number.
__global__ void last_kernel(Dev *d, Mapped *m) {
  d->counter[threadIdx.x] += 1u;
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long n = d->seq;
    st_vol(&m->end_gt, gtimer());
    __threadfence_system();
    st_vol(&m->done, n);
    __threadfence_system();
  }
}

// Cycles-per-ms calibration (a plain launch, outside any graph).
__global__ void spin_only_kernel(long long cycles) { spin_for(cycles); }

// The scheduler graph's only node. kCarveMax: 1 = instantiated after setting the
// preferred shared-memory carveout to cudaSharedmemCarveoutMaxShared, 0 = default (two
// functions so that the attribute differs; the code is the same).
template <int kCarveMax>
__global__ void launcher(cudaGraphExec_t g, Dev *d, Mapped *m, int tail_g, unsigned poll_ns) {
  st_vol(&m->launcher_runs, *reinterpret_cast<volatile unsigned long long *>(&m->launcher_runs) + 1);
  st_vol(&m->launcher_smid, smid());
  const unsigned long long last = d->last_go;
  unsigned long long v;
  for (;;) {
    v = ld_acquire_sys(&m->go);
    if (v == kQuit) return;  // no relaunch: the stream's launch of S completes
    if (v > last) break;
    if (poll_ns) __nanosleep(poll_ns);
  }
  const unsigned long long seen = gtimer();
  d->last_go = v;
  st_vol(&m->seen_go, v);
  st_vol(&m->seen_gt, seen);
  __threadfence_system();
  cudaError_t e = cudaGraphLaunch(g, tail_g ? cudaStreamGraphTailLaunch : cudaStreamGraphFireAndForget);
  if (e != cudaSuccess) {
    st_vol(&m->launcher_err, (1ull << 32) | static_cast<unsigned>(e));
    __threadfence_system();
    return;
  }
  e = cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
  if (e != cudaSuccess) {
    st_vol(&m->launcher_err, (2ull << 32) | static_cast<unsigned>(e));
    __threadfence_system();
  }
}

// Clock calibration: for k = 1..rounds, wait for ping == base + k, store %globaltimer and
// pong = base + k. Then measure the smallest step of %globaltimer.
__global__ void calib_kernel(Mapped *m, unsigned long long base, int rounds, unsigned long long timeout_ns) {
  for (int k = 1; k <= rounds; ++k) {
    const unsigned long long want = base + static_cast<unsigned long long>(k);
    const unsigned long long t0 = gtimer();
    while (ld_acquire_sys(&m->ping) != want) {
      if (gtimer() - t0 > timeout_ns) {
        st_vol(&m->calib_timeout, 1);
        __threadfence_system();
        return;
      }
    }
    const unsigned long long g = gtimer();
    st_vol(&m->pong_gt, g);
    __threadfence_system();
    st_vol(&m->pong, want);
    __threadfence_system();
  }
  unsigned long long prev = gtimer(), step = ~0ull;
  const unsigned long long start = prev;
  int changes = 0;
  while (changes < 64 && gtimer() - start < 2000000ull) {
    const unsigned long long x = gtimer();
    if (x != prev) {
      step = x - prev < step ? x - prev : step;
      prev = x;
      ++changes;
    }
  }
  st_vol(&m->timer_step_ns, step);
  __threadfence_system();
}

// Co-residency probe: one CTA per SM with `big` bytes of dynamic shared memory, each
// spinning spin_ns and recording its SM and start time.
__global__ void big_smem_kernel(Probe *p, unsigned long long spin_ns) {
  extern __shared__ unsigned char smem[];
  smem[threadIdx.x] = static_cast<unsigned char>(threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long t0 = gtimer();
    while (gtimer() - t0 < spin_ns) {
    }
    p[blockIdx.x].start = t0;
    p[blockIdx.x].end = gtimer();
    p[blockIdx.x].smid = smid();
    p[blockIdx.x].pad = smem[1];
  }
}

// The updatable probe (--probe-updatable): can a graph with a device-updatable kernel
// node, patched by an earlier node of the same graph, be instantiated for device launch
// and launched from the device? P = upd_patch -> upd_target; upd_patch writes probe_in
// into upd_target's parameter `v`, upd_target stores v into probe_out.
__global__ void upd_target(Mapped *m, unsigned long long v) {
  st_vol(&m->probe_out, v);
  __threadfence_system();
}

__global__ void upd_patch(cudaGraphDeviceNode_t node, Mapped *m) {
  const unsigned long long v = ld_acquire_sys(&m->probe_in);
  const cudaError_t e = cudaGraphKernelNodeSetParam(node, sizeof(Mapped *), &v, sizeof v);
  if (e != cudaSuccess) {
    st_vol(&m->probe_err, (3ull << 32) | static_cast<unsigned>(e));
    __threadfence_system();
  }
}

// A one-shot device launcher: launches g fire-and-forget once.
__global__ void upd_oneshot(cudaGraphExec_t g, Mapped *m) {
  const cudaError_t e = cudaGraphLaunch(g, cudaStreamGraphFireAndForget);
  if (e != cudaSuccess) {
    st_vol(&m->probe_err, (4ull << 32) | static_cast<unsigned>(e));
    __threadfence_system();
  }
}

// ---------------------------------------------------------------------------------------
// Host side: state, errors, clocks.

struct State {
  Mapped *mh = nullptr;  // host view
  Mapped *md = nullptr;  // device view of the same memory
  Dev *dev = nullptr;
  Probe *probe = nullptr;
  cudaStream_t s = nullptr, s2 = nullptr;
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ga = nullptr, gd = nullptr;
  cudaGraph_t sg[3] = {nullptr, nullptr, nullptr};
  cudaGraphExec_t se[3] = {nullptr, nullptr, nullptr};  // [0] fnf default carveout, [1] fnf max, [2] tail max
  bool s_running = false;
  unsigned long long launches = 0;  // launches of G so far (host mirror of Dev::seq)
  unsigned long long ping = 0;
};
State st;

unsigned long long hload(const unsigned long long *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

// The whole host cost of a device-mode step: a release store, then a full fence so that the
// store leaves the store buffer before the host goes on.
void hstore(unsigned long long *p, unsigned long long v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

long long now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void sleep_ns(long long ns) {
  if (ns <= 0) return;
  timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000LL);
  ts.tv_nsec = static_cast<long>(ns % 1000000000LL);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

[[noreturn]] void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "device_launch_bench: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  // Best effort: let a running launcher return, so that the context tears down cleanly.
  if (st.mh) hstore(&st.mh->go, kQuit);
  std::exit(1);
}

#define CK(call)                                                                                  \
  do {                                                                                            \
    const cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) die("%s failed: %s (%s) at line %d", #call, cudaGetErrorString(e_),    \
                               cudaGetErrorName(e_), __LINE__);                                   \
  } while (0)

// ---------------------------------------------------------------------------------------
// Statistics.

struct Stat {
  bool ok = false;
  size_t n = 0;
  double p50 = 0, p99 = 0, max = 0, min = 0;
};

Stat stat_of(std::vector<double> v) {
  Stat s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.ok = true;
  s.n = v.size();
  const size_t n = v.size();
  s.p50 = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  const double idx = 0.99 * static_cast<double>(n - 1);
  s.p99 = v[std::min(n - 1, static_cast<size_t>(idx + 0.5))];
  s.max = v.back();
  s.min = v.front();
  return s;
}

std::string fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  va_list ap2;
  va_copy(ap2, ap);
  const int n = std::vsnprintf(nullptr, 0, f, ap);
  va_end(ap);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(&out[0], out.size() + 1, f, ap2);
  va_end(ap2);
  return out;
}

std::string json_str(const std::string &s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      o += fmt("\\u%04x", c);
    } else {
      o += c;
    }
  }
  return o + "\"";
}

std::string json_stat(const Stat &s) {
  if (!s.ok) return "null";
  return fmt("{\"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f, \"min\": %.3f, \"n\": %zu}", s.p50, s.p99, s.max,
             s.min, s.n);
}

// ---------------------------------------------------------------------------------------
// Clock calibration: %globaltimer against CLOCK_MONOTONIC.
//
// The host stores ping = k at t0 and spins until it sees pong = k at t1; the device read
// %globaltimer (g) after it saw ping and before it stored pong, so g was read at a host
// time inside [t0, t1]. offset = g - (t0 + t1) / 2 is then exact to +-(t1 - t0) / 2, plus
// the timer's step. Of `rounds` pings the one with the smallest t1 - t0 is kept.

struct Calib {
  long long host_ns = 0;  // (t0 + t1) / 2 of the kept ping
  long long offset_ns = 0;  // globaltimer - CLOCK_MONOTONIC
  long long rtt_ns = 0;  // t1 - t0 of the kept ping
  unsigned long long timer_step_ns = 0;
};

Calib calibrate(int rounds) {
  hstore(&st.mh->calib_timeout, 0);
  const unsigned long long base = st.ping;
  calib_kernel<<<1, 1, 0, st.s>>>(st.md, base, rounds, 2000000000ull);
  CK(cudaGetLastError());
  Calib best;
  best.rtt_ns = -1;
  for (int k = 1; k <= rounds; ++k) {
    const unsigned long long want = base + static_cast<unsigned long long>(k);
    const long long t0 = now_ns();
    hstore(&st.mh->ping, want);
    unsigned it = 0;
    while (hload(&st.mh->pong) != want) {
      if ((++it & 4095u) == 0 && (now_ns() - t0 > 3000000000LL || hload(&st.mh->calib_timeout)))
        die("clock calibration: no answer from the device to ping %d", k);
    }
    const long long t1 = now_ns();
    const long long g = static_cast<long long>(hload(&st.mh->pong_gt));
    if (best.rtt_ns < 0 || t1 - t0 < best.rtt_ns) {
      best.rtt_ns = t1 - t0;
      best.host_ns = t0 + (t1 - t0) / 2;
      best.offset_ns = g - best.host_ns;
    }
  }
  st.ping = base + static_cast<unsigned long long>(rounds);
  CK(cudaStreamSynchronize(st.s));
  best.timer_step_ns = hload(&st.mh->timer_step_ns);
  return best;
}

// globaltimer -> CLOCK_MONOTONIC, the offset interpolated linearly between two calibrations.
struct ClockMap {
  Calib a, b;
  long long offset_at(long long host_ns) const {
    if (b.host_ns == a.host_ns) return a.offset_ns;
    const double f = static_cast<double>(host_ns - a.host_ns) / static_cast<double>(b.host_ns - a.host_ns);
    return a.offset_ns + static_cast<long long>(f * static_cast<double>(b.offset_ns - a.offset_ns));
  }
  long long to_host(unsigned long long gt, long long near_host_ns) const {
    return static_cast<long long>(gt) - offset_at(near_host_ns);
  }
};

// ---------------------------------------------------------------------------------------
// Steps.

enum Mode { kHost = 0, kDevice = 1, kDeviceTail = 2 };
const char *const kModeName[] = {"host", "device", "device_tail"};
enum Wait { kPoll = 0, kSleep = 1 };
const char *const kWaitName[] = {"poll", "sleep"};

struct Options {
  std::string out = "device_launch.json";
  int iters = 200;
  int nodes = 330;
  std::vector<double> steps_ms = {0, 2.5, 10, 33};
  std::vector<int> waits = {kPoll, kSleep};
  std::vector<int> modes = {kHost, kDevice, kDeviceTail};
  bool smoke = false;
  bool probe_updatable = false;
  int pin = -1;
  int calib_rounds = 64;
  int big_smem_kb = 220;
  unsigned launcher_poll_ns = 0;
  std::string command;
};

struct Raw {
  long long t0, t1, t2;  // before the launch / store, after it, `done` observed
  unsigned long long start_seq, start_gt, end_gt, seen_go, seen_gt;
  unsigned long long expect, go;  // G's launch number and the go value of this step
};

// Polls `done` until it holds `expect`; dies after deadline_ns or a launcher error.
long long wait_done(unsigned long long expect, long long deadline_ns, bool device) {
  unsigned it = 0;
  for (;;) {
    const unsigned long long v = hload(&st.mh->done);
    if (v == expect) return now_ns();
    if ((++it & 1023u) == 0) {
      if (v > expect) die("done = %llu past the expected launch %llu", v, expect);
      if (device) {
        const unsigned long long e = hload(&st.mh->launcher_err);
        if (e)
          die("the launcher's device cudaGraphLaunch (%s) failed: %s", (e >> 32) == 1 ? "G" : "tail self-launch",
              cudaGetErrorString(static_cast<cudaError_t>(e & 0xffffffffu)));
      }
      if (now_ns() > deadline_ns) {
        const cudaError_t q = cudaStreamQuery(st.s);
        die("step %llu not done in time (done = %llu, stream: %s, launcher runs %llu)", expect, v,
            cudaGetErrorString(q), hload(&st.mh->launcher_runs));
      }
    }
  }
}

void wait_stream(cudaStream_t s, long long timeout_ns, const char *what) {
  const long long t0 = now_ns();
  for (;;) {
    const cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) die("%s: %s", what, cudaGetErrorString(q));
    if (now_ns() - t0 > timeout_ns) die("%s: the stream did not finish in %lld ms", what, timeout_ns / 1000000);
    sleep_ns(20000);
  }
}

// Starts scheduler graph i with the launcher state reset; returns once the launcher spins.
void start_scheduler(int i) {
  hstore(&st.mh->go, 0);
  hstore(&st.mh->launcher_err, 0);
  hstore(&st.mh->launcher_runs, 0);
  CK(cudaMemsetAsync(&st.dev->last_go, 0, sizeof(unsigned long long), st.s));
  CK(cudaStreamSynchronize(st.s));
  CK(cudaGraphLaunch(st.se[i], st.s));
  st.s_running = true;
  const long long t0 = now_ns();
  while (hload(&st.mh->launcher_runs) == 0) {
    if (now_ns() - t0 > 5000000000LL) die("the scheduler graph did not start in 5 s");
  }
}

void stop_scheduler() {
  hstore(&st.mh->go, kQuit);
  wait_stream(st.s, 10000000000LL, "scheduler shutdown");
  st.s_running = false;
  const unsigned long long e = hload(&st.mh->launcher_err);
  if (e)
    die("the launcher's device cudaGraphLaunch failed: %s", cudaGetErrorString(static_cast<cudaError_t>(e & 0xffffffffu)));
}

struct Row {
  int mode, wait;
  double step_ms, gpu_us;
  Stat host, step, span, submit, done_seen, store_seen, seen_start;
  int mismatches;
  long nonvol;
  Calib ca, cb;
};

long nonvol_switches() {
  rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nivcsw;
}

Row run_row(const Options &o, int mode, int wait, double d_ms, double gpu_us) {
  Row r{};
  r.mode = mode;
  r.wait = wait;
  r.step_ms = d_ms;
  r.gpu_us = gpu_us;
  r.ca = calibrate(o.calib_rounds);
  const bool device = mode != kHost;
  if (device) start_scheduler(mode == kDevice ? 1 : 2);
  const long long sleep_for = wait == kSleep ? static_cast<long long>(0.8 * d_ms * 1e6) : 0;
  const long long budget = 2000000000LL + static_cast<long long>(3 * d_ms * 1e6);
  std::vector<Raw> raw;
  raw.reserve(static_cast<size_t>(o.iters));
  const long sw0 = nonvol_switches();
  for (int i = 0; i < kWarmup + o.iters; ++i) {
    const unsigned long long expect = ++st.launches;
    Raw x{};
    if (device) {
      x.t0 = now_ns();
      hstore(&st.mh->go, static_cast<unsigned long long>(i + 1));
      x.t1 = now_ns();
    } else {
      x.t0 = now_ns();
      const cudaError_t e = cudaGraphLaunch(st.ga, st.s);
      x.t1 = now_ns();
      if (e != cudaSuccess) die("cudaGraphLaunch(Ga): %s", cudaGetErrorString(e));
    }
    sleep_ns(sleep_for);
    x.t2 = wait_done(expect, x.t0 + budget, device);
    x.start_seq = hload(&st.mh->start_seq);
    x.start_gt = hload(&st.mh->start_gt);
    x.end_gt = hload(&st.mh->end_gt);
    x.seen_go = hload(&st.mh->seen_go);
    x.seen_gt = hload(&st.mh->seen_gt);
    x.expect = expect;
    x.go = static_cast<unsigned long long>(i + 1);
    if (i >= kWarmup) raw.push_back(x);
  }
  r.nonvol = nonvol_switches() - sw0;
  if (device) stop_scheduler();
  r.cb = calibrate(o.calib_rounds);
  ClockMap cm{r.ca, r.cb};
  std::vector<double> host, step, span, submit, done_seen, store_seen, seen_start;
  int mism = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    const Raw &x = raw[i];
    host.push_back((x.t1 - x.t0) / 1e3);
    step.push_back((x.t2 - x.t0) / 1e3);
    // The stamps are this step's only if they carry its numbers; else they are left out.
    if (x.start_seq != x.expect || (device && x.seen_go != x.go)) {
      ++mism;
      continue;
    }
    span.push_back((static_cast<double>(x.end_gt) - static_cast<double>(x.start_gt)) / 1e3);
    submit.push_back((cm.to_host(x.start_gt, x.t0) - x.t0) / 1e3);
    done_seen.push_back((x.t2 - cm.to_host(x.end_gt, x.t2)) / 1e3);
    if (device) {
      store_seen.push_back((cm.to_host(x.seen_gt, x.t0) - x.t0) / 1e3);
      seen_start.push_back((static_cast<double>(x.start_gt) - static_cast<double>(x.seen_gt)) / 1e3);
    }
  }
  r.host = stat_of(host);
  r.step = stat_of(step);
  r.span = stat_of(span);
  r.submit = stat_of(submit);
  r.done_seen = stat_of(done_seen);
  r.store_seen = stat_of(store_seen);
  r.seen_start = stat_of(seen_start);
  r.mismatches = mism;
  return r;
}

std::string calib_json(const Row &r) {
  const double dt = static_cast<double>(r.cb.host_ns - r.ca.host_ns);
  const double drift_ppm = dt > 0 ? static_cast<double>(r.cb.offset_ns - r.ca.offset_ns) / dt * 1e6 : 0.0;
  const long long unc = std::max(r.ca.rtt_ns, r.cb.rtt_ns) / 2 +
                        static_cast<long long>(std::max(r.ca.timer_step_ns, r.cb.timer_step_ns));
  return fmt("{\"offset_before_ns\": %lld, \"offset_after_ns\": %lld, \"drift_ppm\": %.3f, "
             "\"rtt_min_before_ns\": %lld, \"rtt_min_after_ns\": %lld, \"timer_step_ns\": %llu, "
             "\"uncertainty_ns\": %lld}",
             r.ca.offset_ns, r.cb.offset_ns, drift_ppm, r.ca.rtt_ns, r.cb.rtt_ns, r.ca.timer_step_ns, unc);
}

std::string row_json(const Row &r) {
  const bool device = r.mode != kHost;
  std::string j = fmt("{\"mode\": \"%s\", \"step_ms\": %.3f, \"wait\": \"%s\", \"iters\": %zu, ", kModeName[r.mode],
                      r.step_ms, kWaitName[r.wait], r.step.n);
  j += device ? "\"host_trigger_us\": " : "\"host_launch_us\": ";
  j += json_stat(r.host);
  j += ", \"step_us\": " + json_stat(r.step);
  j += fmt(", \"gpu_us\": %.3f, \"step_minus_gpu_us_p50\": %.3f", r.gpu_us, r.step.p50 - r.gpu_us);
  j += ", \"gpu_span_us\": " + json_stat(r.span);
  j += ", \"submit_to_start_us\": " + json_stat(r.submit);
  j += ", \"done_to_seen_us\": " + json_stat(r.done_seen);
  if (device) {
    j += ", \"store_to_launcher_us\": " + json_stat(r.store_seen);
    j += ", \"launcher_to_start_us\": " + json_stat(r.seen_start);
  }
  j += fmt(", \"stamp_mismatches\": %d", r.mismatches);
  j += fmt(", \"nonvoluntary_switches\": %ld", r.nonvol);
  j += ", \"calib\": " + calib_json(r) + "}";
  return j;
}

// ---------------------------------------------------------------------------------------
// Setup.

void build_graphs(const Options &o) {
  // G by stream capture: spin, NODES - 1 adds, the last kernel.
  CK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeThreadLocal));
  spin_kernel<<<1, 1, 0, st.s>>>(st.dev, st.md);
  for (int i = 0; i < o.nodes - 1; ++i) add_kernel<<<1, 32, 0, st.s>>>(st.dev);
  last_kernel<<<1, 32, 0, st.s>>>(st.dev, st.md);
  CK(cudaGetLastError());
  CK(cudaStreamEndCapture(st.s, &st.g));
  CK(cudaGraphInstantiate(&st.ga, st.g, 0));
  CK(cudaGraphInstantiate(&st.gd, st.g, cudaGraphInstantiateFlagDeviceLaunch));
  CK(cudaGraphUpload(st.ga, st.s));
  CK(cudaGraphUpload(st.gd, st.s));
  // The scheduler graphs: one launcher kernel each, device-launch instantiated (it must be
  // a device graph for cudaGetCurrentGraphExec and the tail self-launch).
  CK(cudaFuncSetAttribute(launcher<1>, cudaFuncAttributePreferredSharedMemoryCarveout,
                          cudaSharedmemCarveoutMaxShared));
  for (int i = 0; i < 3; ++i) {
    CK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeThreadLocal));
    if (i == 0)
      launcher<0><<<1, 1, 0, st.s>>>(st.gd, st.dev, st.md, 0, o.launcher_poll_ns);
    else
      launcher<1><<<1, 1, 0, st.s>>>(st.gd, st.dev, st.md, i == 2 ? 1 : 0, o.launcher_poll_ns);
    CK(cudaGetLastError());
    CK(cudaStreamEndCapture(st.s, &st.sg[i]));
    CK(cudaGraphInstantiate(&st.se[i], st.sg[i], cudaGraphInstantiateFlagDeviceLaunch));
    CK(cudaGraphUpload(st.se[i], st.s));
  }
  CK(cudaStreamSynchronize(st.s));
}

// --probe-updatable: builds P (upd_patch -> upd_target, upd_target device-updatable),
// instantiates it for device launch, then launches it (a) from the host and (b) from the
// device through a one-shot launcher graph, each time with a new probe_in, and checks
// that upd_target ran with the patched value. Failures are recorded, not fatal.
std::string probe_updatable() {
  std::string res = "{";
  std::string fail;
  auto ok = [&](cudaError_t e, const char *what) {
    if (e == cudaSuccess) return true;
    if (fail.empty()) fail = fmt("%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    cudaGetLastError();
    return false;
  };
  cudaGraph_t g = nullptr, og = nullptr;
  cudaGraphExec_t ge = nullptr, oe = nullptr;
  cudaGraphNode_t np = nullptr, nt = nullptr;
  cudaGraphDeviceNode_t dn = nullptr;
  Mapped *mdp = st.md;
  unsigned long long zero = 0;
  bool instantiated = false, host_ok = false, device_ok = false;
  unsigned long long host_seen = 0, device_seen = 0;
  do {
    if (!ok(cudaGraphCreate(&g, 0), "cudaGraphCreate")) break;
    cudaKernelNodeParams kp = {};
    void *pargs[2] = {&dn, &mdp};
    kp.func = reinterpret_cast<void *>(upd_patch);
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(1);
    kp.kernelParams = pargs;
    if (!ok(cudaGraphAddKernelNode(&np, g, nullptr, 0, &kp), "add upd_patch")) break;
    void *targs[2] = {&mdp, &zero};
    kp.func = reinterpret_cast<void *>(upd_target);
    kp.kernelParams = targs;
    if (!ok(cudaGraphAddKernelNode(&nt, g, &np, 1, &kp), "add upd_target")) break;
    cudaLaunchAttributeValue av = {};
    av.deviceUpdatableKernelNode.deviceUpdatable = 1;
    if (!ok(cudaGraphKernelNodeSetAttribute(nt, cudaLaunchAttributeDeviceUpdatableKernelNode, &av),
            "set deviceUpdatable on upd_target"))
      break;
    cudaLaunchAttributeValue got = {};
    if (!ok(cudaGraphKernelNodeGetAttribute(nt, cudaLaunchAttributeDeviceUpdatableKernelNode, &got),
            "get devNode"))
      break;
    dn = got.deviceUpdatableKernelNode.devNode;
    kp.func = reinterpret_cast<void *>(upd_patch);
    kp.kernelParams = pargs;
    if (!ok(cudaGraphKernelNodeSetParams(np, &kp), "set upd_patch's devNode")) break;
    if (!ok(cudaGraphInstantiate(&ge, g, cudaGraphInstantiateFlagDeviceLaunch), "instantiate P for device launch"))
      break;
    instantiated = true;
    if (!ok(cudaGraphUpload(ge, st.s), "upload P")) break;
    // (a) host launch
    st.mh->probe_in = 0x1111;
    st.mh->probe_out = 0;
    if (!ok(cudaGraphLaunch(ge, st.s), "host launch of P")) break;
    if (!ok(cudaStreamSynchronize(st.s), "sync after host launch")) break;
    host_seen = hload(&st.mh->probe_out);
    host_ok = host_seen == 0x1111 && st.mh->probe_err == 0;
    // (b) device launch through a one-shot launcher graph
    if (!ok(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeThreadLocal), "capture launcher")) break;
    upd_oneshot<<<1, 1, 0, st.s>>>(ge, st.md);
    cudaGetLastError();
    if (!ok(cudaStreamEndCapture(st.s, &og), "end capture launcher")) break;
    if (!ok(cudaGraphInstantiate(&oe, og, cudaGraphInstantiateFlagDeviceLaunch), "instantiate launcher")) break;
    if (!ok(cudaGraphUpload(oe, st.s), "upload launcher")) break;
    if (!ok(cudaStreamSynchronize(st.s), "sync before device launch")) break;
    st.mh->probe_in = 0x2222;
    st.mh->probe_out = 0;
    if (!ok(cudaGraphLaunch(oe, st.s), "host launch of the one-shot launcher")) break;
    if (!ok(cudaStreamSynchronize(st.s), "sync after the launcher")) break;
    const long long t0 = now_ns();
    while (hload(&st.mh->probe_out) != 0x2222 && now_ns() - t0 < 2000000000ll) {
    }
    device_seen = hload(&st.mh->probe_out);
    device_ok = device_seen == 0x2222 && st.mh->probe_err == 0;
  } while (false);
  if (oe) cudaGraphExecDestroy(oe);
  if (og) cudaGraphDestroy(og);
  if (ge) cudaGraphExecDestroy(ge);
  if (g) cudaGraphDestroy(g);
  res += fmt("\"instantiated_for_device_launch\": %s, \"host_launch_patched\": %s, \"host_seen\": %llu, "
             "\"device_launch_patched\": %s, \"device_seen\": %llu, \"device_err\": %llu, \"first_failure\": %s}",
             instantiated ? "true" : "false", host_ok ? "true" : "false", host_seen, device_ok ? "true" : "false",
             device_seen, st.mh->probe_err, json_str(fail.empty() ? "none" : fail).c_str());
  return res;
}

double measure_cycles_per_ms() {
  std::vector<double> v;
  const long long cycles = 20000000;
  for (int i = 0; i < 4; ++i) {
    CK(cudaEventRecord(st.ev0, st.s));
    spin_only_kernel<<<1, 1, 0, st.s>>>(cycles);
    CK(cudaGetLastError());
    CK(cudaEventRecord(st.ev1, st.s));
    CK(cudaEventSynchronize(st.ev1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, st.ev0, st.ev1));
    if (i > 0) v.push_back(static_cast<double>(cycles) / ms);
  }
  return stat_of(v).p50;
}

// GPU time of G alone: events around a host launch of Ga, median of kGpuTimeReps.
double measure_gpu_us() {
  std::vector<double> v;
  for (int i = 0; i < kGpuTimeReps + 2; ++i) {
    const unsigned long long expect = ++st.launches;
    CK(cudaEventRecord(st.ev0, st.s));
    CK(cudaGraphLaunch(st.ga, st.s));
    CK(cudaEventRecord(st.ev1, st.s));
    CK(cudaEventSynchronize(st.ev1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, st.ev0, st.ev1));
    if (hload(&st.mh->done) != expect) die("done = %llu after a timed launch, %llu expected", hload(&st.mh->done), expect);
    if (i >= 2) v.push_back(ms * 1e3);
  }
  return stat_of(v).p50;
}

// Does a 1-CTA-per-SM kernel with big dynamic shared memory still get every SM while the
// launcher spins (waiting for go) on one of them? Scheduler graph i (0: default carveout,
// 1: max-shared carveout).
std::string coresidency(int i, size_t big_bytes, int sms) {
  start_scheduler(i);
  const unsigned long long spin_ns = 200000;
  CK(cudaMemsetAsync(st.probe, 0, sizeof(Probe) * static_cast<size_t>(sms), st.s2));
  big_smem_kernel<<<sms, 32, big_bytes, st.s2>>>(st.probe, spin_ns);
  CK(cudaGetLastError());
  wait_stream(st.s2, 10000000000LL, "co-residency kernel");
  const unsigned long long launcher_sm = hload(&st.mh->launcher_smid);
  stop_scheduler();
  std::vector<Probe> p(static_cast<size_t>(sms));
  CK(cudaMemcpy(p.data(), st.probe, sizeof(Probe) * p.size(), cudaMemcpyDeviceToHost));
  unsigned long long first = ~0ull, last = 0;
  std::vector<int> used(1024, 0);
  bool launcher_sm_used = false;
  for (const Probe &x : p) {
    first = std::min(first, x.start);
    last = std::max(last, x.start);
    if (x.smid < used.size()) used[x.smid] = 1;
    if (x.smid == launcher_sm) launcher_sm_used = true;
  }
  int distinct = 0, late = 0;
  for (int u : used) distinct += u;
  for (const Probe &x : p)
    if (x.start - first > spin_ns / 2) ++late;
  std::fprintf(stderr,
               "co-residency (launcher carveout %s): launcher on SM %llu, %d CTAs of %zu B shared on %d SMs, "
               "launcher's SM used: %s, start spread %.1f us, CTAs in a second wave: %d\n",
               i ? "max_shared" : "default", launcher_sm, sms, big_bytes, distinct, launcher_sm_used ? "yes" : "no",
               (last - first) / 1e3, late);
  return fmt("{\"launcher_carveout\": \"%s\", \"launcher_smid\": %llu, \"ctas\": %d, \"dynamic_smem_bytes\": %zu, "
             "\"cta_spin_us\": %.1f, \"distinct_sms\": %d, \"launcher_sm_used\": %s, \"start_spread_us\": %.3f, "
             "\"ctas_in_second_wave\": %d}",
             i ? "max_shared" : "default", launcher_sm, sms, big_bytes, spin_ns / 1e3, distinct,
             launcher_sm_used ? "true" : "false", (last - first) / 1e3, late);
}

std::vector<double> parse_doubles(const char *s) {
  std::vector<double> v;
  std::string t(s);
  size_t i = 0;
  while (i <= t.size()) {
    size_t j = t.find(',', i);
    if (j == std::string::npos) j = t.size();
    if (j > i) v.push_back(std::atof(t.substr(i, j - i).c_str()));
    i = j + 1;
  }
  return v;
}

std::vector<int> parse_names(const char *s, const char *const *names, int count, const char *what) {
  std::vector<int> v;
  std::string t(s);
  size_t i = 0;
  while (i <= t.size()) {
    size_t j = t.find(',', i);
    if (j == std::string::npos) j = t.size();
    const std::string w = t.substr(i, j - i);
    if (!w.empty()) {
      int k = 0;
      while (k < count && w != names[k]) ++k;
      if (k == count) die("unknown %s '%s'", what, w.c_str());
      v.push_back(k);
    }
    i = j + 1;
  }
  return v;
}

std::string shell_quote(const char *a) {
  const std::string s(a);
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=,:+") ==
                        std::string::npos)
    return s;
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command += (i ? " " : "") + shell_quote(argv[i]);
  bool iters_set = false, steps_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> const char * {
      if (i + 1 >= argc) die("%s wants a value", a.c_str());
      return argv[++i];
    };
    if (a == "--out") o.out = val();
    else if (a == "--iters") o.iters = std::atoi(val()), iters_set = true;
    else if (a == "--nodes") o.nodes = std::atoi(val());
    else if (a == "--steps-ms") o.steps_ms = parse_doubles(val()), steps_set = true;
    else if (a == "--waits") o.waits = parse_names(val(), kWaitName, 2, "wait");
    else if (a == "--modes") o.modes = parse_names(val(), kModeName, 3, "mode");
    else if (a == "--smoke") o.smoke = true;
    else if (a == "--probe-updatable") o.probe_updatable = true;
    else if (a == "--pin") o.pin = std::atoi(val());
    else if (a == "--calib-rounds") o.calib_rounds = std::atoi(val());
    else if (a == "--big-smem-kb") o.big_smem_kb = std::atoi(val());
    else if (a == "--launcher-poll-ns") o.launcher_poll_ns = static_cast<unsigned>(std::atoi(val()));
    else if (a == "-h" || a == "--help") {
      std::printf("usage: %s [--out PATH] [--iters N] [--nodes N] [--steps-ms 0,2.5,10,33] [--waits poll,sleep]\n"
                  "       [--modes host,device,device_tail] [--smoke] [--pin CORE] [--calib-rounds N]\n"
                  "       [--big-smem-kb KB] [--launcher-poll-ns NS] [--probe-updatable]\n",
                  argv[0]);
      std::exit(0);
    } else {
      die("unknown argument '%s' (--help lists them)", a.c_str());
    }
  }
  if (o.smoke) {
    if (!iters_set) o.iters = 10;
    if (!steps_set) o.steps_ms = {0};
  }
  if (o.iters < 1 || o.nodes < 1 || o.calib_rounds < 1 || o.steps_ms.empty() || o.waits.empty() || o.modes.empty())
    die("--iters, --nodes, --calib-rounds must be >= 1 and the lists non-empty");
  for (double d : o.steps_ms)
    if (d < 0) die("--steps-ms: %g is negative", d);
  return o;
}

std::string read_nvidia_driver() {
  FILE *f = std::fopen("/proc/driver/nvidia/version", "r");
  if (!f) return "unknown";
  char line[512] = {0};
  const bool got = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  if (!got) return "unknown";
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ..." or "... UNIX Open
  // Kernel Module for x86_64  580.159.04 ...": the first token after "Kernel Module"
  // that starts with a digit and holds a dot.
  const char *k = std::strstr(line, "Kernel Module");
  if (!k) return "unknown";
  k += std::strlen("Kernel Module");
  while (*k) {
    while (*k == ' ' || *k == '\t') ++k;
    std::string v;
    while (*k && *k != ' ' && *k != '\t' && *k != '\n') v += *k++;
    if (!v.empty() && v[0] >= '0' && v[0] <= '9' && v.find('.') != std::string::npos) return v;
    if (*k == '\n') break;
  }
  return "unknown";
}

std::string utc_now() {
  const time_t t = time(nullptr);
  tm g;
  gmtime_r(&t, &g);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &g);
  return buf;
}

void cleanup() {
  if (st.s_running) stop_scheduler();
  for (int i = 0; i < 3; ++i) {
    if (st.se[i]) cudaGraphExecDestroy(st.se[i]);
    if (st.sg[i]) cudaGraphDestroy(st.sg[i]);
  }
  if (st.gd) cudaGraphExecDestroy(st.gd);
  if (st.ga) cudaGraphExecDestroy(st.ga);
  if (st.g) cudaGraphDestroy(st.g);
  if (st.ev0) cudaEventDestroy(st.ev0);
  if (st.ev1) cudaEventDestroy(st.ev1);
  if (st.s2) cudaStreamDestroy(st.s2);
  if (st.s) cudaStreamDestroy(st.s);
  if (st.probe) cudaFree(st.probe);
  if (st.dev) cudaFree(st.dev);
  if (st.mh) cudaFreeHost(st.mh);
  st = State();
}

}  // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  if (o.pin >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(o.pin, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) die("--pin %d: sched_setaffinity failed", o.pin);
  }
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 1) die("no CUDA device");
  CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int drv = 0, rt = 0;
  CK(cudaDriverGetVersion(&drv));
  CK(cudaRuntimeGetVersion(&rt));
  if (prop.major != 9) die("%s is compute capability %d.%d; this build holds sm_90a code only", prop.name, prop.major, prop.minor);
  std::fprintf(stderr, "device_launch_bench: %s (%d SMs), CUDA driver %d, runtime %d\n", prop.name,
               prop.multiProcessorCount, drv, rt);

  void *mh = nullptr;
  CK(cudaHostAlloc(&mh, sizeof(Mapped), cudaHostAllocMapped));
  std::memset(mh, 0, sizeof(Mapped));
  st.mh = static_cast<Mapped *>(mh);
  void *md = nullptr;
  CK(cudaHostGetDevicePointer(&md, mh, 0));
  st.md = static_cast<Mapped *>(md);
  CK(cudaMalloc(&st.dev, sizeof(Dev)));
  CK(cudaMemset(st.dev, 0, sizeof(Dev)));
  CK(cudaMalloc(&st.probe, sizeof(Probe) * static_cast<size_t>(prop.multiProcessorCount)));
  CK(cudaStreamCreateWithFlags(&st.s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&st.s2, cudaStreamNonBlocking));
  CK(cudaEventCreate(&st.ev0));
  CK(cudaEventCreate(&st.ev1));

  const double cyc_per_ms = measure_cycles_per_ms();
  std::fprintf(stderr, "spin: %.0f clock64 cycles per ms\n", cyc_per_ms);
  build_graphs(o);
  std::string upd = "null";
  if (o.probe_updatable) {
    upd = probe_updatable();
    std::fprintf(stderr, "updatable probe: %s\n", upd.c_str());
  }
  cudaFuncAttributes la;
  CK(cudaFuncGetAttributes(&la, launcher<1>));

  // Co-residency with a 1-CTA-per-SM kernel using big_smem_kb of shared memory.
  const size_t big = std::min(static_cast<size_t>(o.big_smem_kb) * 1024, prop.sharedMemPerBlockOptin);
  CK(cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(big)));
  int big_per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&big_per_sm, big_smem_kernel, 32, big));
  const bool fits = big + prop.reservedSharedMemPerBlock + (la.sharedSizeBytes + prop.reservedSharedMemPerBlock) <=
                    prop.sharedMemPerMultiprocessor;
  std::string cores = "[";
  cores += coresidency(0, big, prop.multiProcessorCount) + ", ";
  cores += coresidency(1, big, prop.multiProcessorCount) + "]";

  std::vector<Row> rows;
  for (double d : o.steps_ms) {
    const unsigned long long cycles = static_cast<unsigned long long>(d * cyc_per_ms);
    CK(cudaMemcpy(&st.dev->spin_cycles, &cycles, sizeof cycles, cudaMemcpyHostToDevice));
    const double gpu_us = measure_gpu_us();
    std::fprintf(stderr, "D %.1f ms: G alone %.1f us (events around a host launch, median of %d)\n", d, gpu_us,
                 kGpuTimeReps);
    for (int w : o.waits) {
      for (int m : o.modes) {  // modes interleaved within (D, wait), so host noise hits each alike
        rows.push_back(run_row(o, m, w, d, gpu_us));
        const Row &r = rows.back();
        std::fprintf(stderr, "  %-11s %-5s: host %.2f / %.2f us, step %.1f / %.1f us, submit->start %.2f us\n",
                     kModeName[m], kWaitName[w], r.host.p50, r.host.p99, r.step.p50, r.step.p99, r.submit.p50);
      }
    }
  }

  // Every launch of G ran all its nodes.
  Dev dh;
  CK(cudaMemcpy(&dh, st.dev, sizeof dh, cudaMemcpyDeviceToHost));
  const unsigned long long want = st.launches * static_cast<unsigned long long>(o.nodes);
  bool counter_ok = dh.seq == st.launches;
  for (int t = 0; t < 32; ++t) counter_ok = counter_ok && dh.counter[t] == static_cast<unsigned>(want);

  // JSON.
  std::string j = "{\"benchmark\": \"device_launch\",\n";
  const char *commit = std::getenv("CGRT_BENCH_COMMIT");
  j += fmt("\"meta\": {\"gpu\": %s, \"driver\": %s, \"cuda_driver_version\": %d, \"cuda_runtime_version\": %d, "
           "\"date\": %s, \"commit\": %s, \"command\": %s},\n",
           json_str(prop.name).c_str(), json_str(read_nvidia_driver()).c_str(), drv, rt, json_str(utc_now()).c_str(),
           json_str(commit && *commit ? commit : "unknown").c_str(), json_str(o.command).c_str());
  j += fmt("\"device\": {\"sms\": %d, \"cc\": \"%d.%d\", \"shared_mem_per_sm\": %zu, \"reserved_shared_mem_per_block\": "
           "%zu, \"shared_mem_per_block_optin\": %zu},\n",
           prop.multiProcessorCount, prop.major, prop.minor, prop.sharedMemPerMultiprocessor,
           prop.reservedSharedMemPerBlock, prop.sharedMemPerBlockOptin);
  std::string steps = "[", waits = "[", modes = "[";
  for (size_t i = 0; i < o.steps_ms.size(); ++i) steps += fmt("%s%g", i ? ", " : "", o.steps_ms[i]);
  for (size_t i = 0; i < o.waits.size(); ++i) waits += fmt("%s\"%s\"", i ? ", " : "", kWaitName[o.waits[i]]);
  for (size_t i = 0; i < o.modes.size(); ++i) modes += fmt("%s\"%s\"", i ? ", " : "", kModeName[o.modes[i]]);
  j += fmt("\"config\": {\"nodes\": %d, \"graph_nodes\": %d, \"iters\": %d, \"warmup\": %d, \"steps_ms\": %s], "
           "\"waits\": %s], \"modes\": %s], \"calib_rounds\": %d, \"launcher_poll_ns\": %u, \"smoke\": %s, "
           "\"pin\": %d},\n",
           o.nodes, o.nodes + 1, o.iters, kWarmup, steps.c_str(), waits.c_str(), modes.c_str(), o.calib_rounds,
           o.launcher_poll_ns, o.smoke ? "true" : "false", o.pin);
  j += fmt("\"cycles_per_ms\": %.1f,\n", cyc_per_ms);
  j += fmt("\"launcher\": {\"num_regs\": %d, \"static_shared_bytes\": %zu, \"local_bytes\": %zu, \"carveout\": "
           "\"max_shared\"},\n",
           la.numRegs, la.sharedSizeBytes, la.localSizeBytes);
  j += fmt("\"occupancy\": {\"big_ctas_per_sm\": %d, \"big_plus_launcher_fit_by_shared_memory\": %s},\n", big_per_sm,
           fits ? "true" : "false");
  j += "\"coresidency\": " + cores + ",\n";
  j += "\"updatable_probe\": " + upd + ",\n";
  j += fmt("\"checks\": {\"launches\": %llu, \"counter_expected\": %llu, \"counter_ok\": %s},\n", st.launches, want,
           counter_ok ? "true" : "false");
  j += "\"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) j += (i ? ",\n" : "") + row_json(rows[i]);
  j += "\n]}\n";
  FILE *f = std::fopen(o.out.c_str(), "w");
  if (!f) die("cannot write %s", o.out.c_str());
  std::fputs(j.c_str(), f);
  std::fclose(f);

  // Table.
  std::printf("device_launch: %s, driver %s (CUDA %d), G = 1 spin + %d kernels, %d steps per row\n", prop.name,
              read_nvidia_driver().c_str(), drv, o.nodes, o.iters);
  std::printf("%-11s %6s %-5s | %-20s | %-24s | %9s %9s | %-15s | %-15s | %9s\n", "mode", "D ms", "wait",
              "host us p50/p99/max", "step us p50/p99/max", "gpu us", "step-gpu", "submit->start", "launcher->start",
              "done->seen");
  for (const Row &r : rows) {
    std::string ls = r.mode == kHost ? "-" : fmt("%.2f/%.2f", r.seen_start.p50, r.seen_start.p99);
    std::printf("%-11s %6.1f %-5s | %6.2f/%6.2f/%6.1f | %7.1f/%7.1f/%8.1f | %9.1f %9.1f | %6.2f/%8.2f | %-15s | %9.2f\n",
                kModeName[r.mode], r.step_ms, kWaitName[r.wait], r.host.p50, r.host.p99, r.host.max, r.step.p50,
                r.step.p99, r.step.max, r.gpu_us, r.step.p50 - r.gpu_us, r.submit.p50, r.submit.p99, ls.c_str(),
                r.done_seen.p50);
  }
  std::printf("clock map: %%globaltimer step %llu ns, calibration uncertainty up to %lld ns (see calib in the JSON)\n",
              rows.empty() ? 0ull : rows.front().ca.timer_step_ns,
              rows.empty() ? 0ll : std::max(rows.front().ca.rtt_ns, rows.front().cb.rtt_ns) / 2);
  std::printf("checks: %llu launches of G, counters %s\n", st.launches, counter_ok ? "ok" : "WRONG");
  std::fprintf(stderr, "wrote %s\n", o.out.c_str());
  cleanup();
  return counter_ok ? 0 : 1;
}
