//! A client's socket: a TCP connection, or one accepted on the `unixsocket` listener.
//!
//! One type for both, so a connection, and a replica it turns into, run the same code whichever
//! listener accepted them: an enum, not a generic `serve`, which would put a second copy of the
//! request loop in the binary. Each call below is one `match` on a tag that never changes for
//! the connection's life, so the branch predictor takes it for free.
//!
//! Only what the connection code needs is here: tokio's readiness calls (`poll_read_ready`,
//! `try_io`, which the hand-made `recvfrom`/`sendto` of `connection` sit on), reads and writes
//! through `&self` (so a read and a write can wait in one `select!`, as `TcpStream::split`'s
//! halves did), and `AsyncRead`/`AsyncWrite` for `write_all` and `shutdown`.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

/// An accepted client connection.
pub enum ClientStream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl ClientStream {
    /// Readiness to read, registering the task's waker when there is none: tokio's
    /// `poll_read_ready` of the stream.
    #[inline]
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            ClientStream::Tcp(s) => s.poll_read_ready(cx),
            ClientStream::Unix(s) => s.poll_read_ready(cx),
        }
    }

    /// Runs `f` (a system call on the socket) and clears the readiness it saw if `f` says
    /// `WouldBlock`: tokio's `try_io`.
    #[inline]
    pub fn try_io<R>(
        &self,
        interest: Interest,
        f: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        match self {
            ClientStream::Tcp(s) => s.try_io(interest, f),
            ClientStream::Unix(s) => s.try_io(interest, f),
        }
    }

    /// Waits until something can be read, then reads it into `buf`'s spare capacity: `Ok(0)` when
    /// the peer closed its side. Cancel-safe: a read either happened or did not.
    pub async fn read_some(&self, buf: &mut BytesMut) -> io::Result<usize> {
        loop {
            let r = match self {
                ClientStream::Tcp(s) => {
                    s.readable().await?;
                    s.try_read_buf(buf)
                }
                ClientStream::Unix(s) => {
                    s.readable().await?;
                    s.try_read_buf(buf)
                }
            };
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            }
        }
    }

    /// Waits until the socket takes data, then writes what it takes of `buf`. Cancel-safe.
    pub async fn write_some(&self, buf: &[u8]) -> io::Result<usize> {
        loop {
            let r = match self {
                ClientStream::Tcp(s) => {
                    s.writable().await?;
                    s.try_write(buf)
                }
                ClientStream::Unix(s) => {
                    s.writable().await?;
                    s.try_write(buf)
                }
            };
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            }
        }
    }

    /// TCP_NODELAY on a TCP connection, as Redis sets it on every client; nothing for the Unix
    /// socket, which has no Nagle delay.
    pub fn set_nodelay(&self) {
        if let ClientStream::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }
}

impl AsRawFd for ClientStream {
    #[inline]
    fn as_raw_fd(&self) -> RawFd {
        match self {
            ClientStream::Tcp(s) => s.as_raw_fd(),
            ClientStream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl From<TcpStream> for ClientStream {
    fn from(s: TcpStream) -> ClientStream {
        ClientStream::Tcp(s)
    }
}

impl From<UnixStream> for ClientStream {
    fn from(s: UnixStream) -> ClientStream {
        ClientStream::Unix(s)
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            ClientStream::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            ClientStream::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Tcp(s) => Pin::new(s).poll_flush(cx),
            ClientStream::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            ClientStream::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
