package io.aerostream;

import io.aerostream.proto.Codec;
import io.aerostream.proto.DecodeException;
import io.aerostream.proto.Message;
import io.aerostream.proto.Messages;
import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One TCP connection to a server: the hello and login, then pipelined
 * requests matched to their answers by correlation id (section 4 of
 * docs/native-protocol.md).
 */
final class Connection {
    /** The largest answer body read; a header announcing more is refused before the body is read. */
    static final long MAX_RESPONSE_BYTES = 256L << 20;

    final String addr;
    private final DataInputStream in;
    private final OutputStream out;
    private final Object writeLock = new Object();
    private final Map<Long, CompletableFuture<Message>> pending = new ConcurrentHashMap<>();
    private final AtomicLong next = new AtomicLong(1);
    private final AtomicLong nextSub = new AtomicLong(1);
    private final Map<Long, LinkedBlockingQueue<Object>> subs = new ConcurrentHashMap<>();
    private volatile AeroStreamException dead;
    long maxFrame;
    long nodeId;
    long sessionLifetimeMs;

    private final Transport transport;
    private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "aerostream-login-watchdog");
        t.setDaemon(true);
        return t;
    });

    private Connection(String addr, Transport transport) {
        this.addr = addr;
        this.transport = transport;
        this.in = new DataInputStream(new BufferedInputStream(transport.in(), 1 << 16));
        this.out = transport.out();
    }

    static Connection open(String addr, ClientConfig cfg, boolean overQuic) {
        int colon = addr.lastIndexOf(':');
        String host = addr.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        int port = Integer.parseInt(addr.substring(colon + 1));
        Transport t;
        try {
            t = overQuic ? QuicTransport.dial(host, port, cfg) : Transport.Tcp.dial(host, port,
                    (int) cfg.dialTimeout.toMillis());
        } catch (IOException e) {
            throw new AeroStreamException.ConnectionLostException("connecting to " + addr + ": " + e.getMessage(), e);
        }
        Connection c = new Connection(addr, t);
        AtomicBoolean late = new AtomicBoolean();
        ScheduledFuture<?> watchdog = WATCHDOG.schedule(() -> {
            late.set(true);
            t.close();
        }, cfg.dialTimeout.toMillis(), TimeUnit.MILLISECONDS);
        try {
            c.handshake(cfg);
        } catch (IOException e) {
            t.close();
            String why = late.get() ? "the hello and login took longer than " + cfg.dialTimeout.toMillis() + " ms"
                    : e.toString();
            throw new AeroStreamException.ConnectionLostException("connecting to " + addr + ": " + why, e);
        } catch (RuntimeException e) {
            t.close();
            throw e;
        } finally {
            watchdog.cancel(false);
        }
        Thread reader = new Thread(c::readLoop, "aerostream-conn-" + addr);
        reader.setDaemon(true);
        reader.start();
        return c;
    }

    /** One request and its answer, before the reader runs (the hello and the login). */
    Message exchange(Message m) throws IOException {
        out.write(Codec.encode(m));
        out.flush();
        Message reply = readFrame();
        if (reply.type() == Messages.ERROR_FRAME) {
            throw new AeroStreamException(reply.error(), addr + ": login", reply.getString("message"));
        }
        return reply;
    }

    private void handshake(ClientConfig cfg) throws IOException {
        Message hello = Messages.HELLO.with("correlation", 1, "min_version", Codec.MIN_VERSION,
                "max_version", Codec.MAX_VERSION, "client_id", cfg.clientId);
        String mech = cfg.mechanism;
        if (mech.equals("PLAIN")) {
            hello.set("auth_mechanism", "PLAIN");
            hello.set("auth_bytes", ("\0" + cfg.user + "\0" + cfg.password).getBytes(StandardCharsets.UTF_8));
        }
        Message reply = exchange(hello);
        if (reply.type() != Messages.HELLO_RESPONSE) {
            throw new AeroStreamException(addr + ": the server answered the hello with " + reply.name());
        }
        AeroStreamException.check(reply.error(), "", addr + ": hello");
        long version = reply.getLong("version");
        if (version < Codec.MIN_VERSION || version > Codec.MAX_VERSION) {
            throw new AeroStreamException(addr + ": the server chose protocol version " + version
                    + ", this client speaks " + Codec.MIN_VERSION + ".." + Codec.MAX_VERSION);
        }
        maxFrame = reply.getLong("max_frame_bytes");
        nodeId = reply.getLong("node_id");
        switch (mech) {
            case "", "PLAIN" -> { }
            case "SCRAM-SHA-256", "SCRAM-SHA-512" -> sessionLifetimeMs = Scram.login(this, mech, cfg.user, cfg.password);
            default -> throw new AeroStreamException("SASL mechanism \"" + mech
                    + "\" is not one this client offers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)");
        }
    }

    private Message readFrame() throws IOException {
        byte[] head = new byte[Codec.HEADER_LEN];
        in.readFully(head);
        Codec.Header h = Codec.decodeHeader(head, MAX_RESPONSE_BYTES);
        byte[] body = new byte[(int) h.length()];
        in.readFully(body);
        return Codec.decodeBody(h.op(), body);
    }

    private void readLoop() {
        while (true) {
            Message m;
            try {
                m = readFrame();
            } catch (EOFException e) {
                fail(new AeroStreamException.ConnectionLostException("the connection to " + addr
                        + " was closed by the server", e));
                return;
            } catch (IOException e) {
                fail(new AeroStreamException.ConnectionLostException("the connection to " + addr + " failed: " + e, e));
                return;
            } catch (DecodeException e) {
                fail(new AeroStreamException("the server " + addr + " sent a frame this client refuses: "
                        + e.getMessage(), e));
                return;
            }
            if (m.type() == Messages.ERROR_FRAME) {
                AeroStreamException err = new AeroStreamException(m.error(), "connection to " + addr,
                        m.getString("message"));
                CompletableFuture<Message> f = pending.remove(m.getLong("correlation"));
                if (f != null) {
                    f.completeExceptionally(err);
                }
                fail(err);
                return;
            }
            if (m.type() == Messages.PUSH) {
                long id = m.getLong("subscription");
                LinkedBlockingQueue<Object> q = m.error() != ErrorCode.NONE ? subs.remove(id) : subs.get(id);
                if (q != null) {
                    q.add(m); // an error push ends its subscription
                }
                continue;
            }
            CompletableFuture<Message> f = pending.remove(m.correlation());
            if (f != null) {
                f.complete(m);
            }
        }
    }

    private void fail(AeroStreamException err) {
        synchronized (this) {
            if (dead != null) {
                return;
            }
            dead = err;
        }
        transport.close();
        List<CompletableFuture<Message>> left = new ArrayList<>(pending.values());
        pending.clear();
        for (LinkedBlockingQueue<Object> q : subs.values()) {
            q.add(err);
        }
        subs.clear();
        for (CompletableFuture<Message> f : left) {
            f.completeExceptionally(err);
        }
    }

    boolean alive() {
        return dead == null;
    }

    void close() {
        fail(new AeroStreamException.ConnectionLostException("the connection to " + addr + " was closed", null));
    }

    /** Sends a request; the future completes with its answer or the connection's failure. */
    CompletableFuture<Message> send(Message m) {
        CompletableFuture<Message> f = new CompletableFuture<>();
        AeroStreamException d = dead;
        if (d != null) {
            f.completeExceptionally(d);
            return f;
        }
        long corr;
        do {
            corr = next.getAndIncrement() & 0xFFFFFFFFL;
        } while (corr == 0);
        m.set("correlation", corr);
        byte[] frame = Codec.encode(m);
        if (maxFrame != 0 && frame.length - Codec.HEADER_LEN > maxFrame) {
            f.completeExceptionally(new AeroStreamException(m.name() + " request of " + (frame.length - Codec.HEADER_LEN)
                    + " bytes exceeds the server's limit of " + maxFrame));
            return f;
        }
        pending.put(corr, f);
        try {
            synchronized (writeLock) {
                out.write(frame);
            }
        } catch (IOException e) {
            fail(new AeroStreamException.ConnectionLostException("writing to " + addr + ": " + e, e));
        }
        if (dead != null) {
            // fail() may have run before the put: nothing will answer this request
            CompletableFuture<Message> mine = pending.remove(corr);
            if (mine != null) {
                mine.completeExceptionally(dead);
            }
        }
        return f;
    }

    /** An open subscription: its id, and its pushes (or the error that ended the connection). */
    record Subscription(long id, LinkedBlockingQueue<Object> pushes) {}

    /** Opens a subscription to a partition from an offset, with a first credit of record bytes. */
    Subscription subscribe(String topic, int partition, long offset, long credit, Duration timeout) {
        long id = nextSub.getAndIncrement() & 0xFFFFFFFFL;
        LinkedBlockingQueue<Object> q = new LinkedBlockingQueue<>();
        subs.put(id, q);
        try {
            Message r = AeroStreamClient.expect(request(Messages.SUBSCRIBE.with("subscription", id, "topic", topic,
                    "partition", partition, "start_kind", 0, "start_value", offset, "credit", credit), timeout),
                    Messages.SUBSCRIBE_RESPONSE, "Subscribe");
            AeroStreamException.check(r.error(), r.getString("message"), "subscribing to " + topic + "-" + partition);
        } catch (RuntimeException e) {
            subs.remove(id);
            throw e;
        }
        if (dead != null) {
            q.add(dead);
        }
        return new Subscription(id, q);
    }

    void dropSubscription(long id) {
        subs.remove(id);
    }

    /** Sends a frame that has no answer (a Credit). */
    void sendOneWay(Message m) {
        byte[] frame = Codec.encode(m);
        try {
            synchronized (writeLock) {
                out.write(frame);
            }
        } catch (IOException e) {
            fail(new AeroStreamException.ConnectionLostException("writing to " + addr + ": " + e, e));
        }
    }

    /** Sends a request and waits at most timeout for its answer. */
    Message request(Message m, Duration timeout) {
        CompletableFuture<Message> f = send(m);
        return await(f, m, timeout);
    }

    Message await(CompletableFuture<Message> f, Message m, Duration timeout) {
        try {
            return f.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            pending.remove(m.correlation());
            throw new AeroStreamException.RequestTimeoutException(m.name() + " to " + addr
                    + " got no answer within " + timeout.toMillis() + " ms");
        } catch (InterruptedException e) {
            pending.remove(m.correlation());
            Thread.currentThread().interrupt();
            throw new AeroStreamException("interrupted while waiting for " + m.name() + " to " + addr, e);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof AeroStreamException a) {
                throw a;
            }
            throw new AeroStreamException(m.name() + " to " + addr + ": " + e.getCause(), e.getCause());
        }
    }
}
