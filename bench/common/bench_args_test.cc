// bench_args: the benchmarks' command-line parser.
#include "bench/common/bench_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using cgrt_bench::Args;

// Parses `words` (argv[0] is added) with the options of a benchmark main.
struct Parsed {
  bool ok = false, smoke = false;
  int reps = 30;
  std::string out = "default.json";
  std::vector<std::string> shapes;
};

Parsed parse(std::vector<std::string> words, Args::Mode mode) {
  Parsed r;
  words.insert(words.begin(), "bench");
  std::vector<char *> argv;
  for (std::string &w : words) argv.push_back(&w[0]);
  Args a;
  a.flag("--smoke", &r.smoke).value("--reps", &r.reps).value("--out", &r.out).value("--shape", [&](const char *v) {
    if (std::string(v) == "bad") return false;
    r.shapes.push_back(v);
    return true;
  });
  r.ok = a.parse((int)argv.size(), argv.data(), mode);
  return r;
}

TEST(BenchArgs, FlagsValuesAndDefaults) {
  Parsed d = parse({}, Args::kStrict);
  EXPECT_TRUE(d.ok);
  EXPECT_FALSE(d.smoke);
  EXPECT_EQ(d.reps, 30);
  EXPECT_EQ(d.out, "default.json");
  Parsed p = parse({"--smoke", "--reps", "7", "--out", "x.json", "--shape", "1,2,3", "--shape", "4,5,6"},
                   Args::kStrict);
  EXPECT_TRUE(p.ok);
  EXPECT_TRUE(p.smoke);
  EXPECT_EQ(p.reps, 7);
  EXPECT_EQ(p.out, "x.json");
  EXPECT_EQ(p.shapes, (std::vector<std::string>{"1,2,3", "4,5,6"}));
}

TEST(BenchArgs, LastValueWinsAndIntegersAreAtoi) {
  Parsed p = parse({"--reps", "3", "--reps", "12abc"}, Args::kStrict);
  EXPECT_TRUE(p.ok);
  EXPECT_EQ(p.reps, 12);
  EXPECT_EQ(parse({"--reps", "x"}, Args::kStrict).reps, 0);
}

TEST(BenchArgs, UnknownArgumentsFailWhenStrictAndPassWhenLenient) {
  EXPECT_FALSE(parse({"--smoke", "--bogus"}, Args::kStrict).ok);
  Parsed p = parse({"--bogus", "--smoke", "stray", "--reps", "5"}, Args::kLenient);
  EXPECT_TRUE(p.ok);
  EXPECT_TRUE(p.smoke);
  EXPECT_EQ(p.reps, 5);
}

TEST(BenchArgs, AValueOptionWithoutItsValueIsUnknown) {
  EXPECT_FALSE(parse({"--reps"}, Args::kStrict).ok);
  Parsed p = parse({"--smoke", "--reps"}, Args::kLenient);
  EXPECT_TRUE(p.ok);
  EXPECT_EQ(p.reps, 30);
}

TEST(BenchArgs, AFailedValueStopsTheParse) {
  Parsed p = parse({"--shape", "bad", "--smoke"}, Args::kLenient);
  EXPECT_FALSE(p.ok);
  EXPECT_FALSE(p.smoke) << "nothing after the failed value is parsed";
}

TEST(BenchArgs, IntList) {
  EXPECT_EQ(cgrt_bench::int_list("32,128,512"), (std::vector<int>{32, 128, 512}));
  EXPECT_EQ(cgrt_bench::int_list(",1,,2,"), (std::vector<int>{1, 2}));
  EXPECT_EQ(cgrt_bench::int_list(""), std::vector<int>{});
}

}  // namespace
