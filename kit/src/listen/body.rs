//! A request body that must arrive whole within a deadline.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::Service;
use tokio::time::{Instant, Sleep};

/// A service whose requests' bodies fail once `timeout` has passed since the request's head
/// arrived (the handler reading it gets an error, and the connection is closed).
#[derive(Debug, Clone)]
pub(crate) struct WithBodyDeadline<S> {
    pub(crate) inner: S,
    pub(crate) timeout: Duration,
}

impl<S> Service<hyper::Request<Incoming>> for WithBodyDeadline<S>
where
    S: Service<hyper::Request<DeadlineBody>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let timeout = self.timeout;
        self.inner
            .call(request.map(|body| DeadlineBody::new(body, timeout)))
    }
}

/// [`Incoming`] with a deadline. The timer is made only when the body is not already there.
pub(crate) struct DeadlineBody {
    inner: Incoming,
    started: Instant,
    timeout: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

impl DeadlineBody {
    fn new(inner: Incoming, timeout: Duration) -> Self {
        DeadlineBody {
            inner,
            started: Instant::now(),
            timeout,
            timer: None,
        }
    }
}

/// The error a late body ends with.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request body did not arrive within {0:?} (the server's body read timeout); send it at \
     once, or ask the operator to raise the timeout"
)]
pub(crate) struct BodyTimeout(Duration);

impl Body for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => {
                // `Duration::MAX` ("no limit") must not overflow the clock.
                let deadline = Instant::from_std(crate::deadline::after(
                    this.started.into_std(),
                    this.timeout,
                ));
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout(this.timeout))))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
