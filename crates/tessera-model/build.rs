//! Under the `cuda` feature, compile `kernels/*.cu` (at the workspace root) to
//! PTX in OUT_DIR with nvcc; `src/device/cuda.rs` embeds the PTX and the driver
//! JIT-compiles it for the GPU at hand. A CPU-only build does nothing here.
//!
//! nvcc is `$NVCC`, else `$CUDA_ROOT/bin/nvcc` / `$CUDA_PATH/bin/nvcc`, else
//! `nvcc` on PATH. `TESSERA_CUDA_ARCH` picks the virtual architecture (default
//! `compute_80`: Ampere and newer, the H100/H200 included).

use std::path::{Path, PathBuf};
use std::process::Command;

const KERNELS: [&str; 2] = ["paged_attention", "cache_write"];

fn main() {
    let kernels_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels");
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    for name in KERNELS {
        println!(
            "cargo:rerun-if-changed={}",
            kernels_dir.join(format!("{name}.cu")).display()
        );
    }
    println!(
        "cargo:rerun-if-changed={}",
        kernels_dir.join("tessera_common.cuh").display()
    );
    for var in ["NVCC", "CUDA_ROOT", "CUDA_PATH", "TESSERA_CUDA_ARCH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let nvcc = nvcc();
    let arch = std::env::var("TESSERA_CUDA_ARCH").unwrap_or_else(|_| "compute_80".to_string());
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for name in KERNELS {
        let source = kernels_dir.join(format!("{name}.cu"));
        let ptx = out_dir.join(format!("{name}.ptx"));
        let status = Command::new(&nvcc)
            .args(["-ptx", "-O3", "-std=c++17"])
            .arg(format!("-arch={arch}"))
            .arg("-I")
            .arg(&kernels_dir)
            .arg(&source)
            .arg("-o")
            .arg(&ptx)
            .status();
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => panic!("nvcc failed ({status}) on {}", source.display()),
            Err(error) => panic!(
                "the `cuda` feature needs nvcc ({error} running {}); set NVCC or CUDA_ROOT, or put nvcc on PATH",
                nvcc.display()
            ),
        }
    }
}

fn nvcc() -> PathBuf {
    if let Some(nvcc) = std::env::var_os("NVCC") {
        return nvcc.into();
    }
    for root in ["CUDA_ROOT", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(root) {
            let candidate = Path::new(&root).join("bin/nvcc");
            if candidate.exists() {
                return candidate;
            }
        }
    }
    PathBuf::from("nvcc")
}
