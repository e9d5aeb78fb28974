//! A small HTTP/1.1 listener for `/health` (also `/healthz`) and `/metrics`
//! (Prometheus text), plus whatever [`HttpExtension`]s the binary adds
//! (tiering figures, test-only admin endpoints). One request per connection.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::broker::Broker;

/// Extra figures and endpoints the embedding binary adds to the listener.
pub trait HttpExtension: Send + Sync + 'static {
    /// Prometheus text appended to `/metrics`.
    fn metrics(&self) -> String;
    /// The status and body for `target` (path and query) if this extension
    /// serves it, else `None`.
    fn handle(&self, target: &str) -> Option<(u16, String)>;
}

/// Serves until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    broker: Arc<Broker>,
    extensions: Vec<Arc<dyn HttpExtension>>,
    mut stop: watch::Receiver<bool>,
) {
    let extensions = Arc::new(extensions);
    loop {
        let (mut stream, _) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, say: back off rather than spin on the
                    // runtime that also keeps this node's leases alive.
                    tracing::warn!(error = %e, "HTTP accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let broker = broker.clone();
        let extensions = extensions.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let mut used = 0;
            // Read until the end of the request head (or the buffer is full).
            loop {
                match stream.read(&mut buf[used..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        used += n;
                        if buf[..used].windows(4).any(|w| w == b"\r\n\r\n") || used == buf.len() {
                            break;
                        }
                    }
                }
            }
            let head = String::from_utf8_lossy(&buf[..used]);
            let path = head.split_whitespace().nth(1).unwrap_or("/");
            let admin = extensions.iter().find_map(|x| x.handle(path));
            let (status, ctype, body) = match path {
                _ if admin.is_some() => {
                    let (code, text) = admin.unwrap_or_default();
                    let status = match code {
                        200 => "200 OK",
                        404 => "404 Not Found",
                        _ => "400 Bad Request",
                    };
                    (status, "text/plain", text)
                }
                "/health" | "/healthz" => {
                    if broker.is_shutting_down() {
                        (
                            "503 Service Unavailable",
                            "text/plain",
                            "shutting down\n".to_string(),
                        )
                    } else {
                        ("200 OK", "text/plain", "ok\n".to_string())
                    }
                }
                "/metrics" => {
                    let mut text = broker.metrics.render(
                        broker.partitions.len(),
                        broker.partitions.counters(),
                        &broker.forward_counters,
                    );
                    text.push_str(&broker.connections.render());
                    for x in extensions.iter() {
                        text.push_str(&x.metrics());
                    }
                    ("200 OK", "text/plain; version=0.0.4", text)
                }
                _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(resp.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}
