package io.aerostream;

import io.aerostream.proto.Message;
import io.aerostream.proto.Messages;
import io.aerostream.proto.Struct;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A consumer's membership of its group (docs/native-protocol.md sections
 * 7.12 to 7.16): JoinGroup answers with this member's partitions, then
 * heartbeats until the group rebalances; the member commits, gives its
 * partitions up and joins again.
 */
final class GroupMember {
    private final Consumer cs;
    private final List<String> topics;
    private final String group;
    private final Object mu = new Object();
    private String coordinator;
    private String memberId = "";
    private long generation = -1;
    private boolean assigned;
    private volatile boolean stopped;
    private final Thread thread;

    GroupMember(Consumer cs, List<String> topics) {
        this.cs = cs;
        this.topics = topics;
        this.group = cs.cfg.group;
        this.thread = new Thread(this::run, "aerostream-group-" + group);
        thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    private void run() {
        int failures = 0;
        while (!stopped) {
            try {
                joinAndServe();
                failures = 0;
            } catch (AeroStreamException e) {
                if (stopped) {
                    return;
                }
                failures++;
                int code = e.code();
                synchronized (mu) {
                    if (code < 0 || code == ErrorCode.NOT_COORDINATOR || code == ErrorCode.NOT_AVAILABLE) {
                        coordinator = null;
                    } else if (code == ErrorCode.UNKNOWN_MEMBER) {
                        memberId = "";
                    }
                }
                boolean rejoin = code < 0 || code == ErrorCode.NOT_COORDINATOR || code == ErrorCode.NOT_AVAILABLE
                        || code == ErrorCode.UNKNOWN_MEMBER || code == ErrorCode.REBALANCE_IN_PROGRESS
                        || code == ErrorCode.ILLEGAL_GENERATION || ErrorCode.isRetriable(code);
                if (!rejoin) {
                    cs.deliverError(e);
                    return;
                }
                if (!pause(AeroStreamClient.backoff(failures).toMillis())) {
                    return;
                }
            }
        }
    }

    private boolean pause(long ms) {
        try {
            Thread.sleep(ms);
            return !stopped;
        } catch (InterruptedException e) {
            return false;
        }
    }

    private String findCoordinator() {
        synchronized (mu) {
            if (coordinator != null) {
                return coordinator;
            }
        }
        String addr = cs.client.groupCoordinator(group);
        synchronized (mu) {
            coordinator = addr;
        }
        return addr;
    }

    private void joinAndServe() {
        String addr = findCoordinator();
        String member;
        synchronized (mu) {
            member = memberId;
        }
        ConsumerConfig cfg = cs.cfg;
        Message join = Messages.JOIN_GROUP.with("group", group, "member_id", member, "topics", topics,
                "session_timeout_ms", cfg.sessionTimeout.toMillis(), "rebalance_timeout_ms",
                cfg.rebalanceTimeout.toMillis());
        Message jr = AeroStreamClient.expect(cs.client.callAt(addr, join,
                cfg.rebalanceTimeout.multipliedBy(2).plusMinutes(1)), Messages.JOIN_GROUP_RESPONSE, "JoinGroup");
        if (!jr.getString("member_id").isEmpty()) {
            synchronized (mu) {
                memberId = jr.getString("member_id");
            }
        }
        AeroStreamException.check(jr.error(), "", "joining group " + group);
        long gen = jr.getLong("generation");
        String me = jr.getString("member_id");
        synchronized (mu) {
            generation = gen;
            memberId = me;
        }
        List<TopicPartition> mine = new ArrayList<>();
        for (Struct a : jr.getList("assignment")) {
            for (long p : a.getIds("partitions")) {
                mine.add(new TopicPartition(a.getString("topic"), (int) p));
            }
        }
        Map<TopicPartition, Long> positions = new HashMap<>();
        if (!mine.isEmpty()) {
            List<Struct> ps = new ArrayList<>();
            for (TopicPartition tp : mine) {
                ps.add(Struct.of("topic", tp.topic(), "partition", tp.partition()));
            }
            Message fr = AeroStreamClient.expect(cs.client.callAt(addr, Messages.FETCH_OFFSETS.with("group", group,
                    "partitions", ps), cs.client.cfg.requestTimeout), Messages.FETCH_OFFSETS_RESPONSE, "FetchOffsets");
            for (Struct o : fr.getList("offsets")) {
                TopicPartition tp = new TopicPartition(o.getString("topic"), o.getInt("partition"));
                AeroStreamException.check(o.error(), "", "committed offset of " + tp);
                long off = o.getLong("offset");
                if (off < 0) {
                    off = cs.resolve(tp.topic(), tp.partition(), cfg.reset);
                }
                positions.put(tp, off);
            }
        }
        cs.startFetchers(positions);
        synchronized (mu) {
            assigned = true;
        }
        long nextBeat = System.nanoTime() + cfg.heartbeatInterval.toNanos();
        long nextCommit = System.nanoTime() + cfg.autoCommitInterval.toNanos();
        while (!stopped) {
            long now = System.nanoTime();
            long wait = Math.min(nextBeat, nextCommit) - now;
            if (wait > 0) {
                if (!pause(Math.max(1, wait / 1_000_000))) {
                    return;
                }
                continue;
            }
            if (now >= nextCommit) {
                nextCommit = now + cfg.autoCommitInterval.toNanos();
                if (cfg.autoCommit) {
                    try {
                        commit();
                    } catch (AeroStreamException e) {
                        // retried at the next tick
                    }
                }
            }
            if (now >= nextBeat) {
                nextBeat = now + cfg.heartbeatInterval.toNanos();
                Message hr;
                try {
                    hr = AeroStreamClient.expect(cs.client.callAt(addr, Messages.HEARTBEAT.with("group", group,
                            "member_id", me, "generation", gen), cfg.sessionTimeout), Messages.HEARTBEAT_RESPONSE,
                            "Heartbeat");
                } catch (AeroStreamException e) {
                    if (stopped) {
                        return;
                    }
                    revoke(false);
                    throw e;
                }
                if (hr.error() != ErrorCode.NONE) {
                    revoke(hr.error() == ErrorCode.REBALANCE_IN_PROGRESS);
                    throw new AeroStreamException(hr.error(), "heartbeat of group " + group, "");
                }
            }
        }
    }

    private void revoke(boolean commitFirst) {
        if (commitFirst && cs.cfg.autoCommit) {
            try {
                commit();
            } catch (AeroStreamException e) {
                // the next member starts from the last commit
            }
        }
        cs.stopFetchers();
        synchronized (mu) {
            assigned = false;
        }
    }

    void commit() {
        String addr;
        String member;
        long gen;
        synchronized (mu) {
            if (!assigned || coordinator == null) {
                return;
            }
            addr = coordinator;
            member = memberId;
            gen = generation;
        }
        cs.client.commitOffsets(group, cs.positions(), gen, member, addr);
    }

    void close() {
        AeroStreamException err = null;
        if (cs.cfg.autoCommit) {
            try {
                commit();
            } catch (AeroStreamException e) {
                err = e;
            }
        }
        String addr;
        String member;
        synchronized (mu) {
            addr = coordinator;
            member = memberId;
        }
        stopped = true;
        thread.interrupt();
        try {
            thread.join(10000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (addr != null && !member.isEmpty()) {
            try {
                cs.client.callAt(addr, Messages.LEAVE_GROUP.with("group", group, "member_id", member),
                        Duration.ofSeconds(5));
            } catch (AeroStreamException e) {
                if (err == null) {
                    err = e;
                }
            }
        }
        if (err != null) {
            throw err;
        }
    }

    Consumer.GroupMetadata metadata() {
        synchronized (mu) {
            return assigned ? new Consumer.GroupMetadata(group, generation, memberId) : null;
        }
    }
}
