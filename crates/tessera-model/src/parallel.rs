//! Parallel loops for the CPU kernels, run on candle's barrier pool so that the
//! matmuls and our kernels share one set of worker threads sized to the cores
//! (two pools on two cores oversubscribe, and spin-waiting workers then starve
//! each other).

/// Run `work(index, chunk)` for every `chunk_len`-sized chunk of `data`, in parallel.
/// Each chunk is handed to exactly one call.
pub fn for_each_chunk_mut<F>(data: &mut [f32], chunk_len: usize, work: F)
where
    F: Fn(usize, &mut [f32]) + Sync,
{
    if chunk_len == 0 || data.is_empty() {
        return;
    }
    let num_chunks = data.len().div_ceil(chunk_len);
    let total = data.len();
    let base = SharedPtr(data.as_mut_ptr());
    let base = &base;
    candle_core::utils::barrier_pool().execute_chunked(num_chunks, |range| {
        for index in range {
            let start = index * chunk_len;
            let len = chunk_len.min(total - start);
            // SAFETY: chunk `index` covers [start, start+len) of `data`; distinct
            // indices give disjoint ranges, each index is visited once, and `data`
            // stays mutably borrowed by this function until the pool returns.
            let chunk = unsafe { std::slice::from_raw_parts_mut(base.0.add(start), len) };
            work(index, chunk);
        }
    });
}

struct SharedPtr(*mut f32);
// SAFETY: only used to hand out disjoint sub-slices (see above).
unsafe impl Sync for SharedPtr {}

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
}
