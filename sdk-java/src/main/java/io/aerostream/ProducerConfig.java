package io.aerostream;

import java.time.Duration;

/**
 * Settings of a {@link Producer}. Defaults: acks -1 (every in-sync
 * replica), linger 5 ms, batches up to 512 KiB, a 32 MiB buffer (send
 * blocks while it is full), 2 minutes to deliver a record, idempotent, no
 * compression.
 */
public final class ProducerConfig {
    int acks = -1;
    Duration linger = Duration.ofMillis(5);
    int batchBytes = 512 << 10;
    long bufferBytes = 32L << 20;
    Duration deliveryTimeout = Duration.ofMinutes(2);
    boolean idempotent = true;
    Compression compression = Compression.NONE;
    String transactionalId = "";
    Duration transactionTimeout = Duration.ofMinutes(1);

    /** -1 (all in-sync replicas) or 1 (the leader). */
    public ProducerConfig acks(int acks) {
        if (acks != -1 && acks != 1) {
            throw new IllegalArgumentException("acks " + acks + ": use -1 (all) or 1 (leader)");
        }
        this.acks = acks;
        return this;
    }

    /** How long a batch waits for more records before it is sent. */
    public ProducerConfig linger(Duration d) {
        this.linger = d;
        return this;
    }

    /** A batch is sent once its records reach this size. */
    public ProducerConfig batchBytes(int n) {
        this.batchBytes = n;
        return this;
    }

    /** Records buffered and in flight at most; {@code send} blocks beyond it. */
    public ProducerConfig bufferBytes(long n) {
        this.bufferBytes = n;
        return this;
    }

    /** How long a record may take from send to acknowledgement, retries included. */
    public ProducerConfig deliveryTimeout(Duration d) {
        this.deliveryTimeout = d;
        return this;
    }

    /**
     * Idempotent (the default): batches carry a producer id and sequence
     * numbers, so a retried batch is written once.
     */
    public ProducerConfig idempotent(boolean on) {
        this.idempotent = on;
        return this;
    }

    public ProducerConfig compression(Compression c) {
        this.compression = c;
        return this;
    }

    /**
     * Makes the producer transactional: records are sent between
     * {@link Producer#beginTransaction} and {@link Producer#commitTransaction}
     * or {@link Producer#abortTransaction}; creating the producer fences
     * earlier producers of the same id. A transactional producer is
     * idempotent and uses acks -1.
     */
    public ProducerConfig transactionalId(String id) {
        this.transactionalId = id == null ? "" : id;
        return this;
    }

    /** How long a transaction may stay open before the coordinator aborts it (default 1 minute). */
    public ProducerConfig transactionTimeout(Duration d) {
        this.transactionTimeout = d;
        return this;
    }
}
