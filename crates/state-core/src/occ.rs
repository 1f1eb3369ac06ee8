//! Optimistic concurrency: the conditional-write rule shared by every write path.

/// `expected` absent: write unconditionally. `Some(0)`: only if the key does not exist.
/// `Some(n)`: only if the key's current version is `n`. `current` is 0 for an absent key.
///
/// On mismatch the caller gets the version it should have sent, so a retry needs no read.
pub fn check_expected(current: u64, expected: Option<u64>) -> Result<(), VersionMismatch> {
    match expected {
        Some(expected) if expected != current => Err(VersionMismatch { expected, current }),
        _ => Ok(()),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionMismatch {
    pub expected: u64,
    pub current: u64,
}

#[cfg(test)]
mod tests;
