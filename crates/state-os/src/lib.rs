//! The platform seam. Everything the product does that Linux and macOS do differently sits
//! here, one module per concern, each with a `linux.rs` and a `macos.rs` side by side and the
//! rule both obey in the module itself. No other crate names an operating system (`cargo
//! xtask tidy` checks), so porting is done here or not at all.
//!
//! - [`process`]: when a process started, and whether the one that took a lock is still alive
//!   (not merely some process that reused its pid).
//! - [`hold`]: a hold on one process, to signal it and wait for its end without ever reaching
//!   another process that took its pid since.
//! - [`log_io`]: the write-ahead log's way to stable storage (Linux: `O_DIRECT | O_DSYNC`;
//!   macOS: `F_NOCACHE` and `F_FULLFSYNC`).
//! - [`socket`]: owner sockets: how long their paths may be, where they live by default,
//!   whether the other end of one has hung up.

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
compile_error!("state builds for Linux and macOS; on Windows, run it inside WSL2");

pub mod hold;
pub mod log_io;
pub mod process;
pub mod socket;
