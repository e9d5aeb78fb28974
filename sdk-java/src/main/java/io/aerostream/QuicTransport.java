package io.aerostream;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.FixedRecvByteBufAllocator;
import io.netty.channel.epoll.EpollChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDatagramChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.bootstrap.Bootstrap;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;
import io.netty.handler.codec.quic.EpollQuicUtils;
import io.netty.handler.codec.quic.QuicChannel;
import io.netty.handler.codec.quic.QuicChannelBootstrap;
import io.netty.handler.codec.quic.QuicChannelOption;
import io.netty.handler.codec.quic.QuicClientCodecBuilder;
import io.netty.handler.codec.quic.QuicSslContext;
import io.netty.handler.codec.quic.QuicSslContextBuilder;
import io.netty.handler.codec.quic.QuicStreamChannel;
import io.netty.handler.codec.quic.QuicStreamType;
import io.netty.handler.ssl.util.InsecureTrustManagerFactory;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The QUIC transport of section 1.1 of docs/native-protocol.md: TLS 1.3
 * with ALPN {@code aerostream/1}, the server's certificate checked against
 * the CA given (and its name against the host dialled), and the first
 * bidirectional stream carrying the conversation exactly as a TCP
 * connection does.
 */
final class QuicTransport implements Transport {
    static final String ALPN = "aerostream/1";
    private static final byte[] EOF = new byte[0];
    /**
     * Bytes queued on the stream before a writer waits: a produce request of
     * a full batch (128 KiB by default) is one write, and waiting at Netty's
     * default of 64 KiB would stop every such write until the last one left.
     */
    private static final WriteBufferWaterMark WATER_MARK = new WriteBufferWaterMark(2 << 20, 8 << 20);
    /** QUIC packets handed to the kernel in one segmented (GSO) send. */
    private static final int GSO_SEGMENTS = 16;
    /**
     * The largest UDP payload taken, announced to the server as
     * max_udp_payload_size (it sends nothing larger): a datagram of an
     * Ethernet MTU, which lets the epoll socket read many at once.
     */
    private static final int MAX_UDP_PAYLOAD = 1500;
    private static final int RECV_BATCH = 32;
    /** The UDP socket's buffers each way (the kernel caps them at net.core.rmem_max/wmem_max). */
    private static final int SOCKET_BUFFER = 4 << 20;
    private static volatile EventLoopGroup group;
    /** Whether the UDP socket is Netty's epoll one (GSO and GRO) rather than the JDK's. */
    private static final boolean EPOLL = epollAvailable();

    private static boolean epollAvailable() {
        try {
            return Epoll.isAvailable();
        } catch (LinkageError e) {
            return false; // the epoll transport left off the classpath: the JDK's socket
        }
    }

    private final Channel udp;
    private final QuicChannel quic;
    private final QuicStreamChannel stream;
    private final LinkedBlockingQueue<byte[]> inbound;
    private final InputStream in;
    private final OutputStream out;
    /** Writers waiting for the stream to take data wait on it; writability changes wake them. */
    private final Object writable;

    private QuicTransport(Channel udp, QuicChannel quic, QuicStreamChannel stream, LinkedBlockingQueue<byte[]> inbound,
            Object writable) {
        this.writable = writable;
        this.udp = udp;
        this.quic = quic;
        this.stream = stream;
        this.inbound = inbound;
        this.in = new QueueInputStream(inbound);
        this.out = new OutputStream() {
            @Override
            public void write(int b) throws IOException {
                write(new byte[] {(byte) b}, 0, 1);
            }

            @Override
            public void write(byte[] b, int off, int len) throws IOException {
                if (!stream.isActive()) {
                    throw new IOException("the QUIC stream is closed");
                }
                // one copy, into the direct memory quiche reads from; writes
                // are queued in order on the stream's event loop, and a
                // failed one ends the stream, which fails the connection
                ByteBuf buf = stream.alloc().directBuffer(len, len).writeBytes(b, off, len);
                stream.write(buf).addListener(f -> {
                    if (!f.isSuccess()) {
                        inbound.add(EOF);
                        stream.close();
                    }
                });
                // one flush for the writes queued meanwhile: every flush makes
                // quiche packetise and send, so a flush per frame sends many
                // small packets where one train of full ones would do
                if (flushQueued.compareAndSet(false, true)) {
                    stream.eventLoop().execute(flushTask);
                }
                awaitWritable();
            }
        };
    }

    private final AtomicBoolean flushQueued = new AtomicBoolean();
    private final Runnable flushTask = this::flushNow;

    private void flushNow() {
        flushQueued.set(false);
        stream.flush();
    }

    /** Backpressure: waits while the stream's outbound buffer is over its high-water mark. */
    private void awaitWritable() throws IOException {
        if (stream.isWritable()) {
            return;
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        synchronized (writable) {
            while (!stream.isWritable() && stream.isActive()) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new IOException("the QUIC stream took no data for 60 s");
                }
                try {
                    // woken by writabilityChanged; the timeout only bounds a missed wake-up
                    writable.wait(Math.max(1, Math.min(TimeUnit.NANOSECONDS.toMillis(left), 50)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while writing", e);
                }
            }
        }
    }

    private static void wake(Object writable) {
        synchronized (writable) {
            writable.notifyAll();
        }
    }

    /**
     * The event loops of every QUIC connection: one per processor (a second
     * on one processor only adds switches between them), epoll's where
     * Netty's native transport loads, else NIO's.
     */
    private static EventLoopGroup group() {
        EventLoopGroup g = group;
        if (g == null) {
            synchronized (QuicTransport.class) {
                if (group == null) {
                    int n = Math.max(1, Runtime.getRuntime().availableProcessors());
                    DefaultThreadFactory threads = new DefaultThreadFactory("aerostream-quic", true);
                    group = new MultiThreadIoEventLoopGroup(n, threads,
                            EPOLL ? EpollIoHandler.newFactory() : NioIoHandler.newFactory());
                }
                g = group;
            }
        }
        return g;
    }

    static QuicTransport dial(String host, int port, ClientConfig cfg) throws IOException {
        QuicSslContextBuilder ssl = QuicSslContextBuilder.forClient().applicationProtocols(ALPN);
        if (cfg.insecure) {
            ssl.trustManager(InsecureTrustManagerFactory.INSTANCE);
        } else {
            Path ca = cfg.tlsCaFile;
            if (ca == null || !ca.toFile().canRead()) {
                throw new IOException("cannot read the TLS CA " + ca);
            }
            ssl.trustManager(ca.toFile()).endpointIdentificationAlgorithm("HTTPS");
        }
        QuicSslContext ctx = ssl.build();
        ChannelHandler codec = new QuicClientCodecBuilder()
                .sslEngineProvider(q -> ctx.newEngine(q.alloc(), host, port))
                .maxIdleTimeout(60, TimeUnit.SECONDS)
                .initialMaxData(64L << 20)
                .initialMaxStreamDataBidirectionalLocal(16L << 20)
                .initialMaxStreamDataBidirectionalRemote(16L << 20)
                .initialMaxStreamsBidirectional(16)
                .initialMaxStreamsUnidirectional(0)
                .maxRecvUdpPayloadSize(MAX_UDP_PAYLOAD)
                .build();
        Channel udp = null;
        long timeoutMs = cfg.dialTimeout.toMillis();
        try {
            // a socket buffer that outlasts a busy moment of the event loop:
            // the default (about 200 KiB, 150 packets) overflows within
            // milliseconds at 20 MB/s, and every packet dropped there is a
            // loss to the server's congestion control, which then backs off
            Bootstrap b = new Bootstrap().group(group()).handler(codec)
                    .option(ChannelOption.SO_RCVBUF, SOCKET_BUFFER)
                    .option(ChannelOption.SO_SNDBUF, SOCKET_BUFFER);
            boolean gso = false;
            if (EPOLL) {
                b.channel(EpollDatagramChannel.class);
                gso = EpollDatagramChannel.isSegmentedDatagramPacketSupported();
                // recvmmsg: up to RECV_BATCH datagrams per system call
                b.option(EpollChannelOption.MAX_DATAGRAM_PAYLOAD_SIZE, MAX_UDP_PAYLOAD);
                b.option(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(MAX_UDP_PAYLOAD * RECV_BATCH));
            } else {
                b.channel(NioDatagramChannel.class);
            }
            udp = b.bind(0).sync().channel();
            QuicChannelBootstrap qb = QuicChannel.newBootstrap(udp);
            if (gso) {
                qb.option(QuicChannelOption.SEGMENTED_DATAGRAM_PACKET_ALLOCATOR,
                        EpollQuicUtils.newSegmentedAllocator(GSO_SEGMENTS));
            }
            QuicChannel quic = qb
                    .handler(new ChannelInboundHandlerAdapter())
                    .streamHandler(new ChannelInboundHandlerAdapter())
                    .remoteAddress(new InetSocketAddress(host, port))
                    .connect().get(timeoutMs, TimeUnit.MILLISECONDS);
            LinkedBlockingQueue<byte[]> inbound = new LinkedBlockingQueue<>();
            Object writable = new Object();
            QuicStreamChannel stream = quic.newStreamBootstrap().type(QuicStreamType.BIDIRECTIONAL)
                    .option(ChannelOption.AUTO_READ, false).handler(new ChannelInboundHandlerAdapter() {
                /** Chunks read and not yet handed to the reader (touched on the event loop only). */
                private final java.util.ArrayList<ByteBuf> held = new java.util.ArrayList<>();
                private int heldBytes;
                private long chunks;
                private boolean drainQueued;
                private boolean draining;

                /**
                 * Read on demand rather than automatically: read
                 * automatically, the stream yields a chunk per QUIC packet
                 * (a buffer, a trip through the pipeline and a wake-up of
                 * the reader per 1.3 KB, which cost more than the packet).
                 * The first packet of an event-loop pass is read at once;
                 * the rest wait in quiche until the pass's I/O is done,
                 * then come out in chunks of up to 64 KiB and go to the
                 * reader as one array.
                 */
                @Override
                public void channelRead(ChannelHandlerContext c, Object msg) {
                    ByteBuf buf = (ByteBuf) msg;
                    chunks++;
                    if (!buf.isReadable()) {
                        buf.release();
                    } else {
                        held.add(buf);
                        heldBytes += buf.readableBytes();
                    }
                    if (!draining && !drainQueued) {
                        drainQueued = true;
                        c.executor().execute(() -> drain(c));
                    }
                }

                private void drain(ChannelHandlerContext c) {
                    drainQueued = false;
                    draining = true;
                    try {
                        while (c.channel().isActive()) {
                            long before = chunks;
                            // reads one chunk if the stream has data; if not,
                            // leaves a read pending, so the next packet is read
                            // as it comes
                            c.read();
                            if (chunks == before) {
                                break;
                            }
                            if (heldBytes >= (1 << 20)) {
                                handOver();
                            }
                        }
                    } finally {
                        draining = false;
                    }
                    handOver();
                }

                private void handOver() {
                    if (held.isEmpty()) {
                        return;
                    }
                    byte[] b = new byte[heldBytes];
                    int at = 0;
                    for (ByteBuf buf : held) {
                        int n = buf.readableBytes();
                        buf.readBytes(b, at, n);
                        at += n;
                        buf.release();
                    }
                    held.clear();
                    heldBytes = 0;
                    inbound.add(b);
                }

                @Override
                public void userEventTriggered(ChannelHandlerContext c, Object evt) {
                    if (evt == ChannelInputShutdownReadComplete.INSTANCE) {
                        handOver();
                        inbound.add(EOF);
                    }
                }

                @Override
                public void channelWritabilityChanged(ChannelHandlerContext c) {
                    wake(writable);
                }

                @Override
                public void channelInactive(ChannelHandlerContext c) {
                    handOver();
                    inbound.add(EOF);
                    wake(writable);
                }

                @Override
                public void exceptionCaught(ChannelHandlerContext c, Throwable cause) {
                    handOver();
                    inbound.add(EOF);
                    c.close();
                }
            }).create().get(timeoutMs, TimeUnit.MILLISECONDS);
            stream.config().setWriteBufferWaterMark(WATER_MARK);
            stream.read(); // the first read pending
            final Channel u = udp;
            quic.closeFuture().addListener(f -> {
                inbound.add(EOF);
                u.close();
            });
            return new QuicTransport(udp, quic, stream, inbound, writable);
        } catch (ExecutionException e) {
            closeQuietly(udp);
            Throwable cause = e.getCause() == null ? e : e.getCause();
            throw new IOException("QUIC handshake with " + host + ":" + port + " failed: " + describe(cause), cause);
        } catch (TimeoutException e) {
            closeQuietly(udp);
            throw new IOException("QUIC handshake with " + host + ":" + port + " took longer than " + timeoutMs
                    + " ms (is the server's UDP port reachable?)", e);
        } catch (InterruptedException e) {
            closeQuietly(udp);
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while connecting", e);
        }
    }

    private static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder(String.valueOf(t.getMessage()));
        for (Throwable c = t.getCause(); c != null && c != t; c = c.getCause()) {
            sb.append(": ").append(c.getMessage());
        }
        return sb.toString();
    }

    private static void closeQuietly(Channel c) {
        if (c != null) {
            c.close();
        }
    }

    @Override
    public InputStream in() {
        return in;
    }

    @Override
    public OutputStream out() {
        return out;
    }

    @Override
    public void close() {
        stream.close();
        quic.close();
        udp.close();
        inbound.add(EOF);
    }

    /** Reads the chunks the stream received, in order; an empty chunk is the end. */
    private static final class QueueInputStream extends InputStream {
        private final LinkedBlockingQueue<byte[]> q;
        private byte[] cur = new byte[0];
        private int pos;
        private boolean ended;

        QueueInputStream(LinkedBlockingQueue<byte[]> q) {
            this.q = q;
        }

        private boolean fill() throws IOException {
            while (pos >= cur.length) {
                if (ended) {
                    return false;
                }
                try {
                    cur = q.take();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while reading", e);
                }
                pos = 0;
                if (cur == EOF) {
                    ended = true;
                    return false;
                }
            }
            return true;
        }

        @Override
        public int read() throws IOException {
            return fill() ? cur[pos++] & 0xFF : -1;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            if (len == 0) {
                return 0;
            }
            if (!fill()) {
                return -1;
            }
            int n = Math.min(len, cur.length - pos);
            System.arraycopy(cur, pos, b, off, n);
            pos += n;
            return n;
        }
    }
}
