//! Tessera's one worker pool for the CPU kernels (a rayon pool sized to the
//! cores). Matmuls run as independent row slices of the weight matrix on it,
//! and candle's own barrier pool is pinned to a single thread so it never runs
//! beside ours: its workers spin-wait, and on a loaded 2-core machine two
//! spinning pools made decode ~3× slower than one thread (measured; see
//! ARCHITECTURE.md). rayon's idle workers sleep instead of spinning.

use rayon::prelude::*;
use std::sync::OnceLock;

static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
static THREADS: OnceLock<usize> = OnceLock::new();

/// Choose the number of worker threads; effective only before the pool first runs.
/// Returns the number in force.
pub fn set_num_threads(threads: usize) -> usize {
    *THREADS.get_or_init(|| threads.max(1))
}

/// The number of worker threads (default: the available cores).
pub fn num_threads() -> usize {
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Pin candle's internal pool to one thread (the calling thread, no workers).
/// Must run before candle's first quantized matmul; later calls have no effect.
pub(crate) fn pin_candle_to_one_thread() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        // Read once, when candle's barrier pool starts. Rust's env functions are
        // internally locked; this runs before any of our model threads exist.
        std::env::set_var("CANDLE_NUM_THREADS", "1");
    });
}

fn pool() -> &'static rayon::ThreadPool {
    POOL.get_or_init(|| {
        pin_candle_to_one_thread();
        rayon::ThreadPoolBuilder::new()
            .num_threads(num_threads())
            .thread_name(|i| format!("tessera-cpu-{i}"))
            .build()
            .unwrap_or_else(|_| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .build()
                    .expect("a one-thread pool")
            })
    })
}

/// Run `work(index, chunk)` for every `chunk_len`-sized chunk of `data`, in parallel.
pub fn for_each_chunk_mut<F>(data: &mut [f32], chunk_len: usize, work: F)
where
    F: Fn(usize, &mut [f32]) + Sync + Send,
{
    if chunk_len == 0 || data.is_empty() {
        return;
    }
    pool().install(|| {
        data.par_chunks_mut(chunk_len)
            .enumerate()
            .with_min_len(4)
            .for_each(|(index, chunk)| work(index, chunk))
    });
}

/// Map every item to a result in parallel, keeping order.
pub fn map<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync + Send) -> Vec<R> {
    if items.len() == 1 {
        return vec![work(&items[0])];
    }
    pool().install(|| items.par_iter().map(work).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_chunk_is_visited_once() {
        let mut data = vec![0f32; 103];
        super::for_each_chunk_mut(&mut data, 10, |index, chunk| {
            for value in chunk {
                *value += index as f32 + 1.0;
            }
        });
        for (i, value) in data.iter().enumerate() {
            assert_eq!(*value, (i / 10) as f32 + 1.0);
        }
    }

    #[test]
    fn map_keeps_order() {
        let items: Vec<u32> = (0..50).collect();
        assert_eq!(
            super::map(&items, |x| x * 2),
            items.iter().map(|x| x * 2).collect::<Vec<_>>()
        );
    }
}
