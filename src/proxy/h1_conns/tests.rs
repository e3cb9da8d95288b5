use std::time::Duration;

use http::uri::Authority;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{H1Conns, KEEP_HEAD, head_buffer, keep_head};

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

/// A written head's buffer is the next head's on the same thread: one buffer a thread, not
/// one a call; one grown past the limit is not kept.
#[test]
fn a_head_buffer_is_reused_by_the_next_head() {
    std::thread::spawn(|| {
        let mut first = head_buffer(200);
        assert!(first.is_empty() && first.capacity() >= 200);
        first.extend_from_slice(b"POST / HTTP/1.1\r\n\r\n");
        let (at, room) = (first.as_ptr(), first.capacity());
        keep_head(first);
        let second = head_buffer(100);
        assert!(second.is_empty());
        assert_eq!(
            (second.as_ptr(), second.capacity()),
            (at, room),
            "the spare was not reused"
        );
        // Taken: a head encoded meanwhile gets a buffer of its own.
        let meanwhile = head_buffer(100);
        assert_ne!(meanwhile.as_ptr(), at);
        keep_head(second);

        let big = head_buffer(KEEP_HEAD + 1);
        keep_head(big);
        assert!(
            head_buffer(10).capacity() <= KEEP_HEAD,
            "a big buffer was kept"
        );
    })
    .join()
    .unwrap();
}
