// Bad-argument cases of include/cgrt/cgrt_workspace.h (workspaces and counters).
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cgrt/cgrt_workspace.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

cgrt_status request1(cgrt_runtime *rt, int lane, const char *name, cgrt_tensor_desc d) {
  CUdeviceptr p = 0;
  return cgrt_workspace_request(rt, lane, name, &d, 1, &p);
}

void workspace_cases() {
  A("cgrt_dtype_size/values outside the enum", [](Ctx &c) {
    for (int t : {-1, 6, 99, INT_MAX, INT_MIN})
      c.check(cgrt_dtype_size((cgrt_dtype)t) == 0, "cgrt_dtype_size(" + std::to_string(t) + ") is not 0");
    c.check(cgrt_dtype_size(CGRT_DTYPE_U8) == 1 && cgrt_dtype_size(CGRT_DTYPE_I32) == 4 &&
                cgrt_dtype_size(CGRT_DTYPE_I64) == 8 && cgrt_dtype_size(CGRT_DTYPE_F16) == 2 &&
                cgrt_dtype_size(CGRT_DTYPE_BF16) == 2 && cgrt_dtype_size(CGRT_DTYPE_F32) == 4,
            "cgrt_dtype_size of the known dtypes");
  });
  runtime_handle_cases("cgrt_workspace_request",
                       [](World &, cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(16, CGRT_DTYPE_F32)); });
  runtime_handle_cases("cgrt_workspace_lock", [](World &, cgrt_runtime *rt) { return cgrt_workspace_lock(rt); });
  runtime_handle_cases("cgrt_workspace_get_stats", [](World &, cgrt_runtime *rt) {
    cgrt_workspace_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    return cgrt_workspace_get_stats(rt, &s);
  });
  runtime_handle_cases("cgrt_workspace_visit", [](World &, cgrt_runtime *rt) {
    return cgrt_workspace_visit(rt, [](void *, int, const char *, size_t, size_t) {}, nullptr);
  });
  runtime_handle_cases("cgrt_workspace_verify", [](World &, cgrt_runtime *rt) { return cgrt_workspace_verify(rt); });
  runtime_handle_cases("cgrt_counters_reserve", [](World &, cgrt_runtime *rt) { return cgrt_counters_reserve(rt, 64); });
  runtime_handle_cases("cgrt_counters_get", [](World &, cgrt_runtime *rt) {
    CUdeviceptr p;
    size_t n;
    return cgrt_counters_get(rt, &p, &n);
  });
  runtime_handle_cases("cgrt_counters_verify", [](World &, cgrt_runtime *rt) { return cgrt_counters_verify(rt); });
  value_handle_cases<cgrt_runtime, int>("cgrt_workspace_is_locked", live_rt, dead_rt, cgrt_workspace_is_locked, 0);

  struct ReqCase {
    const char *what;
    cgrt_status (*call)(cgrt_runtime *);
    std::vector<cgrt_status> want;
  };
  static const ReqCase kReq[] = {
      {"lane -1", [](cgrt_runtime *rt) { return request1(rt, -1, "x", desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"lane CGRT_MAX_LANES",
       [](cgrt_runtime *rt) { return request1(rt, CGRT_MAX_LANES, "x", desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"lane INT_MAX", [](cgrt_runtime *rt) { return request1(rt, INT_MAX, "x", desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"lane INT_MIN", [](cgrt_runtime *rt) { return request1(rt, INT_MIN, "x", desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"name NULL", [](cgrt_runtime *rt) { return request1(rt, 0, nullptr, desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"name \"\"", [](cgrt_runtime *rt) { return request1(rt, 0, "", desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"name of 100000 characters",
       [](cgrt_runtime *rt) {
         std::string n(100000, 'n');
         return request1(rt, 0, n.c_str(), desc1(16, CGRT_DTYPE_F32));
       },
       {IA, OK}},
      {"descs NULL",
       [](cgrt_runtime *rt) {
         CUdeviceptr p;
         return cgrt_workspace_request(rt, 0, "x", nullptr, 1, &p);
       },
       {IA}},
      {"ptrs NULL",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         return cgrt_workspace_request(rt, 0, "x", &d, 1, nullptr);
       },
       {IA}},
      {"count 0",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         CUdeviceptr p;
         return cgrt_workspace_request(rt, 0, "x", &d, 0, &p);
       },
       {IA}},
      {"ndim -1",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         d.ndim = -1;
         return request1(rt, 0, "x", d);
       },
       {IA}},
      {"ndim CGRT_MAX_TENSOR_DIMS + 1",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         d.ndim = CGRT_MAX_TENSOR_DIMS + 1;
         return request1(rt, 0, "x", d);
       },
       {IA}},
      {"ndim INT_MAX",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         d.ndim = INT_MAX;
         return request1(rt, 0, "x", d);
       },
       {IA}},
      {"negative dimension", [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(-1, CGRT_DTYPE_F32)); }, {IA}},
      {"dimension INT64_MIN",
       [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(INT64_MIN, CGRT_DTYPE_F32)); }, {IA}},
      {"dtype 99", [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(16, (cgrt_dtype)99)); }, {IA}},
      {"dtype -1", [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(16, (cgrt_dtype)-1)); }, {IA}},
      {"shape product overflows (INT64_MAX x INT64_MAX)",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(INT64_MAX, CGRT_DTYPE_U8);
         d.ndim = 2;
         d.shape[1] = INT64_MAX;
         return request1(rt, 0, "x", d);
       },
       {IA}},
      {"bytes overflow (2^62 floats)",
       [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1((int64_t)1 << 62, CGRT_DTYPE_F32)); }, {IA}},
      {"6 dimensions of 2^11 (2^66 bytes)",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(2048, CGRT_DTYPE_U8);
         d.ndim = 6;
         for (int i = 0; i < 6; i++) d.shape[i] = 2048;
         return request1(rt, 0, "x", d);
       },
       {IA}},
      {"4 TiB (out of memory)",
       [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1((int64_t)1 << 40, CGRT_DTYPE_F32)); }, {OOM}},
      {"zero-size dimension",
       [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(0, CGRT_DTYPE_F32)); }, {OK, IA}},
      {"ndim 0 (a scalar)",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         d.ndim = 0;
         return request1(rt, 0, "x", d);
       },
       {OK, IA}},
      {"count 4097 buffers of junk descriptors beyond the first",
       [](cgrt_runtime *rt) {
         std::vector<cgrt_tensor_desc> d(4097, desc1(1, CGRT_DTYPE_U8));
         std::vector<CUdeviceptr> p(4097);
         return cgrt_workspace_request(rt, 0, "x", d.data(), d.size(), p.data());
       },
       {OK, IA}},
  };
  for (const ReqCase &k : kReq) {
    A(std::string("cgrt_workspace_request/") + k.what, [&k](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      cgrt_status st = k.call(w.rt);
      c.expect(st, k.want, std::string("cgrt_workspace_request with ") + k.what);
    });
  }
  A("cgrt_workspace_get_stats/stats NULL", [](Ctx &c) {
    World w(c);
    if (w.rt) c.expect(cgrt_workspace_get_stats(w.rt, nullptr), {IA}, "get_stats(rt, NULL)");
  });
  for (size_t size : {(size_t)0, (size_t)1, sizeof(cgrt_workspace_stats) - 1}) {
    A("cgrt_workspace_get_stats/stats->size " + std::to_string(size), [size](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      Canaried<cgrt_workspace_stats> s(size);
      c.expect(cgrt_workspace_get_stats(w.rt, s.get()), {IA}, "get_stats with size " + std::to_string(size));
      c.check(s.canary_intact(), "cgrt_workspace_get_stats wrote past the struct");
    });
  }
  A("cgrt_workspace_get_stats/stats->size larger than the struct writes only the struct", [](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    Canaried<cgrt_workspace_stats> s(sizeof(cgrt_workspace_stats) + 256);
    if (c.expect(cgrt_workspace_get_stats(w.rt, s.get()), {OK, IA}, "get_stats with a larger size"))
      c.check(s.canary_intact(), "cgrt_workspace_get_stats wrote past sizeof(cgrt_workspace_stats)");
  });
  A("cgrt_workspace_visit/fn NULL", [](Ctx &c) {
    World w(c);
    if (w.rt) c.expect(cgrt_workspace_visit(w.rt, nullptr, nullptr), {IA}, "visit(rt, NULL)");
  });
  A("cgrt_counters_decode_bytes/products that overflow saturate to SIZE_MAX", [](Ctx &c) {
    struct {
      size_t rows, heads;
      int sms;
    } v[] = {{SIZE_MAX, 2, 0},          {(size_t)1 << 62, 4, 0}, {SIZE_MAX / 4 - 1, 1, 0},
             {SIZE_MAX / 4 + 1, 1, 132}, {(size_t)1 << 32, (size_t)1 << 32, 132}, {SIZE_MAX, SIZE_MAX, INT_MAX}};
    for (auto &x : v) {
      unsigned __int128 n = (unsigned __int128)x.rows * x.heads;
      if (x.sms > 0 && (unsigned __int128)x.sms > n) n = (unsigned)x.sms;
      unsigned __int128 exact = (n + 7) / 8 * 8 * 4;
      size_t want = exact > SIZE_MAX ? SIZE_MAX : (size_t)exact;
      size_t got = cgrt_counters_decode_bytes(x.rows, x.heads, x.sms);
      c.check(got == want, "cgrt_counters_decode_bytes(" + std::to_string(x.rows) + ", " + std::to_string(x.heads) +
                               ", " + std::to_string(x.sms) + ") = " + std::to_string(got) + ", expected " +
                               std::to_string(want));
    }
  });
  A("cgrt_counters_decode_bytes/zero and negative sizes", [](Ctx &c) {
    c.check(cgrt_counters_decode_bytes(0, 0, 0) == 0, "decode_bytes(0, 0, 0) != 0");
    c.check(cgrt_counters_decode_bytes(0, 16, -5) == 0, "decode_bytes(0, 16, -5) != 0");
    c.check(cgrt_counters_decode_bytes(1, 1, 132) == 544, "decode_bytes(1, 1, 132) != 544");
    c.check(cgrt_counters_decode_bytes(3, 5, INT_MIN) == 64, "decode_bytes(3, 5, INT_MIN) != 64");
  });
  struct CntCase {
    const char *what;
    size_t bytes;
    std::vector<cgrt_status> want;
  };
  static const CntCase kCnt[] = {{"0 bytes", 0, {IA, OK}},
                                 {"SIZE_MAX bytes", SIZE_MAX, {IA, OOM}},
                                 {"SIZE_MAX - 5 bytes (rounding to 32 overflows)", SIZE_MAX - 5, {IA, OOM}},
                                 {"2^63 + 1 bytes", ((size_t)1 << 63) + 1, {IA, OOM}},
                                 {"2^40 + 1 bytes", ((size_t)1 << 40) + 1, {IA, OOM}},
                                 {"decode_bytes of an overflowing product", 0, {IA, OOM}}};
  for (const CntCase &k : kCnt) {
    A(std::string("cgrt_counters_reserve/") + k.what, [&k](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      size_t bytes = k.bytes;
      if (std::string(k.what).find("overflowing") != std::string::npos)
        bytes = cgrt_counters_decode_bytes(SIZE_MAX / 2, 4, 132);
      cgrt_status st = cgrt_counters_reserve(w.rt, bytes);
      c.expect(st, k.want, std::string("cgrt_counters_reserve(") + std::to_string(bytes) + ")");
      CUdeviceptr p = 0;
      size_t n = 0;
      if (c.expect_ok(cgrt_counters_get(w.rt, &p, &n), "cgrt_counters_get after") && st != OK)
        c.check(n == 0, "a refused cgrt_counters_reserve left a counter buffer of " + std::to_string(n) + " bytes");
    });
  }
  A("cgrt_counters_get/ptr NULL", [](Ctx &c) {
    World w(c);
    size_t n;
    if (w.rt) c.expect(cgrt_counters_get(w.rt, nullptr, &n), {IA}, "counters_get(rt, NULL, &n)");
  });
  A("cgrt_counters_get/bytes NULL", [](Ctx &c) {
    World w(c);
    CUdeviceptr p;
    if (w.rt) c.expect(cgrt_counters_get(w.rt, &p, nullptr), {OK, IA}, "counters_get(rt, &p, NULL)");
  });
}

Register reg([] {
  workspace_cases();
});

}  // namespace
}  // namespace adv
