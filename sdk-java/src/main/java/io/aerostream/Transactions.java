package io.aerostream;

import io.aerostream.proto.Message;
import io.aerostream.proto.MessageType;
import io.aerostream.proto.Messages;
import io.aerostream.proto.Struct;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

/**
 * A transactional producer's state and its calls to the transaction
 * coordinator (docs/native-protocol.md section 7.23).
 */
final class Transactions {
    private final AeroStreamClient client;
    private final String id;
    private final Duration timeout;
    private String coordinator;
    private boolean open;
    private final Set<TopicPartition> added = new HashSet<>();
    private final Set<String> groups = new HashSet<>();
    private RuntimeException failed;
    private boolean fenced;

    Transactions(AeroStreamClient client, String id, Duration timeout) {
        this.client = client;
        this.id = id;
        this.timeout = timeout;
    }

    synchronized void checkOpen() {
        if (!open) {
            throw new IllegalStateException("a transactional producer sends between beginTransaction and "
                    + "commitTransaction or abortTransaction");
        }
    }

    synchronized void fence() {
        fenced = true;
        open = false;
    }

    synchronized void begin() {
        if (fenced) {
            throw new AeroStreamException(24, "transactional id " + id,
                    "a newer producer of this transactional id exists: this one can do nothing more");
        }
        if (open) {
            throw new IllegalStateException("a transaction is open already");
        }
        open = true;
        failed = null;
        added.clear();
        groups.clear();
    }

    synchronized void fail(RuntimeException e) {
        if (failed == null) {
            failed = e;
        }
    }

    private synchronized String coordinator() {
        return coordinator;
    }

    private synchronized void coordinator(String addr) {
        coordinator = addr;
    }

    /** Sends a request to the coordinator, finding it first, retrying retriable errors. */
    private Message call(Supplier<Message> req, MessageType answer, String what) {
        long deadline = System.nanoTime() + timeout.plusSeconds(30).toNanos();
        for (int attempt = 0; ; attempt++) {
            try {
                String addr = coordinator();
                if (addr == null) {
                    Message r = AeroStreamClient.expect(client.call(Messages.FIND_TXN_COORDINATOR.with(
                            "transactional_id", id)), Messages.FIND_TXN_COORDINATOR_RESPONSE, "FindTxnCoordinator");
                    AeroStreamException.check(r.error(), "", "finding the coordinator of " + id);
                    addr = AeroStreamClient.hostPort(r.getString("host"), r.getLong("port"));
                    coordinator(addr);
                }
                Message r = AeroStreamClient.expect(client.callAt(addr, req.get(), client.cfg.requestTimeout),
                        answer, answer.name);
                AeroStreamException.check(r.error(), r.getString("message"), what);
                return r;
            } catch (AeroStreamException e) {
                if (!e.retriable() || System.nanoTime() > deadline) {
                    throw e;
                }
                if (e.code() < 0 || e.code() == ErrorCode.NOT_COORDINATOR || e.code() == ErrorCode.NOT_AVAILABLE) {
                    coordinator(null);
                }
                AeroStreamClient.sleep(AeroStreamClient.backoff(attempt));
            }
        }
    }

    /** InitTxn: this id's producer id and a new epoch, fencing earlier producers of the id. */
    RecordBatch.Identity init() {
        Message r = call(() -> Messages.INIT_TXN.with("transactional_id", id, "timeout_ms", timeout.toMillis()),
                Messages.INIT_TXN_RESPONSE, "initializing transactional id " + id);
        return new RecordBatch.Identity(r.getLong("producer_id"), (short) r.getLong("producer_epoch"), 0);
    }

    private Struct producer(RecordBatch.Identity who) {
        return Struct.of("transactional_id", id, "producer_id", who.producerId(), "producer_epoch", who.epoch());
    }

    void addPartition(RecordBatch.Identity who, TopicPartition tp) {
        synchronized (this) {
            if (added.contains(tp)) {
                return;
            }
        }
        call(() -> Messages.ADD_TXN_PARTITIONS.with("producer", producer(who), "topics",
                List.of(Struct.of("topic", tp.topic(), "partitions", List.of((long) tp.partition())))),
                Messages.ADD_TXN_PARTITIONS_RESPONSE, "adding " + tp + " to the transaction");
        synchronized (this) {
            added.add(tp);
        }
    }

    /** EndTxn (abort when a record failed); gives the failure that turned a commit into an abort. */
    RuntimeException end(RecordBatch.Identity who, boolean commit) {
        RuntimeException why;
        boolean anything;
        synchronized (this) {
            why = failed;
            anything = !added.isEmpty() || !groups.isEmpty();
        }
        boolean really = commit && why == null;
        try {
            if (anything) {
                call(() -> Messages.END_TXN.with("producer", producer(who), "commit", really),
                        Messages.END_TXN_RESPONSE, really ? "committing the transaction" : "aborting the transaction");
            }
        } finally {
            synchronized (this) {
                open = false;
                added.clear();
                groups.clear();
            }
        }
        return why;
    }

    void sendOffsets(RecordBatch.Identity who, Consumer.GroupMetadata member, Map<TopicPartition, Long> offsets) {
        boolean known;
        synchronized (this) {
            known = groups.contains(member.group());
        }
        if (!known) {
            call(() -> Messages.ADD_TXN_OFFSETS.with("producer", producer(who), "group", member.group()),
                    Messages.ADD_TXN_OFFSETS_RESPONSE, "adding group " + member.group() + " to the transaction");
            synchronized (this) {
                groups.add(member.group());
            }
        }
        List<Struct> os = new ArrayList<>();
        offsets.forEach((tp, off) -> os.add(Struct.of("topic", tp.topic(), "partition", tp.partition(), "offset", off)));
        for (int attempt = 0; ; attempt++) {
            try {
                String addr = client.groupCoordinator(member.group());
                Message r = AeroStreamClient.expect(client.callAt(addr, Messages.TXN_OFFSET_COMMIT.with(
                        "producer", producer(who), "group", member.group(), "generation", member.generation(),
                        "member_id", member.memberId(), "offsets", os), client.cfg.requestTimeout),
                        Messages.TXN_OFFSET_COMMIT_RESPONSE, "TxnOffsetCommit");
                AeroStreamException.check(r.error(), r.getString("message"), "committing offsets of group "
                        + member.group() + " in the transaction");
                return;
            } catch (AeroStreamException e) {
                if (!e.retriable() || attempt >= 10) {
                    throw e;
                }
                AeroStreamClient.sleep(AeroStreamClient.backoff(attempt));
            }
        }
    }
}
