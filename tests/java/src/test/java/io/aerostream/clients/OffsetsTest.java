package io.aerostream.clients;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class OffsetsTest {

    /** The first record a consumer positioned at its current position reads. */
    private static ConsumerRecord<String, String> next(KafkaConsumer<String, String> c) {
        long deadline = System.nanoTime() + Kit.PATIENCE.toNanos();
        while (System.nanoTime() < deadline) {
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            c.poll(Duration.ofMillis(200)).forEach(got::add);
            if (!got.isEmpty()) {
                return got.get(0);
            }
        }
        throw new AssertionError("no record read in " + Kit.PATIENCE);
    }

    /** offsetsForTimes' answer as [offset, timestamp]. */
    private static List<Long> byTime(KafkaConsumer<String, String> c, TopicPartition tp, long time) {
        OffsetAndTimestamp o = c.offsetsForTimes(Map.of(tp, time)).get(tp);
        assertNotNull(o, "offsetsForTimes(" + time + ")");
        return List.of(o.offset(), o.timestamp());
    }

    /**
     * Ten records with timestamps a second apart: beginning and end offsets, offsetsForTimes
     * (the first record at or after a time, none after the last), seek, seekToBeginning and
     * seekToEnd, the admin's ListOffsets (earliest, latest, max timestamp, by time), a commit
     * with metadata read back, and DeleteRecords moving the beginning.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void seekAndOffsetsByTime(Target t) throws Exception {
        try (Admin admin = Kit.admin(t)) {
            String topic = Kit.createTopic(admin, t, "offsets", 1, Map.of());
            TopicPartition tp = new TopicPartition(topic, 0);
            long t0 = System.currentTimeMillis() - 600_000;
            try (KafkaProducer<String, String> p = Kit.producer(t, Map.of("acks", "all"))) {
                for (int i = 0; i < 10; i++) {
                    p.send(new ProducerRecord<>(topic, 0, t0 + i * 1000L, "k" + i, "v" + i));
                }
                p.flush();
            }
            String group = Kit.unique("offsets");
            try (KafkaConsumer<String, String> c = Kit.consumer(t, Map.of("group.id", group))) {
                List<TopicPartition> tps = List.of(tp);
                assertEquals(Map.of(tp, 0L), c.beginningOffsets(tps), "beginning offsets");
                assertEquals(Map.of(tp, 10L), c.endOffsets(tps), "end offsets");

                assertEquals(List.of(4L, t0 + 4000), byTime(c, tp, t0 + 3500), "the first record at or after t0+3.5s");
                assertEquals(List.of(0L, t0), byTime(c, tp, t0), "the record at t0");
                assertEquals(List.of(9L, t0 + 9000), byTime(c, tp, t0 + 9000), "the last record");
                assertNull(c.offsetsForTimes(Map.of(tp, t0 + 9001)).get(tp), "no record after the last one's time");

                c.assign(tps);
                c.seek(tp, 6);
                ConsumerRecord<String, String> r = next(c);
                assertEquals(6, r.offset(), "offset read after seek(6)");
                assertEquals("v6", r.value());
                assertEquals(t0 + 6000, r.timestamp());
                c.seekToBeginning(tps);
                assertEquals(0, c.position(tp), "position after seekToBeginning");
                assertEquals("v0", next(c).value());
                c.seekToEnd(tps);
                assertEquals(10, c.position(tp), "position after seekToEnd");

                c.commitSync(Map.of(tp, new OffsetAndMetadata(7, "checkpoint seven")));
                OffsetAndMetadata committed = c.committed(java.util.Set.of(tp)).get(tp);
                assertNotNull(committed, "committed offset read back");
                assertEquals(7, committed.offset());
                assertEquals("checkpoint seven", committed.metadata());
            }

            Map<TopicPartition, ListOffsetsResultInfo> l = admin.listOffsets(Map.of(tp, OffsetSpec.earliest()))
                    .all().get();
            assertEquals(0, l.get(tp).offset(), "ListOffsets earliest");
            l = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get();
            assertEquals(10, l.get(tp).offset(), "ListOffsets latest");
            l = admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).all().get();
            assertEquals(9, l.get(tp).offset(), "ListOffsets max timestamp: offset");
            assertEquals(t0 + 9000, l.get(tp).timestamp(), "ListOffsets max timestamp: timestamp");
            l = admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(t0 + 2500))).all().get();
            assertEquals(3, l.get(tp).offset(), "ListOffsets by time: offset");
            assertEquals(t0 + 3000, l.get(tp).timestamp(), "ListOffsets by time: timestamp");

            long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(3))).lowWatermarks()
                    .get(tp).get().lowWatermark();
            assertEquals(3, low, "low watermark after deleting the records before offset 3");
            try (KafkaConsumer<String, String> c = Kit.consumer(t, Map.of())) {
                assertEquals(Map.of(tp, 3L), c.beginningOffsets(List.of(tp)), "beginning after DeleteRecords");
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                ConsumerRecord<String, String> r = next(c);
                assertEquals(3, r.offset(), "first record after DeleteRecords");
                assertEquals("v3", r.value());
            }
        }
    }

    /**
     * A position past the end: with auto.offset.reset=earliest the consumer starts over at the
     * beginning, with none poll() throws OffsetOutOfRangeException naming the partition. A
     * record larger than max.partition.fetch.bytes and fetch.max.bytes is still returned whole,
     * so a consumer never gets stuck behind it.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void outOfRangeAndOversizedRecords(Target t) throws Exception {
        try (Admin admin = Kit.admin(t)) {
            String topic = Kit.createTopic(admin, t, "out-of-range", 1, Map.of());
            TopicPartition tp = new TopicPartition(topic, 0);
            String big = "b".repeat(50_000);
            try (KafkaProducer<String, String> p = Kit.producer(t, Map.of("acks", "all", "compression.type", "none"))) {
                p.send(new ProducerRecord<>(topic, 0, "k", "small")).get();
                p.send(new ProducerRecord<>(topic, 0, "k", big)).get();
                p.send(new ProducerRecord<>(topic, 0, "k", "after")).get();
            }
            try (KafkaConsumer<String, String> c = Kit.consumer(t, Map.of("auto.offset.reset", "earliest"))) {
                c.assign(List.of(tp));
                c.seek(tp, 1000);
                ConsumerRecord<String, String> r = next(c);
                assertEquals(0, r.offset(), "reset to the earliest offset");
                assertEquals("small", r.value());
            }
            try (KafkaConsumer<String, String> c = Kit.consumer(t, Map.of("auto.offset.reset", "none"))) {
                c.assign(List.of(tp));
                c.seek(tp, 1000);
                OffsetOutOfRangeException e = assertThrows(OffsetOutOfRangeException.class, () -> {
                    long deadline = System.nanoTime() + Kit.PATIENCE.toNanos();
                    while (System.nanoTime() < deadline) {
                        c.poll(Duration.ofMillis(200));
                    }
                });
                assertEquals(Map.of(tp, 1000L), e.offsetOutOfRangePartitions(), "the partition and position");
            }
            try (KafkaConsumer<String, String> c = Kit.consumer(t, Map.of(
                    "max.partition.fetch.bytes", 1024, "fetch.max.bytes", 1024))) {
                c.assign(List.of(tp));
                c.seek(tp, 1);
                ConsumerRecord<String, String> r = next(c);
                assertEquals(1, r.offset());
                assertEquals(big, r.value(), "the 50 kB record whole");
                c.seek(tp, 2);
                assertEquals("after", next(c).value());
            }
        }
    }
}
