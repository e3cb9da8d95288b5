//! The agent-facing listener: HTTP/1.1 and h2 (hyper-util's auto builder), one task per
//! connection, graceful drain on shutdown; TLS when configured (see `tls.rs`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use super::CurrentProxy;
use super::tls::AgentTls;

/// Concurrent h2 streams per agent connection (h2's default is unlimited-ish; bound it).
pub const MAX_CONCURRENT_STREAMS: u32 = 256;

/// Listener settings.
#[derive(Clone, Debug)]
pub struct ServerSettings {
    /// The agent must send a request head within this (slowloris defence).
    pub header_read: Duration,
    /// Largest request head (h1 buffer, h2 header list).
    pub max_header_bytes: usize,
    /// On shutdown, how long in-flight exchanges (SSE streams included) may finish.
    pub drain: Duration,
}

/// Accepts agent connections until `shutdown` resolves, then drains.
pub async fn serve(
    listener: TcpListener,
    proxy: Arc<CurrentProxy>,
    tls: Arc<AgentTls>,
    settings: ServerSettings,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(settings.header_read)
        // hyper panics below 8 KiB; config validation already enforces that floor.
        .max_buf_size(settings.max_header_bytes.max(8192));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_header_list_size(u32::try_from(settings.max_header_bytes).unwrap_or(u32::MAX));
    // Shared with the connection tasks, which build their connection after any TLS handshake.
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, agent) = match accepted {
                    Ok(conn) => conn,
                    Err(err) => {
                        // EMFILE and friends: back off briefly rather than spin.
                        tracing::warn!(error = %err, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let current = proxy.clone();
                let service = service_fn(move |req| current.load().handle(req, agent));
                // Read per connection: a reloaded certificate applies from the next accept.
                let acceptor = tls.load();
                let (tls, builder, watcher) = (tls.clone(), builder.clone(), graceful.watcher());
                let header_read = settings.header_read;
                tokio::spawn(async move {
                    // The TLS handshake runs here, not in the accept loop: a slow agent delays
                    // only itself.
                    let Some(io) = tls.accept(acceptor, stream, agent, header_read).await else {
                        return;
                    };
                    let conn = builder
                        .serve_connection_with_upgrades(TokioIo::new(io), service)
                        .into_owned();
                    if let Err(err) = watcher.watch(conn).await {
                        tracing::debug!(error = %err, %agent, "agent connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(settings.drain) => {
            tracing::warn!("drain deadline reached; closing the remaining agent connections");
        }
    }
    Ok(())
}
