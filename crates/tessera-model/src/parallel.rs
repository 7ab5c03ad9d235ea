//! Tessera's one worker pool for the CPU kernels: `threads - 1` workers plus
//! the calling thread, which takes tasks too. A forward pass on two cores
//! submits ~120 products per decoded token, ~100 µs each, so the cost that
//! matters is the hand-off: an idle worker spins for at most [`SPIN`] (with
//! `spin_loop` hints, never `sched_yield`) watching for the next job, then
//! parks on a condition variable. Between two products of one forward (gaps
//! of a few µs, well under the spin) it does not park; between requests it
//! sleeps. (rayon's workers yielded in a loop: `sched_yield` and wake-ups
//! were ~15% of decode cycles, measured.) One job runs at a time: a task
//! must not wait for another thread that calls [`run`] (it would wait for
//! the pool forever); a nested `run` on a pool thread runs inline.
//!
//! Jobs are claimed task by task from an atomic counter, so a worker that the
//! OS has descheduled costs nothing: the caller takes its tasks.
//!
//! candle's own barrier pool (its CPU ops and quantized matmuls) must stay on
//! one thread so it never spins beside ours: two spinning pools made decode
//! ~3× slower on 2 cores, and beside a CPU hog candle's spin-waiting pool
//! dropped decode from 37.7 tok/s (1 thread) to 14.3 (2 threads) where ours
//! holds 24 (measured on the 2-core machines). candle 0.11 sizes that pool
//! once, at its first use, from `CANDLE_NUM_THREADS` (else `RAYON_NUM_THREADS`,
//! else the physical cores) and offers no API to size it. This library never
//! writes the environment: `set_var` races with every thread that reads it,
//! C code included (why Rust 2024 made it `unsafe`), and a library cannot know
//! that no such thread exists. The process pins candle before any thread
//! exists instead: the `tessera` binary first thing in `main` (with
//! [`CANDLE_PIN`]), and whatever cargo starts (tests, benches, examples,
//! `cargo run`) through `.cargo/config.toml`'s `[env]`. The library only
//! checks: the first model load or pool start reads the variables as candle
//! will and logs a warning when candle's pool would run more than one thread
//! (results are unchanged; only speed suffers).
//!
//! Protocol (all `SeqCst`): the caller publishes the job, then stores its
//! epoch in `open`; a worker increments `in_flight`, then checks `open` still
//! holds the epoch it saw before touching the job. The caller claims tasks
//! until none is left, stores `open = 0` and waits for `in_flight == 0`.
//! Either a worker's increment precedes that wait (the caller waits for it)
//! or its check sees `open` changed (it leaves without touching the job), so
//! the borrowed closure is never called after [`run`] returns.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How long an idle worker watches for a job before it parks.
const SPIN: Duration = Duration::from_micros(200);

static POOL: OnceLock<Pool> = OnceLock::new();
static THREADS: OnceLock<usize> = OnceLock::new();

thread_local! {
    /// Set while this thread runs pool tasks: a nested `run` executes inline.
    static IN_POOL: Cell<bool> = const { Cell::new(false) };
}

/// Choose the number of worker threads; effective only before the pool first runs.
/// Returns the number in force.
pub fn set_num_threads(threads: usize) -> usize {
    *THREADS.get_or_init(|| threads.max(1))
}

/// The number of threads that run a job, the caller included (default: the available cores).
pub fn num_threads() -> usize {
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The environment entry that keeps candle's pool on one thread, for a
/// process's entry point to set before any thread exists (see the module docs).
pub const CANDLE_PIN: (&str, &str) = ("CANDLE_NUM_THREADS", "1");

/// The threads candle's barrier pool will start with when the environment
/// names them: `CANDLE_NUM_THREADS`, else `RAYON_NUM_THREADS`, each a positive
/// integer (`candle_core::utils::candle_num_threads` in candle 0.11.1); `None`
/// when neither does (candle then takes the physical cores).
fn candle_threads() -> Option<usize> {
    [CANDLE_PIN.0, "RAYON_NUM_THREADS"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok()?.parse::<usize>().ok().filter(|&n| n > 0))
}

/// Warn once when candle's pool would run more than one thread (it reads the
/// environment at its first use, so this runs before the first model load).
pub(crate) fn check_candle_pinned() {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = candle_threads();
        if threads == Some(1) || (threads.is_none() && cores == 1) {
            return;
        }
        let (name, value) = CANDLE_PIN;
        tracing::warn!(
            candle_threads = ?threads,
            "candle's thread pool is not pinned to one thread: its spinning workers compete with \
             Tessera's (decode measured ~3x slower on 2 cores); set {name}={value} in the \
             environment before the process starts (the `tessera` binary and cargo do)"
        );
    });
}

/// A job's closure with its lifetime erased, and its task count.
#[derive(Clone, Copy)]
struct Job {
    task: *const (dyn Fn(usize) + Sync + 'static),
    tasks: usize,
}

// SAFETY: the closure is `Sync`; the protocol in the module docs guarantees
// it is only called while `run`, which borrows it, has not returned.
unsafe impl Send for Job {}

/// State shared by the caller and the workers.
struct Shared {
    /// Epoch of the job open for workers to join; 0 when none is.
    open: AtomicU64,
    /// Next task index to claim.
    next: AtomicUsize,
    /// Workers inside the current job.
    in_flight: AtomicUsize,
    /// Workers parked on `wake`.
    sleepers: AtomicUsize,
    /// 1 while the caller is parked on `done`.
    caller_parked: AtomicUsize,
    job: Mutex<Option<Job>>,
    /// The first panic of a worker's task, re-raised by the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    wake: (Mutex<()>, Condvar),
    done: (Mutex<()>, Condvar),
}

/// The pool: one job at a time (`submit`), the caller among the threads.
struct Pool {
    shared: Arc<Shared>,
    workers: usize,
    submit: Mutex<u64>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a task panicked elsewhere; the data is plain.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn pool() -> &'static Pool {
    POOL.get_or_init(|| {
        check_candle_pinned();
        let shared = Arc::new(Shared {
            open: AtomicU64::new(0),
            next: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            caller_parked: AtomicUsize::new(0),
            job: Mutex::new(None),
            panic: Mutex::new(None),
            wake: (Mutex::new(()), Condvar::new()),
            done: (Mutex::new(()), Condvar::new()),
        });
        let mut workers = 0;
        for index in 1..num_threads() {
            let worker_shared = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name(format!("tessera-cpu-{index}"))
                .spawn(move || worker_loop(&worker_shared));
            if spawned.is_ok() {
                workers += 1;
            }
        }
        Pool {
            shared,
            workers,
            submit: Mutex::new(0),
        }
    })
}

/// Run `task(i)` for every `i < tasks` on the pool and the calling thread;
/// returns when all have run. A panicking task is re-raised here, after the
/// other threads have left the job.
pub fn run(tasks: usize, task: &(dyn Fn(usize) + Sync)) {
    if tasks == 0 {
        return;
    }
    if tasks == 1 || IN_POOL.with(Cell::get) {
        (0..tasks).for_each(task);
        return;
    }
    let pool = pool();
    if pool.workers == 0 {
        (0..tasks).for_each(task);
        return;
    }
    let mut epoch = lock(&pool.submit);
    *epoch += 1;
    let shared = &pool.shared;
    // SAFETY: only the lifetime is erased; see the module docs for why the
    // pointer is never used after this function returns.
    let erased: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(task) };
    *lock(&shared.job) = Some(Job { task: erased, tasks });
    shared.next.store(0, SeqCst);
    shared.open.store(*epoch, SeqCst);
    if shared.sleepers.load(SeqCst) > 0 {
        let _guard = lock(&shared.wake.0);
        shared.wake.1.notify_all();
    }
    IN_POOL.with(|flag| flag.set(true));
    let caller = catch_unwind(AssertUnwindSafe(|| claim_tasks(shared, task, tasks)));
    IN_POOL.with(|flag| flag.set(false));
    shared.open.store(0, SeqCst);
    wait_for_workers(shared);
    *lock(&shared.job) = None;
    let worker_panic = lock(&shared.panic).take();
    drop(epoch);
    if let Err(payload) = caller {
        resume_unwind(payload);
    }
    if let Some(payload) = worker_panic {
        resume_unwind(payload);
    }
}

/// Claim and run tasks until none is left.
fn claim_tasks(shared: &Shared, task: &(dyn Fn(usize) + Sync), tasks: usize) {
    loop {
        let index = shared.next.fetch_add(1, SeqCst);
        if index >= tasks {
            return;
        }
        task(index);
    }
}

/// Spin briefly, then park, until no worker is inside the job.
fn wait_for_workers(shared: &Shared) {
    let start = Instant::now();
    while shared.in_flight.load(SeqCst) > 0 {
        if start.elapsed() > SPIN {
            let mut guard = lock(&shared.done.0);
            shared.caller_parked.store(1, SeqCst);
            while shared.in_flight.load(SeqCst) > 0 {
                guard = shared.done.1.wait(guard).unwrap_or_else(|p| p.into_inner());
            }
            shared.caller_parked.store(0, SeqCst);
            return;
        }
        std::hint::spin_loop();
    }
}

fn worker_loop(shared: &Shared) {
    IN_POOL.with(|flag| flag.set(true));
    let mut seen = 0;
    loop {
        seen = wait_for_job(shared, seen);
        shared.in_flight.fetch_add(1, SeqCst);
        if shared.open.load(SeqCst) == seen {
            let job = *lock(&shared.job);
            if let Some(job) = job {
                // SAFETY: the job is open and this worker is counted in
                // `in_flight`, so `run` has not returned and the closure lives.
                let task = unsafe { &*job.task };
                if let Err(payload) = catch_unwind(AssertUnwindSafe(|| claim_tasks(shared, task, job.tasks))) {
                    lock(&shared.panic).get_or_insert(payload);
                }
            }
        }
        if shared.in_flight.fetch_sub(1, SeqCst) == 1 && shared.caller_parked.load(SeqCst) == 1 {
            let _guard = lock(&shared.done.0);
            shared.done.1.notify_all();
        }
    }
}

/// The epoch of the next open job after `seen`: spin up to [`SPIN`], then park.
fn wait_for_job(shared: &Shared, seen: u64) -> u64 {
    let fresh = |epoch: u64| epoch != 0 && epoch != seen;
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        let epoch = shared.open.load(SeqCst);
        if fresh(epoch) {
            return epoch;
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(64) && start.elapsed() > SPIN {
            break;
        }
        std::hint::spin_loop();
    }
    let mut guard = lock(&shared.wake.0);
    shared.sleepers.fetch_add(1, SeqCst);
    let epoch = loop {
        let epoch = shared.open.load(SeqCst);
        if fresh(epoch) {
            break epoch;
        }
        guard = shared.wake.1.wait(guard).unwrap_or_else(|p| p.into_inner());
    };
    shared.sleepers.fetch_sub(1, SeqCst);
    epoch
}

/// Run `work(index, chunk)` for every `chunk_len`-sized chunk of `data`, in
/// parallel: up to four tasks per thread (uneven chunks balance), each a run
/// of consecutive chunks; a decode step's few chunks get a task each.
pub fn for_each_chunk_mut<F>(data: &mut [f32], chunk_len: usize, work: F)
where
    F: Fn(usize, &mut [f32]) + Sync + Send,
{
    if chunk_len == 0 || data.is_empty() {
        return;
    }
    let chunks = data.len().div_ceil(chunk_len);
    let tasks = chunks.clamp(1, num_threads() * 4);
    let per_task = chunks.div_ceil(tasks);
    let groups: Vec<Mutex<(usize, &mut [f32])>> = data
        .chunks_mut(per_task * chunk_len)
        .enumerate()
        .map(|(group, slice)| Mutex::new((group * per_task, slice)))
        .collect();
    run(groups.len(), &|group| {
        let mut guard = lock(&groups[group]);
        let (first, slice) = &mut *guard;
        for (offset, chunk) in slice.chunks_mut(chunk_len).enumerate() {
            work(*first + offset, chunk);
        }
    });
}

/// Map every item to a result in parallel, keeping order.
pub fn map<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync + Send) -> Vec<R> {
    let results: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    run(items.len(), &|index| {
        let value = work(&items[index]);
        *lock(&results[index]) = Some(value);
    });
    results
        .into_iter()
        .filter_map(|slot| slot.into_inner().unwrap_or_else(|p| p.into_inner()))
        .collect()
}

#[cfg(test)]
mod tests;
