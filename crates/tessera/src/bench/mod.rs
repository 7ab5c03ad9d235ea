//! `tessera bench`: in-process benchmarks on the real model.

mod report;
pub mod ttft;
mod workload;

/// Which benchmark to run.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Time to first token with and without prefix reuse: a prefix-length sweep
    /// (cold vs warm), an agent transcript replay and two interleaved sessions.
    Ttft(ttft::TtftArgs),
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Ttft(args) => ttft::run(args),
    }
}
