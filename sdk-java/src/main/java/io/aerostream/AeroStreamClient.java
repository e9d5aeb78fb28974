package io.aerostream;

import io.aerostream.proto.Message;
import io.aerostream.proto.Messages;
import io.aerostream.proto.Struct;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A client of AeroStream's native protocol over TCP or QUIC: it connects to the
 * bootstrap servers, learns the cluster from Metadata, keeps one
 * connection per server, and sends each request to the server that serves
 * it (a partition's leader, a group's coordinator). Thread-safe.
 *
 * <pre>{@code
 * try (AeroStreamClient client = AeroStreamClient.connect("aero://127.0.0.1:9091")) {
 *     client.createTopic("events", 3, (short) -1, Map.of());
 * }
 * }</pre>
 */
public final class AeroStreamClient implements AutoCloseable {
    final ClientConfig cfg;
    private final List<String> bootstrap;
    private final boolean quic;
    private final Map<String, Connection> conns = new ConcurrentHashMap<>();
    private final Map<String, Object> dialLocks = new ConcurrentHashMap<>();
    private final Map<Long, String> nodes = new ConcurrentHashMap<>();
    private final Map<String, List<Struct>> topics = new ConcurrentHashMap<>();
    private volatile boolean closed;

    private AeroStreamClient(List<String> bootstrap, boolean quic, ClientConfig cfg) {
        this.bootstrap = bootstrap;
        this.quic = quic;
        this.cfg = cfg;
    }

    /** Connects with default settings. */
    public static AeroStreamClient connect(String bootstrap) {
        return connect(bootstrap, new ClientConfig());
    }

    /** Connects to the first bootstrap server that answers and logs in. */
    public static AeroStreamClient connect(String bootstrap, ClientConfig cfg) {
        boolean overQuic = bootstrap.startsWith(QUIC_SCHEME);
        if (!overQuic && (cfg.tlsCaFile != null || cfg.insecure)) {
            throw new IllegalArgumentException("\"" + bootstrap + "\": a TLS CA or insecureSkipVerify applies to "
                    + "aero+quic:// only (aero:// is plain TCP)");
        }
        if (overQuic && cfg.tlsCaFile == null && !cfg.insecure) {
            throw new IllegalArgumentException("\"" + bootstrap + "\": QUIC needs the servers' CA (tlsCaFile, e.g. "
                    + "DATA_DIR/native-tls/ca.pem) or insecureSkipVerify");
        }
        AeroStreamClient c = new AeroStreamClient(parseBootstrap(bootstrap), overQuic, cfg);
        try {
            c.metadata();
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
        return c;
    }

    static final String TCP_SCHEME = "aero://";
    static final String QUIC_SCHEME = "aero+quic://";

    /**
     * The servers of a bootstrap URL: {@code aero://HOST:PORT} (TCP) or
     * {@code aero+quic://HOST:PORT} (QUIC), several comma-separated
     * ({@code aero://h1:9091,h2:9091}).
     */
    public static List<String> parseBootstrap(String url) {
        String scheme = url.startsWith(QUIC_SCHEME) ? QUIC_SCHEME : TCP_SCHEME;
        if (!url.startsWith(scheme)) {
            throw new IllegalArgumentException("\"" + url + "\" is not an aero://HOST:PORT or aero+quic://HOST:PORT URL");
        }
        List<String> out = new ArrayList<>();
        for (String part : url.substring(scheme.length()).split(",")) {
            part = part.trim();
            if (part.startsWith(scheme)) {
                part = part.substring(scheme.length());
            }
            if (part.endsWith("/")) {
                part = part.substring(0, part.length() - 1);
            }
            int colon = part.lastIndexOf(':');
            if (colon <= 0) {
                throw new IllegalArgumentException("\"" + url + "\": \"" + part + "\" is not HOST:PORT");
            }
            int port;
            try {
                port = Integer.parseInt(part.substring(colon + 1));
            } catch (NumberFormatException e) {
                port = -1;
            }
            if (port < 1 || port > 65535) {
                throw new IllegalArgumentException("\"" + url + "\": \"" + part.substring(colon + 1)
                        + "\" is not a port");
            }
            out.add(part);
        }
        return out;
    }

    @Override
    public void close() {
        closed = true;
        for (Connection c : conns.values()) {
            c.close();
        }
        conns.clear();
    }

    Connection connTo(String addr) {
        if (closed) {
            throw new AeroStreamException("the client is closed");
        }
        Connection c = conns.get(addr);
        if (c != null && c.alive()) {
            return c;
        }
        synchronized (dialLocks.computeIfAbsent(addr, a -> new Object())) {
            c = conns.get(addr);
            if (c != null && c.alive()) {
                return c;
            }
            c = Connection.open(addr, cfg, quic);
            if (closed) {
                c.close();
                throw new AeroStreamException("the client is closed");
            }
            conns.put(addr, c);
            return c;
        }
    }

    private Connection anyConn() {
        for (Connection c : conns.values()) {
            if (c.alive()) {
                return c;
            }
        }
        List<String> addrs = new ArrayList<>(bootstrap);
        addrs.addAll(nodes.values());
        List<String> errs = new ArrayList<>();
        AeroStreamException last = null;
        for (String a : addrs) {
            try {
                return connTo(a);
            } catch (AeroStreamException e) {
                if (e.code() == ErrorCode.AUTHENTICATION_FAILED || e.code() >= 0 || closed) {
                    throw e; // a refused login is refused by every server
                }
                errs.add(e.getMessage());
                last = e;
            }
        }
        throw new AeroStreamException.ConnectionLostException("no server answers: " + String.join("; ", errs),
                last);
    }

    /** Sends a request to any server. */
    Message call(Message req) {
        return anyConn().request(req, cfg.requestTimeout);
    }

    Message callAt(String addr, Message req, Duration timeout) {
        return connTo(addr).request(req, timeout);
    }

    static AeroStreamException unexpected(String req, Message m) {
        return new AeroStreamException("the server answered " + req + " with " + m.name());
    }

    static Message expect(Message m, io.aerostream.proto.MessageType type, String req) {
        if (m.type() != type) {
            throw unexpected(req, m);
        }
        return m;
    }

    /**
     * Describes topics (every topic when none is named): node addresses and
     * partitions with their leaders, remembered for routing.
     */
    public Message metadata(String... names) {
        Message md = expect(call(Messages.METADATA.with("topics", List.of(names))), Messages.METADATA_RESPONSE,
                "Metadata");
        for (Struct n : md.getList("nodes")) {
            nodes.put(n.getLong("id"), hostPort(n.getString("host"), n.getLong("port")));
        }
        for (Struct t : md.getList("topics")) {
            if (t.error() == ErrorCode.NONE) {
                topics.put(t.getString("name"), t.getList("partitions"));
            } else {
                topics.remove(t.getString("name"));
            }
        }
        return md;
    }

    /** Every topic and its partition count. */
    public Map<String, Integer> listTopics() {
        Map<String, Integer> out = new LinkedHashMap<>();
        for (Struct t : metadata().getList("topics")) {
            if (t.error() == ErrorCode.NONE) {
                out.put(t.getString("name"), t.getList("partitions").size());
            }
        }
        return out;
    }

    /** The partition count of a topic (from the cache, or Metadata). */
    public int partitions(String topic) {
        List<Struct> ps = topics.get(topic);
        if (ps != null) {
            return ps.size();
        }
        for (Struct t : metadata(topic).getList("topics")) {
            if (t.getString("name").equals(topic)) {
                AeroStreamException.check(t.error(), "", "topic " + topic);
                return t.getList("partitions").size();
            }
        }
        throw new AeroStreamException(ErrorCode.UNKNOWN_TOPIC, "topic " + topic, "");
    }

    String leader(String topic, int partition) {
        for (int attempt = 0; ; attempt++) {
            List<Struct> ps = topics.get(topic);
            boolean known = false;
            if (ps != null && partition < ps.size()) {
                known = true;
                long l = ps.get(partition).getLong("leader");
                if (l >= 0) {
                    String addr = nodes.get(l);
                    if (addr != null) {
                        return addr;
                    }
                }
            }
            if (attempt > 0) {
                if (!known) {
                    throw new AeroStreamException(ErrorCode.UNKNOWN_PARTITION, topic + "-" + partition, "");
                }
                throw new AeroStreamException(ErrorCode.NOT_AVAILABLE, topic + "-" + partition + " has no leader", "");
            }
            metadata(topic);
        }
    }

    void forget(String topic) {
        topics.remove(topic);
    }

    /**
     * Creates a topic: partitions -1 and replicationFactor -1 take the
     * server's defaults; configs are Kafka topic settings.
     */
    public void createTopic(String name, int partitions, short replicationFactor, Map<String, String> configs) {
        List<Struct> cs = new ArrayList<>();
        configs.forEach((k, v) -> cs.add(Struct.of("name", k, "value", v)));
        Message r = expect(call(Messages.CREATE_TOPIC.with("name", name, "partitions", partitions,
                "replication_factor", replicationFactor, "configs", cs)), Messages.CREATE_TOPIC_RESPONSE, "CreateTopic");
        AeroStreamException.check(r.error(), r.getString("message"), "creating topic " + name);
    }

    /** Deletes a topic and its data. */
    public void deleteTopic(String name) {
        Message r = expect(call(Messages.DELETE_TOPIC.with("name", name)), Messages.DELETE_TOPIC_RESPONSE,
                "DeleteTopic");
        forget(name);
        AeroStreamException.check(r.error(), r.getString("message"), "deleting topic " + name);
    }

    /** A round trip to a server. */
    public Duration ping() {
        long start = System.nanoTime();
        long nonce = start;
        Message r = expect(call(Messages.PING.with("nonce", nonce)), Messages.PONG, "Ping");
        if (r.getLong("nonce") != nonce) {
            throw unexpected("Ping", r);
        }
        return Duration.ofNanos(System.nanoTime() - start);
    }

    /** A partition's offset for a spec: {@link Messages#SPEC_EARLIEST}, {@link Messages#SPEC_LATEST} or a timestamp. */
    public long listOffset(String topic, int partition, long spec) {
        for (int attempt = 0; ; attempt++) {
            try {
                String addr = leader(topic, partition);
                Message r = expect(callAt(addr, Messages.LIST_OFFSETS.with("partitions",
                        List.of(Struct.of("topic", topic, "partition", partition, "spec", spec))), cfg.requestTimeout),
                        Messages.LIST_OFFSETS_RESPONSE, "ListOffsets");
                List<Struct> ps = r.getList("partitions");
                if (ps.size() != 1) {
                    throw unexpected("ListOffsets", r);
                }
                AeroStreamException.check(ps.get(0).error(), "", "offsets of " + topic + "-" + partition);
                return ps.get(0).getLong("offset");
            } catch (AeroStreamException e) {
                if (attempt >= 5 || !e.retriable()) {
                    throw e;
                }
                forget(topic);
                sleep(backoff(attempt));
            }
        }
    }

    /** The address of a group's coordinator. */
    String groupCoordinator(String group) {
        Message r = expect(call(Messages.FIND_COORDINATOR.with("group", group)), Messages.FIND_COORDINATOR_RESPONSE,
                "FindCoordinator");
        AeroStreamException.check(r.error(), "", "finding the coordinator of group " + group);
        return hostPort(r.getString("host"), r.getLong("port"));
    }

    /** A group's committed offsets of partitions (-1: none committed). */
    public Map<TopicPartition, Long> committedOffsets(String group, List<TopicPartition> partitions) {
        String addr = groupCoordinator(group);
        List<Struct> ps = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            ps.add(Struct.of("topic", tp.topic(), "partition", tp.partition()));
        }
        Message r = expect(callAt(addr, Messages.FETCH_OFFSETS.with("group", group, "partitions", ps),
                cfg.requestTimeout), Messages.FETCH_OFFSETS_RESPONSE, "FetchOffsets");
        Map<TopicPartition, Long> out = new HashMap<>();
        for (Struct o : r.getList("offsets")) {
            AeroStreamException.check(o.error(), "", "committed offset of " + o.getString("topic") + "-"
                    + o.getLong("partition"));
            out.put(new TopicPartition(o.getString("topic"), o.getInt("partition")), o.getLong("offset"));
        }
        return out;
    }

    /** Commits a group's offsets without membership (a group with no members). */
    public void commitOffsets(String group, Map<TopicPartition, Long> offsets) {
        commitOffsets(group, offsets, -1, "", groupCoordinator(group));
    }

    void commitOffsets(String group, Map<TopicPartition, Long> offsets, long generation, String member, String addr) {
        List<Struct> os = new ArrayList<>();
        offsets.forEach((tp, off) -> os.add(Struct.of("topic", tp.topic(), "partition", tp.partition(),
                "offset", off, "metadata", "")));
        if (os.isEmpty()) {
            return;
        }
        Message r = expect(callAt(addr, Messages.COMMIT_OFFSETS.with("group", group, "offsets", os,
                "generation", generation, "member_id", member), cfg.requestTimeout),
                Messages.COMMIT_OFFSETS_RESPONSE, "CommitOffsets");
        for (Struct p : r.getList("partitions")) {
            AeroStreamException.check(p.error(), "", "committing " + p.getString("topic") + "-"
                    + p.getLong("partition"));
        }
    }

    /** Creates a producer with these settings. */
    public Producer producer(ProducerConfig pc) {
        return new Producer(this, pc);
    }

    /** Creates a consumer with these settings. */
    public Consumer consumer(ConsumerConfig cc) {
        return new Consumer(this, cc);
    }

    static String hostPort(String host, long port) {
        return (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
    }

    static Duration backoff(int attempt) {
        long ms = 50L << Math.min(attempt, 5);
        return Duration.ofMillis(Math.min(ms, 1000));
    }

    static void sleep(Duration d) {
        try {
            Thread.sleep(d.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AeroStreamException("interrupted", e);
        }
    }
}
