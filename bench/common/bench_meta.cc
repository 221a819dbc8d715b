// Run metadata of the benchmarks' JSON (bench_meta.h).
#include "bench/common/bench_meta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

namespace cgrt_bench {

std::string json_string(const std::string &s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += (char)c;
    } else if (c == '\n') {
      o += "\\n";
    } else if (c == '\t') {
      o += "\\t";
    } else if (c < 0x20) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += (char)c;
    }
  }
  return o + "\"";
}

std::string nvidia_driver_version(const char *path) {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct ..." (or "Open
  // Kernel Module for x86_64"): the first word of digits and dots with a dot in it.
  FILE *f = fopen(path, "r");
  if (!f) return "";
  char line[512] = {0};
  const bool got = fgets(line, sizeof line, f) != nullptr;
  fclose(f);
  if (!got) return "";
  for (char *w = strtok(line, " \t\n"); w; w = strtok(nullptr, " \t\n")) {
    const size_t n = strlen(w);
    if (strspn(w, "0123456789.") == n && strchr(w, '.') && w[0] != '.') return w;
  }
  return "";
}

std::string command_line(int argc, char **argv) {
  std::string o;
  for (int i = 0; i < argc; i++) {
    const std::string a = argv[i];
    if (i) o += ' ';
    if (!a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()[]{}!#~") == std::string::npos) {
      o += a;
      continue;
    }
    o += '\'';
    for (char c : a) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
    o += '\'';
  }
  return o;
}

std::string meta_json(const cgrt_runtime_info &info, const std::string &command) {
  std::string driver = "emulated";
  if (info.driver == CGRT_DRIVER_CUDA) {
    driver = nvidia_driver_version();
    if (driver.empty()) driver = "unknown";
  }
  char date[32];
  const time_t now = time(nullptr);
  struct tm utc;
  gmtime_r(&now, &utc);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  const char *commit = getenv("CGRT_BENCH_COMMIT");
  return "{\"gpu\": " + json_string(info.device_name) + ", \"driver\": " + json_string(driver) +
         ", \"cuda_driver_version\": " + std::to_string(info.driver_version) +
         ", \"driver_kind\": " + json_string(cgrt_driver_kind_name(info.driver)) + ", \"date\": " +
         json_string(date) + ", \"commit\": " + json_string(commit && *commit ? commit : "unknown") +
         ", \"command\": " + json_string(command) + "}";
}

}  // namespace cgrt_bench
