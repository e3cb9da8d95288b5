//! A connection handed to hyper with the bytes strata read from it but did not consume: they
//! are read again first, then the socket.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The agent's socket, with what was read ahead put back in front.
#[derive(Debug)]
pub(crate) struct Rewound {
    ahead: Bytes,
    tcp: TcpStream,
}

impl Rewound {
    pub(super) fn new(ahead: Bytes, tcp: TcpStream) -> Self {
        Rewound { ahead, tcp }
    }
}

impl AsyncRead for Rewound {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.ahead.is_empty() {
            return Pin::new(&mut this.tcp).poll_read(cx, buf);
        }
        let n = this.ahead.len().min(buf.remaining());
        buf.put_slice(&this.ahead[..n]);
        this.ahead.advance(n);
        if this.ahead.is_empty() {
            // Dropped: its allocation may be the old read buffer.
            this.ahead = Bytes::new();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Rewound {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}
