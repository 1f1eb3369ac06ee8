//! A TCP proxy that holds every chunk of bytes for a fixed delay in each direction: PostgreSQL
//! "behind a network" on one machine, where `tc netem` is missing (this kernel has no
//! `sch_netem`). Latency only, no bandwidth limit or loss. tokio's timer ticks in
//! milliseconds, so a chunk is held between `delay` and `delay` + 1 ms; the proxy's own CPU
//! (two copies per chunk) comes out of the same two cores as everything else.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub(crate) struct DelayProxy {
    pub(crate) addr: SocketAddr,
    accepting: JoinHandle<()>,
}

impl DelayProxy {
    /// Listens on an ephemeral loopback port and forwards every connection to `target`.
    pub(crate) async fn start(target: SocketAddr, delay: Duration) -> Result<DelayProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(target).await {
                        let _ = (client.set_nodelay(true), server.set_nodelay(true));
                        let (client_read, client_write) = client.into_split();
                        let (server_read, server_write) = server.into_split();
                        tokio::join!(carry(client_read, server_write, delay), carry(server_read, client_write, delay));
                    }
                });
            }
        });
        Ok(DelayProxy { addr, accepting })
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Reads as bytes arrive and writes each chunk once it is `delay` old, in order: a reader
/// stamps, a writer waits for the stamp, so a stream's chunks are pipelined as on a wire.
async fn carry(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (chunks, mut due) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reading = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 || chunks.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    };
    let writing = async move {
        while let Some((at, chunk)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reading, writing);
}

/// The host and port a key=value PostgreSQL connection string names (libpq's defaults
/// otherwise), and the same string pointed at `via` instead.
pub(crate) fn reroute(conninfo: &str, via: SocketAddr) -> Result<(SocketAddr, String)> {
    anyhow::ensure!(
        !conninfo.contains("://"),
        "the delayed-network runs need STATE_BENCH_PG as key=value pairs (host=... port=...), not a URL"
    );
    let mut host = "127.0.0.1".to_owned();
    let mut port = 5432u16;
    let mut rest = Vec::new();
    for pair in conninfo.split_whitespace() {
        match pair.split_once('=') {
            Some(("host", h)) => host = h.to_owned(),
            Some(("port", p)) => port = p.parse().context("port in STATE_BENCH_PG")?,
            _ => rest.push(pair),
        }
    }
    let target: SocketAddr = format!("{host}:{port}").parse().context("STATE_BENCH_PG's host must be an IP address")?;
    let rerouted = format!("host={} port={} {}", via.ip(), via.port(), rest.join(" "));
    Ok((target, rerouted))
}
