//! A local handler for tests that answers every request with the same
//! bytes, written as given: the answers hyper's own servers never give (a
//! status past 599, a control byte in a header, an answer before the body
//! was read), which PortPreview must still take well.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::task::AbortOnDropHandle;

/// Listens on loopback and answers each connection's first read (the
/// request's head, or its start) with `answer`, then closes it, what was
/// sent past that unread. The port, and the task, which stops when dropped.
pub async fn answering(answer: &'static [u8]) -> (u16, AbortOnDropHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut head = [0u8; 4096];
            let _ = socket.read(&mut head).await;
            let _ = socket.write_all(answer).await;
        }
    });
    (port, AbortOnDropHandle::new(task))
}
