//! Block pool hot paths: allocate/release and growing a table.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use tessera_kv::{BlockPool, BlockTable};

fn pool(c: &mut Criterion) {
    let mut pool = BlockPool::new(4096, 16);
    c.bench_function("pool_allocate_release", |b| {
        b.iter(|| {
            let block = pool.allocate().expect("free block");
            pool.release(black_box(block)).expect("release");
        })
    });
    c.bench_function("table_grow_2048_tokens_and_release", |b| {
        b.iter(|| {
            let mut table = BlockTable::new();
            assert!(table.grow(&mut pool, black_box(2048)));
            table.release(&mut pool).expect("release");
        })
    });
}

criterion_group!(benches, pool);
criterion_main!(benches);
