//! The prefix cache survives a restart: saved with its K/V rows, restored into a
//! fresh pool and cache, a previously seen prefix is a hit with the cold logits;
//! a file for another model, another layout, element type or format version, or a damaged one is refused.

use tessera_model::{load_prefix_cache, save_prefix_cache, LogitsFor, PersistError, Runtime, Sequence};

#[test]
fn a_restored_cache_answers_warm_with_the_cold_logits() {
    let loaded = crate::common::model();
    let model = &loaded.model;
    let base = loaded.tokenizer.encode(&crate::common::long_prompt()).unwrap();
    let dir = std::env::temp_dir().join(format!("tessera-persist-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("prefix.cache");
    let fingerprint = tessera_model::model_fingerprint(&crate::common::model_path()).unwrap();

    // First "process": run the prompt, finish, save.
    let (mut pool, mut kv) = crate::common::cache_for(loaded, 800);
    let (mut seq, _) = Sequence::start(
        Runtime {
            model,
            pool: &mut pool,
            kv: &mut kv,
        },
        &base,
    );
    let cold = seq
        .feed(
            Runtime {
                model,
                pool: &mut pool,
                kv: &mut kv,
            },
            &base,
            128,
            LogitsFor::Last,
        )
        .unwrap();
    seq.release(&mut pool);
    let saved = save_prefix_cache(&file, &pool, &kv, &fingerprint).unwrap();
    assert_ne!(base.len() % 16, 0, "the prompt ends inside a block");
    assert_eq!(
        saved,
        base.len().div_ceil(16),
        "every block of the prompt is saved, the partial last one included"
    );

    // Second "process": fresh pool and cache, restore, run the same prompt.
    let (mut pool, mut kv) = crate::common::cache_for(loaded, 800);
    let restored = load_prefix_cache(&file, &mut pool, &mut kv, &fingerprint).unwrap();
    assert_eq!(restored, saved);
    pool.check_invariants().unwrap();
    let (mut seq, cached) = Sequence::start(
        Runtime {
            model,
            pool: &mut pool,
            kv: &mut kv,
        },
        &base,
    );
    assert_eq!(
        cached,
        base.len() - 1,
        "the restored blocks are hits, up to the last token"
    );
    let warm = seq
        .feed(
            Runtime {
                model,
                pool: &mut pool,
                kv: &mut kv,
            },
            &base[cached..],
            128,
            LogitsFor::Last,
        )
        .unwrap();
    assert_eq!(
        warm.row(0),
        cold.row(0),
        "restored K/V gives the cold logits bit for bit"
    );
    seq.release(&mut pool);

    // Refusals: another model, another layout, damage, truncation.
    let (mut pool, mut kv) = crate::common::cache_for(loaded, 800);
    let error = load_prefix_cache(&file, &mut pool, &mut kv, "another-model").unwrap_err();
    assert!(matches!(error, PersistError::Mismatch(_)), "{error}");
    let mut other_layout =
        tessera_model::KvCache::new(model.config(), 40, 8, tessera_model::KvDtype::default()).unwrap();
    let mut other_pool = tessera_kv::BlockPool::new(40, 8);
    let error = load_prefix_cache(&file, &mut other_pool, &mut other_layout, &fingerprint).unwrap_err();
    assert!(matches!(error, PersistError::Mismatch(_)), "{error}");
    let (mut f32_pool, mut f32_kv) = crate::common::cache_of(loaded, 800, tessera_model::KvDtype::F32);
    let error = load_prefix_cache(&file, &mut f32_pool, &mut f32_kv, &fingerprint).unwrap_err();
    assert!(
        matches!(error, PersistError::Mismatch(_)),
        "f16 rows into an f32 cache: {error}"
    );
    let mut bytes = std::fs::read(&file).unwrap();
    let mut older = bytes.clone();
    older[..8].copy_from_slice(b"TESSKV01");
    std::fs::write(&file, &older).unwrap();
    let error = load_prefix_cache(&file, &mut pool, &mut kv, &fingerprint).unwrap_err();
    assert!(
        matches!(error, PersistError::Mismatch(_)),
        "another format version: {error}"
    );
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let error = load_prefix_cache(&file, &mut pool, &mut kv, &fingerprint).unwrap_err();
    assert!(matches!(error, PersistError::Corrupt(_)), "{error}");
    std::fs::write(&file, &bytes[..1000]).unwrap();
    let error = load_prefix_cache(&file, &mut pool, &mut kv, &fingerprint).unwrap_err();
    assert!(matches!(error, PersistError::Corrupt(_)), "{error}");
    assert_eq!(pool.stats().free, pool.num_blocks(), "a refused file restores nothing");
    std::fs::remove_dir_all(&dir).ok();
}
