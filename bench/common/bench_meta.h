// Run metadata that every benchmark writes into its JSON as a top-level "meta" object:
// the GPU, the driver, the date, the commit and the command line, so that a result file
// says where it came from (bench/results/README.md indexes them).
#pragma once

#include <string>

#include "cgrt/cgrt_runtime.h"

namespace cgrt_bench {

// s as a JSON string literal, quotes included (", \ and control characters escaped).
std::string json_string(const std::string &s);

// The NVIDIA kernel driver's version ("580.159.04") from the first line of `path`
// (/proc/driver/nvidia/version on Linux); "" where the file is absent or has no version.
std::string nvidia_driver_version(const char *path = "/proc/driver/nvidia/version");

// The argument vector as one shell command line (arguments with spaces or shell
// characters single-quoted). Take it before parsing arguments with strtok.
std::string command_line(int argc, char **argv);

// The "meta" object, one line:
//   {"gpu": device name, "driver": NVIDIA driver version ("emulated" on the emulation,
//    "unknown" where not readable), "cuda_driver_version": cuDriverGetVersion's figure,
//    "driver_kind": "cuda" | "emulated", "date": UTC ISO 8601, "commit": the environment
//    variable CGRT_BENCH_COMMIT (tools/h200_validate.sh sets it) or "unknown",
//    "command": command, from command_line}
std::string meta_json(const cgrt_runtime_info &info, const std::string &command);

}  // namespace cgrt_bench
