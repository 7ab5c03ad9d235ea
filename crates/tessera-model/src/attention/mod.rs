//! Paged attention on the CPU: each query walks its sequence's block table,
//! scoring all query heads of a GQA group against one K tile (a block's
//! `block_size × head_dim` keys of one KV head) at a time, with an online
//! softmax (running max and sum per head, rescaled once per tile).
//!
//! Contexts are split into partitions of [`PARTITION_TOKENS`] keys processed
//! in parallel, then merged by log-sum-exp (the flash-decoding split-K idea),
//! so two cores stay busy even when one sequence decodes. The partition
//! boundaries are fixed absolute positions, never a function of the batch, so
//! a query's result is bit-identical whether its sequence runs alone, in a
//! ragged batch, in one prefill chunk or token by token (batch invariance; the
//! quantized matmuls downstream amplify even last-bit differences).
//! Cost: O(queries × context × heads × head_dim); memory traffic is one pass
//! over the K/V rows per (query, KV head, partition). `f16` K/V rows are
//! widened as they are loaded (F16C), so both element types share one loop.

use crate::kv_cache::{KvLayout, LayerKv};
use crate::parallel::for_each_chunk_mut;
use crate::simd;
use half::f16;
use std::ops::Range;
use tessera_kv::BlockId;

/// The online-softmax loop of `attend_range`, written once for every build and
/// K/V element type (`$scores`: a query head's scaled dots with a K tile, `$exp`:
/// `exp(x − max)` of a tile's scores, `$axpy_rows`: `y += Σ a_i·x_i` over its V
/// rows; `$keys` and `$values` are one layer's pools). The
/// weights of a tile are computed first, then accumulated in one call (with
/// no `exp` call in between, a 64-wide accumulator stays in registers). The
/// rescale factor of what was accumulated so far, `exp(old max − new max)`, is
/// 1 unless the tile raised the max (`$max`: a tile's largest score).
macro_rules! attend_body {
    ($scores:expr, $max:expr, $exp:expr, $axpy_rows:expr, $scale:expr, $layout:expr, $seq:expr, $item:expr, $q:expr, $keys:expr, $values:expr, $partial:expr) => {{
        let (layout, seq, item, partial): (KvLayout, &AttentionSeq<'_>, WorkItem, &mut [f32]) =
            ($layout, $seq, $item, $partial);
        let dim = layout.head_dim;
        let bs = layout.block_size;
        let rows = item.rows.1;
        let row_len = $q.len() / rows;
        let group = partial.len() / (rows * (dim + 2));
        partial.fill(0.0);
        for state in partial.chunks_exact_mut(dim + 2) {
            state[0] = f32::NEG_INFINITY;
        }
        let mut scores = [0f32; 64];
        let mut weights = [0f32; 64];
        let (mut key, end) = item.keys;
        while key < end {
            let block = seq.blocks[key / bs];
            let first_slot = key % bs;
            let slots = (bs - first_slot).min(end - key).min(scores.len());
            let tile = layout.tile_offset(block, item.kv_head) + first_slot * dim;
            let (k_tile, v_tile) = (&$keys[tile..tile + slots * dim], &$values[tile..tile + slots * dim]);
            // Query `i` of the sequence sees keys `0..=first_pos + i`: rows
            // before `first_seeing` end before this tile; the others see it up
            // to their own end.
            let first_seeing = key.saturating_sub(seq.first_pos + item.rows.0);
            for r in first_seeing..rows {
                let visible = slots.min(seq.first_pos + item.rows.0 + r + 1 - key);
                let heads_q = &$q[r * row_len + item.kv_head * group * dim..][..group * dim];
                let states = &mut partial[r * group * (dim + 2)..][..group * (dim + 2)];
                for (g, state) in states.chunks_exact_mut(dim + 2).enumerate() {
                    let q_head = &heads_q[g * dim..(g + 1) * dim];
                    // SAFETY: a build's primitives need only the features the build
                    // enables (its caller's contract) and take any lengths.
                    unsafe { $scores(q_head, &k_tile[..visible * dim], $scale, &mut scores[..visible]) };
                    // SAFETY: as above.
                    let tile_max = unsafe { $max(&scores[..visible]) };
                    let (head, acc) = state.split_at_mut(2);
                    let new_max = head[0].max(tile_max);
                    // SAFETY: as above.
                    unsafe { $exp(&scores[..visible], new_max, &mut weights[..visible]) };
                    // `exp(0) = 1`: most tiles leave the running max where it was.
                    let rescale = match head[0] == new_max {
                        true => 1.0,
                        false => (head[0] - new_max).exp(),
                    };
                    if rescale != 1.0 {
                        head[1] *= rescale;
                        simd::scale(acc, rescale);
                    }
                    head[0] = new_max;
                    for weight in &weights[..visible] {
                        head[1] += weight;
                    }
                    // SAFETY: as above.
                    unsafe { $axpy_rows(acc, &weights[..visible], &v_tile[..visible * dim]) };
                }
            }
            key += slots;
        }
    }};
}

/// One build of [`attend_body!`] as a function over one element type's pools
/// (`$attr`: the build's attributes; the primitives inline where it enables
/// their target features, and each build stays small enough for them to).
macro_rules! attend_fn {
    ($(#[$attr:meta])* $name:ident, $elem:ty, $scores:path, $max:path, $exp:path, $axpy_rows:path) => {
        /// One build of `attend_range`'s loop.
        ///
        /// # Safety
        /// The CPU has the features the build enables (none for the portable
        /// builds). Nothing else: the loop reaches the pools, queries and
        /// states through checked slices, and the primitives take any lengths.
        $(#[$attr])*
        #[allow(unused_unsafe)] // the portable builds' primitives are safe
        unsafe fn $name(at: &AttendItem<'_, '_>, keys: &[$elem], values: &[$elem], partial: &mut [f32]) {
            let AttendItem { scale, layout, seq, item, q } = *at;
            attend_body!($scores, $max, $exp, $axpy_rows, scale, layout, seq, item, q, keys, values, partial)
        }
    };
}

attend_fn!(
    attend_f16,
    f16,
    tile::scaled_dots_f16,
    tile::max,
    tile::exp_shifted,
    simd::axpy_rows_f16
);
attend_fn!(
    attend_f32,
    f32,
    tile::scaled_dots,
    tile::max,
    tile::exp_shifted,
    simd::axpy_rows
);
attend_fn!(
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    attend_f16_avx2,
    f16,
    tile::avx2::scaled_dots_f16,
    tile::avx2::max,
    tile::avx2::exp_shifted,
    simd::avx2::axpy_rows_f16
);
attend_fn!(
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    attend_f16_avx512,
    f16,
    tile::avx2::scaled_dots_f16,
    tile::avx2::max,
    tile::avx512::exp_shifted,
    simd::avx2::axpy_rows_f16
);
attend_fn!(
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    attend_f32_avx512,
    f32,
    tile::avx2::scaled_dots,
    tile::avx2::max,
    tile::avx512::exp_shifted,
    simd::avx2::axpy_rows
);
attend_fn!(
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    attend_f32_avx2,
    f32,
    tile::avx2::scaled_dots,
    tile::avx2::max,
    tile::avx2::exp_shifted,
    simd::avx2::axpy_rows
);

/// Keys per partition when a context is split.
pub const PARTITION_TOKENS: usize = 256;

/// One sequence's queries in a ragged batch.
#[derive(Debug, Clone, Copy)]
pub struct AttentionSeq<'a> {
    /// Index of the sequence's first query row in the batch.
    pub first_row: usize,
    /// Number of query rows (prefill chunk length, or 1 for decode).
    pub num_queries: usize,
    /// Absolute position of the first query; query `i` sees keys `0..=first_pos + i`.
    pub first_pos: usize,
    /// The sequence's block table (must cover `first_pos + num_queries` tokens).
    pub blocks: &'a [BlockId],
}

/// Head counts and scale for one attention call.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    /// Query heads.
    pub num_heads: usize,
    /// Softmax scale, usually `1 / sqrt(head_dim)`.
    pub scale: f32,
}

/// One unit of parallel work: a run of one sequence's query rows, a KV head and a key range.
#[derive(Debug, Clone, Copy)]
struct WorkItem {
    seq: usize,
    /// (first query index within the sequence, count).
    rows: (usize, usize),
    kv_head: usize,
    keys: (usize, usize),
}

/// What one work item's attention reads besides the K/V pools: the score
/// scale, the pools' layout, its sequence, the item and its query rows
/// (`[rows, num_heads, head_dim]`).
#[derive(Clone, Copy)]
struct AttendItem<'s, 'a> {
    scale: f32,
    layout: KvLayout,
    seq: &'s AttentionSeq<'a>,
    item: WorkItem,
    q: &'s [f32],
}

/// Query rows of one sequence per work item: they read each K/V tile while it
/// is in L1 (a warm turn's new tokens all attend over the same cached prefix).
const ROWS_PER_ITEM: usize = 8;

/// A batch's sequences and its parallel work items, planned once per forward
/// and shared by every layer.
#[derive(Debug, Clone)]
pub struct AttentionPlan<'a> {
    seqs: Vec<AttentionSeq<'a>>,
    items: Vec<WorkItem>,
    /// Runs of `items` with the same sequence, rows and KV head: one run of
    /// query rows' partitions, in key order.
    runs: Vec<Range<usize>>,
    /// Query rows per item's partial (the longest run of any item).
    rows_per_item: usize,
    /// Query-key pairs of the whole batch and of its largest run.
    work: (usize, usize),
}

impl<'a> AttentionPlan<'a> {
    /// Plan attention for `seqs` over a cache with `num_kv_heads` KV heads.
    pub fn new(seqs: Vec<AttentionSeq<'a>>, num_kv_heads: usize) -> Self {
        let items = plan_work(&seqs, num_kv_heads);
        let rows_per_item = items.iter().map(|item| item.rows.1).max().unwrap_or(1);
        let runs = partition_runs(&items);
        let pairs = |run: &Range<usize>| -> usize {
            items[run.clone()]
                .iter()
                .map(|item| item.rows.1 * (item.keys.1 - item.keys.0))
                .sum()
        };
        let work = (runs.iter().map(pairs).sum(), runs.iter().map(pairs).max().unwrap_or(0));
        Self {
            seqs,
            items,
            runs,
            rows_per_item,
            work,
        }
    }

    /// The batch row of work item `index`'s first query.
    fn first_row(&self, index: usize) -> usize {
        let item = self.items[index];
        self.seqs[item.seq].first_row + item.rows.0
    }
}

/// Which builds of the attention loop run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Builds {
    /// The widest this CPU runs (AVX-512, AVX2, else portable).
    Detected,
    /// The portable ones (tests compare them with the vector builds; an
    /// argument, not a process-wide switch, so tests running beside each other
    /// never see each other's choice).
    #[cfg_attr(not(test), allow(dead_code))]
    Portable,
}

/// Attention for every query row of `plan`: `q` and `out` are `[rows, num_heads, head_dim]`.
pub fn paged_attention(
    shape: AttentionShape,
    layout: KvLayout,
    plan: &AttentionPlan<'_>,
    q: &[f32],
    kv: &LayerKv,
    out: &mut [f32],
) {
    paged_attention_on(Builds::Detected, shape, layout, plan, q, kv, out)
}

/// [`paged_attention`] on `builds`. When the runs of query rows share the
/// work out evenly enough (a prefill chunk's), each task attends one run's
/// partitions into a scratch its thread keeps and merges them at once; else
/// (one decode row) the partitions themselves are the tasks, merged after. The same
/// partition states merged in the same order either way: the same bits.
fn paged_attention_on(
    builds: Builds,
    shape: AttentionShape,
    layout: KvLayout,
    plan: &AttentionPlan<'_>,
    q: &[f32],
    kv: &LayerKv,
    out: &mut [f32],
) {
    let job = Job::new(builds, shape, layout, plan, q, kv);
    // By runs when no run is more than half a thread's share of the work (a
    // prefill chunk's runs; not one long context's decode row).
    let (total, largest) = plan.work;
    match largest * 2 * crate::parallel::num_threads() <= total {
        true => attend_by_runs(&job, out),
        false => attend_by_items(&job, out),
    }
}

/// Every work item a task, each into its own part of one buffer of
/// partition states, merged after.
fn attend_by_items(job: &Job<'_, '_>, out: &mut [f32]) {
    let (plan, partial_len, dim) = (job.plan, job.partial_len, job.layout.head_dim);
    let group = job.shape.num_heads / job.layout.num_kv_heads;
    let mut partials = vec![0f32; plan.items.len() * partial_len];
    for_each_chunk_mut(&mut partials, partial_len, |index, partial| job.attend(index, partial));
    for (run, partition) in plan.runs.iter().enumerate() {
        let states = |i: usize| &partials[(partition.start + i) * partial_len..][..partial_len];
        let kv_head = plan.items[partition.start].kv_head;
        let at = |row: usize, g: usize| (row * job.shape.num_heads + kv_head * group + g) * dim;
        job.merge_run(run, partition.len(), states, at, out);
    }
}

/// Each run of query rows attended and merged by one task, into a compact
/// `[run][row][head of the group][dim]` buffer, then copied into `out`.
fn attend_by_runs(job: &Job<'_, '_>, out: &mut [f32]) {
    thread_local! {
        /// A run's partition states: reused, so a long context's prefill does
        /// not fault in fresh pages for them every layer.
        static PARTIALS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let (plan, dim) = (job.plan, job.layout.head_dim);
    let group = job.shape.num_heads / job.layout.num_kv_heads;
    let run_len = plan.rows_per_item * group * dim;
    let mut merged = vec![0f32; plan.runs.len() * run_len];
    for_each_chunk_mut(&mut merged, run_len, |run, dst| {
        PARTIALS.with_borrow_mut(|partials| {
            let partition = plan.runs[run].clone();
            let needed = partition.len() * job.partial_len;
            if partials.len() < needed {
                // NaN until a kernel initializes its states: a state it forgot would show.
                partials.resize(needed, f32::NAN);
            }
            for (i, index) in partition.clone().enumerate() {
                job.attend(index, &mut partials[i * job.partial_len..][..job.partial_len]);
            }
            let states = |i: usize| &partials[i * job.partial_len..][..job.partial_len];
            let first_row = plan.first_row(partition.start);
            job.merge_run(
                run,
                partition.len(),
                states,
                |row, g| ((row - first_row) * group + g) * dim,
                dst,
            );
        });
    });
    for (run, partition) in plan.runs.iter().enumerate() {
        let (item, first_row) = (plan.items[partition.start], plan.first_row(partition.start));
        for r in 0..item.rows.1 {
            let heads = &merged[run * run_len + r * group * dim..][..group * dim];
            let at = ((first_row + r) * job.shape.num_heads + item.kv_head * group) * dim;
            out[at..at + group * dim].copy_from_slice(heads);
        }
    }
}

/// One attention call's inputs, shared by its tasks.
struct Job<'j, 'a> {
    builds: Builds,
    shape: AttentionShape,
    layout: KvLayout,
    plan: &'j AttentionPlan<'a>,
    q: &'j [f32],
    kv: &'j LayerKv,
    /// Floats per item's partition states (`partial`).
    partial_len: usize,
}

impl<'j, 'a> Job<'j, 'a> {
    /// The call's inputs.
    fn new(
        builds: Builds,
        shape: AttentionShape,
        layout: KvLayout,
        plan: &'j AttentionPlan<'a>,
        q: &'j [f32],
        kv: &'j LayerKv,
    ) -> Self {
        let group = shape.num_heads / layout.num_kv_heads;
        // Per item, per row and per head of its group: running max, running sum, accumulator.
        let partial_len = plan.rows_per_item * group * (layout.head_dim + 2);
        Self {
            builds,
            shape,
            layout,
            plan,
            q,
            kv,
            partial_len,
        }
    }

    /// Work item `index`'s partition states into `partial` (at least
    /// `partial_len` floats).
    fn attend(&self, index: usize, partial: &mut [f32]) {
        let (group, dim) = (self.shape.num_heads / self.layout.num_kv_heads, self.layout.head_dim);
        let row_len = self.shape.num_heads * dim;
        let item = self.plan.items[index];
        let seq = &self.plan.seqs[item.seq];
        let first_row = seq.first_row + item.rows.0;
        let q_rows = &self.q[first_row * row_len..(first_row + item.rows.1) * row_len];
        let partial = &mut partial[..item.rows.1 * group * (dim + 2)];
        let at = AttendItem {
            scale: self.shape.scale,
            layout: self.layout,
            seq,
            item,
            q: q_rows,
        };
        attend_range(self.builds, &at, self.kv, partial);
    }

    /// Merge run `run`'s `count` partitions (`states(i)`: the `i`-th one's
    /// states) by log-sum-exp, in partition order, and normalize: row `row`
    /// (of the batch) and head `g` of the group go to `dst[at(row, g)..][..dim]`.
    /// Partitions a row does not reach are skipped.
    fn merge_run<'p>(
        &self,
        run: usize,
        count: usize,
        states: impl Fn(usize) -> &'p [f32],
        at: impl Fn(usize, usize) -> usize,
        dst: &mut [f32],
    ) {
        let (group, dim) = (self.shape.num_heads / self.layout.num_kv_heads, self.layout.head_dim);
        let start = self.plan.runs[run].start;
        let (item, first_row) = (self.plan.items[start], self.plan.first_row(start));
        for r in 0..item.rows.1 {
            for g in 0..group {
                let state = |i: usize| &states(i)[(r * group + g) * (dim + 2)..][..dim + 2];
                let reached = (0..count).filter(|&i| state(i)[0] != f32::NEG_INFINITY);
                let max = reached.clone().map(|i| state(i)[0]).fold(f32::NEG_INFINITY, f32::max);
                let dst = &mut dst[at(first_row + r, g)..][..dim];
                dst.fill(0.0);
                let mut sum = 0.0;
                for i in reached {
                    let weight = (state(i)[0] - max).exp();
                    sum += state(i)[1] * weight;
                    simd::axpy(dst, weight, &state(i)[2..]);
                }
                simd::scale(dst, 1.0 / sum);
            }
        }
    }
}

/// The runs of consecutive items with the same sequence, rows and KV head.
fn partition_runs(items: &[WorkItem]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    while start < items.len() {
        let key = |item: &WorkItem| (item.seq, item.rows, item.kv_head);
        let end = start
            + items[start..]
                .iter()
                .take_while(|item| key(item) == key(&items[start]))
                .count();
        runs.push(start..end);
        start = end;
    }
    runs
}

/// Split the work: one item per (run of up to [`ROWS_PER_ITEM`] rows of a
/// sequence, KV head, partition of the keys the run's last row sees).
fn plan_work(seqs: &[AttentionSeq<'_>], num_kv_heads: usize) -> Vec<WorkItem> {
    let mut items = Vec::new();
    for (seq_index, seq) in seqs.iter().enumerate() {
        let mut first = 0;
        while first < seq.num_queries {
            let count = (seq.num_queries - first).min(ROWS_PER_ITEM);
            let context = seq.first_pos + first + count;
            for kv_head in 0..num_kv_heads {
                let mut start = 0;
                while start < context {
                    let end = (start + PARTITION_TOKENS).min(context);
                    items.push(WorkItem {
                        seq: seq_index,
                        rows: (first, count),
                        kv_head,
                        keys: (start, end),
                    });
                    start = end;
                }
            }
            first += count;
        }
    }
    items
}

/// Online softmax over keys `item.keys` for the item's query rows (`q`: their
/// `[rows, num_heads, head_dim]` queries), every head of the KV head's group.
/// Writes `[max, sum, acc[dim]]` per row and head into `partial` (a row that
/// sees none of the keys keeps `max = −∞`). The AVX2 builds of
/// the loop inline their primitives (a call per key cost a third of the
/// attention time); f16 items with many passes over a tile (a prefill
/// chunk's rows) take the phased builds of `pairs`, the widest the CPU runs.
/// Every build does the same arithmetic.
fn attend_range(builds: Builds, at: &AttendItem<'_, '_>, kv: &LayerKv, partial: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    let (avx2, avx512) = match builds {
        Builds::Detected => (simd::use_avx2(), simd::use_avx512()),
        Builds::Portable => (false, false),
    };
    #[cfg(target_arch = "x86_64")]
    let group = partial.len() / (at.item.rows.1 * (at.layout.head_dim + 2));
    // SAFETY: the AVX2 builds run only where AVX2, FMA and F16C exist, the
    // AVX-512 builds only where AVX-512 F does too (checked), and the phased
    // builds only on heads they `cover`; the portable builds have no requirement.
    unsafe {
        match kv {
            #[cfg(target_arch = "x86_64")]
            LayerKv::F16 { keys, values } if avx512 && pairs::covers(at.layout.head_dim) => {
                pairs::attend_f16(at, keys, values, partial)
            }
            #[cfg(target_arch = "x86_64")]
            LayerKv::F16 { keys, values } if avx512 => attend_f16_avx512(at, keys, values, partial),
            #[cfg(target_arch = "x86_64")]
            LayerKv::F32 { keys, values } if avx512 => attend_f32_avx512(at, keys, values, partial),
            #[cfg(target_arch = "x86_64")]
            LayerKv::F16 { keys, values } if avx2 && pairs::avx2::widens(at, group) => {
                pairs::avx2::attend_f16(at, keys, values, partial)
            }
            #[cfg(target_arch = "x86_64")]
            LayerKv::F16 { keys, values } if avx2 => attend_f16_avx2(at, keys, values, partial),
            #[cfg(target_arch = "x86_64")]
            LayerKv::F32 { keys, values } if avx2 => attend_f32_avx2(at, keys, values, partial),
            LayerKv::F16 { keys, values } => attend_f16(at, keys, values, partial),
            LayerKv::F32 { keys, values } => attend_f32(at, keys, values, partial),
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod pairs;
mod tile;

/// `out[i] = exp(x[i] − shift)` with glibc's `expf` bits, on the widest
/// vector build this CPU runs (see `tile.rs`; SwiGLU uses it too).
pub(crate) fn exp_shifted(x: &[f32], shift: f32, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if simd::use_avx512() {
            // SAFETY: the CPU has AVX2, FMA, F16C and AVX-512 F (checked); any lengths.
            return unsafe { tile::avx512::exp_shifted(x, shift, out) };
        }
        if simd::use_avx2() {
            // SAFETY: the CPU has AVX2, FMA and F16C (checked); any lengths.
            return unsafe { tile::avx2::exp_shifted(x, shift, out) };
        }
    }
    tile::exp_shifted(x, shift, out)
}

#[cfg(test)]
mod tests;
