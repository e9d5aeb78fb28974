//! The connection against a server double that speaks the frames over real
//! TCP: it answers the hello, then runs a script.

use std::future::Future;

use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpListener;

use super::*;
use crate::proto::{Metadata, Ping, Pong, Produce};

type ServerRead = BufReader<OwnedReadHalf>;

const LONG: Duration = Duration::from_secs(5);

fn options() -> ConnOptions {
    ConnOptions {
        client_id: "conn-test".into(),
        connect_timeout: LONG,
        max_frame_bytes: 1 << 20,
    }
}

fn hello_ok(hello: Hello) -> Bytes {
    HelloResponse {
        correlation: hello.correlation,
        error: ErrorCode::NONE,
        version: 1,
        node_id: 7,
        max_frame_bytes: 1 << 20,
        server: "double".into(),
    }
    .to_frame()
}

/// Accepts one connection, answers its hello with `answer`, then runs
/// `script` on the two halves.
async fn serve<A, S, F>(answer: A, script: S) -> Address
where
    A: FnOnce(Hello) -> Bytes + Send + 'static,
    S: FnOnce(ServerRead, OwnedWriteHalf) -> F + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        let hello = read_frame(&mut read, u32::MAX).await.unwrap().unwrap();
        assert_eq!(hello.op, op::HELLO);
        let hello = Hello::decode_body(hello.body).unwrap();
        assert_eq!(hello.client_id, "conn-test");
        assert_eq!(
            (hello.min_version, hello.max_version),
            (proto::MIN_VERSION, proto::MAX_VERSION)
        );
        write.write_all(&answer(hello)).await.unwrap();
        script(read, write).await;
    });
    Address {
        host: "127.0.0.1".into(),
        port,
    }
}

async fn read_ping(read: &mut ServerRead) -> Ping {
    let frame = read_frame(read, u32::MAX).await.unwrap().unwrap();
    Ping::decode_body(frame.body).unwrap()
}

async fn pong(write: &mut OwnedWriteHalf, ping: &Ping) {
    let answer = Pong {
        correlation: ping.correlation,
        nonce: ping.nonce,
    };
    write.write_all(&answer.to_frame()).await.unwrap();
}

fn ping(nonce: u64) -> Ping {
    Ping {
        correlation: 0,
        nonce,
    }
}

/// Waits for the server to close its side.
async fn until_closed(mut read: ServerRead) {
    while let Ok(Some(_)) = read_frame(&mut read, u32::MAX).await {}
}

#[tokio::test]
async fn answers_in_any_order_reach_the_requests_they_answer() {
    let addr = serve(hello_ok, |mut read, mut write| async move {
        let mut pings = Vec::new();
        for _ in 0..3 {
            pings.push(read_ping(&mut read).await);
        }
        for p in pings.iter().rev() {
            pong(&mut write, p).await;
        }
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    assert_eq!(conn.info().node_id, 7);
    assert_eq!(conn.info().max_frame_bytes, 1 << 20);
    let (a, b, c) = tokio::join!(
        conn.call(ping(1), LONG),
        conn.call(ping(2), LONG),
        conn.call(ping(3), LONG)
    );
    assert_eq!(
        [a.unwrap().nonce, b.unwrap().nonce, c.unwrap().nonce],
        [1, 2, 3]
    );
}

#[tokio::test]
async fn an_error_frame_fails_the_request_it_names_and_correlation_zero_fails_all() {
    let addr = serve(hello_ok, |mut read, mut write| async move {
        let a = read_ping(&mut read).await;
        let b = read_ping(&mut read).await;
        let _c = read_ping(&mut read).await;
        let named = ErrorFrame {
            correlation: b.correlation,
            error: ErrorCode::INVALID_REQUEST,
            message: "bad ping".into(),
        };
        write.write_all(&named.to_frame()).await.unwrap();
        pong(&mut write, &a).await;
        let all = ErrorFrame {
            correlation: 0,
            error: ErrorCode::BAD_FRAME,
            message: String::new(),
        };
        write.write_all(&all.to_frame()).await.unwrap();
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let (a, b, c) = tokio::join!(
        conn.call(ping(1), LONG),
        conn.call(ping(2), LONG),
        conn.call(ping(3), LONG)
    );
    assert_eq!(a.unwrap().nonce, 1, "answered before the error frames");
    assert!(matches!(
        b,
        Err(Error::Server { code: ErrorCode::INVALID_REQUEST, message }) if message == "bad ping"
    ));
    assert!(matches!(
        c,
        Err(Error::Server {
            code: ErrorCode::BAD_FRAME,
            ..
        })
    ));
    assert!(conn.is_closed());
    assert!(matches!(conn.call(ping(4), LONG).await, Err(Error::Closed)));
}

#[tokio::test]
async fn every_waiting_request_fails_when_the_connection_drops() {
    let addr = serve(hello_ok, |mut read, write| async move {
        read_ping(&mut read).await;
        read_ping(&mut read).await;
        drop((read, write));
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let (a, b) = tokio::join!(conn.call(ping(1), LONG), conn.call(ping(2), LONG));
    assert!(matches!(a, Err(Error::Closed)), "{a:?}");
    assert!(matches!(b, Err(Error::Closed)), "{b:?}");
    assert!(conn.is_closed());
    assert!(conn.closed_at().is_some());
    assert!(matches!(conn.call(ping(3), LONG).await, Err(Error::Closed)));
}

#[tokio::test]
async fn an_oversized_answer_is_refused_from_its_header() {
    let addr = serve(hello_ok, |mut read, mut write| async move {
        read_ping(&mut read).await;
        // A header announcing one byte more than the client accepts, and
        // no body: the client must not wait for (or allocate) it.
        let header = FrameHeader {
            op: op::PING | RESPONSE,
            len: (1 << 20) + 1,
        };
        write.write_all(&header.encode()).await.unwrap();
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let err = conn.call(ping(1), LONG).await.unwrap_err();
    assert!(
        matches!(&err, Error::Protocol(m) if m.contains("exceeds the limit")),
        "{err}"
    );
    assert!(conn.is_closed());
}

#[tokio::test]
async fn a_request_times_out_and_its_late_answer_is_not_mistaken_for_another() {
    let addr = serve(hello_ok, |mut read, mut write| async move {
        let slow = read_ping(&mut read).await;
        let next = read_ping(&mut read).await;
        pong(&mut write, &slow).await;
        pong(&mut write, &next).await;
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let slow = conn.call(ping(1), Duration::from_millis(50)).await;
    assert!(matches!(slow, Err(Error::Timeout)), "{slow:?}");
    assert_eq!(conn.call(ping(2), LONG).await.unwrap().nonce, 2);
    assert!(!conn.is_closed());
}

#[tokio::test]
async fn an_answer_of_the_wrong_operation_is_a_protocol_error() {
    let addr = serve(hello_ok, |mut read, mut write| async move {
        let p = read_ping(&mut read).await;
        let wrong = proto::MetadataResponse {
            correlation: p.correlation,
            ..Default::default()
        };
        write.write_all(&wrong.to_frame()).await.unwrap();
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let err = conn.call(ping(1), LONG).await.unwrap_err();
    assert!(matches!(err, Error::Protocol(_)), "{err}");
}

#[tokio::test]
async fn a_request_larger_than_the_server_accepts_is_not_sent() {
    let small = |hello: Hello| {
        HelloResponse {
            correlation: hello.correlation,
            version: 1,
            max_frame_bytes: 16,
            ..Default::default()
        }
        .to_frame()
    };
    let addr = serve(small, |mut read, mut write| async move {
        // The first frame after the hello is the ping, not the metadata.
        let p = read_ping(&mut read).await;
        pong(&mut write, &p).await;
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let big = Metadata {
        correlation: 0,
        topics: vec!["a-topic-name-longer-than-sixteen-bytes".into()],
    };
    let err = conn.call(big, LONG).await.unwrap_err();
    assert!(matches!(err, Error::TooLarge { max: 16, .. }), "{err}");
    assert_eq!(conn.call(ping(9), LONG).await.unwrap().nonce, 9);
}

#[tokio::test]
async fn a_request_without_answer_completes_once_written() {
    let (seen_tx, seen) = oneshot::channel();
    let addr = serve(hello_ok, |mut read, write| async move {
        let _open = write;
        let frame = read_frame(&mut read, u32::MAX).await.unwrap().unwrap();
        let produce = Produce::decode_body(frame.body).unwrap();
        seen_tx.send(produce.acks).unwrap();
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let produce = Produce {
        acks: 0,
        ..Default::default()
    };
    conn.send_only(produce, LONG).await.unwrap();
    assert_eq!(seen.await.unwrap(), 0);
}

#[tokio::test]
async fn a_refused_hello_says_why() {
    let unsupported = |hello: Hello| {
        HelloResponse {
            correlation: hello.correlation,
            error: ErrorCode::UNSUPPORTED_VERSION,
            ..Default::default()
        }
        .to_frame()
    };
    let addr = serve(unsupported, |_, _| async {}).await;
    let err = connect(&addr, Transport::Tcp, &options())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnsupportedVersion(_)), "{err}");

    let future_version = |hello: Hello| {
        HelloResponse {
            correlation: hello.correlation,
            version: proto::MAX_VERSION + 1,
            ..Default::default()
        }
        .to_frame()
    };
    let addr = serve(future_version, |_, _| async {}).await;
    let err = connect(&addr, Transport::Tcp, &options())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnsupportedVersion(_)), "{err}");

    let error_frame = |hello: Hello| {
        ErrorFrame {
            correlation: hello.correlation,
            error: ErrorCode::UNAUTHORIZED,
            message: "who are you".into(),
        }
        .to_frame()
    };
    let addr = serve(error_frame, |_, _| async {}).await;
    let err = connect(&addr, Transport::Tcp, &options())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::UNAUTHORIZED));
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error_naming_the_address() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let addr = Address {
        host: "127.0.0.1".into(),
        port,
    };
    let err = connect(&addr, Transport::Tcp, &options())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Connect { addr, .. } if *addr == format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(err.is_retriable());
}
