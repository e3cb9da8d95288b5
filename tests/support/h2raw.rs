//! A raw h2 agent (prior knowledge, cleartext) that writes frames by hand, so it can do what
//! a well-behaved h2 client library will not: open more streams than the server allows, and
//! reset streams as fast as it opens them (CVE-2023-44487, "rapid reset").
//!
//! Header blocks use HPACK's "literal without indexing, new name" form only (RFC 7541
//! §6.2.2), which needs no table and no Huffman coding.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const GOAWAY: u8 = 0x7;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const ACK: u8 = 0x1;
pub const CANCEL: u32 = 0x8;
pub const REFUSED_STREAM: u32 = 0x7;

/// One frame as read.
#[derive(Clone, Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY.
    pub fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            RST_STREAM => 0,
            GOAWAY => 4,
            _ => return None,
        };
        let b = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A header block of literal fields.
pub fn header_block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0x00);
        string(&mut out, name);
        string(&mut out, value);
    }
    out
}

/// An HPACK string literal, no Huffman: a 7-bit prefix length (RFC 7541 §5.1, §5.2).
fn string(out: &mut Vec<u8>, s: &str) {
    let mut len = s.len();
    if len < 127 {
        out.push(len as u8);
    } else {
        out.push(127);
        len -= 127;
        while len >= 128 {
            out.push((len % 128) as u8 | 0x80);
            len /= 128;
        }
        out.push(len as u8);
    }
    out.extend_from_slice(s.as_bytes());
}

/// A GET of the MCP endpoint's SSE stream on `stream`, ending the request side.
pub fn get_stream(stream: u32, authority: &str) -> Vec<u8> {
    let block = header_block(&[
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", authority),
        (":path", "/mcp"),
        ("accept", "text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
    ]);
    frame(HEADERS, END_STREAM | END_HEADERS, stream, &block)
}

pub fn rst_stream(stream: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &code.to_be_bytes())
}

/// A connection after the preface and the settings exchange (ours empty, the server's
/// acknowledged, so its limits are in force).
pub struct RawH2 {
    pub io: TcpStream,
    buf: Vec<u8>,
}

impl RawH2 {
    pub async fn connect(addr: SocketAddr) -> RawH2 {
        let io = TcpStream::connect(addr).await.unwrap();
        io.set_nodelay(true).unwrap();
        let mut h2 = RawH2 {
            io,
            buf: Vec::new(),
        };
        let mut hello = PREFACE.to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &[]));
        h2.io.write_all(&hello).await.unwrap();
        loop {
            let f = h2.next(Duration::from_secs(5)).await.unwrap();
            if f.kind == SETTINGS && f.flags & ACK == 0 {
                break;
            }
        }
        h2.io
            .write_all(&frame(SETTINGS, ACK, 0, &[]))
            .await
            .unwrap();
        h2
    }

    pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.io.write_all(bytes).await
    }

    /// The next frame, or `None` when the connection closed or nothing came within `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<Frame> {
        timeout(wait, async {
            loop {
                if self.buf.len() >= 9 {
                    let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]);
                    let len = len as usize;
                    if self.buf.len() >= 9 + len {
                        let b = &self.buf;
                        let f = Frame {
                            kind: b[3],
                            flags: b[4],
                            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
                            payload: b[9..9 + len].to_vec(),
                        };
                        self.buf.drain(..9 + len);
                        return Some(f);
                    }
                }
                let mut scratch = [0u8; 16 * 1024];
                match self.io.read(&mut scratch).await {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => self.buf.extend_from_slice(&scratch[..n]),
                }
            }
        })
        .await
        .ok()
        .flatten()
    }
}
