//! The metrics endpoint (`rendergate serve --metrics-addr ADDR`): a small
//! HTTP/1 server on the gate's own tokio runtime.
//!
//! - `GET /metrics`: every metric, in Prometheus' text format;
//! - `GET /healthz`: `200 ok` while the event loop and the check worker make
//!   progress, `503` and one line saying what is stuck otherwise
//!   ([`Health`]).
//!
//! Anything else is a 404 (a 405 for other methods). `HEAD` is answered too.

use crate::health::Health;
use crate::metrics::{self, Metrics};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// How long a client may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Listens on `addr` (`HOST:PORT`; `:PORT` is every IPv4 address). Port 0
/// picks a free port: ask the listener for its `local_addr`.
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let addr = if addr.starts_with(':') { format!("0.0.0.0{addr}") } else { addr.to_owned() };
    TcpListener::bind(addr).await
}

/// Serves `/metrics` and `/healthz` on `listener` until the task is aborted
/// (or the runtime ends).
pub fn serve(listener: TcpListener, metrics: Arc<Metrics>, health: Arc<Health>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, most likely: wait, do not spin.
                    tracing::warn!("metrics: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let (metrics, health) = (metrics.clone(), health.clone());
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let response = respond(&request, &metrics, &health);
                    async move { Ok::<_, Infallible>(response) }
                });
                let served = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(e) = served {
                    tracing::debug!("metrics: connection from {peer}: {e}");
                }
            });
        }
    })
}

fn respond(request: &Request<Incoming>, metrics: &Metrics, health: &Health) -> Response<String> {
    let path = request.uri().path();
    if !matches!(path, "/metrics" | "/healthz") {
        return plain(StatusCode::NOT_FOUND, "not found: try /metrics or /healthz\n".into());
    }
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
        response.headers_mut().insert(hyper::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    // For HEAD, hyper sends the headers (Content-Length included) and no body.
    match path {
        "/metrics" => {
            let mut response = Response::new(metrics.render());
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(metrics::CONTENT_TYPE));
            response
        }
        _ => match health.status(now()) {
            Ok(()) => plain(StatusCode::OK, "ok\n".into()),
            Err(reason) => {
                tracing::warn!("healthz: {reason}");
                plain(StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n"))
            }
        },
    }
}

fn plain(status: StatusCode, body: String) -> Response<String> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// The clock the driver stamps [`Health`] with.
fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}
