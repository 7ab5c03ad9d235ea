//! `tessera bench`: in-process benchmarks on the real model.

pub mod memory;
mod report;
pub mod ttft;
mod workload;

/// Which benchmark to run.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Time to first token with and without prefix reuse: a prefix-length sweep
    /// (cold vs warm), an agent transcript replay and two interleaved sessions.
    Ttft(ttft::TtftArgs),
    /// Memory read bandwidth on the kernels' thread pool: the physical limit of decode
    /// (bandwidth / bytes of weights read per token).
    Memory(memory::MemoryArgs),
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Ttft(args) => ttft::run(args),
        BenchCommand::Memory(args) => memory::run(args),
    }
}
