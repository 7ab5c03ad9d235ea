//! Loading a persisted prefix cache in three streaming passes over the file:
//! the checksum over all of it (nothing is trusted before it matches), the
//! header and entries with their rows skipped (all validated before the pool
//! changes), then the rows of the entries the pool placed, one layer's block
//! at a time.

use super::{layout_words, PersistError, MAGIC};
use crate::cache::KvCache;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use tessera_kv::BlockPool;

/// Longest fingerprint a file may name (they are tens of bytes).
const MAX_FINGERPRINT_BYTES: u64 = 4096;

/// A persisted entry: its parent entry, its tokens and where its rows start.
struct Entry {
    parent: Option<usize>,
    tokens: Vec<u32>,
    rows_at: u64,
}

/// Restore a file written by [`save_prefix_cache`](super::save_prefix_cache)
/// into a pool and cache with free blocks. Returns the number of blocks
/// restored (cached, evictable). A file refused before its blocks are placed
/// leaves the pool as it was; one that fails while its rows are read in (an
/// I/O or device error) drops every cached block, so none holds rows that are
/// not its tokens' (at start, the pool has no other).
pub fn load_prefix_cache(
    path: &Path,
    pool: &mut BlockPool,
    kv: &mut KvCache,
    fingerprint: &str,
) -> Result<usize, PersistError> {
    let mut r = FileReader::open(path)?;
    r.check_magic()?;
    r.verify_checksum()?;
    let entries = r.entries(kv, fingerprint)?;
    let meta: Vec<(Option<usize>, Vec<u32>)> = entries.iter().map(|e| (e.parent, e.tokens.clone())).collect();
    let placed = pool.restore_entries(&meta);
    let restored = r.fill_rows(&placed, &entries, kv);
    if restored.is_err() {
        // The blocks are indexed but their rows are not what the file holds: forget them.
        pool.clear_cache();
    }
    restored
}

/// A buffered cursor over the file's checksummed body that reports reads past it as corruption.
struct FileReader {
    path: String,
    inner: BufReader<File>,
    at: u64,
    /// The body's length: the file's, less the checksum.
    end: u64,
}

impl FileReader {
    fn open(path: &Path) -> Result<Self, PersistError> {
        let io = |source| PersistError::Io {
            path: path.display().to_string(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        Ok(Self {
            path: path.display().to_string(),
            inner: BufReader::with_capacity(1 << 20, file),
            at: 0,
            end: len.saturating_sub(4),
        })
    }

    fn io(&self, source: std::io::Error) -> PersistError {
        PersistError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// The format's name and version: another version is a mismatch, not damage.
    fn check_magic(&mut self) -> Result<(), PersistError> {
        let mut magic = [0u8; 8];
        if self.end < 16 || self.take(&mut magic).is_err() || !magic.starts_with(&MAGIC[..6]) {
            return Err(PersistError::Corrupt("not a Tessera prefix cache file".into()));
        }
        if &magic != MAGIC {
            return Err(PersistError::Mismatch(format!(
                "format {}, this build reads {}",
                String::from_utf8_lossy(&magic[6..]),
                String::from_utf8_lossy(&MAGIC[6..])
            )));
        }
        Ok(())
    }

    /// The CRC-32 of the body against the one stored after it; leaves the cursor after the magic.
    fn verify_checksum(&mut self) -> Result<(), PersistError> {
        self.seek_to(0)?;
        let mut crc = crc32fast::Hasher::new();
        let mut chunk = vec![0u8; 1 << 20];
        while self.at < self.end {
            let len = chunk.len().min((self.end - self.at) as usize);
            self.take(&mut chunk[..len])?;
            crc.update(&chunk[..len]);
        }
        let mut stored = [0u8; 4];
        self.inner.read_exact(&mut stored).map_err(|error| self.io(error))?;
        self.at += stored.len() as u64;
        if crc.finalize() != u32::from_le_bytes(stored) {
            return Err(PersistError::Corrupt("checksum mismatch".into()));
        }
        self.seek_to(MAGIC.len() as u64)
    }

    /// The header checked against this model and cache, then every entry, rows skipped.
    fn entries(&mut self, kv: &KvCache, fingerprint: &str) -> Result<Vec<Entry>, PersistError> {
        let length = self.u64()?;
        if length > MAX_FINGERPRINT_BYTES {
            return Err(PersistError::Corrupt(format!(
                "a fingerprint of {length} bytes (at most {MAX_FINGERPRINT_BYTES})"
            )));
        }
        let mut stored = vec![0u8; length as usize];
        self.take(&mut stored)?;
        let stored = String::from_utf8_lossy(&stored);
        if stored != fingerprint {
            return Err(PersistError::Mismatch(format!(
                "written for model {stored}, this is {fingerprint}"
            )));
        }
        let layout = [self.u32()?, self.u32()?, self.u32()?, self.u32()?, self.u32()?];
        if layout != layout_words(kv) {
            return Err(PersistError::Mismatch(format!(
                "KV layout {layout:?}, this cache is {:?}",
                layout_words(kv)
            )));
        }
        let count = self.u64()?;
        let rows_len = (kv.block_bytes_len() * kv.num_layers()) as u64;
        let mut entries = Vec::new();
        for index in 0..count {
            entries.push(self.entry(index as usize, kv.layout().block_size, rows_len)?);
        }
        if self.at != self.end {
            return Err(PersistError::Corrupt("trailing bytes".into()));
        }
        Ok(entries)
    }

    /// Entry `index`'s parent and tokens, checked; its `rows_len` bytes of rows skipped.
    fn entry(&mut self, index: usize, block_size: usize, rows_len: u64) -> Result<Entry, PersistError> {
        let parent = match self.u32()? {
            u32::MAX => None,
            p if (p as usize) < index => Some(p as usize),
            p => return Err(PersistError::Corrupt(format!("entry {index} names parent {p}"))),
        };
        let num_tokens = self.u32()? as usize;
        if num_tokens == 0 || num_tokens > block_size {
            return Err(PersistError::Corrupt(format!(
                "entry {index} holds {num_tokens} tokens; a block holds 1 to {block_size}"
            )));
        }
        let tokens = (0..num_tokens).map(|_| self.u32()).collect::<Result<Vec<_>, _>>()?;
        let rows_at = self.at;
        self.skip(rows_len)?;
        Ok(Entry {
            parent,
            tokens,
            rows_at,
        })
    }

    /// Each placed entry's rows into its block; the number of blocks filled.
    fn fill_rows(
        &mut self,
        placed: &[Option<tessera_kv::BlockId>],
        entries: &[Entry],
        kv: &mut KvCache,
    ) -> Result<usize, PersistError> {
        let mut rows = vec![0u8; kv.block_bytes_len()];
        let mut restored = 0;
        for (block, entry) in placed.iter().zip(entries) {
            let Some(block) = block else { continue };
            self.seek_to(entry.rows_at)?;
            for layer in 0..kv.num_layers() {
                self.take(&mut rows)?;
                kv.set_block_bytes(layer, *block, &rows)
                    .map_err(|error| PersistError::Device(error.to_string()))?;
            }
            restored += 1;
        }
        Ok(restored)
    }

    /// Exactly `out.len()` bytes of the body.
    fn take(&mut self, out: &mut [u8]) -> Result<(), PersistError> {
        self.check_room(out.len() as u64)?;
        self.inner.read_exact(out).map_err(|error| self.io(error))?;
        self.at += out.len() as u64;
        Ok(())
    }

    fn skip(&mut self, len: u64) -> Result<(), PersistError> {
        self.check_room(len)?;
        self.seek_to(self.at + len)
    }

    fn check_room(&self, len: u64) -> Result<(), PersistError> {
        match self.at.checked_add(len) {
            Some(end) if end <= self.end => Ok(()),
            _ => Err(PersistError::Corrupt(format!("truncated at byte {}", self.at))),
        }
    }

    fn seek_to(&mut self, at: u64) -> Result<(), PersistError> {
        // `seek_relative` keeps the buffer when the target is inside it.
        let offset = at as i64 - self.at as i64;
        self.inner.seek_relative(offset).map_err(|error| self.io(error))?;
        self.at = at;
        Ok(())
    }

    fn u32(&mut self) -> Result<u32, PersistError> {
        let mut word = [0u8; 4];
        self.take(&mut word)?;
        Ok(u32::from_le_bytes(word))
    }

    fn u64(&mut self) -> Result<u64, PersistError> {
        let mut word = [0u8; 8];
        self.take(&mut word)?;
        Ok(u64::from_le_bytes(word))
    }
}
