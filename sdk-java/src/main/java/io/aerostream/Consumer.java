package io.aerostream;

import io.aerostream.proto.Message;
import io.aerostream.proto.Messages;
import io.aerostream.proto.Struct;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Reads records of assigned partitions ({@link #assign}) or, with a group,
 * of the partitions the group gives this member ({@link #subscribe}), in
 * offset order per partition. Positions advance as {@link #poll} hands
 * records out; a group member commits them every autoCommitInterval, before
 * giving partitions up in a rebalance, and at {@link #close}.
 */
public final class Consumer implements AutoCloseable {
    final AeroStreamClient client;
    final ConsumerConfig cfg;
    private final LinkedBlockingQueue<Item> out = new LinkedBlockingQueue<>(1024);
    private final Object mu = new Object();
    private long generation;
    private Map<TopicPartition, Long> consumed = new HashMap<>();
    private Fetchers fetchers;
    private volatile boolean closed;
    private GroupMember group;

    private record Item(ConsumerRecord rec, RuntimeException err, long generation) {}

    private static final class Fetchers {
        volatile boolean stopped;
        final List<Thread> threads = new ArrayList<>();

        void stop() {
            stopped = true;
            for (Thread t : threads) {
                t.interrupt();
            }
            for (Thread t : threads) {
                try {
                    t.join(10000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    Consumer(AeroStreamClient client, ConsumerConfig cfg) {
        this.client = client;
        this.cfg = cfg;
    }

    /**
     * Reads partitions of a topic (every partition when {@code partitions}
     * is null) from {@code start}. Partitions assigned before keep reading.
     */
    public void assign(String topic, List<Integer> partitions, StartAt start) {
        if (!cfg.group.isEmpty()) {
            throw new IllegalStateException("a group member is given its partitions: use subscribe");
        }
        List<Integer> ps = partitions;
        if (ps == null) {
            ps = new ArrayList<>();
            int n = client.partitions(topic);
            for (int i = 0; i < n; i++) {
                ps.add(i);
            }
        }
        Map<TopicPartition, Long> positions = positions();
        for (int p : ps) {
            positions.put(new TopicPartition(topic, p), resolve(topic, p, start));
        }
        startFetchers(positions);
    }

    /** Reads these partitions from these offsets (partitions assigned before keep reading). */
    public void assign(Map<TopicPartition, Long> offsets) {
        if (!cfg.group.isEmpty()) {
            throw new IllegalStateException("a group member is given its partitions: use subscribe");
        }
        Map<TopicPartition, Long> positions = positions();
        positions.putAll(offsets);
        startFetchers(positions);
    }

    long resolve(String topic, int partition, StartAt start) {
        return switch (start.kind()) {
            case 1 -> client.listOffset(topic, partition, Messages.SPEC_EARLIEST);
            case 2 -> client.listOffset(topic, partition, Messages.SPEC_LATEST);
            default -> start.offset();
        };
    }

    /** Joins the consumer group of the config for these topics; partitions come with the group's assignment. */
    public void subscribe(String... topics) {
        if (cfg.group.isEmpty()) {
            throw new IllegalStateException("subscribe needs a consumer with a group; use assign otherwise");
        }
        if (topics.length == 0) {
            throw new IllegalArgumentException("subscribe needs at least one topic");
        }
        synchronized (mu) {
            if (closed) {
                throw new AeroStreamException("the consumer is closed");
            }
            if (group != null) {
                throw new IllegalStateException("the consumer is subscribed already");
            }
            group = new GroupMember(this, List.of(topics));
            group.start();
        }
    }

    void startFetchers(Map<TopicPartition, Long> positions) {
        stopFetchers();
        synchronized (mu) {
            if (closed) {
                return;
            }
            generation++;
            long gen = generation;
            consumed = new HashMap<>(positions);
            Fetchers f = new Fetchers();
            fetchers = f;
            for (Map.Entry<TopicPartition, Long> e : positions.entrySet()) {
                TopicPartition tp = e.getKey();
                long pos = e.getValue();
                Runnable loop = cfg.push && !cfg.readCommitted ? () -> pushLoop(f, gen, tp, pos)
                        : () -> fetchLoop(f, gen, tp, pos);
                Thread t = new Thread(loop, "aerostream-fetch-" + tp);
                t.setDaemon(true);
                f.threads.add(t);
            }
            f.threads.forEach(Thread::start);
        }
    }

    void stopFetchers() {
        Fetchers f;
        synchronized (mu) {
            f = fetchers;
            fetchers = null;
        }
        if (f != null) {
            f.stop();
        }
    }

    long currentGeneration() {
        synchronized (mu) {
            return generation;
        }
    }

    private void fetchLoop(Fetchers f, long gen, TopicPartition tp, long pos) {
        int failures = 0;
        while (!f.stopped) {
            try {
                String addr = client.leader(tp.topic(), tp.partition());
                List<Struct> topics = List.of(Struct.of("name", tp.topic(), "partitions", List.of(Struct.of(
                        "partition", tp.partition(), "offset", pos, "max_bytes", cfg.partitionMaxBytes))));
                long wait = cfg.maxWait.toMillis();
                Message req = cfg.readCommitted
                        ? Messages.FETCH_ISOLATED.with("isolation", Messages.READ_COMMITTED, "max_wait_ms", wait,
                                "min_bytes", 1, "max_bytes", cfg.partitionMaxBytes, "topics", topics)
                        : Messages.FETCH.with("max_wait_ms", wait, "min_bytes", 1, "max_bytes",
                                cfg.partitionMaxBytes, "topics", topics);
                Message r = client.callAt(addr, req, cfg.maxWait.plusSeconds(30));
                if (r.type() != Messages.FETCH_RESPONSE && r.type() != Messages.FETCH_ISOLATED_RESPONSE) {
                    throw AeroStreamClient.unexpected("Fetch", r);
                }
                List<Struct> ts = r.getList("topics");
                if (ts.size() != 1 || ts.get(0).getList("partitions").size() != 1) {
                    throw AeroStreamClient.unexpected("Fetch", r);
                }
                Struct p = ts.get(0).getList("partitions").get(0);
                int err = p.error();
                if (err == ErrorCode.OFFSET_OUT_OF_RANGE) {
                    pos = resolve(tp.topic(), tp.partition(), cfg.reset);
                    continue;
                }
                AeroStreamException.check(err, "", "fetching " + tp);
                failures = 0;
                List<RecordBatch.Aborted> aborted = new ArrayList<>();
                for (Struct a : p.getList("aborted")) {
                    aborted.add(new RecordBatch.Aborted(a.getLong("producer_id"), a.getLong("first_offset")));
                }
                byte[] records = p.getBytes("records");
                RecordBatch.Decoded d;
                try {
                    d = RecordBatch.decode(tp.topic(), tp.partition(), records, pos, aborted);
                } catch (AeroStreamException e) {
                    deliver(f, new Item(null, e, gen));
                    return;
                }
                if (d.next() < 0 && records.length >= cfg.partitionMaxBytes) {
                    deliver(f, new Item(null, new AeroStreamException(tp + ": a batch at offset " + pos
                            + " is larger than the fetch size of " + cfg.partitionMaxBytes + " bytes"), gen));
                    return;
                }
                for (ConsumerRecord rec : d.records()) {
                    if (!deliver(f, new Item(rec, null, gen))) {
                        return;
                    }
                }
                if (d.next() > pos) {
                    pos = d.next();
                }
            } catch (AeroStreamException e) {
                if (f.stopped) {
                    return;
                }
                failures++;
                if (!e.retriable()) {
                    deliver(f, new Item(null, e, gen));
                    return;
                }
                client.forget(tp.topic());
                try {
                    Thread.sleep(AeroStreamClient.backoff(failures).toMillis());
                } catch (InterruptedException ie) {
                    return;
                }
            }
        }
    }

    private void pushLoop(Fetchers f, long gen, TopicPartition tp, long start) {
        long credit = Math.max(4L * cfg.partitionMaxBytes, 1 << 20);
        long[] pos = {start};
        int[] failures = {0};
        while (!f.stopped) {
            Connection cn;
            Connection.Subscription sub;
            try {
                cn = client.connTo(client.leader(tp.topic(), tp.partition()));
                sub = cn.subscribe(tp.topic(), tp.partition(), pos[0], credit, client.cfg.requestTimeout);
            } catch (AeroStreamException e) {
                if (f.stopped) {
                    return;
                }
                failures[0]++;
                if (!e.retriable()) {
                    deliver(f, new Item(null, e, gen));
                    return;
                }
                client.forget(tp.topic());
                if (!pause(AeroStreamClient.backoff(failures[0]))) {
                    return;
                }
                continue;
            }
            if (!drain(f, gen, tp, pos, cn, sub, failures)) {
                cn.dropSubscription(sub.id());
                Thread.interrupted(); // the unsubscribe is sent even when stopping
                try {
                    cn.request(Messages.UNSUBSCRIBE.with("subscription", sub.id()), Duration.ofSeconds(5));
                } catch (AeroStreamException e) {
                    // the connection ended: so did the subscription
                }
                return;
            }
        }
    }

    /** Hands the subscription's records over; false to stop, true to subscribe again. */
    private boolean drain(Fetchers f, long gen, TopicPartition tp, long[] pos, Connection cn,
            Connection.Subscription sub, int[] failures) {
        while (true) {
            Object it;
            try {
                it = sub.pushes().poll(100, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                return false;
            }
            if (f.stopped) {
                return false;
            }
            if (it == null) {
                continue;
            }
            if (it instanceof AeroStreamException) {
                failures[0]++;
                return pause(AeroStreamClient.backoff(failures[0]));
            }
            Message push = (Message) it;
            int err = push.error();
            if (err == ErrorCode.OFFSET_OUT_OF_RANGE) {
                try {
                    pos[0] = resolve(tp.topic(), tp.partition(), cfg.reset);
                } catch (AeroStreamException e) {
                    failures[0]++;
                    return pause(AeroStreamClient.backoff(failures[0]));
                }
                return true;
            }
            if (err != ErrorCode.NONE) {
                AeroStreamException e = new AeroStreamException(err, "subscription to " + tp, "");
                if (!e.retriable()) {
                    deliver(f, new Item(null, e, gen));
                    return false;
                }
                client.forget(tp.topic());
                failures[0]++;
                return pause(AeroStreamClient.backoff(failures[0]));
            }
            failures[0] = 0;
            byte[] records = push.getBytes("records");
            RecordBatch.Decoded d;
            try {
                d = RecordBatch.decode(tp.topic(), tp.partition(), records, pos[0]);
            } catch (AeroStreamException e) {
                deliver(f, new Item(null, e, gen));
                return false;
            }
            for (ConsumerRecord rec : d.records()) {
                if (!deliver(f, new Item(rec, null, gen))) {
                    return false;
                }
            }
            if (d.next() > pos[0]) {
                pos[0] = d.next();
            }
            if (records.length > 0) {
                cn.sendOneWay(Messages.CREDIT.with("subscription", sub.id(), "bytes", records.length));
            }
        }
    }

    private static boolean pause(Duration d) {
        try {
            Thread.sleep(d.toMillis());
            return true;
        } catch (InterruptedException e) {
            return false;
        }
    }

    private boolean deliver(Fetchers f, Item it) {
        while (!f.stopped) {
            try {
                if (out.offer(it, 100, TimeUnit.MILLISECONDS)) {
                    return true;
                }
            } catch (InterruptedException e) {
                return false;
            }
        }
        return false;
    }

    /** Hands a failure of the group member to the reader. */
    void deliverError(RuntimeException e) {
        out.offer(new Item(null, e, currentGeneration()));
    }

    /**
     * The next record, waiting at most {@code timeout}; null when none came.
     * A failure of a partition's reading (not retriable) is thrown here.
     */
    public ConsumerRecord poll(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            if (closed) {
                throw new AeroStreamException("the consumer is closed");
            }
            Item it;
            try {
                it = out.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return null;
            }
            if (it == null) {
                return null;
            }
            synchronized (mu) {
                if (it.generation != generation) {
                    continue; // a partition given up in a rebalance
                }
                if (it.err == null) {
                    consumed.put(new TopicPartition(it.rec.topic(), it.rec.partition()), it.rec.offset() + 1);
                }
            }
            if (it.err != null) {
                throw it.err;
            }
            return it.rec;
        }
    }

    /** The next offset to read of each partition this consumer reads. */
    public Map<TopicPartition, Long> positions() {
        synchronized (mu) {
            return new HashMap<>(consumed);
        }
    }

    /** The partitions this consumer reads now. */
    public List<TopicPartition> assignment() {
        synchronized (mu) {
            List<TopicPartition> out = new ArrayList<>(consumed.keySet());
            out.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition())
                    : a.topic().compareTo(b.topic()));
            return Collections.unmodifiableList(out);
        }
    }

    /** Commits the positions reached (group members only). */
    public void commit() {
        GroupMember g;
        synchronized (mu) {
            g = group;
        }
        if (g == null) {
            throw new IllegalStateException("only a group member commits");
        }
        g.commit();
    }

    /** Stops reading; a group member commits its positions and leaves the group. */
    @Override
    public void close() {
        GroupMember g;
        synchronized (mu) {
            if (closed) {
                return;
            }
            closed = true;
            g = group;
        }
        stopFetchers();
        if (g != null) {
            g.close();
        }
    }

    /** A group member's identity, for offsets committed in a producer's transaction. */
    public record GroupMetadata(String group, long generation, String memberId) {}

    /** This member's group, generation and member id while it holds an assignment; null otherwise. */
    public GroupMetadata groupMetadata() {
        GroupMember g;
        synchronized (mu) {
            g = group;
        }
        return g == null ? null : g.metadata();
    }
}
