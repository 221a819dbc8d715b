// Bad-argument cases of the DCP API (include/cgrt/cgrt_dcp.h): a group of one rank on the
// World's runtime, every function given dead, foreign, misaligned and NULL handles and
// bad options and arguments; the group must stay usable after each.
#include <climits>
#include <cmath>
#include <cstring>
#include <string>

#include "cgrt/cgrt_dcp.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

// Options of a one-rank group over small_mla() with a fresh id; false when the id could
// not be made (recorded).
bool one_rank(World &w, cgrt_dcp_options *o) {
  cgrt_dcp_options_init(o);
  o->mla = small_mla();
  o->mla.heads = 4;
  return w.c.expect_ok(cgrt_dcp_unique_id(w.rt, nullptr, &o->id), "cgrt_dcp_unique_id");
}

cgrt_dcp_group *group(World &w) {
  cgrt_dcp_options o;
  if (!w.rt || !one_rank(w, &o)) return nullptr;
  cgrt_dcp_group *g = nullptr;
  w.c.expect_ok(cgrt_dcp_group_create(w.rt, &o, &g), "cgrt_dcp_group_create");
  return g;
}

// Valid step arguments for group(w): 2 rows of 4 heads, every row padding.
cgrt_dcp_args step_args(World &w) {
  cgrt_dcp_args a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.q = w.buffer(2 * 4 * 576 * 2);
  a.kv_cache = w.buffer(64 * 576 * 2);
  a.block_table = w.buffer(2 * 2 * 4);
  a.seq_lens = w.buffer(2 * 4);
  a.out = w.buffer(2 * 4 * 512 * 2);
  a.lse = w.buffer(2 * 4 * 4);
  a.num_rows = 2;
  a.softmax_scale = 0.0417f;
  return a;
}

// A destroyed group's address.
cgrt_dcp_group *dead_group(World &w) {
  cgrt_dcp_group *g = group(w);
  cgrt_dcp_group_destroy(g);
  return g;
}

void handle_cases() {
  using Call = cgrt_status (*)(World &, cgrt_dcp_group *);
  struct H {
    const char *fn;
    Call call;
  };
  static const H kCalls[] = {
      {"cgrt_dcp_step",
       [](World &w, cgrt_dcp_group *g) {
         cgrt_dcp_args a = step_args(w);
         return cgrt_dcp_step(g, nullptr, &a);
       }},
      {"cgrt_dcp_wait", [](World &, cgrt_dcp_group *g) { return cgrt_dcp_wait(g, nullptr); }},
      {"cgrt_dcp_agree",
       [](World &, cgrt_dcp_group *g) {
         int all = 1;
         return cgrt_dcp_agree(g, 1, &all);
       }},
      {"cgrt_dcp_group_get_info",
       [](World &, cgrt_dcp_group *g) {
         cgrt_dcp_info i;
         i.size = sizeof i;
         return cgrt_dcp_group_get_info(g, &i);
       }},
      {"cgrt_dcp_group_destroy",
       [](World &, cgrt_dcp_group *g) {
         cgrt_dcp_group_destroy(g);  // must be a no-op
         return IH;
       }},
  };
  for (const H &h : kCalls)
    for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED})
      A(std::string(h.fn) + "/" + kBadNames[b], [&h, b](Ctx &c) {
        World w(c);
        cgrt_dcp_group *live = group(w);
        if (!live) return;
        cgrt_dcp_group *dead = dead_group(w);
        c.expect(h.call(w, bad_handle(b, live, dead)), {IH}, std::string(h.fn) + " with a " + kBadNames[b]);
        int all = 0;
        c.expect_ok(cgrt_dcp_agree(live, 1, &all), "the live group after");
        cgrt_dcp_group_destroy(live);
      });
  for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED}) {
    A(std::string("cgrt_dcp_unique_id/") + kBadNames[b], [b](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      cgrt_dcp_id id;
      c.expect(cgrt_dcp_unique_id(bad_handle(b, w.rt, dead_runtime(c)), nullptr, &id), {IH}, "cgrt_dcp_unique_id");
    });
    A(std::string("cgrt_dcp_group_create/") + kBadNames[b], [b](Ctx &c) {
      World w(c);
      cgrt_dcp_options o;
      if (!w.rt || !one_rank(w, &o)) return;
      cgrt_dcp_group *g = reinterpret_cast<cgrt_dcp_group *>(1);
      c.expect(cgrt_dcp_group_create(bad_handle(b, w.rt, dead_runtime(c)), &o, &g), {IH}, "cgrt_dcp_group_create");
      c.check(g == nullptr, "*out is not NULL after a failed cgrt_dcp_group_create");
    });
  }
}

void option_cases() {
  struct O {
    const char *what;
    void (*tweak)(cgrt_dcp_options *);
  };
  static const O kBad[] = {
      {"size 0", [](cgrt_dcp_options *o) { o->size = 0; }},
      {"size 1", [](cgrt_dcp_options *o) { o->size = 1; }},
      {"world_size 0", [](cgrt_dcp_options *o) { o->world_size = 0; }},
      {"world_size INT_MAX", [](cgrt_dcp_options *o) { o->world_size = INT_MAX; }},
      {"rank -1", [](cgrt_dcp_options *o) { o->rank = -1; }},
      {"rank = world_size", [](cgrt_dcp_options *o) { o->rank = o->world_size; }},
      {"timeout_ms 0", [](cgrt_dcp_options *o) { o->timeout_ms = 0; }},
      {"timeout_ms INT_MIN", [](cgrt_dcp_options *o) { o->timeout_ms = INT_MIN; }},
      {"gather_q 2", [](cgrt_dcp_options *o) { o->gather_q = 2; }},
      {"merge 9", [](cgrt_dcp_options *o) { o->merge = (cgrt_dcp_merge)9; }},
      {"merge -1", [](cgrt_dcp_options *o) { o->merge = (cgrt_dcp_merge)-1; }},
      {"mla.size 0", [](cgrt_dcp_options *o) { o->mla.size = 0; }},
      {"mla.heads 0", [](cgrt_dcp_options *o) { o->mla.heads = 0; }},
      {"mla.page_size 48", [](cgrt_dcp_options *o) { o->mla.page_size = 48; }},
  };
  for (const O &b : kBad)
    A(std::string("cgrt_dcp_group_create/") + b.what, [&b](Ctx &c) {
      World w(c);
      cgrt_dcp_options o;
      if (!w.rt || !one_rank(w, &o)) return;
      b.tweak(&o);
      cgrt_dcp_group *g = reinterpret_cast<cgrt_dcp_group *>(1);
      c.expect(cgrt_dcp_group_create(w.rt, &o, &g), {IA}, std::string("cgrt_dcp_group_create with ") + b.what);
      c.check(g == nullptr, "*out is not NULL after a failed cgrt_dcp_group_create");
    });
  A("cgrt_dcp_group_create/NULL options or out", [](Ctx &c) {
    World w(c);
    cgrt_dcp_options o;
    if (!w.rt || !one_rank(w, &o)) return;
    cgrt_dcp_group *g = nullptr;
    c.expect(cgrt_dcp_group_create(w.rt, nullptr, &g), {IA}, "options NULL");
    c.expect(cgrt_dcp_group_create(w.rt, &o, nullptr), {IA}, "out NULL");
  });
  A("cgrt_dcp_unique_id/out NULL", [](Ctx &c) {
    World w(c);
    if (w.rt) c.expect(cgrt_dcp_unique_id(w.rt, nullptr, nullptr), {IA}, "out NULL");
  });
  A("cgrt_dcp_options_init/NULL is a no-op", [](Ctx &c) {
    cgrt_dcp_options_init(nullptr);
    cgrt_dcp_options o;
    memset(&o, 0xff, sizeof o);
    cgrt_dcp_options_init(&o);
    c.check(o.size == sizeof o && o.world_size == 1 && o.gather_q == 1 && o.mla.size == sizeof o.mla,
            "cgrt_dcp_options_init did not set the defaults");
  });
  A("cgrt_dcp_local_len/out-of-range arguments", [](Ctx &c) {
    c.check(cgrt_dcp_local_len(10, -1, 2, 1) == -1 && cgrt_dcp_local_len(10, 2, 2, 1) == -1 &&
                cgrt_dcp_local_len(10, 0, 0, 1) == -1 && cgrt_dcp_local_len(10, 0, 2, 0) == -1 &&
                cgrt_dcp_local_len(INT_MAX, 1, 2, INT_MAX) >= 0 && cgrt_dcp_local_len(INT_MIN, 0, 2, 1) == 0,
            "cgrt_dcp_local_len accepted a bad argument or overflowed");
  });
}

void step_cases() {
  struct S {
    const char *what;
    void (*tweak)(cgrt_dcp_args *);
  };
  static const S kBad[] = {
      {"size 0", [](cgrt_dcp_args *a) { a->size = 0; }},
      {"num_rows 0", [](cgrt_dcp_args *a) { a->num_rows = 0; }},
      {"num_rows -1", [](cgrt_dcp_args *a) { a->num_rows = -1; }},
      {"num_rows INT_MAX", [](cgrt_dcp_args *a) { a->num_rows = INT_MAX; }},
      {"q 0", [](cgrt_dcp_args *a) { a->q = 0; }},
      {"kv_cache 0", [](cgrt_dcp_args *a) { a->kv_cache = 0; }},
      {"block_table 0", [](cgrt_dcp_args *a) { a->block_table = 0; }},
      {"seq_lens 0", [](cgrt_dcp_args *a) { a->seq_lens = 0; }},
      {"out 0", [](cgrt_dcp_args *a) { a->out = 0; }},
      {"out misaligned", [](cgrt_dcp_args *a) { a->out += 2; }},
      {"q misaligned", [](cgrt_dcp_args *a) { a->q += 8; }},
      {"lse misaligned", [](cgrt_dcp_args *a) { a->lse += 2; }},
      {"scale NaN", [](cgrt_dcp_args *a) { a->softmax_scale = NAN; }},
      {"scale 0", [](cgrt_dcp_args *a) { a->softmax_scale = 0; }},
      {"scale -1", [](cgrt_dcp_args *a) { a->softmax_scale = -1; }},
      {"scale inf", [](cgrt_dcp_args *a) { a->softmax_scale = INFINITY; }},
  };
  for (const S &b : kBad)
    A(std::string("cgrt_dcp_step/") + b.what, [&b](Ctx &c) {
      World w(c);
      cgrt_dcp_group *g = group(w);
      if (!g) return;
      cgrt_dcp_args a = step_args(w);
      b.tweak(&a);
      c.expect(cgrt_dcp_step(g, nullptr, &a), {IA}, std::string("cgrt_dcp_step with ") + b.what);
      cgrt_dcp_args ok = step_args(w);
      c.expect_ok(cgrt_dcp_step(g, nullptr, &ok), "a valid step after");
      c.expect_ok(cgrt_dcp_wait(g, nullptr), "cgrt_dcp_wait after");
      cgrt_dcp_group_destroy(g);
    });
  A("cgrt_dcp_step/args NULL", [](Ctx &c) {
    World w(c);
    cgrt_dcp_group *g = group(w);
    if (!g) return;
    c.expect(cgrt_dcp_step(g, nullptr, nullptr), {IA}, "args NULL");
    cgrt_dcp_group_destroy(g);
  });
  A("cgrt_dcp_agree/all_ok NULL", [](Ctx &c) {
    World w(c);
    cgrt_dcp_group *g = group(w);
    if (!g) return;
    c.expect(cgrt_dcp_agree(g, 1, nullptr), {IA}, "all_ok NULL");
    int all = 0;
    c.expect_ok(cgrt_dcp_agree(g, 1, &all), "agree after");
    c.check(all == 1, "a group of one agreed on 0");
    cgrt_dcp_group_destroy(g);
  });
  A("cgrt_dcp_group_get_info/NULL or small info", [](Ctx &c) {
    World w(c);
    cgrt_dcp_group *g = group(w);
    if (!g) return;
    cgrt_dcp_info i;
    c.expect(cgrt_dcp_group_get_info(g, nullptr), {IA}, "info NULL");
    i.size = 0;
    c.expect(cgrt_dcp_group_get_info(g, &i), {IA}, "info->size 0");
    i.size = sizeof i;
    c.expect(cgrt_dcp_group_get_info(g, &i), {OK}, "info after");
    cgrt_dcp_group_destroy(g);
  });
  A("cgrt_dcp_wait/valid (control)", [](Ctx &c) {
    World w(c);
    cgrt_dcp_group *g = group(w);
    if (!g) return;
    c.expect_ok(cgrt_dcp_wait(g, nullptr), "cgrt_dcp_wait on an idle stream");
    cgrt_dcp_group_destroy(g);
  });
}

Register reg([] {
  handle_cases();
  option_cases();
  step_cases();
});

}  // namespace
}  // namespace adv
