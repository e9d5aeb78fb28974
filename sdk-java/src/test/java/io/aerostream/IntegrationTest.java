package io.aerostream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.aerostream.proto.Messages;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The client, producer and consumers against a real agent (AEROSTREAM_BIN). */
@Timeout(120)
class IntegrationTest {
    static TestAgent agent;
    static AeroStreamClient client;

    @BeforeAll
    static void start() throws Exception {
        agent = TestAgent.start();
        client = AeroStreamClient.connect(agent.bootstrap);
    }

    @AfterAll
    static void stop() throws Exception {
        if (client != null) {
            client.close();
        }
        if (agent != null) {
            agent.close();
        }
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static void eventually(String what, Duration within, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + within.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail(what + " did not happen within " + within.toSeconds() + " s");
            }
            Thread.sleep(50);
        }
    }

    @Test
    void topicAdmin() {
        client.createTopic("admin-t", 2, (short) -1, Map.of("retention.ms", "3600000"));
        assertEquals(2, client.listTopics().get("admin-t"));
        AeroStreamException dup = assertThrows(AeroStreamException.class,
                () -> client.createTopic("admin-t", 2, (short) -1, Map.of()));
        assertEquals(ErrorCode.TOPIC_ALREADY_EXISTS, dup.code(), dup.getMessage());
        AeroStreamException bad = assertThrows(AeroStreamException.class,
                () -> client.createTopic("no/slash", 1, (short) -1, Map.of()));
        assertEquals("INVALID_TOPIC", ErrorCode.of(bad.code()).name(), bad.getMessage());
        client.deleteTopic("admin-t");
        assertFalse(client.listTopics().containsKey("admin-t"));
        assertTrue(client.ping().toMillis() < 5000);
    }

    @Test
    void produceThenConsumeInOrderPerPartitionWithKeysOnTheirMurmur2Partition() throws Exception {
        String topic = "ordered";
        client.createTopic(topic, 3, (short) -1, Map.of());
        List<CompletableFuture<RecordMetadata>> acks = new ArrayList<>();
        int n = 3000;
        try (Producer p = client.producer(new ProducerConfig().linger(Duration.ofMillis(2)))) {
            for (int i = 0; i < n; i++) {
                String key = "key-" + (i % 17);
                acks.add(p.send(new ProducerRecord(topic, utf8(key), utf8(Integer.toString(i)))));
            }
            p.flush();
        }
        Map<Integer, Long> lastOffset = new HashMap<>();
        for (int i = 0; i < n; i++) {
            RecordMetadata md = acks.get(i).get();
            int want = Partitioner.partitionForKey(utf8("key-" + (i % 17)), 3);
            assertEquals(want, md.partition(), "record " + i + " is not on the murmur2 partition of its key");
            Long before = lastOffset.put(md.partition(), md.offset());
            assertTrue(before == null || md.offset() == before + 1, "offsets of partition " + md.partition()
                    + " go " + before + " then " + md.offset());
        }
        try (Consumer c = client.consumer(new ConsumerConfig())) {
            c.assign(topic, null, StartAt.EARLIEST);
            Map<String, Integer> lastOfKey = new HashMap<>();
            Map<Integer, Long> lastRead = new HashMap<>();
            Set<String> seen = new HashSet<>();
            while (seen.size() < n) {
                ConsumerRecord r = c.poll(Duration.ofSeconds(20));
                assertNotNull(r, "no record after " + seen.size());
                assertEquals(Partitioner.partitionForKey(r.key(), 3), r.partition(), "partition of " + r.keyString());
                int v = Integer.parseInt(r.valueString());
                Integer prev = lastOfKey.put(r.keyString(), v);
                assertTrue(prev == null || prev < v, "key " + r.keyString() + ": " + v + " read after " + prev);
                Long prevOff = lastRead.put(r.partition(), r.offset());
                assertTrue(prevOff == null || r.offset() == prevOff + 1, "partition " + r.partition() + " read "
                        + r.offset() + " after " + prevOff);
                assertTrue(seen.add(r.valueString()), "record " + v + " read twice");
            }
            assertEquals(lastOffset.size(), lastRead.size());
            lastOffset.forEach((p, off) -> assertEquals(off, lastRead.get(p), "last offset of partition " + p));
        }
    }

    @Test
    void offsetsFromEarliestAndLatest() throws Exception {
        String topic = "offsets";
        client.createTopic(topic, 1, (short) -1, Map.of());
        try (Producer p = client.producer(new ProducerConfig())) {
            for (int i = 0; i < 5; i++) {
                p.send(new ProducerRecord(topic, utf8("old-" + i)));
            }
            p.flush();
            assertEquals(0, client.listOffset(topic, 0, Messages.SPEC_EARLIEST));
            assertEquals(5, client.listOffset(topic, 0, Messages.SPEC_LATEST));
            try (Consumer latest = client.consumer(new ConsumerConfig());
                    Consumer earliest = client.consumer(new ConsumerConfig());
                    Consumer at = client.consumer(new ConsumerConfig())) {
                latest.assign(topic, List.of(0), StartAt.LATEST);
                earliest.assign(topic, List.of(0), StartAt.EARLIEST);
                at.assign(topic, List.of(0), StartAt.offset(3));
                p.send(new ProducerRecord(topic, utf8("new"))).get();
                ConsumerRecord r = latest.poll(Duration.ofSeconds(20));
                assertNotNull(r);
                assertEquals("new", r.valueString());
                assertEquals(5, r.offset());
                assertEquals("old-0", earliest.poll(Duration.ofSeconds(20)).valueString());
                ConsumerRecord third = at.poll(Duration.ofSeconds(20));
                assertEquals(3, third.offset());
                assertEquals("old-3", third.valueString());
            }
        }
    }

    @Test
    void aGroupOfTwoSplitsThePartitionsAndALeaversPartitionsGoToTheOther() throws Exception {
        String topic = "shared";
        client.createTopic(topic, 4, (short) -1, Map.of());
        ConsumerConfig cfg = new ConsumerConfig().group("splitters").heartbeatInterval(Duration.ofMillis(300));
        try (Consumer a = client.consumer(cfg)) {
            a.subscribe(topic);
            eventually("the first member getting all 4 partitions", Duration.ofSeconds(30),
                    () -> a.assignment().size() == 4);
            Consumer b = client.consumer(cfg);
            b.subscribe(topic);
            eventually("the group splitting the partitions", Duration.ofSeconds(40), () -> {
                Set<TopicPartition> all = new HashSet<>(a.assignment());
                all.addAll(b.assignment());
                return a.assignment().size() + b.assignment().size() == 4 && all.size() == 4
                        && !a.assignment().isEmpty() && !b.assignment().isEmpty();
            });
            // both read: a record on each partition reaches its owner
            try (Producer p = client.producer(new ProducerConfig())) {
                for (int i = 0; i < 4; i++) {
                    p.send(new ProducerRecord(topic, i, null, utf8("p" + i), List.of(), 0));
                }
                p.flush();
            }
            Set<String> got = new HashSet<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (got.size() < 4 && System.nanoTime() < deadline) {
                for (Consumer c : List.of(a, b)) {
                    ConsumerRecord r = c.poll(Duration.ofMillis(100));
                    if (r != null) {
                        assertTrue(c.assignment().contains(new TopicPartition(topic, r.partition())),
                                "a member read a partition it does not own");
                        got.add(r.valueString());
                    }
                }
            }
            assertEquals(Set.of("p0", "p1", "p2", "p3"), got);
            b.close();
            eventually("the leaver's partitions going to the other member", Duration.ofSeconds(40),
                    () -> a.assignment().size() == 4);
        }
    }

    @Test
    void aMemberResumesFromTheCommittedOffsets() throws Exception {
        String topic = "resume";
        client.createTopic(topic, 3, (short) -1, Map.of());
        try (Producer p = client.producer(new ProducerConfig())) {
            for (int i = 0; i < 300; i++) {
                p.send(new ProducerRecord(topic, utf8(Integer.toString(i)), utf8(Integer.toString(i))));
            }
            p.flush();
        }
        ConsumerConfig cfg = new ConsumerConfig().group("resumers").heartbeatInterval(Duration.ofMillis(500))
                .autoCommit(false);
        Set<String> first = new HashSet<>();
        Map<TopicPartition, Long> reached;
        try (Consumer c = client.consumer(cfg)) {
            c.subscribe(topic);
            while (first.size() < 100) {
                ConsumerRecord r = c.poll(Duration.ofSeconds(30));
                assertNotNull(r, "no record after " + first.size());
                first.add(r.valueString());
            }
            c.commit();
            reached = c.positions();
        }
        Map<TopicPartition, Long> committed = client.committedOffsets("resumers", new ArrayList<>(reached.keySet()));
        assertEquals(reached, committed, "the committed offsets are the positions reached");
        Set<String> rest = new HashSet<>();
        try (Consumer c = client.consumer(cfg)) {
            c.subscribe(topic);
            while (rest.size() < 200) {
                ConsumerRecord r = c.poll(Duration.ofSeconds(30));
                assertNotNull(r, "no record after " + rest.size());
                assertFalse(first.contains(r.valueString()), "record " + r.valueString() + " read again");
                rest.add(r.valueString());
            }
            assertNullWithin(c, Duration.ofMillis(700));
        }
        assertEquals(300, first.size() + rest.size());
    }

    private static void assertNullWithin(Consumer c, Duration d) {
        ConsumerRecord extra = c.poll(d);
        if (extra != null) {
            fail("record " + extra.valueString() + " read beyond the 300 produced");
        }
    }

    @Test
    void compressedBatchesRoundTrip() throws Exception {
        for (Compression codec : Compression.values()) {
            String topic = "codec-" + codec.name().toLowerCase();
            client.createTopic(topic, 1, (short) -1, Map.of());
            try (Producer p = client.producer(new ProducerConfig().compression(codec))) {
                for (int i = 0; i < 200; i++) {
                    p.send(new ProducerRecord(topic, null, null, utf8("v" + i),
                            List.of(new Header("h", utf8("x" + i))), 0));
                }
                p.flush();
            }
            try (Consumer c = client.consumer(new ConsumerConfig())) {
                c.assign(topic, null, StartAt.EARLIEST);
                for (int i = 0; i < 200; i++) {
                    ConsumerRecord r = c.poll(Duration.ofSeconds(20));
                    assertNotNull(r, codec + ": record " + i);
                    assertEquals("v" + i, r.valueString(), codec.name());
                    assertEquals("x" + i, new String(r.headers().get(0).value(), StandardCharsets.UTF_8));
                }
            }
        }
    }

    @Test
    void aBootstrapListTriesTheNextServer() {
        try (AeroStreamClient c = AeroStreamClient.connect("aero://127.0.0.1:1," + agent.nativeAddr)) {
            assertTrue(c.listTopics() != null);
        }
        AeroStreamException e = assertThrows(AeroStreamException.class,
                () -> AeroStreamClient.connect("aero://127.0.0.1:1"));
        assertTrue(e.getMessage().contains("no server answers"), e.getMessage());
    }

    @Test
    void transactionsCommitAndAbortAndReadCommittedSkipsTheAborted() throws Exception {
        String topic = "txn";
        client.createTopic(topic, 2, (short) -1, Map.of());
        try (Producer p = client.producer(new ProducerConfig().transactionalId("java-txn"))) {
            assertThrows(IllegalStateException.class, () -> p.send(new ProducerRecord(topic, utf8("outside"))));
            p.beginTransaction();
            p.send(new ProducerRecord(topic, utf8("a"), utf8("t1")));
            p.send(new ProducerRecord(topic, utf8("b"), utf8("t2")));
            p.commitTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord(topic, utf8("a"), utf8("t3")));
            p.abortTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord(topic, utf8("b"), utf8("t4")));
            p.commitTransaction();
        }
        Set<String> committed = readAll(topic, true, 3);
        assertEquals(Set.of("t1", "t2", "t4"), committed, "read_committed");
        Set<String> everything = readAll(topic, false, 4);
        assertEquals(Set.of("t1", "t2", "t3", "t4"), everything, "read_uncommitted");
        // a second producer of the id fences the first
        try (Producer first = client.producer(new ProducerConfig().transactionalId("java-fenced"));
                Producer second = client.producer(new ProducerConfig().transactionalId("java-fenced"))) {
            first.beginTransaction();
            first.send(new ProducerRecord(topic, utf8("fenced")));
            AeroStreamException e = assertThrows(AeroStreamException.class, first::commitTransaction);
            assertTrue(e.getMessage().contains("PRODUCER_FENCED") || e.getMessage().contains("aborted"), e.getMessage());
            second.beginTransaction();
            second.send(new ProducerRecord(topic, utf8("from-second")));
            second.commitTransaction();
        }
        assertTrue(readAll(topic, true, 4).contains("from-second"));
    }

    private static Set<String> readAll(String topic, boolean committed, int atLeast) {
        Set<String> out = new HashSet<>();
        try (Consumer c = client.consumer(new ConsumerConfig().readCommitted(committed))) {
            c.assign(topic, null, StartAt.EARLIEST);
            while (true) {
                ConsumerRecord r = c.poll(Duration.ofMillis(out.size() < atLeast ? 20000 : 1500));
                if (r == null) {
                    return out;
                }
                out.add(r.valueString());
            }
        }
    }

    @Test
    void offsetsCommittedInATransactionCountOnlyIfItCommits() throws Exception {
        client.createTopic("ctp-in", 1, (short) -1, Map.of());
        client.createTopic("ctp-out", 1, (short) -1, Map.of());
        try (Producer p = client.producer(new ProducerConfig())) {
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord("ctp-in", utf8("in-" + i)));
            }
            p.flush();
        }
        ConsumerConfig cfg = new ConsumerConfig().group("transformers").autoCommit(false)
                .heartbeatInterval(Duration.ofMillis(300));
        try (Consumer c = client.consumer(cfg);
                Producer p = client.producer(new ProducerConfig().transactionalId("java-transformer"))) {
            c.subscribe("ctp-in");
            for (boolean commit : new boolean[] {false, true}) {
                p.beginTransaction();
                for (int i = 0; i < 5; i++) {
                    ConsumerRecord r = c.poll(Duration.ofSeconds(30));
                    assertNotNull(r);
                    p.send(new ProducerRecord("ctp-out", utf8(r.valueString().toUpperCase())));
                }
                Consumer.GroupMetadata member = c.groupMetadata();
                assertNotNull(member, "the member holds an assignment");
                p.sendOffsetsToTransaction(member, c.positions());
                if (commit) {
                    p.commitTransaction();
                } else {
                    p.abortTransaction();
                }
            }
        }
        Map<TopicPartition, Long> offsets = client.committedOffsets("transformers",
                List.of(new TopicPartition("ctp-in", 0)));
        assertEquals(10L, offsets.get(new TopicPartition("ctp-in", 0)), "the committed transaction's offsets");
        assertEquals(Set.of("IN-5", "IN-6", "IN-7", "IN-8", "IN-9"), readAll("ctp-out", true, 5));
    }

    /** The README's quick start, as written there. */
    @Test
    void theQuickStartOfTheReadmeWorks() throws Exception {
        try (AeroStreamClient client = AeroStreamClient.connect(agent.bootstrap)) {
            client.createTopic("events", 3, (short) -1, Map.of());
            try (Producer producer = client.producer(new ProducerConfig())) {
                RecordMetadata md = producer.send(ProducerRecord.of("events", "user-42", "hello")).get();
                assertEquals(Partitioner.partitionForKey(utf8("user-42"), 3), md.partition());
            }
            try (Consumer consumer = client.consumer(new ConsumerConfig().group("readers"))) {
                consumer.subscribe("events");
                ConsumerRecord r = consumer.poll(Duration.ofSeconds(5)); // null when none came
                assertNotNull(r);
                assertEquals("hello", r.valueString());
            }
        }
    }

    /**
     * A push consumer: 5 MB of records against 1 MiB of credit per
     * partition, so the credit runs out and is granted again as records are
     * handed over; records written later are pushed to the open subscriptions.
     */
    @Test
    void aPushConsumerReadsEverythingInOrderWithinItsCredit() throws Exception {
        String topic = "pushed";
        client.createTopic(topic, 3, (short) -1, Map.of());
        try (Producer p = client.producer(new ProducerConfig());
                Consumer c = client.consumer(new ConsumerConfig().push(true).partitionMaxBytes(64 << 10))) {
            produceLarge(p, topic, 0, 500);
            c.assign(topic, null, StartAt.EARLIEST);
            Set<String> seen = new HashSet<>();
            Map<Integer, Long> last = new HashMap<>();
            readPushed(c, seen, last, 500);
            produceLarge(p, topic, 500, 2500);
            readPushed(c, seen, last, 2500);
        }
    }

    private static void produceLarge(Producer p, String topic, int from, int to) {
        for (int i = from; i < to; i++) {
            p.send(new ProducerRecord(topic, utf8(Integer.toString(i)), utf8(i + ":" + "x".repeat(2000))));
        }
        p.flush();
    }

    private static void readPushed(Consumer c, Set<String> seen, Map<Integer, Long> last, int n) {
        while (seen.size() < n) {
            ConsumerRecord r = c.poll(Duration.ofSeconds(30));
            assertNotNull(r, "no record after " + seen.size());
            assertTrue(seen.add(r.valueString()), r.valueString().substring(0, 8) + " pushed twice");
            Long prev = last.put(r.partition(), r.offset());
            assertTrue(prev == null || r.offset() == prev + 1, "partition " + r.partition() + ": offset "
                    + r.offset() + " after " + prev);
        }
    }
}
