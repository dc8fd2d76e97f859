//! Reading `--check-url`: the body of a GET is the state.
//!
//! Each read has a connection of its own, closed once the answer is in.
//! Many local handlers (Python's `http.server`, `php -S`) serve one
//! connection at a time: a probe connection kept alive beside the attempts'
//! would leave the handler serving one while the other waits, until one of
//! them times out. A read keeps far more of each answer than an attempt: a
//! state is compared whole, and a change past the part kept would go unseen.

use bytes::Bytes;
use portpreview_shared::Header;

use super::attempt::{Connection, Endpoint, Outgoing};
use super::probe::ProbeError;
use crate::target::{Scheme, Target};

/// A `--check-url` ready to read.
pub(super) struct UrlProbe {
    url: String,
    endpoint: Endpoint,
    path: String,
    limit: usize,
}

impl UrlProbe {
    /// Checks the URL; reads answers of up to `limit` bytes. Nothing is
    /// connected yet: the run reads the state before its first attempt, so
    /// a wrong port still fails before anything is sent.
    pub(super) fn new(url: &str, limit: usize) -> Result<Self, ProbeError> {
        let (endpoint, path) = parse_url(url)?;
        Ok(Self {
            url: url.to_string(),
            endpoint,
            path,
            limit,
        })
    }

    /// GETs the state once, on a connection closed before this returns.
    pub(super) async fn read(&mut self) -> Result<String, ProbeError> {
        let mut conn = Connection::open(self.endpoint.clone())
            .await
            .map_err(|err| ProbeError::NoAnswer {
                url: self.url.clone(),
                error: err.to_string(),
            })?
            .keeping(self.limit)
            .aimed_by("--check-url");
        let request = Outgoing {
            method: "GET".into(),
            path: self.path.clone(),
            // Tells the handler too that no second request is coming, so it
            // moves on to the next connection as soon as it has answered.
            headers: vec![Header::new("connection", "close")],
            body: Bytes::new(),
        };
        let answer = conn.send(&request).await;
        conn.close().await;
        match (answer.status, answer.error) {
            (Some(status), _) if (200..300).contains(&status) => {
                if answer.body_size > answer.body.len() as u64 {
                    return Err(ProbeError::TooLarge {
                        probe: format!("the check URL {}", self.url),
                        limit: self.limit,
                    });
                }
                Ok(super::probe::state_text(answer.body))
            }
            (Some(status), _) => Err(ProbeError::Http {
                url: self.url.clone(),
                detail: status.to_string(),
            }),
            (None, error) => Err(ProbeError::NoAnswer {
                url: self.url.clone(),
                error: error.unwrap_or_else(|| "no reason given".into()),
            }),
        }
    }
}

/// Splits `http[s]://host:port/path?query` into where to connect and what to ask.
pub fn parse_url(url: &str) -> Result<(Endpoint, String), ProbeError> {
    let bad = || ProbeError::BadUrl(crate::userinfo::hidden(url).into_owned());
    // Never sent, and it would be shown in every message naming the URL.
    if crate::userinfo::present(url) {
        return Err(ProbeError::Credentials(crate::userinfo::hidden(url).into_owned()));
    }
    // Written as `--target` takes it (`localhost:3000/state`, `3000/state`):
    // plain HTTP, and a bare port on this machine.
    let written;
    let url = match url.contains("://") {
        true => url,
        false => {
            written = Target::parse(url).map_err(|_| bad())?.to_string();
            &written
        }
    };
    let uri: http::Uri = url.parse().map_err(|_| bad())?;
    let scheme = match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("http") => Scheme::Http,
        Some(s) if s.eq_ignore_ascii_case("https") => Scheme::Https,
        _ => return Err(bad()),
    };
    let host = uri
        .host()
        .ok_or_else(bad)?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(scheme.default_port());
    // A query straight after the port is the root's: a request line
    // needs the `/` before it.
    let path = match uri.path_and_query().map(|pq| pq.as_str()) {
        Some(query) if query.starts_with('?') => format!("/{query}"),
        Some(path) if !path.is_empty() => path.to_owned(),
        _ => "/".into(),
    };
    Ok((Endpoint { scheme, host, port }, path))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// Answers every request on one connection with `body`; returns the state URL.
    async fn serve(body: Vec<u8>) -> (String, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/state", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut chunk = [0; 1024];
            loop {
                let n = socket.read(&mut chunk).await.unwrap();
                if n == 0 {
                    return;
                }
                request.extend_from_slice(&chunk[..n]);
                if request.windows(4).any(|w| w == b"\r\n\r\n") {
                    request.clear();
                    let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                    socket.write_all(head.as_bytes()).await.unwrap();
                    socket.write_all(&body).await.unwrap();
                }
            }
        });
        (url, server)
    }

    #[tokio::test]
    async fn a_state_up_to_the_limit_is_read_whole_and_a_longer_one_is_refused() {
        let mut state = vec![b'.'; 200 * 1024];
        state.extend_from_slice(b"balance: 3\n");
        let (url, server) = serve(state.clone()).await;
        let mut probe = UrlProbe::new(&url, state.len()).unwrap();
        assert_eq!(probe.read().await.unwrap().as_bytes(), state);
        server.abort();

        let (url, server) = serve(state.clone()).await;
        let mut probe = UrlProbe::new(&url, state.len() - 1).unwrap();
        let err = probe.read().await.unwrap_err();
        assert!(matches!(err, ProbeError::TooLarge { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with(&format!("the check URL {url} gave more than")),
            "{err}"
        );
        server.abort();
    }

    #[tokio::test]
    async fn each_read_has_a_connection_of_its_own_closed_before_it_returns() {
        // Serves one connection at a time, keeping each alive until its
        // client closes it, and answers with the connection's number.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/state", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            for n in 1.. {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut chunk = [0; 1024];
                while socket.read(&mut chunk).await.unwrap_or(0) > 0 {
                    let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{n}", n.to_string().len());
                    socket.write_all(answer.as_bytes()).await.unwrap();
                }
            }
        });
        let mut probe = UrlProbe::new(&url, 1024).unwrap();
        let reads = async { (probe.read().await.unwrap(), probe.read().await.unwrap()) };
        let reads = tokio::time::timeout(Duration::from_secs(10), reads)
            .await
            .expect("the second read was served: the first left no connection open");
        assert_eq!(reads, ("1".to_string(), "2".to_string()));
        server.abort();
    }

    #[test]
    fn urls_split_into_endpoint_and_path() {
        let (endpoint, path) = parse_url("http://127.0.0.1:4000/state?x=1").unwrap();
        assert_eq!(
            (endpoint.host.as_str(), endpoint.port, path.as_str()),
            ("127.0.0.1", 4000, "/state?x=1")
        );
        let (endpoint, path) = parse_url("https://localhost/state").unwrap();
        assert_eq!(
            (endpoint.scheme, endpoint.port, path.as_str()),
            (Scheme::Https, 443, "/state")
        );
        assert!(parse_url("ftp://example.com/").is_err());
        let refused = parse_url("http://admin:hunter2@127.0.0.1:9/state")
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("\"http://***@127.0.0.1:9/state\" carries a user or password"),
            "{refused}"
        );
        assert!(parse_url("not a url").is_err());
    }

    #[test]
    fn a_url_written_as_a_target_is_plain_http() {
        for (written, host, port, wanted) in [
            ("localhost:4000/state", "localhost", 4000, "/state"),
            ("4000/state?x=1", "localhost", 4000, "/state?x=1"),
            ("127.0.0.1:4000", "127.0.0.1", 4000, "/"),
            ("localhost:4000?x=1", "localhost", 4000, "/?x=1"),
            ("http://localhost:4000?x=1", "localhost", 4000, "/?x=1"),
        ] {
            let (endpoint, path) = parse_url(written).unwrap();
            assert_eq!(
                (endpoint.scheme, endpoint.host.as_str(), endpoint.port, path.as_str()),
                (Scheme::Http, host, port, wanted),
                "{written}"
            );
        }
        assert!(parse_url("localhost:0/state").is_err());
    }
}
