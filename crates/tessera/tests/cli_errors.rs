//! Bad input to `tessera generate`: every case is a clear message on stderr
//! and a non-zero exit, never a panic.

use crate::common::real_model;
use std::path::PathBuf;
use std::process::{Command, Output};

fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .expect("running the tessera binary")
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Assert a clean failure whose stderr mentions every `needle`.
fn check_fails(output: Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "expected failure, got success; stderr: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "panicked: {stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "stderr lacks {needle:?}: {stderr}");
    }
}

#[test]
fn missing_model_file() {
    check_fails(
        tessera(&["generate", "--model", "/nonexistent/model.gguf", "-p", "hi"]),
        &["/nonexistent/model.gguf", "not found"],
    );
}

#[test]
fn corrupt_model_file() {
    let path = temp_file("garbage.gguf", &[0x13u8; 4096]);
    check_fails(
        tessera(&["generate", "--model", path.to_str().unwrap(), "-p", "hi"]),
        &["not a valid GGUF file"],
    );
}

#[test]
fn truncated_model_file() {
    let bytes = std::fs::read(real_model()).unwrap();
    let path = temp_file("truncated.gguf", &bytes[..bytes.len() / 3]);
    check_fails(
        tessera(&["generate", "--model", path.to_str().unwrap(), "-p", "hi"]),
        &["truncated.gguf", "GGUF", "runs past the file"],
    );
}

#[test]
fn unknown_architecture() {
    use candle_core::quantized::gguf_file::{write, Value};
    let path = std::env::temp_dir().join(format!("tessera-arch-{}.gguf", std::process::id()));
    let arch = Value::String("gpt2".into());
    write(
        &mut std::fs::File::create(&path).unwrap(),
        &[("general.architecture", &arch)],
        &[],
    )
    .unwrap();
    check_fails(
        tessera(&["generate", "--model", path.to_str().unwrap(), "-p", "hi"]),
        &["unsupported architecture `gpt2`"],
    );
    std::fs::remove_file(&path).ok();
}

#[test]
fn prompt_longer_than_the_context() {
    let prompt = "word ".repeat(9000);
    check_fails(
        tessera(&["generate", "--model", &real_model(), "-p", &prompt]),
        &["over the model's context of 8192 tokens"],
    );
}

#[test]
fn invalid_sampling_values_name_the_field() {
    let model = real_model();
    check_fails(
        tessera(&["generate", "--model", &model, "-p", "hi", "--temperature=-1"]),
        &["temperature"],
    );
    check_fails(
        tessera(&["generate", "--model", &model, "-p", "hi", "--top-p", "0"]),
        &["top_p", "(0, 1]"],
    );
    check_fails(
        tessera(&["generate", "--model", &model, "-p", "hi", "--max-tokens", "0"]),
        &["--max-tokens"],
    );
    check_fails(
        tessera(&["generate", "--model", &model, "-p", "hi", "--temperature", "abc"]),
        &["--temperature"],
    );
}

#[test]
fn generate_streams_the_answer_and_reports_speed() {
    let output = tessera(&[
        "generate",
        "--model",
        &real_model(),
        "--chat",
        "-p",
        "Name the capital of France in one sentence.",
        "--max-tokens",
        "16",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("Paris"), "answer: {stdout}");
    assert!(stderr.contains("prefill:") && stderr.contains("decode:"), "{stderr}");
}

#[test]
fn an_unknown_or_unbuilt_device_is_a_clear_error() {
    for command in ["generate", "serve", "agent"] {
        check_fails(tessera(&[command, "--device", "gpu"]), &["--device", "gpu", "cuda:N"]);
    }
    check_fails(
        tessera(&["generate", "--device", "cuda:x", "-p", "hi"]),
        &["ordinal `x`"],
    );
    if !cfg!(feature = "cuda") {
        // Refused before the model is located or loaded: no such file is needed.
        check_fails(
            tessera(&[
                "generate",
                "--model",
                "/nonexistent.gguf",
                "--device",
                "cuda",
                "-p",
                "hi",
            ]),
            &["cuda:0", "--features cuda"],
        );
    }
}

#[test]
fn the_device_path_generates_through_the_cli() {
    // candle-cpu runs the GPU code path (candle tensors, device pools, the kernels'
    // contract) on the CPU: the same answer as the CPU path, greedily.
    let run = |device: &str| {
        tessera(&[
            "generate",
            "--model",
            &real_model(),
            "--device",
            device,
            "--chat",
            "-p",
            "Name the capital of France in one sentence.",
            "--max-tokens",
            "12",
            "--temperature",
            "0",
        ])
    };
    let (cpu, device) = (run("cpu"), run("candle-cpu"));
    assert!(device.status.success(), "{}", String::from_utf8_lossy(&device.stderr));
    assert_eq!(
        String::from_utf8_lossy(&cpu.stdout),
        String::from_utf8_lossy(&device.stdout)
    );
}

#[test]
fn check_device_runs_every_check_on_the_device_path() {
    // candle-cpu: the GPU code path on the CPU, so the kernel checks compare the
    // contract with itself; the model comparison and the report are what this covers.
    let json = temp_file("check-device.json", b"");
    let output = tessera(&[
        "check-device",
        "--device",
        "candle-cpu",
        "--model",
        &real_model(),
        "--tokens",
        "6",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("paged_attention") && stdout.contains("bf16"),
        "{stdout}"
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["kernels"].as_array().unwrap().len(), 24);
    assert_eq!(report["dense"]["greedy_identical_prefix"], 6);
    assert_eq!(report["dense"]["argmax_agree"], report["dense"]["positions"]);
    assert!(report["as_stored"]["argmax_agree"].as_u64().unwrap() > 0);
    check_fails(tessera(&["check-device", "--device", "cpu"]), &["name one"]);
}
