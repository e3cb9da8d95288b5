use std::time::Duration;

use http::uri::Authority;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::H1Conns;

/// An upstream that accepts one connection and reports when strata closes it.
async fn upstream() -> (Authority, oneshot::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let authority: Authority = listener.local_addr().unwrap().to_string().parse().unwrap();
    let (closed, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut io, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 64];
        while io.read(&mut buf).await.unwrap_or(0) > 0 {}
        let _ = closed.send(());
    });
    (authority, rx)
}

/// A connection left idle past the limit is closed by the sweep, with no call to find it.
#[tokio::test]
async fn idle_connections_are_closed_by_the_sweep() {
    let (authority, closed) = upstream().await;
    let limit = Duration::from_millis(60);
    let conns = H1Conns::new(&authority, Duration::from_secs(5), limit);
    let held = conns.connect().await.unwrap();
    conns.checkin(held);
    assert_eq!(conns.idle_count(), 1);
    tokio::time::timeout(Duration::from_secs(5), closed)
        .await
        .expect("the upstream saw the idle connection closed")
        .unwrap();
    assert_eq!(conns.idle_count(), 0);
}

/// Within the limit an idle connection stays, and is the one the next call takes.
#[tokio::test]
async fn a_connection_within_the_limit_is_kept_and_taken() {
    let (authority, mut closed) = upstream().await;
    let conns = H1Conns::new(&authority, Duration::from_secs(5), Duration::from_secs(30));
    let held = conns.connect().await.unwrap();
    conns.checkin(held);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(conns.idle_count(), 1);
    assert!(closed.try_recv().is_err());
    assert!(conns.here().checkout(Instant::now()).await.is_some());
    assert_eq!(conns.idle_count(), 0);
}
