//! The paged forward on the real model: chunking, ragged batching and block
//! placement must not change the logits (f16 and f32 K/V alike), and the kernel must really read K/V
//! through the block tables (a permuted table changes the answer).

use tessera_kv::{BlockPool, BlockTable};
use tessera_model::{KvCache, KvDtype, LoadedModel, LogitsFor, Runtime, SeqInput, Sequence};

/// Logits of every position of `tokens`, fed in chunks of the given sizes.
fn logits_in_chunks(loaded: &LoadedModel, tokens: &[u32], sizes: &[usize], dtype: KvDtype) -> Vec<Vec<f32>> {
    let (mut pool, mut kv) = crate::common::cache_of(loaded, tokens.len(), dtype);
    let mut seq = Sequence::new();
    let mut rows = Vec::new();
    let mut start = 0;
    for &size in sizes.iter().cycle() {
        if start == tokens.len() {
            break;
        }
        let end = (start + size).min(tokens.len());
        let runtime = Runtime {
            model: &loaded.model,
            pool: &mut pool,
            kv: &mut kv,
        };
        let logits = seq
            .feed(runtime, &tokens[start..end], usize::MAX, LogitsFor::All)
            .unwrap();
        rows.extend((0..logits.num_rows()).map(|r| logits.row(r).to_vec()));
        start = end;
    }
    seq.release(&mut pool);
    assert_eq!(pool.num_allocatable(), pool.num_blocks());
    rows
}

/// The kernels are batch-invariant (fixed attention partitions, per-row matmuls),
/// so chunking and batching must not change a single bit.
const CHUNK_TOLERANCE: f32 = 0.0;

#[test]
fn one_chunk_uneven_chunks_and_token_by_token_agree() {
    let loaded = crate::common::model();
    let tokens = loaded.tokenizer.encode(&crate::common::long_prompt()).unwrap();
    for dtype in [KvDtype::F16, KvDtype::F32] {
        let whole = logits_in_chunks(loaded, &tokens, &[tokens.len()], dtype);
        for sizes in [&[37usize, 100, 5, 16, 1][..], &[1][..]] {
            let chunked = logits_in_chunks(loaded, &tokens, sizes, dtype);
            let mut worst = 0f32;
            for (pos, (a, b)) in whole.iter().zip(&chunked).enumerate() {
                worst = worst.max(crate::common::max_abs_diff(a, b));
                assert_eq!(
                    crate::common::argmax(a),
                    crate::common::argmax(b),
                    "{dtype} chunks {sizes:?}: argmax differs at {pos}"
                );
            }
            println!("{dtype} chunks {sizes:?}: max |Δlogit| {worst:.2e}");
            assert!(worst <= CHUNK_TOLERANCE, "{dtype} chunks {sizes:?}: max diff {worst}");
        }
    }
}

#[test]
fn a_ragged_batch_gives_each_sequence_its_solo_logits() {
    let loaded = crate::common::model();
    let prompts = [
        "What is 2 + 2?",
        "Name three colors.",
        "Translate 'bonjour' to English.",
        "def fib(n):",
    ];
    let tokens: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| loaded.tokenizer.encode(&crate::common::chat_prompt(p)).unwrap())
        .collect();
    let solo: Vec<Vec<f32>> = tokens
        .iter()
        .map(|t| {
            logits_in_chunks(loaded, t, &[t.len()], KvDtype::default())
                .pop()
                .unwrap()
        })
        .collect();

    // One forward: sequence 0 was prefilled except its last token (so it takes a
    // decode step), the others prefill whole prompts.
    let total: usize = tokens.iter().map(Vec::len).sum();
    let (mut pool, mut kv) = crate::common::cache_for(loaded, total + 64);
    let mut tables: Vec<BlockTable> = Vec::new();
    for t in &tokens {
        let mut table = BlockTable::new();
        assert!(table.grow(&mut pool, t.len()));
        tables.push(table);
    }
    let head = tokens[0].len() - 1;
    let prefill = SeqInput {
        tokens: &tokens[0][..head],
        start_pos: 0,
        blocks: tables[0].blocks(),
        logits: LogitsFor::None,
    };
    loaded.model.forward(&[prefill], &mut kv).unwrap();
    let mut batch = vec![SeqInput {
        tokens: &tokens[0][head..],
        start_pos: head,
        blocks: tables[0].blocks(),
        logits: LogitsFor::Last,
    }];
    for (t, table) in tokens[1..].iter().zip(&tables[1..]) {
        batch.push(SeqInput {
            tokens: t,
            start_pos: 0,
            blocks: table.blocks(),
            logits: LogitsFor::Last,
        });
    }
    let logits = loaded.model.forward(&batch, &mut kv).unwrap();
    for (seq, want) in solo.iter().enumerate() {
        let row = logits.rows_of_seq(seq).next().unwrap();
        let diff = crate::common::max_abs_diff(logits.row(row), want);
        assert!(
            diff <= CHUNK_TOLERANCE,
            "sequence {seq}: batched logits differ from solo by {diff}"
        );
        assert_eq!(crate::common::argmax(logits.row(row)), crate::common::argmax(want));
    }
    for mut table in tables {
        table.release(&mut pool).unwrap();
    }
    assert_eq!(pool.num_allocatable(), pool.num_blocks(), "pool back to baseline");
}

/// Prefill `tokens[..n-1]` into blocks handed out in a scrambled order, then
/// return the last token's logits read through `table_for_last(original table)`.
fn last_logits_with_table(loaded: &LoadedModel, tokens: &[u32], scramble: bool, permute: bool) -> Vec<f32> {
    let blocks = tokens.len().div_ceil(16) + 8;
    let mut pool = BlockPool::new(blocks, 16);
    let mut kv = KvCache::new(loaded.model.config(), blocks, 16, KvDtype::default()).unwrap();
    if scramble {
        // Take every block, give them back in an interleaved order: later tables are non-contiguous.
        let taken: Vec<_> = (0..blocks).map(|_| pool.allocate().unwrap()).collect();
        for block in taken.iter().step_by(2).chain(taken.iter().skip(1).step_by(2)) {
            pool.release(*block).unwrap();
        }
    }
    let mut table = BlockTable::new();
    assert!(table.grow(&mut pool, tokens.len()));
    let n = tokens.len();
    let prefill = SeqInput {
        tokens: &tokens[..n - 1],
        start_pos: 0,
        blocks: table.blocks(),
        logits: LogitsFor::None,
    };
    loaded.model.forward(&[prefill], &mut kv).unwrap();
    let mut read_blocks = table.blocks().to_vec();
    if permute {
        // Swap the first block with the last, partly filled one. (Swapping two
        // full blocks would not show: attention over a full set of keys is
        // order-invariant, as RoPE is applied before the keys are stored.)
        let last = read_blocks.len() - 1;
        read_blocks.swap(0, last);
    }
    let decode = SeqInput {
        tokens: &tokens[n - 1..],
        start_pos: n - 1,
        blocks: &read_blocks,
        logits: LogitsFor::Last,
    };
    let logits = loaded.model.forward(&[decode], &mut kv).unwrap();
    table.release(&mut pool).unwrap();
    pool.check_invariants().unwrap();
    logits.row(0).to_vec()
}

#[test]
fn block_placement_is_invisible_but_a_permuted_table_is_not() {
    let loaded = crate::common::model();
    let tokens = loaded.tokenizer.encode(&crate::common::long_prompt()).unwrap();
    let contiguous = last_logits_with_table(loaded, &tokens, false, false);
    let scrambled = last_logits_with_table(loaded, &tokens, true, false);
    let diff = crate::common::max_abs_diff(&contiguous, &scrambled);
    assert!(diff == 0.0, "scattered blocks changed the logits by {diff}");
    let permuted = last_logits_with_table(loaded, &tokens, true, true);
    let diff = crate::common::max_abs_diff(&contiguous, &permuted);
    println!("permuted table: max |Δlogit| {diff:.3}");
    assert!(diff > 0.5, "swapping two blocks in the table left the logits unchanged ({diff}): attention is not reading through the table");
}
