package io.aerostream;

import java.time.Duration;

/**
 * Settings of a {@link Consumer}. Defaults: no group, partitions without a
 * committed offset start at the earliest, fetches wait up to 500 ms and read
 * up to 1 MiB per partition, group sessions of 10 s with a heartbeat every
 * 3 s, positions committed every 5 s and at close, read_uncommitted.
 */
public final class ConsumerConfig {
    String group = "";
    StartAt reset = StartAt.EARLIEST;
    Duration maxWait = Duration.ofMillis(500);
    int partitionMaxBytes = 1 << 20;
    Duration sessionTimeout = Duration.ofSeconds(10);
    Duration rebalanceTimeout = Duration.ofSeconds(30);
    Duration heartbeatInterval = Duration.ofSeconds(3);
    Duration autoCommitInterval = Duration.ofSeconds(5);
    boolean autoCommit = true;
    boolean readCommitted;
    boolean push;

    /** Read as a member of this consumer group (then {@link Consumer#subscribe}). */
    public ConsumerConfig group(String g) {
        this.group = g == null ? "" : g;
        return this;
    }

    /** Where a partition without a committed offset (or out of range) starts. */
    public ConsumerConfig reset(StartAt s) {
        this.reset = s;
        return this;
    }

    public ConsumerConfig maxWait(Duration d) {
        this.maxWait = d;
        return this;
    }

    public ConsumerConfig partitionMaxBytes(int n) {
        this.partitionMaxBytes = n;
        return this;
    }

    public ConsumerConfig sessionTimeout(Duration d) {
        this.sessionTimeout = d;
        return this;
    }

    public ConsumerConfig rebalanceTimeout(Duration d) {
        this.rebalanceTimeout = d;
        return this;
    }

    public ConsumerConfig heartbeatInterval(Duration d) {
        this.heartbeatInterval = d;
        return this;
    }

    public ConsumerConfig autoCommitInterval(Duration d) {
        this.autoCommitInterval = d;
        return this;
    }

    /** Commit positions every autoCommitInterval, before a rebalance and at close (default on). */
    public ConsumerConfig autoCommit(boolean on) {
        this.autoCommit = on;
        return this;
    }

    /** Read transactional records once committed, never aborted ones. */
    public ConsumerConfig readCommitted(boolean on) {
        this.readCommitted = on;
        return this;
    }

    /**
     * Read by subscription (Subscribe, then the server pushes batches as
     * they are committed, within a credit of record bytes granted again as
     * records are handed over) rather than by Fetch long-polls.
     * read_committed always fetches.
     */
    public ConsumerConfig push(boolean on) {
        this.push = on;
        return this;
    }
}
