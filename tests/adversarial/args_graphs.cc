// Bad-argument cases of include/cgrt/cgrt_graphs.h (graph sets).
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cgrt/cgrt_graphs.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

struct GraphOptCase {
  const char *what;
  void (*set)(cgrt_graphs_options *, World &);
  std::vector<cgrt_status> want;
};

void graphs_cases() {
  A("cgrt_graphs_options_init/NULL", [](Ctx &) { cgrt_graphs_options_init(nullptr); });
  runtime_handle_cases("cgrt_graphs_create", [](World &w, cgrt_runtime *rt) {
    cgrt_graphs_options o;
    w.engine()->options(&o, w.descs);
    cgrt_graphs *s = nullptr;
    cgrt_status st = cgrt_graphs_create(rt, &o, &s);
    if (st == OK) cgrt_graphs_destroy(s);
    return st;
  });
  A("cgrt_graphs_create/out NULL", [](Ctx &c) {
    World w(c);
    Engine *e = w.engine();
    if (!e) return;
    cgrt_graphs_options o;
    e->options(&o, w.descs);
    c.expect(cgrt_graphs_create(w.rt, &o, nullptr), {IA}, "graphs_create(rt, &o, NULL)");
  });
  A("cgrt_graphs_create/options NULL", [](Ctx &c) {
    World w(c);
    cgrt_graphs *s = static_cast<cgrt_graphs *>(foreign());
    if (!w.rt) return;
    c.expect(cgrt_graphs_create(w.rt, nullptr, &s), {IA}, "graphs_create(rt, NULL, &s)");
    c.check(s == nullptr, "*out is not NULL after a failed cgrt_graphs_create");
  });
  static int two_ints[2] = {2, 4};
  static int zero_size[] = {0, 4}, neg_size[] = {-3, 4}, max_size[] = {INT_MAX}, min_size[] = {INT_MIN};
  static const GraphOptCase kOpts[] = {
      {"options->size 0", [](cgrt_graphs_options *o, World &) { o->size = 0; }, {IA}},
      {"options->size one short", [](cgrt_graphs_options *o, World &) { o->size = sizeof *o - 1; }, {IA}},
      {"max_num_seqs 0", [](cgrt_graphs_options *o, World &) { o->max_num_seqs = 0; }, {IA}},
      {"max_num_seqs -1", [](cgrt_graphs_options *o, World &) { o->max_num_seqs = -1; }, {IA}},
      {"max_num_seqs INT_MAX", [](cgrt_graphs_options *o, World &) { o->max_num_seqs = INT_MAX; }, {IA}},
      {"max_num_seqs CGRT_GRAPHS_MAX_ROWS + 1",
       [](cgrt_graphs_options *o, World &) { o->max_num_seqs = CGRT_GRAPHS_MAX_ROWS + 1; }, {IA}},
      {"max_model_len 0", [](cgrt_graphs_options *o, World &) { o->max_model_len = 0; }, {IA}},
      {"max_model_len INT_MIN", [](cgrt_graphs_options *o, World &) { o->max_model_len = INT_MIN; }, {IA}},
      {"enqueue NULL", [](cgrt_graphs_options *o, World &) { o->enqueue = nullptr; }, {IA}},
      {"block_len 1", [](cgrt_graphs_options *o, World &) { o->block_len = 1; }, {IA}},
      {"block_len -1", [](cgrt_graphs_options *o, World &) { o->block_len = -1; }, {IA}},
      {"block_len INT_MAX", [](cgrt_graphs_options *o, World &) { o->block_len = INT_MAX; }, {IA}},
      {"no mode enabled",
       [](cgrt_graphs_options *o, World &) {
         o->enable_decode = 0;
         o->block_len = 0;
       },
       {IA}},
      {"dcp_world_size 0", [](cgrt_graphs_options *o, World &) { o->dcp_world_size = 0; }, {IA}},
      {"dcp_world_size -1", [](cgrt_graphs_options *o, World &) { o->dcp_world_size = -1; }, {IA}},
      {"warmup_runs -1", [](cgrt_graphs_options *o, World &) { o->warmup_runs = -1; }, {IA}},
      {"draft_steps 1", [](cgrt_graphs_options *o, World &) { o->draft_steps = 1; }, {IA}},
      {"draft_steps -2", [](cgrt_graphs_options *o, World &) { o->draft_steps = -2; }, {IA}},
      {"replay_mode 3", [](cgrt_graphs_options *o, World &) { o->replay_mode = (cgrt_replay_mode)3; }, {IA}},
      {"replay_mode -1", [](cgrt_graphs_options *o, World &) { o->replay_mode = (cgrt_replay_mode)-1; }, {IA}},
      {"device_patch 2", [](cgrt_graphs_options *o, World &) { o->device_patch = 2; }, {IA}},
      {"device_patch with exec-update replay",
       [](cgrt_graphs_options *o, World &) {
         o->device_patch = 1;
         o->replay_mode = CGRT_REPLAY_EXEC_UPDATE;
       },
       {IA}},
      {"device_launch 2", [](cgrt_graphs_options *o, World &) { o->device_launch = 2; }, {IA}},
      {"device_launch with copy-in replay",
       [](cgrt_graphs_options *o, World &) {
         o->device_launch = 1;
         o->replay_mode = CGRT_REPLAY_COPY_IN;
       },
       {IA}},
      {"device_launch_idle_us past 60 s", [](cgrt_graphs_options *o, World &) {
         o->device_launch = 1;
         o->device_launch_idle_us = 60000001u;
       },
       {IA}},
      {"num_buffers CGRT_GRAPHS_MAX_BUFFERS + 1",
       [](cgrt_graphs_options *o, World &) {
         o->num_buffers = CGRT_GRAPHS_MAX_BUFFERS + 1;
         o->meta.enabled = 0;
       },
       {IA}},
      {"num_buffers SIZE_MAX",
       [](cgrt_graphs_options *o, World &) {
         o->num_buffers = SIZE_MAX;
         o->meta.enabled = 0;
       },
       {IA}},
      {"buffers NULL with num_buffers 1",
       [](cgrt_graphs_options *o, World &) {
         o->buffers = nullptr;
         o->num_buffers = 1;
         o->meta.enabled = 0;
       },
       {IA}},
      {"a buffer at address 0", [](cgrt_graphs_options *o, World &w) { w.descs[X].ptr = 0; (void)o; }, {IA}},
      {"a buffer of 0 bytes", [](cgrt_graphs_options *o, World &w) { w.descs[X].bytes = 0; (void)o; }, {IA}},
      {"a buffer of direction 0",
       [](cgrt_graphs_options *o, World &w) { w.descs[X].dir = (cgrt_buffer_dir)0; (void)o; }, {IA}},
      {"a buffer of direction 4",
       [](cgrt_graphs_options *o, World &w) { w.descs[X].dir = (cgrt_buffer_dir)4; (void)o; }, {IA}},
      {"two buffers that overlap",
       [](cgrt_graphs_options *o, World &w) { w.descs[Y].ptr = w.descs[X].ptr + 4; (void)o; }, {IA}},
      {"a buffer whose range wraps past 2^64",
       [](cgrt_graphs_options *o, World &w) {
         w.descs[X].ptr = ~(CUdeviceptr)0 - 15;
         w.descs[X].bytes = 64;
         (void)o;
       },
       {IA}},
      {"a buffer of SIZE_MAX bytes",
       [](cgrt_graphs_options *o, World &w) { w.descs[WIN].bytes = SIZE_MAX; (void)o; }, {IA}},
      {"a capture size of 0",
       [](cgrt_graphs_options *o, World &) {
         o->capture_sizes = zero_size;
         o->num_capture_sizes = 2;
       },
       {IA}},
      {"a negative capture size",
       [](cgrt_graphs_options *o, World &) {
         o->capture_sizes = neg_size;
         o->num_capture_sizes = 2;
       },
       {IA}},
      {"capture size INT_MAX",
       [](cgrt_graphs_options *o, World &) {
         o->capture_sizes = max_size;
         o->num_capture_sizes = 1;
       },
       {IA, OK}},
      {"capture size INT_MIN",
       [](cgrt_graphs_options *o, World &) {
         o->capture_sizes = min_size;
         o->num_capture_sizes = 1;
       },
       {IA}},
      {"num_capture_sizes whose byte size overflows size_t",
       [](cgrt_graphs_options *o, World &) {
         o->capture_sizes = two_ints;
         o->num_capture_sizes = SIZE_MAX / sizeof(int) + 3;
       },
       {IA, OOM}},
      {"max_capture_rows -5", [](cgrt_graphs_options *o, World &) { o->max_capture_rows = -5; }, {IA}},
      {"meta.block_size 0", [](cgrt_graphs_options *o, World &) { o->meta.block_size = 0; }, {IA}},
      {"meta.max_blocks_per_seq -1", [](cgrt_graphs_options *o, World &) { o->meta.max_blocks_per_seq = -1; }, {IA}},
      {"meta.seq_lens -1", [](cgrt_graphs_options *o, World &) { o->meta.seq_lens = -1; }, {IA}},
      {"meta.slot_mapping out of range", [](cgrt_graphs_options *o, World &) { o->meta.slot_mapping = NB; }, {IA}},
      {"meta.block_table too small for max_blocks_per_seq",
       [](cgrt_graphs_options *o, World &) { o->meta.max_blocks_per_seq *= 2; }, {IA}},
      {"meta.draft_remaining -2",
       [](cgrt_graphs_options *o, World &) {
         o->draft_steps = 2;
         o->draft_while = 1;
         o->meta.draft_remaining = -2;
       },
       {IA}},
      {"meta.draft_remaining out of range",
       [](cgrt_graphs_options *o, World &) {
         o->draft_steps = 2;
         o->draft_while = 1;
         o->meta.draft_remaining = NB + 3;
       },
       {IA}},
      {"draft_steps INT_MAX (an unrolled loop of 2^31 steps)",
       [](cgrt_graphs_options *o, World &) { o->draft_steps = INT_MAX; }, {IA}},
      {"draft loops without metadata",
       [](cgrt_graphs_options *o, World &) {
         o->draft_steps = 2;
         o->meta.enabled = 0;
       },
       {IA}},
  };
  for (const GraphOptCase &k : kOpts)
    A(std::string("cgrt_graphs_create/") + k.what, [&k](Ctx &c) {
      World w(c);
      Engine *e = w.engine();
      if (!e) return;
      cgrt_graphs_options o;
      e->options(&o, w.descs);
      k.set(&o, w);
      cgrt_graphs *s = static_cast<cgrt_graphs *>(foreign());
      cgrt_status st = cgrt_graphs_create(w.rt, &o, &s);
      c.expect(st, k.want, std::string("cgrt_graphs_create with ") + k.what);
      if (st == OK)
        cgrt_graphs_destroy(s);
      else
        c.check(s == nullptr, "*out is not NULL after a failed cgrt_graphs_create");
    });

  A("cgrt_graphs_destroy/NULL is a no-op", [](Ctx &c) { c.expect_ok(cgrt_graphs_destroy(nullptr), "destroy(NULL)"); });
  for (Bad b : {B_DEAD, B_FOREIGN, B_MISALIGNED})
    A(std::string("cgrt_graphs_destroy/") + kBadNames[b], [b](Ctx &c) {
      World w(c);
      cgrt_graphs *live = w.graphs();
      if (!live) return;
      cgrt_graphs *dead = w.dead_graphs();
      c.expect(cgrt_graphs_destroy(bad_handle(b, live, dead)), {IH}, "cgrt_graphs_destroy");
      c.expect_ok(cgrt_graphs_step(live, CGRT_GRAPH_DECODE, 1, nullptr, 0), "a step of the live set after");
    });
  set_handle_cases("cgrt_graphs_capture", [](World &, cgrt_graphs *s) { return cgrt_graphs_capture(s); });
  set_handle_cases("cgrt_graphs_recapture",
                   [](World &, cgrt_graphs *s) { return cgrt_graphs_recapture(s, CGRT_GRAPH_DECODE, 1); });
  set_handle_cases("cgrt_graphs_step",
                   [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, nullptr, 0); });
  set_handle_cases("cgrt_graphs_draft", [](World &, cgrt_graphs *s) { return cgrt_graphs_draft(s, 1, nullptr, 0); });
  set_handle_cases("cgrt_graphs_set_ranges", [](World &w, cgrt_graphs *s) {
    cgrt_range r = {w.buffer(64), 64, "r"};
    return cgrt_graphs_set_ranges(s, &r, 1);
  });
  set_handle_cases("cgrt_graphs_get_stats", [](World &, cgrt_graphs *s) {
    cgrt_graphs_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    return cgrt_graphs_get_stats(s, &st);
  });
  set_handle_cases("cgrt_graphs_synchronize", [](World &, cgrt_graphs *s) { return cgrt_graphs_synchronize(s); });
  set_handle_cases("cgrt_graphs_get_bucket", [](World &, cgrt_graphs *s) {
    cgrt_bucket_info bi;
    memset(&bi, 0, sizeof bi);
    bi.size = sizeof bi;
    return cgrt_graphs_get_bucket(s, 0, &bi);
  });
  set_handle_cases("cgrt_graphs_bucket_exec", [](World &, cgrt_graphs *s) {
    CUgraphExec x = nullptr;
    return cgrt_graphs_bucket_exec(s, 0, 0, &x);
  });
  value_handle_cases<cgrt_graphs, CUstream>("cgrt_graphs_stream", live_set, dead_set, cgrt_graphs_stream, nullptr);
  value_handle_cases<cgrt_graphs, size_t>("cgrt_graphs_bucket_count", live_set, dead_set, cgrt_graphs_bucket_count,
                                          (size_t)0);
  value_handle_cases<cgrt_graphs, int>(
      "cgrt_graphs_bucket_rows", live_set, dead_set,
      [](cgrt_graphs *s) { return cgrt_graphs_bucket_rows(s, CGRT_GRAPH_DECODE, 1); }, 0);

  struct SetCase {
    const char *what;
    cgrt_status (*call)(World &, cgrt_graphs *);
    std::vector<cgrt_status> want;
    void (*tweak)(cgrt_graphs_options *);
  };
  static const SetCase kSet[] = {
      {"cgrt_graphs_recapture/rows 0", [](World &, cgrt_graphs *s) { return cgrt_graphs_recapture(s, CGRT_GRAPH_DECODE, 0); },
       {IA}, nullptr},
      {"cgrt_graphs_recapture/rows -7",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_recapture(s, CGRT_GRAPH_DECODE, -7); }, {IA}, nullptr},
      {"cgrt_graphs_recapture/rows INT_MAX",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_recapture(s, CGRT_GRAPH_DECODE, INT_MAX); },
       {CGRT_ERROR_NO_BUCKET}, nullptr},
      {"cgrt_graphs_recapture/mode 5",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_recapture(s, (cgrt_graph_mode)5, 1); },
       {IA, CGRT_ERROR_NO_BUCKET}, nullptr},
      {"cgrt_graphs_step/mode 2", [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, (cgrt_graph_mode)2, 1, nullptr, 0); },
       {IA}, nullptr},
      {"cgrt_graphs_step/mode -1",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, (cgrt_graph_mode)-1, 1, nullptr, 0); }, {IA}, nullptr},
      {"cgrt_graphs_step/num_reqs 0", [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 0, nullptr, 0); },
       {IA}, nullptr},
      {"cgrt_graphs_step/num_reqs -1",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, -1, nullptr, 0); }, {IA}, nullptr},
      {"cgrt_graphs_step/num_reqs INT_MIN",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, INT_MIN, nullptr, 0); }, {IA}, nullptr},
      {"cgrt_graphs_step/num_reqs max_num_seqs + 1",
       [](World &w, cgrt_graphs *s) {
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, w.engine()->cfg.max_reqs + 1, nullptr, 0);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/num_reqs INT_MAX",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_BLOCK, INT_MAX, nullptr, 0); }, {IA}, nullptr},
      {"cgrt_graphs_step/bindings NULL with num_bindings 1",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, nullptr, 1); }, {IA}, nullptr},
      {"cgrt_graphs_step/binding of buffer -1",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b = {-1, w.engine()->alt[0][X], 0};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/binding of buffer num_buffers",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b = {NB, w.engine()->alt[0][X], 0};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/binding of buffer INT_MAX",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b = {INT_MAX, w.engine()->alt[0][X], 0};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/binding to address 0",
       [](World &, cgrt_graphs *s) {
         cgrt_binding b = {X, 0, 0};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/binding smaller than the registered buffer",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b = {X, w.engine()->alt[0][X], 4};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/binding whose range wraps past 2^64",
       [](World &, cgrt_graphs *s) {
         cgrt_binding b = {X, ~(CUdeviceptr)0 - 7, SIZE_MAX};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA, CGRT_ERROR_STALE_POINTER},
       [](cgrt_graphs_options *o) { o->checked_replay = 1; }},
      {"cgrt_graphs_step/the same buffer bound twice in one call",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b[2] = {{X, w.engine()->alt[0][X], 0}, {X, w.engine()->a[X], 0}};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, b, 2);
       },
       {IA, OK}, nullptr},
      {"cgrt_graphs_step/a mode that was never captured",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_BLOCK, 1, nullptr, 0); }, {IA},
       [](cgrt_graphs_options *o) { o->block_len = 0; }},
      {"cgrt_graphs_step/checked replay, binding to an address never allocated (0xdead000)",
       [](World &, cgrt_graphs *s) {
         cgrt_binding b = {X, 0xdead000, 0};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {CGRT_ERROR_STALE_POINTER}, [](cgrt_graphs_options *o) { o->checked_replay = 1; }},
      {"cgrt_graphs_step/checked replay, binding to host memory cgrt never allocated",
       [](World &w, cgrt_graphs *s) {
         static std::vector<unsigned char> host;
         host.assign(w.engine()->bytes[X] + 4096, 0);
         cgrt_binding b = {X, (CUdeviceptr)(uintptr_t)host.data(), 0};
         cgrt_status st = cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
         cgrt_runtime_synchronize(w.rt);
         return st;
       },
       {CGRT_ERROR_STALE_POINTER}, [](cgrt_graphs_options *o) { o->checked_replay = 1; }},
      {"cgrt_graphs_draft/no draft loops captured",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_draft(s, 1, nullptr, 0); }, {CGRT_ERROR_NOT_SUPPORTED}, nullptr},
      {"cgrt_graphs_draft/num_reqs 0", [](World &, cgrt_graphs *s) { return cgrt_graphs_draft(s, 0, nullptr, 0); }, {IA},
       [](cgrt_graphs_options *o) { o->draft_steps = 2; }},
      {"cgrt_graphs_draft/num_reqs -3", [](World &, cgrt_graphs *s) { return cgrt_graphs_draft(s, -3, nullptr, 0); }, {IA},
       [](cgrt_graphs_options *o) { o->draft_steps = 2; }},
      {"cgrt_graphs_draft/binding of buffer -1",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b = {-1, w.engine()->alt[0][X], 0};
         return cgrt_graphs_draft(s, 1, &b, 1);
       },
       {IA}, [](cgrt_graphs_options *o) { o->draft_steps = 2; }},
      {"cgrt_graphs_set_ranges/ranges NULL with count 1",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_set_ranges(s, nullptr, 1); }, {IA}, nullptr},
      {"cgrt_graphs_set_ranges/ranges NULL with count 0 (clears)",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_set_ranges(s, nullptr, 0); }, {OK}, nullptr},
      {"cgrt_graphs_set_ranges/base 0",
       [](World &, cgrt_graphs *s) {
         cgrt_range r = {0, 64, "zero"};
         return cgrt_graphs_set_ranges(s, &r, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_set_ranges/0 bytes",
       [](World &w, cgrt_graphs *s) {
         cgrt_range r = {w.buffer(64), 0, "empty"};
         return cgrt_graphs_set_ranges(s, &r, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_set_ranges/a range that wraps past 2^64",
       [](World &w, cgrt_graphs *s) {
         cgrt_range r = {w.buffer(64), SIZE_MAX, "wraps"};
         return cgrt_graphs_set_ranges(s, &r, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_set_ranges/what NULL",
       [](World &w, cgrt_graphs *s) {
         cgrt_range r = {w.buffer(64), 64, nullptr};
         return cgrt_graphs_set_ranges(s, &r, 1);
       },
       {OK, IA}, nullptr},
      {"cgrt_graphs_set_ranges/count SIZE_MAX",
       [](World &w, cgrt_graphs *s) {
         cgrt_range r = {w.buffer(64), 64, "r"};
         return cgrt_graphs_set_ranges(s, &r, SIZE_MAX);
       },
       {IA, OOM}, nullptr},
      {"cgrt_graphs_get_stats/stats NULL", [](World &, cgrt_graphs *s) { return cgrt_graphs_get_stats(s, nullptr); }, {IA},
       nullptr},
      {"cgrt_graphs_get_stats/stats->size 0",
       [](World &w, cgrt_graphs *s) {
         Canaried<cgrt_graphs_stats> st(0);
         cgrt_status r = cgrt_graphs_get_stats(s, st.get());
         w.c.check(st.canary_intact(), "cgrt_graphs_get_stats wrote past the struct");
         return r;
       },
       {IA}, nullptr},
      {"cgrt_graphs_get_stats/stats->size larger than the struct writes only the struct",
       [](World &w, cgrt_graphs *s) {
         Canaried<cgrt_graphs_stats> st(sizeof(cgrt_graphs_stats) + 256);
         cgrt_status r = cgrt_graphs_get_stats(s, st.get());
         w.c.check(st.canary_intact(), "cgrt_graphs_get_stats wrote past sizeof(cgrt_graphs_stats)");
         return r;
       },
       {OK, IA}, nullptr},
      {"cgrt_graphs_get_bucket/index == bucket count",
       [](World &, cgrt_graphs *s) {
         cgrt_bucket_info bi;
         memset(&bi, 0, sizeof bi);
         bi.size = sizeof bi;
         return cgrt_graphs_get_bucket(s, cgrt_graphs_bucket_count(s), &bi);
       },
       {IA}, nullptr},
      {"cgrt_graphs_get_bucket/index SIZE_MAX",
       [](World &, cgrt_graphs *s) {
         cgrt_bucket_info bi;
         memset(&bi, 0, sizeof bi);
         bi.size = sizeof bi;
         return cgrt_graphs_get_bucket(s, SIZE_MAX, &bi);
       },
       {IA}, nullptr},
      {"cgrt_graphs_get_bucket/info NULL", [](World &, cgrt_graphs *s) { return cgrt_graphs_get_bucket(s, 0, nullptr); },
       {IA}, nullptr},
      {"cgrt_graphs_bucket_exec/exec NULL",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_bucket_exec(s, 0, 0, nullptr); }, {IA}, nullptr},
      {"cgrt_graphs_bucket_exec/index SIZE_MAX",
       [](World &, cgrt_graphs *s) {
         CUgraphExec x = nullptr;
         return cgrt_graphs_bucket_exec(s, SIZE_MAX, 0, &x);
       },
       {IA}, nullptr},
      {"cgrt_graphs_bucket_exec/launches UINT_MAX",
       [](World &, cgrt_graphs *s) {
         CUgraphExec x = nullptr;
         return cgrt_graphs_bucket_exec(s, 0, UINT_MAX, &x);
       },
       {IA}, nullptr},
      {"cgrt_graphs_get_bucket/info->size 0",
       [](World &w, cgrt_graphs *s) {
         Canaried<cgrt_bucket_info> bi(0);
         cgrt_status r = cgrt_graphs_get_bucket(s, 0, bi.get());
         w.c.check(bi.canary_intact(), "cgrt_graphs_get_bucket wrote past the struct");
         return r;
       },
       {IA}, nullptr},
      {"cgrt_graphs_bucket_rows/bad mode and request counts answer 0",
       [](World &w, cgrt_graphs *s) {
         for (int m : {-1, 2, 99})
           w.c.check(cgrt_graphs_bucket_rows(s, (cgrt_graph_mode)m, 1) == 0,
                     "cgrt_graphs_bucket_rows with mode " + std::to_string(m) + " != 0");
         for (int n : {0, -1, INT_MIN, INT_MAX})
           w.c.check(cgrt_graphs_bucket_rows(s, CGRT_GRAPH_DECODE, n) == 0,
                     "cgrt_graphs_bucket_rows with num_reqs " + std::to_string(n) + " != 0");
         return OK;
       },
       {OK}, nullptr},
  };
  for (const SetCase &k : kSet)
    A(k.what, [&k](Ctx &c) {
      World w(c);
      cgrt_graphs *s = w.graphs(k.tweak);
      if (!s) return;
      cgrt_status st = k.call(w, s);
      c.expect(st, k.want, std::string(k.what));
    });
  A("cgrt_graphs_step/before cgrt_graphs_capture", [](Ctx &c) {
    World w(c);
    Engine *e = w.engine();
    if (!e) return;
    cgrt_graphs_options o;
    e->options(&o, w.descs);
    cgrt_graphs *s = nullptr;
    if (!c.expect_ok(cgrt_graphs_create(w.rt, &o, &s), "cgrt_graphs_create")) return;
    c.expect(cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, nullptr, 0), {IA, OK}, "a step before any capture");
    c.expect_ok(cgrt_graphs_destroy(s), "cgrt_graphs_destroy");
  });
}

Register reg([] {
  graphs_cases();
});

}  // namespace
}  // namespace adv
