//! The storage every K-quant shares: a `[rows, cols]` matrix of 256-value
//! super-blocks regrouped by [`GROUP`] rows, one fixed-size group
//! super-block per group and super-block (each format lays out its own
//! bytes inside it; rows past the last multiple of 8 stay zero).

use crate::q4::GROUP;
use crate::q4_k::{check_super_blocks, SUPER_BLOCK};
use crate::{KernelError, BLOCK};

/// Group super-blocks of one format.
#[derive(Debug, Clone)]
pub(crate) struct SuperRows {
    rows: usize,
    cols: usize,
    /// Bytes of one group super-block.
    group_bytes: usize,
    data: Vec<u8>,
}

impl SuperRows {
    /// Repack GGML bytes (`ggml_bytes` per row and super-block) of a
    /// `[rows, cols]` matrix: `place(group super-block, lane, GGML block)`
    /// writes each row's block into its group's lane.
    pub(crate) fn repack(
        what: &'static str,
        bytes: &[u8],
        (rows, cols): (usize, usize),
        (ggml_bytes, group_bytes): (usize, usize),
        mut place: impl FnMut(&mut [u8], usize, &[u8]),
    ) -> Result<Self, KernelError> {
        check_super_blocks(what, bytes.len(), (rows, cols), ggml_bytes)?;
        let supers = cols / SUPER_BLOCK;
        let mut this = Self {
            rows,
            cols,
            group_bytes,
            data: vec![0u8; rows.div_ceil(GROUP) * supers * group_bytes],
        };
        for (index, src) in bytes.chunks_exact(ggml_bytes).enumerate() {
            let (row, sb) = (index / supers, index % supers);
            let start = ((row / GROUP) * supers + sb) * group_bytes;
            place(&mut this.data[start..start + group_bytes], row % GROUP, src);
        }
        Ok(this)
    }

    /// Output rows.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Blocks of 32 per row.
    pub(crate) fn blocks(&self) -> usize {
        self.cols / BLOCK
    }

    /// Super-blocks per row.
    pub(crate) fn supers(&self) -> usize {
        self.cols / SUPER_BLOCK
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Group `group`, super-block `sb`.
    pub(crate) fn group_super(&self, group: usize, sb: usize) -> &[u8] {
        &self.data[(group * self.supers() + sb) * self.group_bytes..][..self.group_bytes]
    }
}

/// The accessors of a weight type stored in a [`SuperRows`] field.
macro_rules! super_rows_accessors {
    ($name:ident, $field:tt) => {
        impl $name {
            /// Output rows.
            pub fn rows(&self) -> usize {
                self.$field.rows()
            }

            /// Blocks of 32 per row.
            pub fn blocks(&self) -> usize {
                self.$field.blocks()
            }

            /// Bytes held (for bandwidth figures).
            pub fn bytes(&self) -> usize {
                self.$field.bytes()
            }

            /// Super-blocks per row.
            pub(crate) fn supers(&self) -> usize {
                self.$field.supers()
            }

            /// Group `group`, super-block `sb`: the bytes the module docs describe.
            pub(crate) fn group_super(&self, group: usize, sb: usize) -> &[u8] {
                self.$field.group_super(group, sb)
            }
        }
    };
}
pub(crate) use super_rows_accessors;
