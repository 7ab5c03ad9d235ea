//! `--tools FILE.json` and `--tool-choice` for `tessera generate`: reading tool
//! definitions (OpenAI's `{"type": "function", "function": {…}}` or a bare
//! `{"name", "description", "parameters"}`), and parsing the choice.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use tessera_constrain::{AllowedTool, CallMode, CompiledTools, ToolChoice, ToolDef};
use tessera_engine::ToolConstraint;

/// Read and compile a tools file.
pub fn load_tools(path: &Path) -> Result<Vec<ToolDef>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading --tools {}", path.display()))?;
    let value: Value = serde_json::from_str(&text).with_context(|| format!("--tools {}: not JSON", path.display()))?;
    let Value::Array(items) = value else {
        bail!("--tools {}: expected a JSON array of tools", path.display());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| tool_def(item).with_context(|| format!("--tools {}: tools[{i}]", path.display())))
        .collect()
}

fn tool_def(item: &Value) -> Result<ToolDef> {
    let function = item.get("function").unwrap_or(item);
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .context("`name` must be a string")?;
    let description = match function.get("description") {
        None => "",
        Some(value) => value.as_str().context("`description` must be a string")?,
    };
    let parameters = function
        .get("parameters")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    Ok(ToolDef {
        name: name.to_string(),
        description: description.to_string(),
        parameters,
    })
}

/// `none` | `auto` | `required` | a tool name | `prefix*` | a comma-separated list of names and families.
pub fn parse_choice(choice: &str, parallel: bool) -> ToolChoice {
    let (mode, allowed) = match choice {
        "none" => (CallMode::None, None),
        "auto" => (CallMode::Auto, None),
        "required" => (CallMode::Required, None),
        names => (
            CallMode::Required,
            Some(names.split(',').map(|n| AllowedTool::parse(n.trim())).collect()),
        ),
    };
    ToolChoice {
        mode,
        allowed,
        parallel,
    }
}

/// The engine's constraint for `tools` under `choice` (errors name the bad tool or choice).
pub fn constraint(tools: &[ToolDef], choice: ToolChoice) -> Result<ToolConstraint> {
    let compiled = Arc::new(CompiledTools::compile(tools).context("--tools")?);
    // Resolve now, so a bad --tool-choice fails before the model loads.
    compiled.resolve(choice.allowed.as_deref()).context("--tool-choice")?;
    for warning in compiled.warnings() {
        eprintln!("warning: {warning}");
    }
    Ok(ToolConstraint {
        tools: compiled,
        choice,
    })
}
