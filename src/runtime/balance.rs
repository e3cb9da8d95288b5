//! Agent connections spread evenly over the workers (`workers.rs`): each connection a worker
//! accepts goes to the worker with the fewest open — itself on a tie, else handed over.
//!
//! Why: every worker accepts from the same listening socket, and the kernel wakes all of them
//! for a new connection; the first to call `accept` takes it, and then every other one already
//! queued, since its accept loop runs until the queue is empty. Agents that connect together —
//! a pool opening its connections, a benchmark — land mostly on one worker, at 64 agents up
//! to three times the other's CPU time, and the busy worker is the bottleneck while the other
//! idles (measured in `bench/README.md`). The
//! kernel's own spreading (`SO_REUSEPORT`, a hash of the addresses) is random, not even. Envoy
//! offers the same choice as here (`exact_balance`: the listener's connections go to the worker
//! with the fewest).
//!
//! A connection is only counted, not weighed: an agent's SSE stream idle for hours counts as
//! much as a busy agent's keep-alive connection. A handed-over connection costs one wake-up of
//! its worker, once, for the connection's life.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A connection accepted by one worker for another, not yet registered with any runtime.
type Handed = (std::net::TcpStream, SocketAddr);

/// The workers' open connection counts, and how to hand a connection to each.
pub struct Balance {
    workers: Box<[Seats]>,
}

/// One worker's part of [`Balance`].
struct Seats {
    /// Agent connections open on this worker, or on their way to it.
    open: AtomicUsize,
    handover: mpsc::UnboundedSender<Handed>,
    /// Taken by the worker when it starts listening.
    handed: Mutex<Option<mpsc::UnboundedReceiver<Handed>>>,
}

// === impl Balance ===

impl Balance {
    /// A balance for `workers` workers (at least one).
    pub fn new(workers: usize) -> Arc<Self> {
        let workers = (0..workers.max(1))
            .map(|_| {
                let (handover, handed) = mpsc::unbounded_channel();
                Seats {
                    open: AtomicUsize::new(0),
                    handover,
                    handed: Mutex::new(Some(handed)),
                }
            })
            .collect();
        Arc::new(Balance { workers })
    }

    /// Worker `worker`'s end of the shared `listener`: must be called on that worker's
    /// runtime, once (`None` after, or for a worker this balance does not have).
    pub fn listen(
        self: &Arc<Self>,
        worker: usize,
        listener: std::net::TcpListener,
    ) -> io::Result<Option<WorkerListener>> {
        let Some(handed) = self.workers.get(worker).and_then(|seats| {
            let mut handed = seats.handed.lock().unwrap_or_else(|e| e.into_inner());
            handed.take()
        }) else {
            return Ok(None);
        };
        Ok(Some(WorkerListener {
            listener: TcpListener::from_std(listener)?,
            handed,
            balance: self.clone(),
            worker,
        }))
    }

    /// The worker that takes a connection `worker` accepted: the one with the fewest open,
    /// `worker` itself on a tie; counted there. Two workers choosing at once may each miss
    /// the other's choice: off by one at worst.
    fn choose(&self, worker: usize) -> usize {
        let mut chosen = (worker, self.open(worker));
        for (other, seats) in self.workers.iter().enumerate() {
            let open = seats.open.load(Ordering::Relaxed);
            if open < chosen.1 {
                chosen = (other, open);
            }
        }
        // Counted before any hand-over: that worker may take it, and close it, at once.
        if let Some(seats) = self.workers.get(chosen.0) {
            seats.open.fetch_add(1, Ordering::Relaxed);
        }
        chosen.0
    }

    /// Hands `conn`, seated with worker `to`, over to it; gives it back, seated with `from`,
    /// when `to` no longer listens (it is draining).
    fn hand_over(&self, from: usize, to: usize, conn: Handed) -> Option<Handed> {
        let seats = self.workers.get(to)?;
        let Err(mpsc::error::SendError(back)) = seats.handover.send(conn) else {
            return None;
        };
        seats.open.fetch_sub(1, Ordering::Relaxed);
        if let Some(seats) = self.workers.get(from) {
            seats.open.fetch_add(1, Ordering::Relaxed);
        }
        Some(back)
    }

    /// Agent connections open on `worker` (or handed to it and not yet taken).
    pub fn open(&self, worker: usize) -> usize {
        self.workers
            .get(worker)
            .map_or(0, |seats| seats.open.load(Ordering::Relaxed))
    }
}

/// A worker's seat for one agent connection: counted in [`Balance`] until dropped.
pub struct Seat {
    balance: Arc<Balance>,
    worker: usize,
}

impl Drop for Seat {
    fn drop(&mut self) {
        if let Some(seats) = self.balance.workers.get(self.worker) {
            seats.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// One worker's end of the shared listening socket: what it accepts itself, and what other
/// workers hand it.
pub struct WorkerListener {
    /// This worker's duplicate of the listening descriptor, registered with its runtime.
    listener: TcpListener,
    handed: mpsc::UnboundedReceiver<Handed>,
    balance: Arc<Balance>,
    worker: usize,
}

// === impl WorkerListener ===

impl WorkerListener {
    /// The next agent connection this worker serves, with its seat. Cancel-safe: a connection
    /// accepted is returned or handed over before the next await.
    pub async fn accept(&mut self) -> io::Result<(TcpStream, SocketAddr, Seat)> {
        loop {
            let (stream, agent) = tokio::select! {
                accepted = self.listener.accept() => {
                    let (stream, agent) = accepted?;
                    let to = self.balance.choose(self.worker);
                    if to == self.worker {
                        return Ok((stream, agent, self.seat()));
                    }
                    // Taken off this worker's runtime, to be registered with `to`'s. Only
                    // fails for a descriptor already gone; the connection is lost either way.
                    let stream = match stream.into_std() {
                        Ok(stream) => stream,
                        Err(err) => {
                            drop(Seat { balance: self.balance.clone(), worker: to });
                            return Err(err);
                        }
                    };
                    match self.balance.hand_over(self.worker, to, (stream, agent)) {
                        None => continue,
                        Some(back) => back,
                    }
                }
                Some(handed) = self.handed.recv() => handed,
            };
            let seat = self.seat();
            return Ok((TcpStream::from_std(stream)?, agent, seat));
        }
    }

    /// A seat on this worker, already counted.
    fn seat(&self) -> Seat {
        Seat {
            balance: self.balance.clone(),
            worker: self.worker,
        }
    }
}

#[cfg(test)]
mod tests;
