// Bad-argument cases of include/cgrt/cgrt_mla.h (MLA decode).
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "cgrt/cgrt_mla.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

void mla_cases() {
  A("cgrt_mla_options_init/NULL", [](Ctx &) { cgrt_mla_options_init(nullptr); });
  runtime_handle_cases("cgrt_mla_plan_create", [](World &, cgrt_runtime *rt) {
    cgrt_mla_options o = small_mla(1);
    cgrt_mla_plan *p = nullptr;
    cgrt_status st = cgrt_mla_plan_create(rt, &o, &p);
    cgrt_mla_plan_destroy(p);
    return st;
  });
  struct PlanOpt {
    const char *what;
    void (*set)(cgrt_mla_options *);
    std::vector<cgrt_status> want;
  };
  static const PlanOpt kOpts[] = {
      {"options->size 0", [](cgrt_mla_options *o) { o->size = 0; }, {IA}},
      {"options->size 4", [](cgrt_mla_options *o) { o->size = 4; }, {IA}},
      {"max_num_seqs 0", [](cgrt_mla_options *o) { o->max_num_seqs = 0; }, {IA}},
      {"max_num_seqs -1", [](cgrt_mla_options *o) { o->max_num_seqs = -1; }, {IA}},
      {"heads 0", [](cgrt_mla_options *o) { o->heads = 0; }, {IA}},
      {"heads -16", [](cgrt_mla_options *o) { o->heads = -16; }, {IA}},
      {"block_len 0", [](cgrt_mla_options *o) { o->block_len = 0; }, {IA}},
      {"dcp_world_size 0", [](cgrt_mla_options *o) { o->dcp_world_size = 0; }, {IA}},
      {"page_size 0", [](cgrt_mla_options *o) { o->page_size = 0; }, {IA}},
      {"page_size 8", [](cgrt_mla_options *o) { o->page_size = 8; }, {IA}},
      {"page_size 48", [](cgrt_mla_options *o) { o->page_size = 48; }, {IA}},
      {"page_size 128", [](cgrt_mla_options *o) { o->page_size = 128; }, {IA}},
      {"max_model_len 0", [](cgrt_mla_options *o) { o->max_model_len = 0; }, {IA}},
      {"max_model_len INT_MAX with max_blocks_per_seq 0",
       [](cgrt_mla_options *o) {
         o->max_model_len = INT_MAX;
         o->max_blocks_per_seq = 0;
       },
       {IA}},
      {"max_blocks_per_seq -1", [](cgrt_mla_options *o) { o->max_blocks_per_seq = -1; }, {IA}},
      {"combine 3", [](cgrt_mla_options *o) { o->combine = (cgrt_mla_combine)3; }, {IA}},
      {"combine -1", [](cgrt_mla_options *o) { o->combine = (cgrt_mla_combine)-1; }, {IA}},
      {"lane -1", [](cgrt_mla_options *o) { o->lane = -1; }, {IA}},
      {"lane CGRT_MAX_LANES", [](cgrt_mla_options *o) { o->lane = CGRT_MAX_LANES; }, {IA}},
      {"programmatic_launch 3", [](cgrt_mla_options *o) { o->programmatic_launch = 3; }, {IA}},
      {"programmatic_launch -1", [](cgrt_mla_options *o) { o->programmatic_launch = -1; }, {IA}},
      {"max_num_seqs x block_len overflows int",
       [](cgrt_mla_options *o) {
         o->max_num_seqs = INT_MAX;
         o->block_len = 4;
       },
       {IA}},
      {"heads x dcp_world_size overflows int",
       [](cgrt_mla_options *o) {
         o->heads = INT_MAX / 2;
         o->dcp_world_size = 4;
       },
       {IA}},
      {"max_num_seqs and heads INT_MAX", [](cgrt_mla_options *o) { o->max_num_seqs = o->heads = INT_MAX; }, {IA}},
      {"partials of about 275 GB (out of memory)",
       [](cgrt_mla_options *o) {
         o->max_num_seqs = 1 << 20;
         o->heads = 128;
       },
       {OOM, IA}},
  };
  for (const PlanOpt &k : kOpts)
    A(std::string("cgrt_mla_plan_create/") + k.what, [&k](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      cgrt_mla_options o = small_mla(2);
      k.set(&o);
      cgrt_mla_plan *p = static_cast<cgrt_mla_plan *>(foreign());
      cgrt_status st = cgrt_mla_plan_create(w.rt, &o, &p);
      c.expect(st, k.want, std::string("cgrt_mla_plan_create with ") + k.what);
      if (st == OK)
        cgrt_mla_plan_destroy(p);
      else
        c.check(p == nullptr, "*out is not NULL after a failed cgrt_mla_plan_create");
    });
  A("cgrt_mla_plan_create/options NULL", [](Ctx &c) {
    World w(c);
    cgrt_mla_plan *p = nullptr;
    if (w.rt) c.expect(cgrt_mla_plan_create(w.rt, nullptr, &p), {IA}, "plan_create(rt, NULL, &p)");
  });
  A("cgrt_mla_plan_create/out NULL", [](Ctx &c) {
    World w(c);
    cgrt_mla_options o = small_mla(1);
    if (w.rt) c.expect(cgrt_mla_plan_create(w.rt, &o, nullptr), {IA}, "plan_create(rt, &o, NULL)");
  });
  for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED})
    A(std::string("cgrt_mla_plan_destroy/") + kBadNames[b] + " is a no-op", [b](Ctx &c) {
      World w(c);
      cgrt_mla_plan *live = w.plan();
      if (!live) return;
      cgrt_mla_plan *dead = w.dead_plan();
      cgrt_mla_plan_destroy(bad_handle(b, live, dead));
      cgrt_mla_plan_info i;
      memset(&i, 0, sizeof i);
      i.size = sizeof i;
      c.expect_ok(cgrt_mla_plan_get_info(live, &i), "the live plan after");
    });
  plan_handle_cases("cgrt_mla_plan_get_info", [](World &, cgrt_mla_plan *p) {
    cgrt_mla_plan_info i;
    memset(&i, 0, sizeof i);
    i.size = sizeof i;
    return cgrt_mla_plan_get_info(p, &i);
  });
  A("cgrt_mla_plan_get_info/info NULL", [](Ctx &c) {
    World w(c);
    if (cgrt_mla_plan *p = w.plan()) c.expect(cgrt_mla_plan_get_info(p, nullptr), {IA}, "get_info(plan, NULL)");
  });
  for (size_t size : {(size_t)0, sizeof(size_t), offsetof(cgrt_mla_plan_info, split_kernel)})
    A("cgrt_mla_plan_get_info/info->size " + std::to_string(size), [size](Ctx &c) {
      World w(c);
      cgrt_mla_plan *p = w.plan();
      if (!p) return;
      Canaried<cgrt_mla_plan_info> i(size);
      c.expect(cgrt_mla_plan_get_info(p, i.get()), {IA}, "get_info with size " + std::to_string(size));
      c.check(i.canary_intact(), "cgrt_mla_plan_get_info wrote past the struct");
    });
  plan_handle_cases("cgrt_mla_decode", [](World &w, cgrt_mla_plan *p) {
    cgrt_mla_args a = w.mla_args();
    return cgrt_mla_decode(p, nullptr, &a);
  });
  struct DecCase {
    const char *what;
    void (*set)(cgrt_mla_args *);
  };
  static const DecCase kDec[] = {
      {"args->size 0", [](cgrt_mla_args *a) { a->size = 0; }},
      {"args->size 8", [](cgrt_mla_args *a) { a->size = 8; }},
      {"q 0", [](cgrt_mla_args *a) { a->q = 0; }},
      {"kv_cache 0", [](cgrt_mla_args *a) { a->kv_cache = 0; }},
      {"block_table 0", [](cgrt_mla_args *a) { a->block_table = 0; }},
      {"seq_lens 0", [](cgrt_mla_args *a) { a->seq_lens = 0; }},
      {"out 0", [](cgrt_mla_args *a) { a->out = 0; }},
      {"lse 0", [](cgrt_mla_args *a) { a->lse = 0; }},
      {"q misaligned (+2)", [](cgrt_mla_args *a) { a->q += 2; }},
      {"kv_cache misaligned (+8)", [](cgrt_mla_args *a) { a->kv_cache += 8; }},
      {"out misaligned (+4)", [](cgrt_mla_args *a) { a->out += 4; }},
      {"block_table misaligned (+2)", [](cgrt_mla_args *a) { a->block_table += 2; }},
      {"seq_lens misaligned (+1)", [](cgrt_mla_args *a) { a->seq_lens += 1; }},
      {"lse misaligned (+2)", [](cgrt_mla_args *a) { a->lse += 2; }},
      {"num_rows 0", [](cgrt_mla_args *a) { a->num_rows = 0; }},
      {"num_rows -2", [](cgrt_mla_args *a) { a->num_rows = -2; }},
      {"num_rows max_rows + 2", [](cgrt_mla_args *a) { a->num_rows = 6; }},
      {"num_rows INT_MAX", [](cgrt_mla_args *a) { a->num_rows = INT_MAX; }},
      {"num_rows not a multiple of block_len", [](cgrt_mla_args *a) { a->num_rows = 3; }},
      {"softmax_scale NaN", [](cgrt_mla_args *a) { a->softmax_scale = NAN; }},
      {"softmax_scale +inf", [](cgrt_mla_args *a) { a->softmax_scale = INFINITY; }},
      {"softmax_scale 0", [](cgrt_mla_args *a) { a->softmax_scale = 0.0f; }},
      {"softmax_scale -1", [](cgrt_mla_args *a) { a->softmax_scale = -1.0f; }},
  };
  A("cgrt_mla_decode/args NULL", [](Ctx &c) {
    World w(c);
    if (cgrt_mla_plan *p = w.plan()) c.expect(cgrt_mla_decode(p, nullptr, nullptr), {IA}, "decode(plan, NULL, NULL)");
  });
  for (const DecCase &k : kDec)
    A(std::string("cgrt_mla_decode/") + k.what, [&k](Ctx &c) {
      World w(c);
      cgrt_mla_plan *p = w.plan();
      cgrt_mla_args a = w.mla_args();
      if (!p || !a.q) return;
      k.set(&a);
      c.expect(cgrt_mla_decode(p, nullptr, &a), {IA}, std::string("cgrt_mla_decode with ") + k.what);
      c.expect_ok(cgrt_runtime_synchronize(w.rt), "the runtime after");
    });
  A("cgrt_mla_decode/valid arguments (control)", [](Ctx &c) {
    World w(c);
    cgrt_mla_plan *p = w.plan();
    cgrt_mla_args a = w.mla_args();
    if (!p || !a.q) return;
    c.expect_ok(cgrt_mla_decode(p, nullptr, &a), "cgrt_mla_decode with valid arguments");
    c.expect_ok(cgrt_runtime_synchronize(w.rt), "synchronize");
  });
}

Register reg([] {
  mla_cases();
});

}  // namespace
}  // namespace adv
