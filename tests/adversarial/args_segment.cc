// Bad-argument cases of include/cgrt/cgrt_segment.h. Segments exist only inside a
// capture, so the cases run in the enqueue callback of a set's capture
// (World::capture_with_probe): a live segment (ended, empty) and a destroyed one are made
// there, the bad call is made, and the capture must still succeed.
#include <string>

#include "cgrt/cgrt_segment.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

using SegCall = cgrt_status (*)(cgrt_segment *bad, cgrt_segment *live);

// fn(bad handle) inside a capture answers `want`, and the live segment stays usable.
void segment_handle_cases(const char *fn_name, SegCall call) {
  for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED})
    A(std::string(fn_name) + "/" + kBadNames[b], [=](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      cgrt_graphs *set = nullptr;
      cgrt_status st = w.capture_with_probe(
          [&](CUstream s) {
            cgrt_segment *live = nullptr, *dead = nullptr;
            if (!c.expect_ok(cgrt_segment_begin(w.rt, s, &live), "begin") || !c.expect_ok(cgrt_segment_end(live), "end"))
              return;
            if (c.expect_ok(cgrt_segment_begin(w.rt, s, &dead), "begin (dead)")) cgrt_segment_destroy(dead);
            c.expect(call(bad_handle(b, live, dead), live), {IH}, std::string(fn_name) + " with a " + kBadNames[b]);
            size_t n = 1;
            c.expect_ok(cgrt_segment_nodes(live, &n), "the live segment after");
            c.check(n == 0, "the live (empty) segment has nodes");
            cgrt_segment_destroy(live);
          },
          &set);
      c.expect_ok(st, "the capture around the bad call");
      cgrt_graphs_destroy(set);
    });
}

// A bad argument other than a handle, inside a capture: `want`, the capture goes on.
void segment_arg_case(const char *what, cgrt_status (*call)(cgrt_runtime *, CUstream), cgrt_status want) {
  A(what, [=](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    cgrt_graphs *set = nullptr;
    cgrt_status st =
        w.capture_with_probe([&](CUstream s) { c.expect(call(w.rt, s), {want}, what); }, &set);
    c.expect_ok(st, "the capture around the bad call");
    cgrt_graphs_destroy(set);
  });
}

// An ended empty segment of the capture on s (destroyed by the caller), or NULL.
cgrt_segment *ended(cgrt_runtime *rt, CUstream s) {
  cgrt_segment *g = nullptr;
  if (cgrt_segment_begin(rt, s, &g) != CGRT_SUCCESS) return nullptr;
  cgrt_segment_end(g);
  return g;
}

void segment_args() {
  runtime_handle_cases("cgrt_stream_capturing", [](World &, cgrt_runtime *rt) {
    int cap = 0;
    return cgrt_stream_capturing(rt, nullptr, &cap);
  });
  runtime_handle_cases("cgrt_segment_begin", [](World &, cgrt_runtime *rt) {
    cgrt_segment *g = nullptr;
    return cgrt_segment_begin(rt, nullptr, &g);
  });
  A("cgrt_stream_capturing/capturing NULL", [](Ctx &c) {
    World w(c);
    if (w.rt) c.expect(cgrt_stream_capturing(w.rt, nullptr, nullptr), {IA}, "capturing NULL");
  });
  A("cgrt_segment_begin/stream not capturing", [](Ctx &c) {
    World w(c);
    cgrt_segment *g = reinterpret_cast<cgrt_segment *>(foreign());
    if (!w.rt) return;
    c.expect(cgrt_segment_begin(w.rt, nullptr, &g), {IA}, "begin outside capture");
    c.check(g == nullptr, "*out is not NULL after a failed cgrt_segment_begin");
  });
  segment_arg_case("cgrt_segment_begin/out NULL",
                   [](cgrt_runtime *rt, CUstream s) { return cgrt_segment_begin(rt, s, nullptr); }, IA);
  segment_handle_cases("cgrt_segment_end", [](cgrt_segment *b, cgrt_segment *) { return cgrt_segment_end(b); });
  segment_handle_cases("cgrt_segment_nodes", [](cgrt_segment *b, cgrt_segment *) {
    size_t n = 0;
    return cgrt_segment_nodes(b, &n);
  });
  segment_handle_cases("cgrt_segment_append",
                       [](cgrt_segment *b, cgrt_segment *) { return cgrt_segment_append(b, nullptr, 0); });
  segment_handle_cases("cgrt_segment_compare",
                       [](cgrt_segment *b, cgrt_segment *live) { return cgrt_segment_compare(b, live, nullptr, 0); });
  segment_handle_cases("cgrt_segment_compare", [](cgrt_segment *b, cgrt_segment *live) {
    return cgrt_segment_compare(live, b, nullptr, 0);  // the other one bad
  });
  segment_handle_cases("cgrt_segment_destroy", [](cgrt_segment *b, cgrt_segment *) {
    cgrt_segment_destroy(b);  // a no-op: the call after it must then refuse the same handle
    size_t n = 0;
    return cgrt_segment_nodes(b, &n);
  });
  segment_arg_case("cgrt_segment_nodes/count NULL", [](cgrt_runtime *rt, CUstream s) {
    cgrt_segment *g = ended(rt, s);
    cgrt_status st = cgrt_segment_nodes(g, nullptr);
    cgrt_segment_destroy(g);
    return st;
  }, IA);
  segment_arg_case("cgrt_segment_end/twice", [](cgrt_runtime *rt, CUstream s) {
    cgrt_segment *g = ended(rt, s);
    cgrt_status st = cgrt_segment_end(g);
    cgrt_segment_destroy(g);
    return st;
  }, IA);
  segment_arg_case("cgrt_segment_append/remaps NULL", [](cgrt_runtime *rt, CUstream s) {
    cgrt_segment *g = ended(rt, s);
    cgrt_status st = cgrt_segment_append(g, nullptr, 2);
    cgrt_segment_destroy(g);
    return st;
  }, IA);
  segment_arg_case("cgrt_segment_compare/remap wrapping", [](cgrt_runtime *rt, CUstream s) {
    cgrt_segment *g = ended(rt, s);
    cgrt_remap r = {~0ull - 255, 256, 512};
    cgrt_status st = cgrt_segment_compare(g, g, &r, 1);
    cgrt_segment_destroy(g);
    return st;
  }, IA);
}

Register reg([] { segment_args(); });

}  // namespace
}  // namespace adv
