//! Clients that connect and never log in: they may not hold the request
//! budget logged-in clients need, nor stay connected for long.

use std::time::Duration;

use gateway::broker::BrokerConfig;
use gateway::connections::ConnectionLimits;
use gateway::testing::Logs;
use gateway::Gateway;
use sdk::proto::ErrorCode;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::logins::native_client;
use super::support::*;
use crate::common;

const BUDGET: usize = 4 << 20;

/// With SCRAM required, frames and the broker-wide budget of 4 MiB, a
/// gateway whose login timeout is `login_timeout`.
async fn start_secured(login_timeout: Duration) -> (Gateway, gateway::testing::Backends) {
    use gateway::sasl::{Mechanism, ScramMechanism};
    let (gw, backends) = start_exactly(
        Logs::Disk,
        BrokerConfig {
            sasl_mechanisms: vec![Mechanism::Scram(ScramMechanism::Sha512), Mechanism::Plain],
            max_request_bytes: BUDGET,
            connections: ConnectionLimits {
                queued_max_request_bytes: BUDGET,
                login_timeout,
                ..ConnectionLimits::default()
            },
            ..BrokerConfig::default()
        },
    )
    .await;
    common::add_users(&backends.meta, &["alice"], "pw").await;
    (gw, backends)
}

/// The broker-wide budget in use, once the broker had a moment to read
/// what the stalled sockets sent (it stays 0 with every frame outside it).
async fn budget_in_use_after_reading(gw: &Gateway) -> usize {
    let in_use = || gw.broker().connections.request_bytes_in_use();
    for _ in 0..50 {
        if in_use() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    in_use()
}

/// Sockets that send a hello's header and stall (announcing 100 MiB, the
/// whole 4 MiB budget, and 60 KiB) hold nothing of the broker-wide budget,
/// so a client that logs in is served. Before a client logged in, frames
/// over 64 KiB are refused outright.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_stalled_before_logging_in_hold_none_of_the_request_budget() {
    // the login timeout is long: it plays no part here
    let (gw, _backends) = start_secured(Duration::from_secs(600)).await;
    let headers: [[u8; 7]; 3] = [
        // hello (0x01), 0x06400000 = 100 MiB: over the frame cap anyway
        [0xAE, 0x01, 0x01, 0x06, 0x40, 0x00, 0x00],
        // 0x00400000 = 4 MiB: the frame cap and the whole budget
        [0xAE, 0x01, 0x01, 0x00, 0x40, 0x00, 0x00],
        // 0x0000F000 = 60 KiB: under the cap of a frame before login
        [0xAE, 0x01, 0x01, 0x00, 0x00, 0xF0, 0x00],
    ];
    let mut stalled = Vec::new();
    for h in headers {
        let mut s = TcpStream::connect(gw.native_addr().unwrap()).await.unwrap();
        s.write_all(&h).await.unwrap();
        stalled.push(s);
    }
    assert_eq!(
        budget_in_use_after_reading(&gw).await,
        0,
        "frames of clients that have not logged in take none of the broker-wide budget"
    );
    let logged_in = tokio::time::timeout(
        Duration::from_secs(60),
        native_client(&gw, false, sdk::Credentials::scram_sha512("alice", "pw")),
    )
    .await
    .expect("the login is not held up")
    .unwrap();
    let meta = tokio::time::timeout(Duration::from_secs(60), logged_in.metadata(&[]))
        .await
        .expect("Metadata is not held up")
        .unwrap();
    assert!(!meta.nodes.is_empty(), "{meta:?}");
    // the two over 64 KiB were refused for their size; the third waits
    let mut it = stalled.into_iter();
    for _ in 0..2 {
        let mut s = it.next().unwrap();
        let e = expect_closed_with(&mut s, ErrorCode::FRAME_TOO_LARGE).await;
        assert!(e.message.contains("before the client logged in"), "{e:?}");
    }
    let _waiting = it.next();
    assert_eq!(gw.broker().connections.request_bytes_in_use(), 0);
    drop(logged_in);
    gw.shutdown().await;
}

/// A connection that does not log in within the login timeout is
/// closed (counted in the login timeouts), long before the idle timeout;
/// one that logged in may then stay idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_log_in_within_the_login_timeout_is_closed() {
    let (gw, _backends) = start_secured(Duration::from_secs(1)).await;
    let client = native_client(&gw, false, sdk::Credentials::scram_sha512("alice", "pw"))
        .await
        .unwrap();
    // a hello and nothing after it: the SCRAM exchange never starts
    let mut silent = TcpStream::connect(gw.native_addr().unwrap()).await.unwrap();
    say_hello(&mut silent).await;
    // half a hello
    let mut slow = TcpStream::connect(gw.native_addr().unwrap()).await.unwrap();
    slow.write_all(&[0xAE, 0x01, 0x01, 0x00, 0x00, 0x00, 0x40, 0x00])
        .await
        .unwrap();
    for s in [&mut silent, &mut slow] {
        assert!(
            next_frame(s).await.is_none(),
            "closed by the server without an answer"
        );
    }
    let counters = &gw.broker().connections.counters;
    assert_eq!(
        counters
            .login_timeouts
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    // the logged-in client, idle since, is still served
    tokio::time::sleep(Duration::from_millis(1200)).await;
    client.ping().await.unwrap();
    gw.shutdown().await;
}
