use std::time::Duration;

use tokio::net::TcpStream as Agent;

use super::*;

fn shared_listener() -> (std::net::TcpListener, SocketAddr) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// A balance of two workers, both listening on one socket.
fn two_workers() -> (Arc<Balance>, WorkerListener, WorkerListener, SocketAddr) {
    let (listener, addr) = shared_listener();
    let balance = Balance::new(2);
    let first = balance.listen(0, listener.try_clone().unwrap()).unwrap();
    let second = balance.listen(1, listener).unwrap();
    (balance, first.unwrap(), second.unwrap(), addr)
}

async fn accept(listener: &mut WorkerListener) -> (TcpStream, Seat) {
    let (stream, _, seat) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
        .await
        .expect("a connection within 10 s")
        .unwrap();
    (stream, seat)
}

/// Connections one worker accepts alternate between it and the other: the one with fewer
/// open takes the next, the accepting one on a tie. A closed connection frees its seat, and
/// the next connection goes where it was freed.
#[tokio::test]
async fn each_connection_goes_to_the_worker_with_the_fewest_open() {
    let (balance, mut first, mut second, addr) = two_workers();
    let mut agents = Vec::new();
    for _ in 0..6 {
        agents.push(Agent::connect(addr).await.unwrap());
    }
    // The first worker keeps the 1st, 3rd and 5th, and hands over the 2nd and 4th.
    let mut kept = Vec::new();
    for _ in 0..3 {
        kept.push(accept(&mut first).await);
    }
    assert_eq!((balance.open(0), balance.open(1)), (3, 2));
    // The second takes those two, and the 6th: handed over, or from the listener itself.
    let mut handed = Vec::new();
    for _ in 0..3 {
        handed.push(accept(&mut second).await);
    }
    // Each is a live connection, registered with the runtime serving it.
    let (stream, _) = handed.first().unwrap();
    let peer = stream.peer_addr().unwrap();
    assert!(agents.iter().any(|a| a.local_addr().unwrap() == peer));
    assert_eq!((balance.open(0), balance.open(1)), (3, 3));

    // Two closed on the second worker: the next two connections go there, the third stays.
    handed.truncate(1);
    assert_eq!((balance.open(0), balance.open(1)), (3, 1));
    for _ in 0..3 {
        agents.push(Agent::connect(addr).await.unwrap());
    }
    kept.push(accept(&mut first).await);
    assert_eq!((balance.open(0), balance.open(1)), (4, 3));
    handed.push(accept(&mut second).await);
    handed.push(accept(&mut second).await);
    assert_eq!((handed.len(), kept.len()), (3, 4));
}

/// A worker that no longer listens (draining) is handed nothing: what the other accepts, it
/// keeps, and nothing is lost.
#[tokio::test]
async fn a_worker_that_stopped_listening_is_handed_nothing() {
    let (balance, mut first, second, addr) = two_workers();
    drop(second);
    let mut agents = Vec::new();
    let mut kept = Vec::new();
    for _ in 0..3 {
        agents.push(Agent::connect(addr).await.unwrap());
        kept.push(accept(&mut first).await);
    }
    assert_eq!((balance.open(0), balance.open(1)), (3, 0));
    drop(kept);
    assert_eq!((balance.open(0), balance.open(1)), (0, 0));
}

/// A worker listens once; a worker the balance does not have, never.
#[tokio::test]
async fn a_worker_listens_once() {
    let (listener, _) = shared_listener();
    let balance = Balance::new(1);
    let first = balance.listen(0, listener.try_clone().unwrap()).unwrap();
    assert!(first.is_some());
    assert!(
        balance
            .listen(0, listener.try_clone().unwrap())
            .unwrap()
            .is_none()
    );
    assert!(balance.listen(1, listener).unwrap().is_none());
}
