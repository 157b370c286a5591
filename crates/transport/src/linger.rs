//! Lingering close: after an HTTP connection ends, read (and throw away)
//! what the client is still sending before closing the socket.
//!
//! A refusal decided before the whole body is read (403 by role, 413 at a
//! body limit, 408) leaves the rest of the body on its way.  Closing a
//! socket with unread data makes the kernel send a reset, and a reset that
//! reaches the client while it is still writing destroys the reply it had
//! not read yet: the client sees "connection reset" instead of the 413.
//! So the write side is shut (the client sees the end of the reply), and
//! the read side is drained until the client closes, for a bounded time
//! and number of bytes.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// The longest a closed connection is drained.
pub(crate) const LINGER_TIME: Duration = Duration::from_secs(2);
/// The most bytes drained: more than the largest request body.
pub(crate) const LINGER_BYTES: usize = 20 << 20;

/// A stream lent to hyper and taken back when hyper lets go of it (and
/// not when an upgraded session still holds it).
pub(crate) struct Lent<S>(Arc<Mutex<Option<S>>>);

/// The lender's claim on a [`Lent`] stream.
pub(crate) struct Claim<S>(Arc<Mutex<Option<S>>>);

pub(crate) fn lend<S>(stream: S) -> (Lent<S>, Claim<S>) {
    let shared = Arc::new(Mutex::new(Some(stream)));
    (Lent(Arc::clone(&shared)), Claim(shared))
}

impl<S> Claim<S> {
    /// The stream, when nothing else holds it any more.
    pub(crate) fn take(self) -> Option<S> {
        Arc::try_unwrap(self.0)
            .ok()
            .and_then(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
    }
}

impl<S> Lent<S> {
    fn inner(&self) -> MutexGuard<'_, Option<S>> {
        // Only this connection's task ever locks it: never contended, and
        // a panic while polling leaves a stream that is simply dropped.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "stream taken back")
}

impl<S: AsyncRead + Unpin> AsyncRead for Lent<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.inner().as_mut() {
            Some(s) => Pin::new(s).poll_read(cx, buf),
            None => Poll::Ready(Err(gone())),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Lent<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.inner().as_mut() {
            Some(s) => Pin::new(s).poll_write(cx, data),
            None => Poll::Ready(Err(gone())),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.inner().as_mut() {
            Some(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            None => Poll::Ready(Err(gone())),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner().as_ref().is_some_and(|s| s.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.inner().as_mut() {
            Some(s) => Pin::new(s).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.inner().as_mut() {
            Some(s) => Pin::new(s).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

/// Shut the write side, then read until the peer closes, [`LINGER_TIME`]
/// passes or [`LINGER_BYTES`] were read; the caller then drops the stream.
pub(crate) async fn close<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) {
    let drain = async {
        let _ = stream.shutdown().await;
        let mut buf = vec![0u8; 16 << 10];
        let mut left = LINGER_BYTES;
        while left > 0 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::duplex;

    #[tokio::test]
    async fn the_stream_comes_back_only_when_the_lent_half_is_gone() {
        let (a, _b) = duplex(64);
        let (lent, claim) = lend(a);
        let kept = Lent(Arc::clone(&lent.0));
        drop(lent);
        // An upgraded session still holds it: not taken.
        assert!(claim.take().is_none());
        drop(kept);
        let (a, _b) = duplex(64);
        let (lent, claim) = lend(a);
        drop(lent);
        assert!(claim.take().is_some());
    }

    #[tokio::test]
    async fn close_reads_what_the_peer_still_sends_then_returns_at_its_eof() {
        let (a, mut b) = duplex(1024);
        let writer = tokio::spawn(async move {
            let chunk = vec![7u8; 1000];
            for _ in 0..100 {
                b.write_all(&chunk).await.unwrap();
            }
            // The peer sees our end of stream after everything it sent
            // was taken.
            let mut rest = Vec::new();
            b.read_to_end(&mut rest).await.unwrap();
            rest.len()
        });
        let started = tokio::time::Instant::now();
        close(a).await;
        assert!(started.elapsed() < LINGER_TIME);
        assert_eq!(writer.await.unwrap(), 0);
    }
}
