//! Persisting the prefix cache across restarts: the index (each cached block's
//! tokens and parent) and the K/V rows of its blocks, in one file keyed by the
//! model's fingerprint and the KV layout. A file that does not match, or fails
//! its checksum, is refused with a reason, never trusted.
//!
//! Format (little-endian): `TESSKV02`, fingerprint (u64 length + bytes),
//! layout (u32 layers, kv heads, head dim, block size, bytes per element), u64 entry count, then per
//! entry: u32 parent entry (`u32::MAX` for none), u32 token count `n` (a full
//! block, or `0 < n < block size` for a sequence's partial last block), `n` u32 tokens, and
//! for each layer the block's K then V rows in the cache's element type (f16 or
//! f32); finally a u64 checksum of everything before it. Size: about
//! 2 × layers × kv_heads × head_dim × bytes per element, per cached token.

use crate::cache::KvCache;
use std::hash::Hasher;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use tessera_kv::{BlockId, BlockPool};

const MAGIC: &[u8; 8] = b"TESSKV02";

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

fn checksum(bytes: &[u8]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
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
/// Returns the number of blocks written. Writes a temporary file, then renames.
pub fn save_prefix_cache(
    path: &Path,
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
    let mut bytes = Vec::new();
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(fingerprint.len() as u64).to_le_bytes());
    bytes.extend_from_slice(fingerprint.as_bytes());
    for word in layout_words(kv) {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (block, parent, tokens) in &entries {
        let parent = parent.and_then(|p| position.get(&p).copied()).unwrap_or(u32::MAX);
        bytes.extend_from_slice(&parent.to_le_bytes());
        bytes.extend_from_slice(&(tokens.len() as u32).to_le_bytes());
        tokens.iter().for_each(|t| bytes.extend_from_slice(&t.to_le_bytes()));
        for layer in 0..kv.num_layers() {
            kv.append_block_bytes(layer, *block, &mut bytes)
                .map_err(|error| PersistError::Device(error.to_string()))?;
        }
    }
    bytes.extend_from_slice(&checksum(&bytes).to_le_bytes());
    let io = |source| PersistError::Io {
        path: path.display().to_string(),
        source,
    };
    let temporary = path.with_extension("partial");
    let mut file = BufWriter::new(std::fs::File::create(&temporary).map_err(io)?);
    file.write_all(&bytes).map_err(io)?;
    file.into_inner()
        .map_err(|e| io(e.into_error()))?
        .sync_all()
        .map_err(io)?;
    std::fs::rename(&temporary, path).map_err(io)?;
    Ok(entries.len())
}

/// A cursor over the file's bytes that reports truncation as corruption.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PersistError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| PersistError::Corrupt(format!("truncated at byte {}", self.at)))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
    fn u32(&mut self) -> Result<u32, PersistError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, PersistError> {
        let mut word = [0u8; 8];
        word.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(word))
    }
}

/// A persisted entry: parent entry, tokens, and per layer the K then V rows' bytes.
type Entry<'a> = (Option<usize>, Vec<u32>, Vec<&'a [u8]>);

/// Restore a file written by [`save_prefix_cache`] into a pool and cache with
/// free blocks. Returns the number of blocks restored (cached, evictable).
pub fn load_prefix_cache(
    path: &Path,
    pool: &mut BlockPool,
    kv: &mut KvCache,
    fingerprint: &str,
) -> Result<usize, PersistError> {
    let bytes = std::fs::read(path).map_err(|source| PersistError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let entries = parse(&bytes, kv, fingerprint)?;
    let meta: Vec<(Option<usize>, Vec<u32>)> = entries.iter().map(|(p, t, _)| (*p, t.clone())).collect();
    let placed = pool.restore_entries(&meta);
    let mut restored = 0;
    for (block, (_, _, rows)) in placed.iter().zip(&entries) {
        if let Some(block) = block {
            for (layer, layer_bytes) in rows.iter().enumerate() {
                kv.set_block_bytes(layer, *block, layer_bytes)
                    .map_err(|error| PersistError::Device(error.to_string()))?;
            }
            restored += 1;
        }
    }
    Ok(restored)
}

fn parse<'a>(bytes: &'a [u8], kv: &KvCache, fingerprint: &str) -> Result<Vec<Entry<'a>>, PersistError> {
    if bytes.len() < MAGIC.len() + 8 || !bytes.starts_with(&MAGIC[..6]) {
        return Err(PersistError::Corrupt("not a Tessera prefix cache file".into()));
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err(PersistError::Mismatch(format!(
            "format {}, this build reads {}",
            String::from_utf8_lossy(&bytes[6..MAGIC.len()]),
            String::from_utf8_lossy(&MAGIC[6..])
        )));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 8);
    let mut stored = [0u8; 8];
    stored.copy_from_slice(tail);
    if checksum(body) != u64::from_le_bytes(stored) {
        return Err(PersistError::Corrupt("checksum mismatch".into()));
    }
    let mut r = Reader {
        bytes: body,
        at: MAGIC.len(),
    };
    let length = r.u64()? as usize;
    let stored_fingerprint = String::from_utf8_lossy(r.take(length)?).into_owned();
    if stored_fingerprint != fingerprint {
        return Err(PersistError::Mismatch(format!(
            "written for model {stored_fingerprint}, this is {fingerprint}"
        )));
    }
    let layout = [r.u32()?, r.u32()?, r.u32()?, r.u32()?, r.u32()?];
    if layout != layout_words(kv) {
        return Err(PersistError::Mismatch(format!(
            "KV layout {layout:?}, this cache is {:?}",
            layout_words(kv)
        )));
    }
    let count = r.u64()? as usize;
    let block_bytes = kv.block_bytes_len();
    let mut entries = Vec::new();
    for index in 0..count {
        let parent = match r.u32()? {
            u32::MAX => None,
            p if (p as usize) < index => Some(p as usize),
            p => return Err(PersistError::Corrupt(format!("entry {index} names parent {p}"))),
        };
        let num_tokens = r.u32()? as usize;
        if num_tokens == 0 || num_tokens > kv.layout().block_size {
            return Err(PersistError::Corrupt(format!(
                "entry {index} holds {num_tokens} tokens; a block holds 1 to {}",
                kv.layout().block_size
            )));
        }
        let tokens = (0..num_tokens).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
        let rows = (0..kv.num_layers())
            .map(|_| r.take(block_bytes))
            .collect::<Result<Vec<_>, PersistError>>()?;
        entries.push((parent, tokens, rows));
    }
    if r.at != body.len() {
        return Err(PersistError::Corrupt("trailing bytes".into()));
    }
    Ok(entries)
}
