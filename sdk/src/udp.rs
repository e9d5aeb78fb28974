//! UDP socket buffers for the QUIC transport, sized the same way at both
//! ends (the SDK's client endpoint and the agent's native QUIC endpoint).
//!
//! Linux gives a UDP socket about 208 KiB of receive buffer by default. A
//! QUIC connection carrying tens of megabytes a second overflows that in a
//! few milliseconds whenever its reader is late, the kernel drops the
//! datagrams (`RcvbufErrors` in `/proc/net/snmp`), and every drop costs a
//! loss-recovery round: latency spikes of hundreds of milliseconds and
//! retransmissions that cost CPU at both ends. Larger buffers absorb those
//! bursts. The kernel caps what a process may ask for at
//! `net.core.rmem_max` / `net.core.wmem_max`; the deployment playbook raises
//! both.

use std::net::UdpSocket;

/// What each QUIC socket asks for, in each direction.
pub const QUIC_SOCKET_BUFFER: usize = 8 << 20;

/// Below this, a busy connection is likely to drop datagrams: worth a
/// warning that names the sysctl.
const WARN_BELOW: usize = 1 << 20;

/// Asks for [`QUIC_SOCKET_BUFFER`] bytes of receive and send buffer on
/// `socket` and returns what the kernel granted (receive, send). Failing to
/// set them is not an error (the socket works, only less well): it is
/// logged.
pub fn widen_buffers(socket: &UdpSocket) -> (usize, usize) {
    let s = socket2::SockRef::from(socket);
    if let Err(e) = s.set_recv_buffer_size(QUIC_SOCKET_BUFFER) {
        tracing::debug!(error = %e, "could not size the QUIC socket's receive buffer");
    }
    if let Err(e) = s.set_send_buffer_size(QUIC_SOCKET_BUFFER) {
        tracing::debug!(error = %e, "could not size the QUIC socket's send buffer");
    }
    let granted = (
        s.recv_buffer_size().unwrap_or(0),
        s.send_buffer_size().unwrap_or(0),
    );
    if granted.0 < WARN_BELOW {
        tracing::warn!(
            granted = granted.0,
            wanted = QUIC_SOCKET_BUFFER,
            "the QUIC socket's receive buffer is small: raise net.core.rmem_max (and net.core.wmem_max) to avoid dropped datagrams under load"
        );
    }
    granted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quic_socket_gets_more_than_the_default_buffer_where_the_kernel_allows() {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind a UDP socket");
        let before = socket2::SockRef::from(&socket)
            .recv_buffer_size()
            .expect("read the buffer size");
        let max = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok());
        let (recv, send) = widen_buffers(&socket);
        assert!(recv > 0 && send > 0);
        // Where the kernel allows more than the default, the socket gets it.
        if max.is_some_and(|max| max > before) {
            assert!(recv > before, "{recv} <= {before}");
        }
    }
}
