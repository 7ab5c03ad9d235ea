//! `--tools FILE.json` and `--tool-choice` for `tessera generate`, read into
//! the same wire types the server reads (OpenAI's `{"type": "function",
//! "function": {…}}`, or a bare `{"name", "description", "parameters"}`), so
//! the request they make is parsed by the same code as the server's.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;
use tessera_api::openai::wire::FunctionSpec;
use tessera_api::openai::{ToolChoiceMode, ToolChoiceSpec, ToolSpec};

/// One entry of a tools file.
#[derive(Deserialize)]
#[serde(untagged)]
enum ToolEntry {
    /// `{"type": "function", "function": {…}}`.
    Spec(ToolSpec),
    /// `{"name", "description", "parameters"}`.
    Bare(FunctionSpec),
}

/// Read a tools file.
pub fn load_tools(path: &Path) -> Result<Vec<ToolSpec>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading --tools {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("--tools {}: not JSON", path.display()))?;
    let serde_json::Value::Array(items) = value else {
        bail!("--tools {}: expected a JSON array of tools", path.display());
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match serde_json::from_value(item) {
            Ok(ToolEntry::Spec(spec)) => Ok(spec),
            Ok(ToolEntry::Bare(function)) => Ok(ToolSpec {
                kind: tessera_api::openai::words::ToolKind::Function,
                function,
            }),
            Err(_) => bail!(
                "--tools {}: tools[{i}] is not a tool (expected {{\"type\": \"function\", \"function\": {{\"name\", \"description\", \"parameters\"}}}} or the bare function object)",
                path.display()
            ),
        })
        .collect()
}

/// `none` | `auto` | `required` | a tool name | `prefix*` | a comma-separated
/// list of names and families, as the choice a client sends.
pub fn choice_spec(choice: &str) -> ToolChoiceSpec {
    match choice {
        "none" => ToolChoiceSpec::mode(ToolChoiceMode::None),
        "auto" => ToolChoiceSpec::mode(ToolChoiceMode::Auto),
        "required" => ToolChoiceSpec::mode(ToolChoiceMode::Required),
        name if !name.contains(',') => ToolChoiceSpec::named(name.trim()),
        names => ToolChoiceSpec::allowed(
            ToolChoiceMode::Required,
            names.split(',').map(|name| name.trim().to_string()),
        ),
    }
}
