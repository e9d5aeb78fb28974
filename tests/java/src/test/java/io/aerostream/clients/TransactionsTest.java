package io.aerostream.clients;

import static io.aerostream.clients.Kit.failure;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TransactionalIdNotFoundException;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class TransactionsTest {

    private static Map<String, Object> transactional(String id) {
        Map<String, Object> c = new HashMap<>();
        c.put("transactional.id", id);
        c.put("transaction.timeout.ms", 45_000);
        c.put("acks", "all");
        return c;
    }

    private static List<String> values(List<ConsumerRecord<String, String>> records) {
        return records.stream().map(ConsumerRecord::value).toList();
    }

    /**
     * A transactional producer commits, aborts and commits again over two partitions: a
     * read_committed consumer reads only the committed records, a read_uncommitted one all of
     * them, each in order; while a transaction is open, read_committed's end offset stays at
     * the open transaction's first offset.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void commitAbortAndReadCommitted(Target t) throws Exception {
        String topic;
        try (Admin admin = Kit.admin(t)) {
            topic = Kit.createTopic(admin, t, "txn", 2, Map.of());
        }
        List<TopicPartition> tps = Kit.partitions(topic, 2);
        Map<String, Object> committed = Map.of("isolation.level", "read_committed");
        Map<String, Object> uncommitted = Map.of("isolation.level", "read_uncommitted");
        try (KafkaProducer<String, String> p = Kit.producer(t, transactional(Kit.unique("txn")))) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < 5; i++) {
                p.send(new ProducerRecord<>(topic, i % 2, "k", "committed-" + i));
            }
            p.commitTransaction();

            p.beginTransaction();
            RecordMetadata firstAborted = null;
            for (int i = 0; i < 5; i++) {
                RecordMetadata m = p.send(new ProducerRecord<>(topic, 0, "k", "aborted-" + i)).get();
                if (firstAborted == null) {
                    firstAborted = m;
                }
            }
            // open: read_committed ends where the open transaction starts on partition 0
            try (KafkaConsumer<String, String> c = Kit.consumer(t, committed)) {
                Map<TopicPartition, Long> lso = c.endOffsets(List.of(tps.get(0)));
                assertEquals(firstAborted.offset(), lso.get(tps.get(0)),
                        "read_committed end offset while a transaction is open");
            }
            try (KafkaConsumer<String, String> c = Kit.consumer(t, uncommitted)) {
                Map<TopicPartition, Long> hw = c.endOffsets(List.of(tps.get(0)));
                assertEquals(firstAborted.offset() + 5, hw.get(tps.get(0)),
                        "read_uncommitted end offset while a transaction is open");
            }
            p.abortTransaction();

            p.beginTransaction();
            for (int i = 5; i < 8; i++) {
                p.send(new ProducerRecord<>(topic, 0, "k", "committed-" + i));
            }
            p.commitTransaction();
        }

        List<ConsumerRecord<String, String>> readCommitted = Kit.readAll(t, tps, committed);
        Map<Integer, List<String>> byPartition = readCommitted.stream().collect(
                Collectors.groupingBy(ConsumerRecord::partition, Collectors.mapping(ConsumerRecord::value,
                        Collectors.toList())));
        assertEquals(List.of("committed-0", "committed-2", "committed-4", "committed-5", "committed-6",
                "committed-7"), byPartition.get(0), "read_committed, partition 0");
        assertEquals(List.of("committed-1", "committed-3"), byPartition.get(1), "read_committed, partition 1");

        List<ConsumerRecord<String, String>> readAll = Kit.readAll(t, List.of(tps.get(0)), uncommitted);
        assertEquals(List.of("committed-0", "committed-2", "committed-4", "aborted-0", "aborted-1", "aborted-2",
                "aborted-3", "aborted-4", "committed-5", "committed-6", "committed-7"), values(readAll),
                "read_uncommitted, partition 0");
        // offsets increase, with gaps where the commit and abort markers are
        for (int i = 1; i < readAll.size(); i++) {
            assertTrue(readAll.get(i).offset() > readAll.get(i - 1).offset(), "offsets increase");
        }
    }

    /**
     * Consume-transform-produce: offsets sent to an aborted transaction are not the group's,
     * those sent to a committed one are; a second producer with the same transactional id
     * fences the first.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void offsetsInTransactionsAndFencing(Target t) throws Exception {
        String group = Kit.unique("txn-group");
        String id = Kit.unique("txn-offsets");
        try (Admin admin = Kit.admin(t)) {
            String in = Kit.createTopic(admin, t, "txn-in", 1, Map.of());
            String out = Kit.createTopic(admin, t, "txn-out", 1, Map.of());
            TopicPartition inTp = new TopicPartition(in, 0);
            try (KafkaProducer<String, String> p = Kit.producer(t, Map.of("acks", "all"))) {
                for (int i = 0; i < 4; i++) {
                    p.send(new ProducerRecord<>(in, 0, "k", "in-" + i));
                }
                p.flush();
            }
            try (KafkaConsumer<String, String> c = Kit.consumer(t, Map.of("group.id", group,
                    "group.protocol", "classic", "isolation.level", "read_committed"));
                    KafkaProducer<String, String> p = Kit.producer(t, transactional(id))) {
                p.initTransactions();
                c.subscribe(List.of(in));
                List<ConsumerRecord<String, String>> got = new ArrayList<>();
                Kit.eventually("the consumer reads the 4 input records", () -> {
                    c.poll(java.time.Duration.ofMillis(200)).forEach(got::add);
                    return got.size() >= 4;
                });
                assertEquals(List.of("in-0", "in-1", "in-2", "in-3"), values(got));
                ConsumerGroupMetadata meta = c.groupMetadata();

                p.beginTransaction();
                p.send(new ProducerRecord<>(out, 0, "k", "out-aborted"));
                p.sendOffsetsToTransaction(Map.of(inTp, new OffsetAndMetadata(2)), meta);
                p.abortTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group)
                        .partitionsToOffsetAndMetadata().get();
                assertEquals(null, offsets.get(inTp), "offsets of an aborted transaction: " + offsets);

                p.beginTransaction();
                p.send(new ProducerRecord<>(out, 0, "k", "out-committed"));
                p.sendOffsetsToTransaction(Map.of(inTp, new OffsetAndMetadata(4)), meta);
                p.commitTransaction();
                Kit.eventually("the group's offset is the committed transaction's", () -> {
                    try {
                        OffsetAndMetadata o = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                                .get().get(inTp);
                        return o != null && o.offset() == 4;
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                });
                assertEquals(List.of("out-committed"),
                        values(Kit.readAll(t, List.of(new TopicPartition(out, 0)),
                                Map.of("isolation.level", "read_committed"))),
                        "the output a read_committed consumer sees");

                // a new incarnation with the same id fences the old one
                try (KafkaProducer<String, String> next = Kit.producer(t, transactional(id))) {
                    next.initTransactions();
                    Exception e = assertThrows(Exception.class, () -> {
                        p.beginTransaction();
                        p.send(new ProducerRecord<>(out, 0, "k", "from-the-fenced")).get();
                        p.commitTransaction();
                    });
                    // Kafka's client reports the fencing as either, depending on the request that met it
                    Throwable cause = e;
                    while (!(cause instanceof ProducerFencedException || cause instanceof InvalidProducerEpochException)
                            && cause.getCause() != null) {
                        cause = cause.getCause();
                    }
                    assertTrue(cause instanceof ProducerFencedException || cause instanceof InvalidProducerEpochException,
                            "the old producer is fenced: " + e);
                    next.beginTransaction();
                    next.send(new ProducerRecord<>(out, 0, "k", "from-the-new"));
                    next.commitTransaction();
                }
                assertEquals(List.of("out-committed", "from-the-new"),
                        values(Kit.readAll(t, List.of(new TopicPartition(out, 0)),
                                Map.of("isolation.level", "read_committed"))),
                        "the output after fencing");
            }
        }
    }

    /**
     * The admin's view of a transaction: ListTransactions and DescribeTransactions show it
     * ongoing with its partition and timeout, and after the commit it is complete with no partitions; an unknown id is not found.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void describeAndListTransactions(Target t) throws Exception {
        String id = Kit.unique("txn-describe");
        try (Admin admin = Kit.admin(t)) {
            String topic = Kit.createTopic(admin, t, "txn-describe", 1, Map.of());
            TopicPartition tp = new TopicPartition(topic, 0);
            try (KafkaProducer<String, String> p = Kit.producer(t, transactional(id))) {
                p.initTransactions();
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, 0, "k", "v0")).get();
                p.send(new ProducerRecord<>(topic, 0, "k", "v1")).get();

                TransactionDescription d = admin.describeTransactions(List.of(id)).description(id).get();
                assertEquals(TransactionState.ONGOING, d.state(), "state of the open transaction");
                assertEquals(45_000, d.transactionTimeoutMs(), "transaction timeout");
                assertEquals(Set.of(tp), d.topicPartitions(), "partitions in the transaction");
                assertTrue(d.transactionStartTimeMs().isPresent(), "start time of the open transaction");

                // the admin asks every broker and merges: each lists what it coordinates
                List<TransactionListing> all = admin.listTransactions().all().get().stream()
                        .filter(l -> l.transactionalId().equals(id)).toList();
                assertEquals(1, all.size(), "ListTransactions lists " + id + " once: " + all);
                Optional<TransactionListing> listed = all.stream().findFirst();
                assertEquals(TransactionState.ONGOING, listed.get().state());
                assertEquals(d.producerId(), listed.get().producerId(), "the listed producer id");
                assertTrue(admin.listTransactions(new ListTransactionsOptions()
                        .filterStates(List.of(TransactionState.ONGOING))).all().get().stream()
                        .anyMatch(l -> l.transactionalId().equals(id)), "listed among the ongoing");
                assertTrue(admin.listTransactions(new ListTransactionsOptions()
                        .filterStates(List.of(TransactionState.COMPLETE_ABORT))).all().get().stream()
                        .noneMatch(l -> l.transactionalId().equals(id)), "not listed among the aborted");

                p.commitTransaction();
                Kit.eventually("the transaction is complete", () -> {
                    try {
                        TransactionDescription after = admin.describeTransactions(List.of(id)).description(id).get();
                        return after.state() == TransactionState.COMPLETE_COMMIT && after.topicPartitions().isEmpty();
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                });
            }
            String unknown = Kit.unique("no-such-txn");
            assertInstanceOf(TransactionalIdNotFoundException.class,
                    failure(admin.describeTransactions(List.of(unknown)).description(unknown)),
                    "describing an unknown transactional id");
        }
    }

    /**
     * DescribeProducers on a partition with an open transaction names its producer, epoch and
     * the offset the transaction starts at; after the commit, no transaction is open.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void describeProducersOfOpenTransaction(Target t) throws Exception {
        String id = Kit.unique("txn-producers");
        try (Admin admin = Kit.admin(t)) {
            String topic = Kit.createTopic(admin, t, "txn-producers", 1, Map.of());
            TopicPartition tp = new TopicPartition(topic, 0);
            try (KafkaProducer<String, String> plain = Kit.producer(t, Map.of("acks", "all"))) {
                plain.send(new ProducerRecord<>(topic, 0, "k", "before")).get();
            }
            try (KafkaProducer<String, String> p = Kit.producer(t, transactional(id))) {
                p.initTransactions();
                p.beginTransaction();
                RecordMetadata first = p.send(new ProducerRecord<>(topic, 0, "k", "v0")).get();
                p.send(new ProducerRecord<>(topic, 0, "k", "v1")).get();
                TransactionDescription d = admin.describeTransactions(List.of(id)).description(id).get();

                List<ProducerState> states = admin.describeProducers(List.of(tp)).partitionResult(tp).get()
                        .activeProducers().stream().filter(s -> s.producerId() == d.producerId()).toList();
                assertEquals(1, states.size(), "the transactional producer among " + tp + "'s producers");
                ProducerState s = states.get(0);
                assertEquals(d.producerEpoch(), s.producerEpoch(), "DescribeProducers' epoch");
                assertEquals(1, s.lastSequence(), "the second record's sequence");
                assertEquals(Optional.of(first.offset()), s.currentTransactionStartOffset().stream().boxed()
                        .findFirst(), "where the open transaction starts");

                p.commitTransaction();
                Kit.eventually("no transaction is open on " + tp, () -> {
                    try {
                        return admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()
                                .stream().filter(x -> x.producerId() == d.producerId())
                                .allMatch(x -> x.currentTransactionStartOffset().isEmpty());
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                });
            }
        }
    }

    /**
     * Transactions version 2 (KIP-890 part 2), which the broker turns on by finalizing the
     * {@code transaction.version} feature at level 2: the producer adds no partitions itself
     * (its writes do), and every commit or abort bumps its epoch, as DescribeTransactions shows
     * and the partition's markers carry (DescribeProducers).
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void everyTransactionEndBumpsTheProducerEpoch(Target t) throws Exception {
        String id = Kit.unique("txn-v2");
        try (Admin admin = Kit.admin(t)) {
            FeatureMetadata features = admin.describeFeatures().featureMetadata().get();
            FinalizedVersionRange tv = features.finalizedFeatures().get("transaction.version");
            assertTrue(tv != null && tv.maxVersionLevel() >= 2, "transaction.version finalized at 2: " + features);
            String topic = Kit.createTopic(admin, t, "txn-v2", 1, Map.of());
            TopicPartition tp = new TopicPartition(topic, 0);
            try (KafkaProducer<String, String> p = Kit.producer(t, transactional(id))) {
                p.initTransactions();
                TransactionDescription initial = admin.describeTransactions(List.of(id)).description(id).get();
                for (int i = 0; i < 3; i++) {
                    p.beginTransaction();
                    p.send(new ProducerRecord<>(topic, 0, "k", "v" + i)).get();
                    TransactionDescription open = admin.describeTransactions(List.of(id)).description(id).get();
                    assertEquals(initial.producerEpoch() + i, open.producerEpoch(), "epoch of transaction " + i);
                    assertEquals(Set.of(tp), open.topicPartitions(), "the partition its write added");
                    if (i == 1) {
                        p.abortTransaction();
                    } else {
                        p.commitTransaction();
                    }
                    int bumped = initial.producerEpoch() + i + 1;
                    TransactionDescription ended = admin.describeTransactions(List.of(id)).description(id).get();
                    assertEquals(bumped, ended.producerEpoch(), "epoch after ending transaction " + i);
                    assertEquals(initial.producerId(), ended.producerId(), "the same producer id");
                    Kit.eventually("the marker of transaction " + i + " carries epoch " + bumped, () -> {
                        try {
                            return admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()
                                    .stream().anyMatch(s -> s.producerId() == initial.producerId()
                                            && s.producerEpoch() == bumped
                                            && s.currentTransactionStartOffset().isEmpty());
                        } catch (Exception e) {
                            throw new AssertionError(e);
                        }
                    });
                }
            }
            assertEquals(List.of("v0", "v2"),
                    values(Kit.readAll(t, List.of(tp), Map.of("isolation.level", "read_committed"))),
                    "what a read_committed consumer reads");
        }
    }
}
