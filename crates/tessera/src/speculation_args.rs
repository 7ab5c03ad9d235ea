//! `--no-speculation`, `--no-fast-forward` and `--max-draft`, shared by the
//! commands that decode (`serve`, `agent`, `generate`).

use tessera_engine::SpeculationConfig;

/// How decoding drafts tokens to verify several per forward pass.
#[derive(Debug, Clone, clap::Args)]
pub struct SpeculationArgs {
    /// Turn off drafts taken from the context (prompt lookup): each step then verifies only what
    /// the tool-call constraint forces. Outputs are the same either way (drafts are verified);
    /// for comparison.
    #[arg(long)]
    pub no_speculation: bool,
    /// Turn off grammar fast-forward (drafting the bytes a tool call's constraint forces, such as
    /// `{"name": "` or a required key, and with prompt lookup on, a call's likely punctuation past
    /// them). Outputs are the same either way; for comparison.
    #[arg(long)]
    pub no_fast_forward: bool,
    /// Most drafted tokens verified beside a sequence's token in one forward pass.
    #[arg(long, default_value_t = SpeculationConfig::default().max_draft)]
    pub max_draft: usize,
}

impl SpeculationArgs {
    /// The engine's speculation settings.
    pub fn config(&self) -> SpeculationConfig {
        SpeculationConfig {
            lookup: !self.no_speculation,
            fast_forward: !self.no_fast_forward,
            max_draft: self.max_draft,
            ..SpeculationConfig::default()
        }
    }

    /// For the load line: what drafts tokens.
    pub fn describe(&self) -> String {
        match (!self.no_speculation, !self.no_fast_forward) {
            _ if self.max_draft == 0 => "off".into(),
            (true, true) => format!("prompt lookup + fast-forward, up to {} tokens", self.max_draft),
            (true, false) => format!("prompt lookup, up to {} tokens", self.max_draft),
            (false, true) => format!("fast-forward, up to {} tokens", self.max_draft),
            (false, false) => "off".into(),
        }
    }
}
