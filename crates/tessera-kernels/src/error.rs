//! Errors of kernel setup (the products themselves cannot fail).

/// A matrix or activation shape the kernels cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The inner dimension is not a whole number of blocks.
    #[error("the inner dimension {cols} is not a multiple of the block size {block}")]
    Cols {
        /// The inner dimension.
        cols: usize,
        /// The block size.
        block: usize,
    },
    /// The data does not have the size the shape implies.
    #[error("{what}: expected {expected} bytes or values, got {got}")]
    Size {
        /// Which buffer.
        what: &'static str,
        /// What the shape implies.
        expected: usize,
        /// What was given.
        got: usize,
    },
}
