//! How much a tunnel's socket may hold that the network has not taken.

/// Bytes a socket may hold that have not gone out yet.
pub const UNSENT_MAX: u32 = 64 * 1024;

/// Keeps what was written but not yet sent in the writer's own queue, at
/// most [`UNSENT_MAX`] of it in the kernel's. On a slow link the kernel
/// would otherwise take a window of every transfer in flight, and a
/// webhook's request or answer, written after them, would wait behind all
/// of it (18 s at 60 KB/s); in the writers' queues heads go first
/// ([`crate::room`]). Where the system has no such limit, nothing changes.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn keep_little_unsent(socket: &impl std::os::fd::AsFd) -> std::io::Result<()> {
    socket2::SockRef::from(socket).set_tcp_notsent_lowat(UNSENT_MAX)
}

/// See the Linux version: a no-op here.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn keep_little_unsent<S>(_socket: &S) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_set_on_the_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        keep_little_unsent(&socket).unwrap();
        assert_eq!(socket2::SockRef::from(&socket).tcp_notsent_lowat().unwrap(), UNSENT_MAX);
    }
}
