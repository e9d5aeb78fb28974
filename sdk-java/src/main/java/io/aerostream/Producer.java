package io.aerostream;

import io.aerostream.proto.Message;
import io.aerostream.proto.Messages;
import io.aerostream.proto.Struct;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A batching producer. {@link #send} buffers a record in its partition's
 * batch and returns at once; a batch goes to the partition's leader when it
 * is full or has lingered, one batch in flight per partition so records of a
 * partition are written in the order they were sent. Idempotent by default:
 * retries of a batch are written once. Thread-safe.
 */
public final class Producer implements AutoCloseable {
    private final AeroStreamClient client;
    private final ProducerConfig cfg;
    private volatile RecordBatch.Identity who;
    private final Transactions txn;

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition space = lock.newCondition();
    private final Condition drained = lock.newCondition();
    private final Condition wake = lock.newCondition();
    private final Map<TopicPartition, PartitionState> parts = new HashMap<>();
    private final Map<String, Integer> sticky = new HashMap<>();
    private long buffered;
    private long unfinished;
    private boolean flushing;
    private boolean closed;
    private boolean woken;

    private final Thread sender;
    private final ExecutorService senders;

    private static final class Pending {
        final ProducerRecord record;
        final long timestamp;
        final int size;
        final CompletableFuture<RecordMetadata> future = new CompletableFuture<>();

        Pending(ProducerRecord record, long timestamp, int size) {
            this.record = record;
            this.timestamp = timestamp;
            this.size = size;
        }
    }

    private static final class Batch {
        final TopicPartition tp;
        final List<Pending> records = new ArrayList<>();
        final long created = System.nanoTime();
        long size;
        byte[] encoded;
        int sequence;
        int attempts;

        Batch(TopicPartition tp) {
            this.tp = tp;
        }
    }

    private static final class PartitionState {
        Batch open;
        final ArrayDeque<Batch> ready = new ArrayDeque<>();
        boolean inflight;
        int sequence;
    }

    Producer(AeroStreamClient client, ProducerConfig cfg) {
        this.client = client;
        this.cfg = cfg;
        if (!cfg.transactionalId.isEmpty()) {
            if (!cfg.idempotent) {
                throw new IllegalArgumentException("a transactional producer is idempotent");
            }
            cfg.acks = -1;
            txn = new Transactions(client, cfg.transactionalId, cfg.transactionTimeout);
            who = txn.init();
        } else if (cfg.idempotent) {
            txn = null;
            Message r = AeroStreamClient.expect(client.call(Messages.INIT_PRODUCER.with()),
                    Messages.INIT_PRODUCER_RESPONSE, "InitProducer");
            AeroStreamException.check(r.error(), "", "getting a producer id");
            who = new RecordBatch.Identity(r.getLong("producer_id"), (short) r.getLong("producer_epoch"), 0);
        } else {
            txn = null;
            who = RecordBatch.Identity.NONE;
        }
        senders = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "aerostream-producer-send");
            t.setDaemon(true);
            return t;
        });
        sender = new Thread(this::run, "aerostream-producer");
        sender.setDaemon(true);
        sender.start();
    }

    private static int recordSize(ProducerRecord r) {
        int n = 21 + (r.key() == null ? 0 : r.key().length) + (r.value() == null ? 0 : r.value().length);
        for (Header h : r.headers()) {
            n += 10 + h.key().length() + (h.value() == null ? 0 : h.value().length);
        }
        return n;
    }

    /**
     * Buffers a record; the future completes with where it was written, or
     * with the error that failed it. Blocks while the buffer is full.
     */
    public CompletableFuture<RecordMetadata> send(ProducerRecord r) {
        if (r.topic() == null || r.topic().isEmpty()) {
            throw new IllegalArgumentException("a record needs a topic");
        }
        int partition;
        if (r.partition() != null) {
            partition = r.partition();
        } else {
            int n = client.partitions(r.topic());
            if (n == 0) {
                throw new AeroStreamException("topic " + r.topic() + " has no partition");
            }
            if (r.key() != null) {
                partition = Partitioner.partitionForKey(r.key(), n);
            } else {
                lock.lock();
                try {
                    int next = sticky.computeIfAbsent(r.topic(), t -> ThreadLocalRandom.current().nextInt(n));
                    partition = Math.floorMod(next, n);
                    sticky.put(r.topic(), partition);
                } finally {
                    lock.unlock();
                }
            }
        }
        if (txn != null) {
            txn.checkOpen();
        }
        long ts = r.timestamp() != 0 ? r.timestamp() : System.currentTimeMillis();
        Pending p = new Pending(r, ts, recordSize(r));
        boolean full;
        lock.lock();
        try {
            while (!closed && buffered > 0 && buffered + p.size > cfg.bufferBytes) {
                space.awaitUninterruptibly();
            }
            if (closed) {
                throw new AeroStreamException("the producer is closed");
            }
            TopicPartition tp = new TopicPartition(r.topic(), partition);
            PartitionState st = parts.computeIfAbsent(tp, k -> new PartitionState());
            if (st.open == null) {
                st.open = new Batch(tp);
            }
            st.open.records.add(p);
            st.open.size += p.size;
            full = st.open.size >= cfg.batchBytes;
            if (full) {
                closeBatch(st);
            }
            buffered += p.size;
            unfinished++;
            if (full) {
                signal();
            }
        } finally {
            lock.unlock();
        }
        return p.future;
    }

    private void closeBatch(PartitionState st) {
        Batch b = st.open;
        st.open = null;
        st.ready.add(b);
        Integer s = sticky.get(b.tp.topic());
        if (s != null && s == b.tp.partition()) {
            sticky.put(b.tp.topic(), b.tp.partition() + 1);
        }
    }

    private void signal() {
        woken = true;
        wake.signal();
    }

    /** Sends every buffered record now and waits until each is acknowledged or failed. */
    public void flush() {
        lock.lock();
        try {
            flushing = true;
            signal();
            while (unfinished > 0) {
                drained.awaitUninterruptibly();
            }
        } finally {
            lock.unlock();
        }
    }

    /** Flushes, then stops; records sent after close fail. */
    @Override
    public void close() {
        flush();
        lock.lock();
        try {
            closed = true;
            space.signalAll();
            signal();
        } finally {
            lock.unlock();
        }
        try {
            sender.join(5000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        senders.shutdown();
    }

    private void run() {
        long tickNanos = Math.max(TimeUnit.MILLISECONDS.toNanos(1), cfg.linger.toNanos() / 2);
        while (true) {
            List<Batch> send = new ArrayList<>();
            lock.lock();
            try {
                if (!woken) {
                    wake.awaitNanos(tickNanos);
                }
                woken = false;
                if (closed) {
                    return;
                }
                long now = System.nanoTime();
                for (PartitionState st : parts.values()) {
                    if (st.open != null && (flushing || now - st.open.created >= cfg.linger.toNanos())) {
                        closeBatch(st);
                    }
                    if (!st.inflight && !st.ready.isEmpty()) {
                        st.inflight = true;
                        send.add(st.ready.peek());
                    }
                }
            } catch (InterruptedException e) {
                return;
            } finally {
                lock.unlock();
            }
            for (Batch b : send) {
                senders.execute(() -> deliver(b));
            }
        }
    }

    private void deliver(Batch b) {
        long deadline = b.created + cfg.deliveryTimeout.toNanos();
        PartitionState st;
        lock.lock();
        try {
            st = parts.get(b.tp);
            if (b.encoded == null) {
                b.sequence = st.sequence;
                RecordBatch.Identity id = who.producerId() >= 0
                        ? new RecordBatch.Identity(who.producerId(), who.epoch(), b.sequence) : who;
                List<ProducerRecord> records = new ArrayList<>(b.records.size());
                long[] stamps = new long[b.records.size()];
                for (int i = 0; i < stamps.length; i++) {
                    records.add(b.records.get(i).record);
                    stamps[i] = b.records.get(i).timestamp;
                }
                try {
                    b.encoded = RecordBatch.encode(records, stamps, id, txn != null, cfg.compression);
                } catch (RuntimeException e) {
                    lock.unlock();
                    try {
                        settle(b, -1, e);
                    } finally {
                        lock.lock();
                    }
                    return;
                }
            }
        } finally {
            lock.unlock();
        }
        while (true) {
            try {
                long base = produceOnce(b, deadline);
                lock.lock();
                try {
                    st.sequence = b.sequence + b.records.size();
                } finally {
                    lock.unlock();
                }
                settle(b, base, null);
                return;
            } catch (AeroStreamException e) {
                b.attempts++;
                if (!e.retriable() || System.nanoTime() >= deadline) {
                    settle(b, -1, b.attempts > 1 ? new AeroStreamException("gave up after " + b.attempts
                            + " attempts: " + e.getMessage(), e) : e);
                    return;
                }
                client.forget(b.tp.topic());
                try {
                    Thread.sleep(AeroStreamClient.backoff(b.attempts).toMillis());
                } catch (InterruptedException ie) {
                    settle(b, -1, e);
                    return;
                }
            } catch (RuntimeException e) {
                settle(b, -1, e);
                return;
            }
        }
    }

    private long produceOnce(Batch b, long deadline) {
        if (txn != null) {
            txn.addPartition(who, b.tp);
        }
        String addr = client.leader(b.tp.topic(), b.tp.partition());
        Message req = txn != null ? Messages.TXN_PRODUCE.with("transactional_id", cfg.transactionalId)
                : Messages.PRODUCE.with();
        req.set("acks", cfg.acks);
        req.set("timeout_ms", 30000);
        req.set("topics", List.of(Struct.of("name", b.tp.topic(), "partitions",
                List.of(Struct.of("partition", b.tp.partition(), "batch", b.encoded)))));
        long left = Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
        Message r = client.callAt(addr, req, Duration.ofMillis(Math.min(left, 45000)));
        if (r.type() != Messages.PRODUCE_RESPONSE && r.type() != Messages.TXN_PRODUCE_RESPONSE) {
            throw AeroStreamClient.unexpected("Produce", r);
        }
        List<Struct> ts = r.getList("topics");
        if (ts.size() != 1 || ts.get(0).getList("partitions").size() != 1) {
            throw AeroStreamClient.unexpected("Produce", r);
        }
        Struct pp = ts.get(0).getList("partitions").get(0);
        int err = pp.error();
        if (err == ErrorCode.NONE || err == ErrorCode.DUPLICATE_SEQUENCE) {
            return pp.getLong("base_offset");
        }
        throw new AeroStreamException(err, "producing to " + b.tp, pp.getString("message"));
    }

    private void settle(Batch b, long base, RuntimeException err) {
        if (err != null && txn != null) {
            txn.fail(err);
        }
        for (int i = 0; i < b.records.size(); i++) {
            Pending p = b.records.get(i);
            if (err == null) {
                p.future.complete(new RecordMetadata(b.tp.topic(), b.tp.partition(), base + i, p.timestamp));
            } else {
                p.future.completeExceptionally(err);
            }
        }
        lock.lock();
        try {
            PartitionState st = parts.get(b.tp);
            st.ready.poll();
            st.inflight = false;
            buffered -= b.size;
            space.signalAll();
            unfinished -= b.records.size();
            if (unfinished == 0) {
                flushing = false;
                drained.signalAll();
            }
            signal();
        } finally {
            lock.unlock();
        }
    }

    private Transactions txn() {
        if (txn == null) {
            throw new IllegalStateException("not a transactional producer: set ProducerConfig.transactionalId");
        }
        return txn;
    }

    /** Opens a transaction: records sent from now on are part of it. */
    public void beginTransaction() {
        txn().begin();
    }

    /**
     * Flushes and commits the open transaction. When a record of it failed,
     * the transaction is aborted instead, the producer made usable again,
     * and the failure thrown.
     */
    public void commitTransaction() {
        endTransaction(true);
    }

    /** Flushes and aborts the open transaction: consumers reading committed records never see it. */
    public void abortTransaction() {
        endTransaction(false);
    }

    private void endTransaction(boolean commit) {
        Transactions t = txn();
        t.checkOpen();
        flush();
        RuntimeException failed;
        try {
            failed = t.end(who, commit);
        } catch (AeroStreamException e) {
            if (e.code() == 24) {
                t.fence();
            }
            throw e;
        }
        if (failed != null && fenced(failed)) {
            // a newer producer of the id exists: initializing again would fence it in turn
            t.fence();
            throw new AeroStreamException("the transaction was aborted and this producer is fenced: "
                    + failed.getMessage(), failed);
        }
        if (failed != null) {
            RecordBatch.Identity fresh = t.init();
            lock.lock();
            try {
                who = fresh;
                for (PartitionState st : parts.values()) {
                    st.sequence = 0;
                }
            } finally {
                lock.unlock();
            }
            throw new AeroStreamException("the transaction was aborted: " + failed.getMessage(), failed);
        }
    }

    /**
     * Commits a consumer group's offsets as part of the open transaction
     * (consume-transform-produce): they count only if it commits.
     */
    public void sendOffsetsToTransaction(Consumer.GroupMetadata member, Map<TopicPartition, Long> offsets) {
        Transactions t = txn();
        t.checkOpen();
        t.sendOffsets(who, member, offsets);
    }

    private static boolean fenced(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof AeroStreamException a && a.code() == 24) {
                return true;
            }
        }
        return false;
    }
}
