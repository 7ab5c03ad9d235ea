//! `tessera bench`: in-process benchmarks on the real model.

mod agent_turns;
pub mod decode;
mod decode_report;
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
    /// Decode speed with and without speculation: one stream, 1-16 streams at once, and agent turns
    /// that write files they read (tokens per second per span kind: sampled, forced, copied).
    Decode(decode::DecodeArgs),
    /// Memory read bandwidth on the kernels' thread pool: the physical limit of decode
    /// (bandwidth / bytes of weights read per token).
    Memory(memory::MemoryArgs),
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Ttft(args) => ttft::run(args),
        BenchCommand::Memory(args) => memory::run(args),
        BenchCommand::Decode(args) => decode::run(args),
    }
}
