#!/usr/bin/env python3
"""Link-time stubs of the CUDA libraries candle's `cuda` feature links against
(cudarc's dynamic linking: libcuda, libcublas, libcublasLt, libcurand, libnvrtc),
so a `--features cuda` build links on a machine without the driver or those
libraries. Each stub exports every function cudarc declares for that library
and carries the real library's SONAME; at run time the loader finds the real
ones (the driver's libcuda.so.1, the toolkit's or pip's others) by that name.
Never install the stubs where programs run.

usage: cuda-link-stubs.py OUT_DIR
"""
import glob
import os
import re
import subprocess
import sys

# cudarc module -> (link name, SONAME of the CUDA 13 library)
LIBRARIES = {
    "driver": ("cuda", "libcuda.so.1"),
    "cublas": ("cublas", "libcublas.so.13"),
    "cublaslt": ("cublasLt", "libcublasLt.so.13"),
    "curand": ("curand", "libcurand.so.10"),
    "nvrtc": ("nvrtc", "libnvrtc.so.13"),
}


def cudarc_dir():
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    found = sorted(glob.glob(os.path.join(home, "registry/src/*/cudarc-0.19.*")))
    if not found:
        sys.exit("cudarc 0.19 is not in the cargo registry: run `cargo fetch` first")
    return found[-1]


def functions(module_file):
    text = open(module_file).read()
    # Inside `extern "C" { fn name(...) ... }` blocks (the linked, not dlopen'd, path).
    return sorted(set(re.findall(r'^\s*(?:pub )?fn (\w+)\(', "\n".join(
        block for block in re.findall(r'extern "C" \{(.*?)\n\s*\}', text, re.S)), re.M)))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    root = cudarc_dir()
    for module, (name, soname) in LIBRARIES.items():
        names = functions(os.path.join(root, "src", module, "sys", "mod.rs"))
        if not names:
            sys.exit(f"no functions found for {module} in {root}")
        source = os.path.join(out, f"{name}.c")
        with open(source, "w") as f:
            f.write("/* link-time stub: never loaded at run time */\n")
            for fn in names:
                f.write(f"void {fn}(void) {{}}\n")
        subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o",
                        os.path.join(out, f"lib{name}.so"), source], check=True)
        print(f"lib{name}.so ({soname}): {len(names)} functions")


if __name__ == "__main__":
    main()
