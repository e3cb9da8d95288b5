//! One attempt's request on its way to the upstream, until the response head: on strata's own
//! HTTP/1.1 connection (`h1_conns.rs`) or through hyper-util's pooled client.
//!
//! A future of its own rather than an `async fn`: one would hold its request twice (as its
//! argument and as the local it is moved into) and the chosen route's future beside them,
//! and this future is most of `handle`'s, which is allocated and copied once per call.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Response;
use hyper_util::client::legacy::ResponseFuture;
use pin_project_lite::pin_project;

use super::body::FromUpstream;
use super::h1_conns::{ResponseBody, SendError};
use crate::http::fields::HeadFields;

pin_project! {
    /// [`Proxy::send`](super::Proxy)'s future; `F` is [`H1Conns::send`](super::H1Conns)'s.
    #[project = SendingProj]
    pub(super) enum Sending<'a, F> {
        /// strata's own connection; the answer's fields, when kept as read, go to
        /// `answer_fields`.
        Own {
            #[pin]
            sending: F,
            answer_fields: &'a mut Option<HeadFields>,
        },
        /// hyper-util's client (streamed bodies).
        Pooled {
            #[pin]
            sending: ResponseFuture,
        },
    }
}

impl<F> Future for Sending<'_, F>
where
    F: Future<Output = Result<(Response<ResponseBody>, Option<HeadFields>), SendError>>,
{
    type Output = Result<Response<FromUpstream>, SendError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            SendingProj::Own {
                sending,
                answer_fields,
            } => {
                let (response, fields) = ready!(sending.poll(cx))?;
                **answer_fields = fields;
                Poll::Ready(Ok(response.map(FromUpstream::H1)))
            }
            SendingProj::Pooled { sending } => {
                let response = ready!(sending.poll(cx))?;
                Poll::Ready(Ok(response.map(FromUpstream::Pooled)))
            }
        }
    }
}
