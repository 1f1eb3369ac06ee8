//! The process's stdin and stdout as the server reads and writes them: non-blocking, waited
//! on by the runtime's poller, so a message costs no thread hand-off.
//!
//! rmcp's `stdio_pipes` does that for pipes, and otherwise falls back to tokio's standard
//! streams, where every read and every write is a task on the blocking pool: a pool thread
//! woken, then the runtime woken back, for each message both ways. MCP clients built on
//! Node (libuv: the TypeScript SDK, and the editors and agents built on it) start servers
//! with Unix socket pairs, not pipes, so they all got that fallback: a joined `state_get`
//! took 2.5 times the CPU it takes over pipes. Sockets are made non-blocking here too.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;

use tokio::io::{AsyncRead, AsyncWrite};

pub(crate) type Input = Box<dyn AsyncRead + Send + Unpin>;
pub(crate) type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// This process's stdin and stdout, in the cheapest form the kernel allows.
pub(crate) fn streams() -> (Input, Output) {
    if let Some((input, output)) = sockets(std::io::stdin().as_fd(), std::io::stdout().as_fd()) {
        tracing::debug!("stdin and stdout are sockets: serving them non-blocking");
        return (Box::new(input), Box::new(output));
    }
    let (input, output) = rmcp::transport::stdio_pipes();
    (Box::new(input), Box::new(output))
}

/// `input` and `output` as non-blocking sockets of the runtime, when both are sockets.
///
/// Non-blocking is a property of the open socket, which the descriptors 0 and 1 share with
/// the copies made here; nothing else in this process reads stdin or writes stdout (logs go
/// to stderr), and the owner it may start gets neither. The client's end of each pair is its
/// own and stays as it was.
fn sockets(input: BorrowedFd<'_>, output: BorrowedFd<'_>) -> Option<(tokio::net::UnixStream, tokio::net::UnixStream)> {
    let socket = |fd: BorrowedFd<'_>| -> Option<OwnedFd> {
        let copy = std::fs::File::from(fd.try_clone_to_owned().ok()?);
        copy.metadata().ok()?.file_type().is_socket().then(|| OwnedFd::from(copy))
    };
    // Both or neither: a blocking fallback must not meet a descriptor made non-blocking.
    let (input, output) = (socket(input)?, socket(output)?);
    let (input, output) = (UnixStream::from(input), UnixStream::from(output));
    if input.set_nonblocking(true).and_then(|()| output.set_nonblocking(true)).is_err() {
        let _ = (input.set_nonblocking(false), output.set_nonblocking(false));
        return None;
    }
    // Registering fails only outside a runtime, and this is always called inside one.
    Some((tokio::net::UnixStream::from_std(input).ok()?, tokio::net::UnixStream::from_std(output).ok()?))
}

#[cfg(test)]
mod tests;
