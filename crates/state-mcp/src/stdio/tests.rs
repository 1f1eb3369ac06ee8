use std::os::fd::AsFd;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::*;

#[tokio::test]
async fn socket_pairs_are_served_non_blocking_by_the_runtime() {
    // As a Node-based client starts a server: one socket pair for stdin, one for stdout.
    let (client_in, server_in) = UnixStream::pair().unwrap();
    let (client_out, server_out) = UnixStream::pair().unwrap();
    let (mut input, mut output) = sockets(server_in.as_fd(), server_out.as_fd()).expect("sockets are taken");
    std::io::Write::write_all(&mut &client_in, b"{\"jsonrpc\":\"2.0\"}\n").unwrap();
    let mut line = String::new();
    BufReader::new(&mut input).read_line(&mut line).await.unwrap();
    assert_eq!(line, "{\"jsonrpc\":\"2.0\"}\n");
    output.write_all(b"answer\n").await.unwrap();
    let mut answer = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&client_out), &mut answer).unwrap();
    assert_eq!(answer, "answer\n");
}

#[tokio::test]
async fn pipes_and_files_are_left_to_the_general_path_untouched() {
    let (socket, _peer) = UnixStream::pair().unwrap();
    let file = tempfile::tempfile().unwrap();
    // A socket beside a file is not taken, and the socket is left blocking for the fallback.
    assert!(sockets(socket.as_fd(), file.as_fd()).is_none());
    assert!(sockets(file.as_fd(), socket.as_fd()).is_none());
    socket.set_read_timeout(Some(std::time::Duration::from_millis(20))).unwrap();
    let started = std::time::Instant::now();
    assert!(std::io::Read::read(&mut &socket, &mut [0; 1]).is_err());
    assert!(started.elapsed() >= std::time::Duration::from_millis(15), "the read waited, as a blocking socket's does");
}
