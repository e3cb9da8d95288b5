use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::*;

fn listener() -> (std::net::TcpListener, std::net::SocketAddr) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// Each worker takes connections from its own duplicate of the one listener, on a thread of
/// its own: two workers that each serve one connection and stop both get one.
#[tokio::test]
async fn every_worker_accepts_from_the_shared_listener() {
    let (listener, addr) = listener();
    let names = Arc::new(Mutex::new(Vec::new()));
    let seen = names.clone();
    let workers = Workers::spawn(2, listener, move |mut listener| {
        let seen = seen.clone();
        async move {
            let (_conn, _, _seat) = listener.accept().await?;
            let name = std::thread::current().name().map(str::to_owned);
            seen.lock().unwrap().push(name);
            Ok(())
        }
    })
    .unwrap();
    let _a = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _b = tokio::net::TcpStream::connect(addr).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), workers.join())
        .await
        .expect("both workers accepted a connection")
        .unwrap();
    let mut names = names.lock().unwrap().clone();
    names.sort();
    assert_eq!(
        names,
        [
            Some("strata-worker-0".to_owned()),
            Some("strata-worker-1".to_owned())
        ]
    );
}

/// `join` returns a worker's error, after all have ended.
#[tokio::test]
async fn join_reports_a_worker_error() {
    let (listener, _) = listener();
    let turn = Arc::new(AtomicUsize::new(0));
    let workers = Workers::spawn(3, listener, move |_listener| {
        let me = turn.fetch_add(1, Ordering::SeqCst);
        async move {
            if me == 1 {
                Err(io::Error::other("worker 1 failed"))
            } else {
                Ok(())
            }
        }
    })
    .unwrap();
    let err = workers.join().await.unwrap_err();
    assert_eq!(err.to_string(), "worker 1 failed");
}

/// A worker that has finished keeps running what it spawned until every worker has: here the
/// first worker's task answers a request the second worker sends after the first returned.
#[tokio::test]
async fn a_drained_worker_keeps_its_runtime_until_all_have() {
    let (listener, _) = listener();
    let turn = Arc::new(AtomicUsize::new(0));
    let (to_first, from_second) = mpsc::unbounded_channel::<oneshot::Sender<&'static str>>();
    let from_second = Arc::new(Mutex::new(Some(from_second)));
    let (first_done, first_returned) = oneshot::channel::<()>();
    let first_done = Arc::new(Mutex::new(Some(first_done)));
    let first_returned = Arc::new(Mutex::new(Some(first_returned)));
    let workers = Workers::spawn(2, listener, move |_listener| {
        let me = turn.fetch_add(1, Ordering::SeqCst);
        let (from_second, first_done) = (from_second.clone(), first_done.clone());
        let (to_first, first_returned) = (to_first.clone(), first_returned.clone());
        async move {
            if me == 0 {
                let mut requests = from_second.lock().unwrap().take().unwrap();
                // Lives on this worker's runtime, after this future has returned.
                tokio::spawn(async move {
                    while let Some(reply) = requests.recv().await {
                        let _ = reply.send("served by the first worker");
                    }
                });
                let _ = first_done.lock().unwrap().take().unwrap().send(());
                Ok(())
            } else {
                let returned = first_returned.lock().unwrap().take().unwrap();
                returned.await.map_err(io::Error::other)?;
                // The first worker's serve future has returned; its runtime must still run.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let (reply, answer) = oneshot::channel();
                to_first.send(reply).map_err(io::Error::other)?;
                let answer = answer.await.map_err(io::Error::other)?;
                assert_eq!(answer, "served by the first worker");
                Ok(())
            }
        }
    })
    .unwrap();
    tokio::time::timeout(Duration::from_secs(10), workers.join())
        .await
        .expect("workers end")
        .unwrap();
}

/// Agents connecting one after another are spread evenly over the workers, whichever of
/// them the kernel wakes to accept (`balance.rs`): ten connections, five on each thread.
#[tokio::test]
async fn connections_are_spread_evenly_over_the_workers() {
    let (listener, addr) = listener();
    let (served, mut seen) = mpsc::unbounded_channel::<Option<String>>();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let workers = Workers::spawn(2, listener, move |mut listener| {
        let (served, mut stopped) = (served.clone(), stopped.clone());
        async move {
            let mut open = Vec::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        open.push(accepted?);
                        let _ = served.send(std::thread::current().name().map(str::to_owned));
                    }
                    _ = stopped.wait_for(|stop| *stop) => return Ok(()),
                }
            }
        }
    })
    .unwrap();
    let mut agents = Vec::new();
    let mut names = Vec::new();
    for _ in 0..10 {
        agents.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        // One at a time: each is seated before the next arrives.
        let name = tokio::time::timeout(Duration::from_secs(10), seen.recv())
            .await
            .expect("accepted within 10 s")
            .unwrap();
        names.push(name.unwrap());
    }
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), workers.join())
        .await
        .expect("workers end")
        .unwrap();
    let on_first = names.iter().filter(|n| *n == "strata-worker-0").count();
    let on_second = names.iter().filter(|n| *n == "strata-worker-1").count();
    assert_eq!((on_first, on_second), (5, 5), "{names:?}");
}
