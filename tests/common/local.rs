//! A local webhook handler: a real hyper server that keeps every request it
//! sees and answers as the test says.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A request as the handler received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Method.
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// Headers in the order hyper gives them.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Whole body.
    pub body: Vec<u8>,
}

impl Seen {
    /// Values of a header, in order.
    pub fn header_values(&self, name: &str) -> Vec<&[u8]> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
            .collect()
    }

    /// First value of a header as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.header_values(name)
            .first()
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }
}

/// What the handler answers.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// Status code (0 means 200).
    pub status: u16,
    /// Headers to send.
    pub headers: Vec<(String, String)>,
    /// Body to send.
    pub body: Vec<u8>,
    /// Wait this long before answering.
    pub delay: Duration,
    /// Answer only once this is cancelled: a handler kept at work until
    /// the test has seen what it wants to see meanwhile.
    pub held_until: Option<CancellationToken>,
}

type Reply = Arc<dyn Fn(&Seen) -> Answer + Send + Sync>;

/// A running handler; stops on drop.
pub struct LocalHandler {
    /// Where it listens.
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    shutdown: CancellationToken,
}

impl LocalHandler {
    /// Answers 200 with the request body and `x-seen-method`/`x-seen-uri` headers.
    pub async fn echo() -> Self {
        Self::start(echo).await
    }

    /// Answers as [`Self::echo`] does, over HTTPS only, with a self-signed
    /// certificate for `localhost`, as `dotnet dev-certs` or mkcert make.
    pub async fn echo_https() -> Self {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("self-signed certificate");
        let config = portpreview_server::tls::server_config(
            cert.cert.pem().as_bytes(),
            cert.key_pair.serialize_pem().as_bytes(),
        )
        .expect("TLS settings");
        Self::launch(echo, Some(TlsAcceptor::from(config))).await
    }

    /// Answers 200 to every request after `delay`: a handler still busy
    /// while the test cuts something off.
    pub async fn slow(delay: Duration) -> Self {
        Self::start(move |_| Answer {
            status: 200,
            delay,
            ..Answer::default()
        })
        .await
    }

    /// Answers 200 at once, except a request whose path ends in `held`,
    /// which it answers only once `release` is cancelled: a request kept
    /// in flight for as long as the test needs.
    pub async fn holding(held: &'static str, release: CancellationToken) -> Self {
        Self::start(move |seen| Answer {
            status: 200,
            held_until: seen.uri.ends_with(held).then(|| release.clone()),
            ..Answer::default()
        })
        .await
    }

    /// Answers every request with `reply(request)`.
    pub async fn start(reply: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Self {
        Self::launch(reply, None).await
    }

    /// Answers every request on `listener` with `reply(request)`: a
    /// handler started late, on the port a tunnel already forwards to.
    pub fn start_on(listener: TcpListener, reply: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Self {
        Self::serve(listener, reply, None)
    }

    /// Answers every request with `reply(request)`, in TLS with `tls`.
    async fn launch(reply: impl Fn(&Seen) -> Answer + Send + Sync + 'static, tls: Option<TlsAcceptor>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind handler");
        Self::serve(listener, reply, tls)
    }

    fn serve(
        listener: TcpListener,
        reply: impl Fn(&Seen) -> Answer + Send + Sync + 'static,
        tls: Option<TlsAcceptor>,
    ) -> Self {
        let addr = listener.local_addr().expect("handler address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shutdown = CancellationToken::new();
        let reply: Reply = Arc::new(reply);
        let respond = {
            let seen = seen.clone();
            move |request| {
                let reply = reply.clone();
                let seen = seen.clone();
                async move { answer(request, &reply, &seen).await }
            }
        };
        match tls {
            Some(tls) => tokio::spawn(serve_https(listener, tls, respond, shutdown.clone())),
            None => tokio::spawn(serve_http(listener, respond, shutdown.clone())),
        };
        Self { addr, seen, shutdown }
    }

    /// The port, as `portpreview http PORT` takes it.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `https://localhost:PORT`, the name its certificate holds.
    pub fn https_url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }

    /// Every request seen so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen lock").clone()
    }

    /// How many requests whose body holds `marker` the handler has seen.
    pub fn arrivals(&self, marker: &str) -> usize {
        self.requests()
            .iter()
            .filter(|seen| seen.body.windows(marker.len()).any(|w| w == marker.as_bytes()))
            .count()
    }

    /// Waits until the handler has seen a request; fails the test after 10 s.
    pub async fn wait_for_request(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.requests().is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the handler never saw the request"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for LocalHandler {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Serves HTTP/1 on `listener`, answering each request with `respond`,
/// until `shutdown`; every connection ends with it.
pub async fn serve_http<F, Fut>(listener: TcpListener, respond: F, shutdown: CancellationToken)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let connections = TaskTracker::new();
    while let Some(socket) = accept(&listener, &shutdown).await {
        connections.spawn(serve_connection(socket, respond.clone(), shutdown.clone()));
    }
    connections.close();
}

/// Serves HTTP/1 over TLS on `listener` as [`serve_http`] does. A
/// connection whose handshake fails is dropped, as rustls leaves it.
pub async fn serve_https<F, Fut>(listener: TcpListener, tls: TlsAcceptor, respond: F, shutdown: CancellationToken)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let connections = TaskTracker::new();
    while let Some(socket) = accept(&listener, &shutdown).await {
        let (tls, respond, shutdown) = (tls.clone(), respond.clone(), shutdown.clone());
        connections.spawn(async move {
            if let Ok(stream) = tls.accept(socket).await {
                serve_connection(stream, respond, shutdown).await;
            }
        });
    }
    connections.close();
}

/// Serves HTTP/1 as [`serve_http`] does, but one connection at a time: each
/// is served, kept alive for as long as its client wants, before the next is
/// accepted. Python's `http.server.HTTPServer`, `php -S` and many small test
/// servers work this way, and a client that holds one connection open while
/// it waits on another starves them.
pub async fn serve_http_one_connection_at_a_time<F, Fut>(listener: TcpListener, respond: F, shutdown: CancellationToken)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    while let Some(socket) = accept(&listener, &shutdown).await {
        serve_connection(socket, respond.clone(), shutdown.clone()).await;
    }
}

/// The next connection, or `None` once `shutdown` is cancelled.
async fn accept(listener: &TcpListener, shutdown: &CancellationToken) -> Option<TcpStream> {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return None,
            accepted = listener.accept() => if let Ok((socket, _)) = accepted {
                let _ = socket.set_nodelay(true);
                return Some(socket);
            },
        }
    }
}

/// Serves every request on `socket` until its client closes it or `shutdown`.
async fn serve_connection<S, F, Fut>(socket: S, respond: F, shutdown: CancellationToken)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let service = service_fn(move |request: Request<Incoming>| {
        let answer = respond(request);
        async move { Ok::<_, Infallible>(answer.await) }
    });
    let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(socket), service);
    tokio::select! {
        _ = connection => {}
        () = shutdown.cancelled() => {}
    }
}

fn echo(seen: &Seen) -> Answer {
    Answer {
        status: 200,
        headers: vec![
            ("x-seen-method".into(), seen.method.clone()),
            ("x-seen-uri".into(), seen.uri.clone()),
        ],
        body: seen.body.clone(),
        ..Answer::default()
    }
}

async fn answer(request: Request<Incoming>, reply: &Reply, seen: &Mutex<Vec<Seen>>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
    let request = Seen {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
            .collect(),
        body,
    };
    let answer = reply(&request);
    seen.lock().expect("seen lock").push(request);
    if !answer.delay.is_zero() {
        tokio::time::sleep(answer.delay).await;
    }
    if let Some(held) = &answer.held_until {
        held.cancelled().await;
    }
    let mut response = Response::builder().status(if answer.status == 0 { 200 } else { answer.status });
    for (name, value) in &answer.headers {
        response = response.header(name, value);
    }
    response
        .body(Full::new(Bytes::from(answer.body)))
        .expect("valid test response")
}

/// An `http://` address nothing answers at: a port bound, then let go.
pub fn nothing_answers_at() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    format!("http://{}", listener.local_addr().expect("its address"))
}
