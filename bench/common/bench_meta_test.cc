// bench_meta: the "meta" object of the benchmarks' JSON.
#include "bench/common/bench_meta.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>

namespace {

std::string write_file(const char *name, const char *text) {
  const char *dir = getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  FILE *f = fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr);
  if (f) {
    fputs(text, f);
    fclose(f);
  }
  return path;
}

TEST(BenchMeta, JsonStringEscapes) {
  EXPECT_EQ(cgrt_bench::json_string("plain"), "\"plain\"");
  EXPECT_EQ(cgrt_bench::json_string("a\"b\\c\nd\te\x01"), "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
}

TEST(BenchMeta, NvidiaDriverVersionFromProcFile) {
  const std::string proprietary = write_file(
      "v1", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  2 2025\nGCC version: 12\n");
  EXPECT_EQ(cgrt_bench::nvidia_driver_version(proprietary.c_str()), "580.159.04");
  const std::string open = write_file(
      "v2", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n");
  EXPECT_EQ(cgrt_bench::nvidia_driver_version(open.c_str()), "570.86.15");
  const std::string none = write_file("v3", "NVRM version: unknown\n");
  EXPECT_EQ(cgrt_bench::nvidia_driver_version(none.c_str()), "");
  EXPECT_EQ(cgrt_bench::nvidia_driver_version("/nonexistent/cgrt/version"), "");
}

TEST(BenchMeta, CommandLineQuotesWhatTheShellWouldSplit) {
  char a0[] = "./mla_decode_bench", a1[] = "--shape", a2[] = "1,16,8192", a3[] = "--out", a4[] = "my file.json",
       a5[] = "it's";
  char *argv[] = {a0, a1, a2, a3, a4, a5};
  EXPECT_EQ(cgrt_bench::command_line(6, argv),
            "./mla_decode_bench --shape 1,16,8192 --out 'my file.json' 'it'\\''s'");
}

TEST(BenchMeta, MetaObjectCarriesEveryField) {
  cgrt_runtime_info info;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  info.driver = CGRT_DRIVER_EMULATED;
  info.driver_version = 13000;
  strcpy(info.device_name, "Test \"GPU\"");
  unsetenv("CGRT_BENCH_COMMIT");
  std::string m = cgrt_bench::meta_json(info, "bench --x");
  EXPECT_NE(m.find("\"gpu\": \"Test \\\"GPU\\\"\""), std::string::npos) << m;
  EXPECT_NE(m.find("\"driver\": \"emulated\""), std::string::npos) << m;
  EXPECT_NE(m.find("\"cuda_driver_version\": 13000"), std::string::npos) << m;
  EXPECT_NE(m.find("\"driver_kind\": \"emulated\""), std::string::npos) << m;
  EXPECT_NE(m.find("\"commit\": \"unknown\""), std::string::npos) << m;
  EXPECT_NE(m.find("\"command\": \"bench --x\""), std::string::npos) << m;
  const size_t d = m.find("\"date\": \"");
  ASSERT_NE(d, std::string::npos) << m;
  const std::string date = m.substr(d + 9, 20);  // 2026-11-30T01:37:23Z
  EXPECT_EQ(date.size(), 20u);
  EXPECT_EQ(date[4], '-');
  EXPECT_EQ(date[10], 'T');
  EXPECT_EQ(date[19], 'Z');

  setenv("CGRT_BENCH_COMMIT", "b48d4a7", 1);
  m = cgrt_bench::meta_json(info, "bench --x");
  unsetenv("CGRT_BENCH_COMMIT");
  EXPECT_NE(m.find("\"commit\": \"b48d4a7\""), std::string::npos) << m;
}

}  // namespace
