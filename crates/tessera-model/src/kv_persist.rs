//! Persisting the prefix cache across restarts: the index (each cached block's
//! tokens and parent) and the K/V rows of its blocks, in one file keyed by the
//! model's fingerprint and the KV layout. A file that does not match, or fails
//! its checksum, is refused with a reason, never trusted.
//!
//! Format (little-endian): `TESSKV03`, fingerprint (u64 length + bytes),
//! layout (u32 layers, kv heads, head dim, block size, bytes per element), u64 entry count, then per
//! entry: u32 parent entry (`u32::MAX` for none), u32 token count `n` (a full
//! block, or `0 < n < block size` for a sequence's partial last block), `n` u32 tokens, and
//! for each layer the block's K then V rows in the cache's element type (f16 or
//! f32); finally the CRC-32 (IEEE, u32) of everything before it. Size: about
//! 2 × layers × kv_heads × head_dim × bytes per element, per cached token.
//!
//! Both directions stream: saving holds one layer's block at a time and
//! loading one read buffer, so neither needs memory on the order of the pool
//! (a pool of gigabytes is saved at shutdown, when memory may be tightest).

use crate::cache::KvCache;
use std::hash::Hasher;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use tessera_kv::{BlockId, BlockPool};

mod read;
pub use read::load_prefix_cache;

const MAGIC: &[u8; 8] = b"TESSKV03";

/// Why a persisted cache was not restored (or could not be written).
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// Reading or writing the file failed.
    #[error("prefix cache file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file belongs to another model or KV layout.
    #[error("prefix cache file does not match: {0}")]
    Mismatch(String),
    /// The file is damaged.
    #[error("prefix cache file is corrupt: {0}")]
    Corrupt(String),
    /// Copying K/V rows to or from the device failed.
    #[error("prefix cache: {0}")]
    Device(String),
}

/// A fingerprint of a model file's bytes (size + a hash of the whole content).
pub fn model_fingerprint(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.write(&buffer[..read]);
        size += read as u64;
    }
    Ok(format!("{size}:{:016x}", hasher.finish()))
}

fn layout_words(kv: &KvCache) -> [u32; 5] {
    let l = kv.layout();
    [
        kv.num_layers() as u32,
        l.num_kv_heads as u32,
        l.head_dim as u32,
        l.block_size as u32,
        kv.dtype().bytes() as u32,
    ]
}

/// Write every indexed block of `pool` (tokens, parent, K/V rows) to `path`.
/// Returns the number of blocks written. Writes a temporary file, then
/// renames it; a failed save removes the temporary file and leaves `path` as it was.
pub fn save_prefix_cache(
    path: &Path,
    pool: &BlockPool,
    kv: &KvCache,
    fingerprint: &str,
) -> Result<usize, PersistError> {
    let io = |source| PersistError::Io {
        path: path.display().to_string(),
        source,
    };
    let temporary = path.with_extension("partial");
    let file = std::fs::File::create(&temporary).map_err(io)?;
    let mut out = Checksummed {
        inner: BufWriter::with_capacity(1 << 20, file),
        crc: crc32fast::Hasher::new(),
        path: temporary.display().to_string(),
    };
    let written = write_entries(&mut out, pool, kv, fingerprint).and_then(|entries| {
        let crc = out.crc.finalize();
        out.inner.write_all(&crc.to_le_bytes()).map_err(io)?;
        let file = out.inner.into_inner().map_err(|error| io(error.into_error()))?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&temporary, path).map_err(io)?;
        Ok(entries)
    });
    if written.is_err() {
        // Best effort: the error being reported is the one that matters.
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// The header and every entry of [`save_prefix_cache`]'s format, checksummed, before the checksum.
fn write_entries(
    out: &mut Checksummed<BufWriter<std::fs::File>>,
    pool: &BlockPool,
    kv: &KvCache,
    fingerprint: &str,
) -> Result<usize, PersistError> {
    let entries = pool.index_entries();
    let position: std::collections::HashMap<BlockId, u32> = entries
        .iter()
        .enumerate()
        .map(|(i, (block, _, _))| (*block, i as u32))
        .collect();
    let mut bytes = Vec::with_capacity(kv.block_bytes_len().max(256));
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(fingerprint.len() as u64).to_le_bytes());
    bytes.extend_from_slice(fingerprint.as_bytes());
    for word in layout_words(kv) {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    out.write_all(&bytes)?;
    for (block, parent, tokens) in &entries {
        let parent = parent.and_then(|p| position.get(&p).copied()).unwrap_or(u32::MAX);
        bytes.clear();
        bytes.extend_from_slice(&parent.to_le_bytes());
        bytes.extend_from_slice(&(tokens.len() as u32).to_le_bytes());
        tokens.iter().for_each(|t| bytes.extend_from_slice(&t.to_le_bytes()));
        out.write_all(&bytes)?;
        for layer in 0..kv.num_layers() {
            bytes.clear();
            kv.append_block_bytes(layer, *block, &mut bytes)
                .map_err(|error| PersistError::Device(error.to_string()))?;
            out.write_all(&bytes)?;
        }
    }
    Ok(entries.len())
}

/// A writer that keeps the CRC-32 of everything written through it.
struct Checksummed<W> {
    inner: W,
    crc: crc32fast::Hasher,
    /// The file written, for errors.
    path: String,
}

impl<W: Write> Checksummed<W> {
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), PersistError> {
        self.crc.update(bytes);
        self.inner.write_all(bytes).map_err(|source| PersistError::Io {
            path: self.path.clone(),
            source,
        })
    }
}
