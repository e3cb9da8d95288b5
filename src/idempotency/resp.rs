//! Just enough RESP2 (the Redis serialization protocol, redis.io/docs/reference/protocol-spec)
//! for the store: commands go out as arrays of bulk strings; replies are read as simple
//! strings, errors, integers and bulk strings. Arrays are never asked for (no command the store
//! sends returns one), so an array reply is a protocol error. No HELLO: the connection stays
//! RESP2, so no push messages arrive between replies.
//!
//! Limits, each a protocol error that drops the connection: a status, error or integer line
//! longer than [`MAX_LINE`]; a bulk string longer than the connection's `max_bulk` (the
//! largest record the store writes, so a foreign or corrupt value cannot make it allocate
//! without bound).

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::RedisError;

/// Longest status, error or integer line read, CRLF included.
pub(super) const MAX_LINE: usize = 4096;

/// Read buffer growth per read.
const READ_CHUNK: usize = 16 << 10;

/// One reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Reply {
    /// `+OK`.
    Status(Bytes),
    /// `-ERR …`: the server refused the command; the connection is still good.
    Error(String),
    Integer(i64),
    /// `$-1` (nil) is `None`.
    Bulk(Option<Bytes>),
}

/// The wire form of a command.
pub(super) fn encode(args: &[&[u8]]) -> Vec<u8> {
    let size: usize = args.iter().map(|a| a.len() + 16).sum();
    let mut out = Vec::with_capacity(16 + size);
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Takes one complete reply off the front of `buf`; `None` until it has all arrived.
pub(super) fn parse(buf: &mut BytesMut, max_bulk: usize) -> Result<Option<Reply>, &'static str> {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    let window = &buf[..buf.len().min(MAX_LINE)];
    let Some(cr) = memchr::memmem::find(window, b"\r\n") else {
        return if buf.len() >= MAX_LINE {
            Err("reply line too long")
        } else {
            Ok(None)
        };
    };
    let line = &buf[1..cr];
    let reply = match kind {
        b'+' => {
            let status = Bytes::copy_from_slice(line);
            buf.advance(cr + 2);
            Reply::Status(status)
        }
        b'-' => {
            let message = String::from_utf8_lossy(line).into_owned();
            buf.advance(cr + 2);
            Reply::Error(message)
        }
        b':' => {
            let n = integer(line)?;
            buf.advance(cr + 2);
            Reply::Integer(n)
        }
        b'$' => {
            let len = integer(line)?;
            if len == -1 {
                buf.advance(cr + 2);
                return Ok(Some(Reply::Bulk(None)));
            }
            let len = usize::try_from(len).map_err(|_| "negative bulk length")?;
            if len > max_bulk {
                return Err("bulk reply over the limit");
            }
            let start = cr + 2;
            let end = start + len;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err("bulk reply not followed by CRLF");
            }
            let mut frame = buf.split_to(end + 2);
            frame.truncate(end);
            Reply::Bulk(Some(frame.freeze().slice(start..)))
        }
        b'*' => return Err("unexpected array reply"),
        _ => return Err("unknown reply type"),
    };
    Ok(Some(reply))
}

fn integer(line: &[u8]) -> Result<i64, &'static str> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or("bad integer in reply")
}

/// One connection to Redis, one command at a time.
pub(super) struct Conn {
    stream: TcpStream,
    buf: BytesMut,
    max_bulk: usize,
}

impl Conn {
    /// Connects and selects `db` (a pooled connection keeps its database).
    pub(super) async fn open(
        host: &str,
        port: u16,
        db: u32,
        max_bulk: usize,
    ) -> Result<Conn, RedisError> {
        let stream = TcpStream::connect((host, port))
            .await
            .map_err(RedisError::Connect)?;
        // Commands are small and each waits for its reply: no reason to let Nagle hold them.
        stream.set_nodelay(true).map_err(RedisError::Connect)?;
        let mut conn = Conn {
            stream,
            buf: BytesMut::new(),
            max_bulk,
        };
        if db != 0 {
            match conn.call(&[b"SELECT", db.to_string().as_bytes()]).await? {
                Reply::Status(_) => {}
                Reply::Error(e) => return Err(RedisError::Server(e)),
                _ => return Err(RedisError::Protocol("unexpected reply to SELECT")),
            }
        }
        Ok(conn)
    }

    /// Sends a command and reads its reply.
    pub(super) async fn call(&mut self, args: &[&[u8]]) -> Result<Reply, RedisError> {
        self.stream
            .write_all(&encode(args))
            .await
            .map_err(RedisError::Io)?;
        loop {
            if let Some(reply) =
                parse(&mut self.buf, self.max_bulk).map_err(RedisError::Protocol)?
            {
                return Ok(reply);
            }
            self.buf.reserve(READ_CHUNK);
            let n = self
                .stream
                .read_buf(&mut self.buf)
                .await
                .map_err(RedisError::Io)?;
            if n == 0 {
                return Err(RedisError::Closed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(wire: &[u8], max_bulk: usize) -> Result<Vec<Reply>, &'static str> {
        let mut buf = BytesMut::from(wire);
        let mut out = Vec::new();
        while let Some(r) = parse(&mut buf, max_bulk)? {
            out.push(r);
        }
        assert!(buf.is_empty(), "left over: {buf:?}");
        Ok(out)
    }

    #[test]
    fn encodes_commands_as_bulk_arrays() {
        let wire = encode(&[b"SET", b"k", b"v\r\n", b"NX"]);
        assert_eq!(
            wire,
            b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv\r\n\r\n$2\r\nNX\r\n"
        );
    }

    #[test]
    fn parses_every_reply_kind_at_every_split() {
        let wire = b"+OK\r\n-ERR wrong\r\n:-12\r\n$-1\r\n$0\r\n\r\n$5\r\na\r\nbc\r\n";
        let want = vec![
            Reply::Status(Bytes::from_static(b"OK")),
            Reply::Error("ERR wrong".into()),
            Reply::Integer(-12),
            Reply::Bulk(None),
            Reply::Bulk(Some(Bytes::new())),
            Reply::Bulk(Some(Bytes::from_static(b"a\r\nbc"))),
        ];
        assert_eq!(all(wire, 64), Ok(want.clone()));
        // Fed in two parts split anywhere, the replies are the same.
        for at in 0..wire.len() {
            let mut buf = BytesMut::from(&wire[..at]);
            let mut got = Vec::new();
            while let Some(r) = parse(&mut buf, 64).unwrap() {
                got.push(r);
            }
            buf.extend_from_slice(&wire[at..]);
            while let Some(r) = parse(&mut buf, 64).unwrap() {
                got.push(r);
            }
            assert_eq!(got, want.clone(), "split at {at}");
        }
    }

    #[test]
    fn limits_and_garbage_are_errors() {
        assert_eq!(all(b"$5\r\nabcde\r\n", 4), Err("bulk reply over the limit"));
        assert_eq!(all(b"*1\r\n:1\r\n", 4), Err("unexpected array reply"));
        assert_eq!(all(b"?\r\n", 4), Err("unknown reply type"));
        assert_eq!(all(b":x\r\n", 4), Err("bad integer in reply"));
        assert_eq!(all(b"$-2\r\n", 4), Err("negative bulk length"));
        assert_eq!(
            all(b"$1\r\nab\r\n", 4),
            Err("bulk reply not followed by CRLF")
        );
        let long = vec![b'+'; MAX_LINE];
        assert_eq!(all(&long, 4), Err("reply line too long"));
        // One byte shorter, it may still be arriving.
        let mut buf = BytesMut::from(&long[..MAX_LINE - 1]);
        assert_eq!(parse(&mut buf, 4), Ok(None));
    }
}
