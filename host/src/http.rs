//! The metrics endpoint (`rendergate serve --metrics-addr ADDR`): a small
//! HTTP/1 server on the gate's own tokio runtime.
//!
//! - `GET /metrics`: every metric, in Prometheus' text format;
//! - `GET /healthz`: `200 ok` while the event loop and the check worker make
//!   progress, `503` and one line saying what is stuck otherwise
//!   ([`Health`]).
//!
//! Anything else is a 404 (a 405 for other methods). `HEAD` is answered too.
//!
//! Whoever reaches the port holds bounded resources: at most
//! [`MAX_CONNECTIONS`] at once (a connection past them is closed at once),
//! [`MAX_REQUEST_BUFFER`] of headers each, and each for at most
//! [`CONNECTION_LIFETIME`] (then it finishes its request and closes, or is
//! dropped [`CLOSE_GRACE`] later: a client that never reads holds nothing
//! for good).

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
/// Connections served at once: scrapers and probes need a few.
pub const MAX_CONNECTIONS: usize = 256;
/// What a connection may buffer of a request: the requests served here
/// are a line and a few headers (hyper's least is 8 KiB).
const MAX_REQUEST_BUFFER: usize = 16 * 1024;
/// How long one connection is served; a scraper's keep-alive connection is
/// then closed between two requests and opened again.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// How long a connection past its lifetime may take to finish its request.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// Listens on `addr` (`HOST:PORT`; `:PORT` is every IPv4 address). Port 0
/// picks a free port: ask the listener for its `local_addr`.
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let addr = if addr.starts_with(':') { format!("0.0.0.0{addr}") } else { addr.to_owned() };
    TcpListener::bind(addr).await
}

/// Serves `/metrics` and `/healthz` on `listener` until the task is aborted
/// (or the runtime ends).
pub fn serve(listener: TcpListener, metrics: Arc<Metrics>, health: Arc<Health>) -> JoinHandle<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
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
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                tracing::debug!("metrics: {MAX_CONNECTIONS} connections open; {peer} closed");
                continue; // dropped: closed
            };
            let (metrics, health) = (metrics.clone(), health.clone());
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let response = respond(&request, &metrics, &health);
                    async move { Ok::<_, Infallible>(response) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .max_buf_size(MAX_REQUEST_BUFFER)
                    .serve_connection(TokioIo::new(stream), service);
                tokio::pin!(connection);
                let served = tokio::select! {
                    served = connection.as_mut() => Some(served),
                    () = tokio::time::sleep(CONNECTION_LIFETIME) => {
                        connection.as_mut().graceful_shutdown();
                        tokio::time::timeout(CLOSE_GRACE, connection.as_mut()).await.ok()
                    }
                };
                match served {
                    Some(Err(e)) => tracing::debug!("metrics: connection from {peer}: {e}"),
                    None => {
                        tracing::debug!("metrics: connection from {peer} dropped past its time")
                    }
                    Some(Ok(())) => {}
                }
                drop(slot);
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
