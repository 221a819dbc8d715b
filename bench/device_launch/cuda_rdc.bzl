"""cuda_rdc_binary: one nvcc call that compiles .cu sources with -rdc=true and links them
into an executable with the static CUDA runtime (libcudart_static.a, nvcc's default
`-cudart static`) and the device runtime (libcudadevrt.a), both from the local toolkit.

For bench/device_launch only: the benchmark calls the CUDA runtime API from the host and
cudaGraphLaunch from device code (device graph launch), which needs relocatable device
code and libcudadevrt. The library itself never links nvcc-compiled host code (it loads
fatbins through the driver API, tools/cuda.bzl). The executable needs no shared CUDA
runtime: only the driver's libcuda.so.1, which libcudart_static opens at run time.

nvcc comes from CUDA_PATH in the action environment, else /usr/local/cuda; like
tools/cuda.bzl's cuda_fatbin, the action runs outside the sandbox because nvcc needs the
whole toolkit (its headers, libraries and host-compiler configuration).
"""

def _cuda_rdc_binary_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name)
    gencodes = " ".join(["-gencode=" + g for g in ctx.attr.gencodes])
    cmd = " ".join([
        'NVCC="${CUDA_PATH:-/usr/local/cuda}/bin/nvcc";',
        '"$NVCC" -std=c++17 -O2 -rdc=true -cudart static',
        # Every warning is an error: nvcc's own and the host compiler's.
        "-Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror",
        gencodes,
        " ".join(ctx.attr.nvcc_opts),
        "-I.",
        "-o",
        out.path,
        " ".join([s.path for s in ctx.files.srcs]),
        "-lcudadevrt",
    ])
    ctx.actions.run_shell(
        inputs = ctx.files.srcs + ctx.files.hdrs,
        outputs = [out],
        command = cmd,
        mnemonic = "NvccRdcBinary",
        progress_message = "nvcc -rdc=true %s" % ctx.label,
        use_default_shell_env = True,
        execution_requirements = {"no-sandbox": "1", "no-remote": "1"},
    )
    return [DefaultInfo(executable = out, files = depset([out]))]

cuda_rdc_binary = rule(
    implementation = _cuda_rdc_binary_impl,
    executable = True,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"], mandatory = True),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        # sm_90a machine code only: the device runtime cannot be linked into PTX that the
        # driver JIT-compiles, and the benchmark targets H100 / H200.
        "gencodes": attr.string_list(default = ["arch=compute_90a,code=sm_90a"]),
        "nvcc_opts": attr.string_list(default = []),
    },
)
