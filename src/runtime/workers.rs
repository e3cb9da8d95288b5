//! Serving threads: the agent listener is served by `workers` threads, each running its own
//! single-threaded tokio runtime — nginx's worker processes, as threads of one process.
//!
//! Why not one multi-threaded runtime: a call is one task that moves bytes between two
//! sockets and wakes itself (hyper's parts, the upstream connection it drives). On a
//! work-stealing runtime each such wake may also wake an idle worker to look for work —
//! a futex or eventfd write and an `epoll_wait` per wake, measured at about 5 syscalls per
//! call with one agent (`bench/README.md`). A worker with a runtime of its own wakes nobody:
//! its connections, the upstream connections they drive, their timers, live and die on it.
//!
//! Every worker accepts from the same listening socket (each registers its own duplicate of
//! the descriptor) and seats what it accepts with the worker that has the fewest connections
//! open (`balance.rs`): itself, or another, which it hands the connection to. A connection
//! stays on the worker it was seated with.
//!
//! A worker that has drained keeps its runtime running until all have: an upstream
//! connection it made (hyper-util's pool, which streamed bodies go through, is shared) may
//! still be carrying another worker's response.

use std::future::Future;
use std::io;
use std::thread::JoinHandle;

use tokio::sync::{oneshot, watch};

use super::balance::{Balance, WorkerListener};

/// The running workers.
pub struct Workers {
    /// Each worker's result, sent when it has drained.
    done: Vec<oneshot::Receiver<io::Result<()>>>,
    /// Set once every worker has drained: they may drop their runtimes.
    release: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
}

// === impl Workers ===

impl Workers {
    /// Starts `count` workers (at least one), each serving its own end of `listener` with the
    /// future `serve` makes for it.
    pub fn spawn<F, Fut>(
        count: usize,
        listener: std::net::TcpListener,
        serve: F,
    ) -> io::Result<Self>
    where
        F: Fn(WorkerListener) -> Fut + Send + Clone + 'static,
        Fut: Future<Output = io::Result<()>> + 'static,
    {
        // tokio registers a listener in non-blocking mode only.
        listener.set_nonblocking(true)?;
        let (release, released) = watch::channel(false);
        let balance = Balance::new(count);
        // Workers log where the thread that starts them does: the global subscriber in
        // `main`, a test's capture (`log::capture_json`) in tests.
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        let mut workers = Workers {
            done: Vec::new(),
            release,
            threads: Vec::new(),
        };
        for i in 0..count.max(1) {
            let listener = listener.try_clone()?;
            let (report, done) = oneshot::channel();
            let (serve, mut released) = (serve.clone(), released.clone());
            let (dispatch, balance) = (dispatch.clone(), balance.clone());
            let thread = std::thread::Builder::new()
                .name(format!("strata-worker-{i}"))
                .spawn(move || {
                    let _logs = tracing::dispatcher::set_default(&dispatch);
                    // What every call writes, this worker has a copy of (`per_worker.rs`).
                    crate::runtime::per_worker::enter(i);
                    // Call records written together while the runtime has work, out when it
                    // parks (`log/stdout.rs`).
                    crate::log::batch_log_lines();
                    let runtime = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .on_thread_park(crate::log::flush_log_lines)
                        .build()
                    {
                        Ok(runtime) => runtime,
                        Err(err) => {
                            let _ = report.send(Err(err));
                            return;
                        }
                    };
                    runtime.block_on(async move {
                        let served = match balance.listen(i, listener) {
                            Ok(Some(listener)) => serve(listener).await,
                            Ok(None) => Err(io::Error::other("a worker listened twice")),
                            Err(err) => Err(err),
                        };
                        let _ = report.send(served);
                        // Released, or the owner is gone: either way, done.
                        let _ = released.wait_for(|go| *go).await;
                    });
                    crate::log::flush_log_lines();
                })?;
            workers.done.push(done);
            workers.threads.push(thread);
        }
        Ok(workers)
    }

    /// Waits until every worker has drained (their `serve` futures returned), then lets them
    /// end. Returns the first error a worker reported.
    pub async fn join(self) -> io::Result<()> {
        let mut result = Ok(());
        for done in self.done {
            let served = done
                .await
                .unwrap_or_else(|_| Err(io::Error::other("a worker thread ended early")));
            if result.is_ok() {
                result = served;
            }
        }
        let _ = self.release.send(true);
        let threads = self.threads;
        // Joined off the async threads: a worker's runtime may take a moment to shut down.
        let _ = tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
        })
        .await;
        result
    }
}

#[cfg(test)]
mod tests;
