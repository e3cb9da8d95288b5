//! Raw-socket peers for the fault matrix: an HTTP/1.1 upstream that misbehaves on cue (resets
//! mid-body, stalls, never answers, speaks something that is not HTTP) and serves healthy
//! calls on the same listener, and a healthy agent loop that runs beside each fault.
//!
//! hyper will not write a half body and then reset, or answer with bytes that are not HTTP,
//! so the upstream reads and writes HTTP/1.1 by hand: just enough of it for strata's requests
//! (a head, then a `Content-Length` or chunked body).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use strata::app::Running;
use strata::config::Config;
use strata::testbed::client::{McpClient, Transport};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep, timeout};

use super::LIMIT;

/// What the upstream does with a request, chosen by its tool name (`"GET"` for a GET).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// 200 with a JSON tool result (`Content-Length`), keeping the connection.
    Healthy,
    /// [`Act::Healthy`], then the upstream closes the connection once it has been idle for
    /// 20 ms (a short keep-alive timeout).
    AnswerThenClose,
    /// A JSON head promising 200 bytes, half of them, then a TCP reset.
    ResetMidJson,
    /// An SSE head and one progress event, then a TCP reset.
    ResetMidSse,
    /// A JSON head (`Content-Length`) and a few bytes, then silence until the peer leaves.
    StallAfterHead,
    /// An SSE head and one progress event, then silence until the peer leaves; when strata
    /// closes the request the time is reported on [`RawUpstream::closed`].
    SseThenWatch,
    /// Reads the request and never answers.
    NeverAnswer,
    /// Answers with bytes that are not HTTP, then closes.
    Garbage,
    /// The tool's odd-numbered requests: 503 with `Retry-After: 0` and a short body, keeping
    /// the connection; its even-numbered ones: [`Act::Healthy`]. A retried call succeeds on
    /// its second attempt.
    BusyEveryOther(Busy),
}

/// How [`Act::BusyEveryOther`]'s 503 comes. All but the `Wait*` ones say `Retry-After: 0`;
/// those say `Retry-After: 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Busy {
    /// `Content-Length`, the body in the head's write.
    Whole,
    /// Chunked, the body and its last chunk in the head's write.
    Chunked,
    /// `Content-Length`, the body 5 ms after the head.
    BodyApart,
    /// As `BodyApart`, with a wait before the retry.
    WaitBodyApart,
    /// A wait before the retry, and a `Content-Length` body that never comes (the upstream
    /// waits for the connection to close).
    WaitBodyNever,
    /// A wait before the retry, and a 1 MB body in the head's write.
    WaitBodyLong,
}

/// The fault matrix's catalogue: the act each tool name asks for; any other is healthy.
pub fn by_tool(tool: &str) -> Act {
    match tool {
        "reset_json" => Act::ResetMidJson,
        "reset_sse" => Act::ResetMidSse,
        "stall" => Act::StallAfterHead,
        "watch" => Act::SseThenWatch,
        "never" => Act::NeverAnswer,
        "garbage" => Act::Garbage,
        "then_close" => Act::AnswerThenClose,
        "busy_whole" => Act::BusyEveryOther(Busy::Whole),
        "busy_chunked" => Act::BusyEveryOther(Busy::Chunked),
        "busy_body_apart" => Act::BusyEveryOther(Busy::BodyApart),
        "busy_wait_body_apart" => Act::BusyEveryOther(Busy::WaitBodyApart),
        "busy_wait_body_never" => Act::BusyEveryOther(Busy::WaitBodyNever),
        "busy_wait_body_long" => Act::BusyEveryOther(Busy::WaitBodyLong),
        _ => Act::Healthy,
    }
}

/// A raw upstream acting [`by_tool`], and strata in front of it.
pub async fn setup(tweak: impl FnOnce(&mut Config)) -> (RawUpstream, Running) {
    setup_with(by_tool, tweak).await
}

/// A raw upstream acting `act`, and strata in front of it.
pub async fn setup_with(
    act: fn(&str) -> Act,
    tweak: impl FnOnce(&mut Config),
) -> (RawUpstream, Running) {
    let upstream = RawUpstream::spawn(act).await;
    let strata = super::strata(upstream.addr, tweak).await;
    (upstream, strata)
}

/// The healthy answer's body for a request id: what the agent must receive unchanged.
pub fn healthy_body(id: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id,
        "result": {"content": [{"type": "text", "text": "healthy"}], "isError": false}})
    .to_string()
}

/// A running raw upstream.
pub struct RawUpstream {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
    /// The request line of every head received (before its body is read).
    heads: Arc<Mutex<Vec<String>>>,
    /// (tool, when the upstream saw strata close the request) for [`Act::SseThenWatch`].
    pub closed: mpsc::UnboundedReceiver<(String, Instant)>,
}

impl RawUpstream {
    pub async fn spawn(act: fn(&str) -> Act) -> RawUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (closed_tx, closed) = mpsc::unbounded_channel();
        let (conns, reqs, hds) = (connections.clone(), requests.clone(), heads.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                // Every write goes out as it is made: [`reset`] throws away what is unsent, and
                // Nagle holds a short write back while the one before waits for an ACK.
                let _ = stream.set_nodelay(true);
                conns.fetch_add(1, Ordering::SeqCst);
                let (reqs, hds, closed_tx) = (reqs.clone(), hds.clone(), closed_tx.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, act, reqs, hds, closed_tx).await;
                });
            }
        });
        RawUpstream {
            addr,
            connections,
            requests,
            heads,
            closed,
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Request lines (`POST /mcp HTTP/1.1`) of every head received, whole body or not.
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }

    /// How many requests for `tool` arrived (whole head and body read).
    pub fn requests_of(&self, tool: &str) -> usize {
        let seen = self.requests.lock().unwrap();
        seen.iter().filter(|t| *t == tool).count()
    }
}

async fn serve(
    mut stream: TcpStream,
    act: fn(&str) -> Act,
    requests: Arc<Mutex<Vec<String>>>,
    heads: Arc<Mutex<Vec<String>>>,
    closed: mpsc::UnboundedSender<(String, Instant)>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    loop {
        let Some((head, body)) = read_request(&mut stream, &mut buf, &heads).await? else {
            return Ok(());
        };
        let call: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let tool = match head.starts_with("GET ") {
            true => "GET".to_owned(),
            false => call["params"]["name"].as_str().unwrap_or("").to_owned(),
        };
        let seen = {
            let mut requests = requests.lock().unwrap();
            requests.push(tool.clone());
            requests.iter().filter(|t| **t == tool).count()
        };
        let id = call["id"].clone();
        let event = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1}});
        let sse_head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        transfer-encoding: chunked\r\n\r\n";
        let sse_event = chunk(&format!("event: message\ndata: {event}\n\n"));
        match act(&tool) {
            Act::BusyEveryOther(busy) if seen % 2 == 1 => {
                let wait = match busy {
                    Busy::Whole | Busy::Chunked | Busy::BodyApart => 0,
                    Busy::WaitBodyApart | Busy::WaitBodyNever | Busy::WaitBodyLong => 1,
                };
                let head = format!(
                    "HTTP/1.1 503 Service Unavailable\r\nretry-after: {wait}\r\n\
                     content-type: text/plain\r\n"
                );
                let body = match busy {
                    Busy::WaitBodyLong => "busy\n".repeat(200_000),
                    _ => "busy\n".to_owned(),
                };
                let answer = match busy {
                    Busy::Chunked => format!(
                        "{head}transfer-encoding: chunked\r\n\r\n{}0\r\n\r\n",
                        chunk(&body)
                    ),
                    _ => format!("{head}content-length: {}\r\n\r\n{body}", body.len()),
                };
                let cut = match busy {
                    Busy::BodyApart | Busy::WaitBodyApart | Busy::WaitBodyNever => {
                        answer.len() - body.len()
                    }
                    Busy::Whole | Busy::Chunked | Busy::WaitBodyLong => answer.len(),
                };
                stream.write_all(&answer.as_bytes()[..cut]).await?;
                if busy == Busy::WaitBodyNever {
                    wait_close(&mut stream).await;
                    return Ok(());
                }
                if cut < answer.len() {
                    sleep(Duration::from_millis(5)).await;
                    stream.write_all(&answer.as_bytes()[cut..]).await?;
                }
            }
            Act::Healthy | Act::AnswerThenClose | Act::BusyEveryOther(_) => {
                let body = healthy_body(&id);
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                // Head and body apart, so the agent sees them as two reads.
                stream.write_all(head.as_bytes()).await?;
                sleep(Duration::from_millis(5)).await;
                stream.write_all(body.as_bytes()).await?;
                // A keep-alive timeout of 20 ms, as servers close idle connections: close
                // unless the next request starts arriving first.
                if act(&tool) == Act::AnswerThenClose {
                    match timeout(Duration::from_millis(20), fill(&mut stream, &mut buf)).await {
                        Ok(Ok(true)) => continue,
                        _ => return Ok(()),
                    }
                }
            }
            Act::ResetMidJson => {
                let body = healthy_body(&id);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                            content-length: 200\r\n\r\n";
                stream.write_all(head.as_bytes()).await?;
                stream.write_all(&body.as_bytes()[..body.len() / 2]).await?;
                return reset(stream).await;
            }
            Act::ResetMidSse => {
                stream.write_all(sse_head.as_bytes()).await?;
                stream.write_all(sse_event.as_bytes()).await?;
                return reset(stream).await;
            }
            Act::StallAfterHead => {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                            content-length: 200\r\n\r\n{\"jsonrpc\":";
                stream.write_all(head.as_bytes()).await?;
                wait_close(&mut stream).await;
                return Ok(());
            }
            Act::SseThenWatch => {
                stream.write_all(sse_head.as_bytes()).await?;
                stream.write_all(sse_event.as_bytes()).await?;
                wait_close(&mut stream).await;
                let _ = closed.send((tool, Instant::now()));
                return Ok(());
            }
            Act::NeverAnswer => {
                wait_close(&mut stream).await;
                return Ok(());
            }
            Act::Garbage => {
                stream
                    .write_all(b"SSH-2.0-OpenSSH_9.6\r\n\x00\x01\x02")
                    .await?;
                return Ok(());
            }
        }
    }
}

fn chunk(data: &str) -> String {
    format!("{:x}\r\n{data}\r\n", data.len())
}

/// Closes with a TCP reset (RST) instead of a FIN.
async fn reset(stream: TcpStream) -> std::io::Result<()> {
    stream.set_zero_linger()?;
    drop(stream);
    Ok(())
}

/// Reads (and discards) until the peer closes or resets, bounded by [`LIMIT`] (after which
/// the socket is closed anyway; the test then fails on its own measurement).
async fn wait_close(stream: &mut TcpStream) {
    let mut scratch = [0u8; 1024];
    let _ = timeout(LIMIT * 2, async {
        while let Ok(n) = stream.read(&mut scratch).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// Reads one request: its head as text and its body (`Content-Length` or chunked). `None`
/// when the peer closed between requests.
pub async fn read_request<R: AsyncRead + Unpin>(
    stream: &mut R,
    buf: &mut Vec<u8>,
    heads: &Mutex<Vec<String>>,
) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let head_end = loop {
        if let Some(at) = find(buf, b"\r\n\r\n") {
            break at + 4;
        }
        if !fill(stream, buf).await? {
            return Ok(None);
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let line = head.lines().next().unwrap_or("").to_owned();
    heads.lock().unwrap().push(line);
    buf.drain(..head_end);
    let lower = head.to_ascii_lowercase();
    let length = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let body = if let Some(length) = length {
        while buf.len() < length {
            if !fill(stream, buf).await? {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        buf.drain(..length).collect()
    } else if lower.contains("transfer-encoding: chunked") {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(at) = find(buf, b"\r\n") {
                    break at;
                }
                if !fill(stream, buf).await? {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            };
            let size_text = String::from_utf8_lossy(&buf[..line_end]).into_owned();
            let size = usize::from_str_radix(size_text.trim(), 16)
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))?;
            while buf.len() < line_end + 2 + size + 2 {
                if !fill(stream, buf).await? {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
            body.extend_from_slice(&buf[line_end + 2..line_end + 2 + size]);
            buf.drain(..line_end + 2 + size + 2);
            if size == 0 {
                break body;
            }
        }
    } else {
        Vec::new()
    };
    Ok(Some((head, body)))
}

async fn fill<R: AsyncRead + Unpin>(stream: &mut R, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut scratch = [0u8; 4096];
    let n = stream.read(&mut scratch).await?;
    buf.extend_from_slice(&scratch[..n]);
    Ok(n > 0)
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Healthy calls (tool `healthy`) made one after another on their own connection while a
/// fault runs; each must get the upstream's bytes unchanged. Stop it with [`Beside::check`].
pub struct Beside {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<(usize, Vec<String>)>,
}

impl Beside {
    pub fn start(strata: SocketAddr, transport: Transport) -> Beside {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let client = McpClient::modern(strata)
                .with_transport(transport)
                .with_timeout(LIMIT);
            let (mut ok, mut failures) = (0, Vec::new());
            // Bounded: at most a few hundred calls while a fault test of seconds runs.
            for _ in 0..2_000 {
                // At least one call runs, however short the fault.
                if *stopped.borrow_and_update() && ok + failures.len() > 0 {
                    break;
                }
                match client.call_tool("healthy", json!({})).await {
                    Ok(reply)
                        if reply.status == 200
                            && reply.broken.is_none()
                            && reply.body == healthy_body(&reply.id).as_bytes() =>
                    {
                        ok += 1
                    }
                    Ok(reply) => failures.push(format!("{reply:?}")),
                    Err(err) => failures.push(err.to_string()),
                }
                sleep(Duration::from_millis(5)).await;
            }
            (ok, failures)
        });
        Beside { stop, task }
    }

    /// Stops the loop; asserts every healthy call succeeded unchanged (and at least one ran).
    pub async fn check(self, what: &str) -> usize {
        let started = Instant::now();
        let _ = self.stop.send(true);
        let (ok, failures) = timeout(LIMIT, self.task).await.unwrap().unwrap();
        assert!(
            failures.is_empty(),
            "{what}: healthy calls failed: {failures:?}"
        );
        assert!(
            ok > 0,
            "{what}: no healthy call ran (stopped after {:?})",
            started.elapsed()
        );
        ok
    }
}
