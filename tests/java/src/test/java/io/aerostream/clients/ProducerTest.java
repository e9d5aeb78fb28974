package io.aerostream.clients;

import static io.aerostream.clients.Kit.headers;
import static io.aerostream.clients.Kit.utf8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class ProducerTest {

    static Stream<Arguments> targetsAndCodecs() {
        return Target.all().flatMap(t -> Stream.of("none", "gzip", "snappy", "lz4", "zstd")
                .map(codec -> Arguments.of(t, codec)));
    }

    /**
     * An idempotent producer with acks=all and a codec writes keyed records with headers and
     * set timestamps over three partitions, in batches; a consumer reads back exactly those
     * records, in order per partition, at the offsets the producer was acknowledged with.
     */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("targetsAndCodecs")
    void idempotentProducerRoundTrip(Target t, String codec) throws Exception {
        int partitions = 3;
        int count = 600;
        String topic;
        try (Admin admin = Kit.admin(t)) {
            topic = Kit.createTopic(admin, t, "produce-" + codec, partitions, Map.of());
        }
        long t0 = System.currentTimeMillis() - 60_000;
        List<ProducerRecord<String, String>> sent = new ArrayList<>();
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        Map<String, Object> config = new HashMap<>();
        config.put("acks", "all");
        config.put("enable.idempotence", true);
        config.put("compression.type", codec);
        config.put("linger.ms", 20);
        config.put("batch.size", 16_384);
        try (KafkaProducer<String, String> p = Kit.producer(t, config)) {
            for (int i = 0; i < count; i++) {
                RecordHeaders h = new RecordHeaders();
                h.add("seq", utf8(Integer.toString(i)));
                h.add("codec", utf8(codec));
                if (i % 7 == 0) {
                    h.add("seq", utf8("again-" + i)); // repeated keys keep their order
                }
                if (i % 19 == 0) {
                    h.add("empty", null); // a header without a value
                }
                // values that compress, with some variety, and a few null values (tombstones)
                String value = i % 17 == 5 ? null : "value-" + i + "-" + "abcdefghij".repeat(i % 13);
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, i % partitions, t0 + i,
                        i % 11 == 0 ? null : "key-" + i, value, h);
                sent.add(r);
                acks.add(p.send(r));
            }
            p.flush();
        }
        List<RecordMetadata> meta = new ArrayList<>();
        for (Future<RecordMetadata> f : acks) {
            meta.add(f.get());
        }
        // each partition's acknowledged offsets are 0, 1, 2, ... in send order
        Map<Integer, Long> next = new HashMap<>();
        for (int i = 0; i < count; i++) {
            RecordMetadata m = meta.get(i);
            assertEquals(sent.get(i).partition(), m.partition(), "record " + i + ": partition");
            long expected = next.merge(m.partition(), 1L, Long::sum) - 1;
            assertEquals(expected, m.offset(), "record " + i + ": acknowledged offset");
            assertEquals(t0 + i, m.timestamp(), "record " + i + ": acknowledged timestamp");
        }

        List<ConsumerRecord<String, String>> read = new ArrayList<>(
                Kit.readAll(t, Kit.partitions(topic, partitions), Map.of()));
        assertEquals(count, read.size(), "records read back");
        read.sort(Comparator.comparingInt(ConsumerRecord<String, String>::partition)
                .thenComparingLong(ConsumerRecord::offset));
        Map<Integer, List<Integer>> byPartition = new HashMap<>();
        for (int i = 0; i < count; i++) {
            byPartition.computeIfAbsent(i % partitions, k -> new ArrayList<>()).add(i);
        }
        int at = 0;
        for (int p = 0; p < partitions; p++) {
            for (int i : byPartition.get(p)) {
                ConsumerRecord<String, String> got = read.get(at++);
                ProducerRecord<String, String> want = sent.get(i);
                String what = "record " + i;
                assertEquals(p, got.partition(), what + ": partition");
                assertEquals(meta.get(i).offset(), got.offset(), what + ": offset");
                assertEquals(want.key(), got.key(), what + ": key");
                assertEquals(want.value(), got.value(), what + ": value");
                assertEquals(want.timestamp(), got.timestamp(), what + ": timestamp");
                assertEquals(headers(want.headers()), headers(got.headers()), what + ": headers");
            }
        }
    }

    /**
     * A record larger than the topic's max.message.bytes is refused with RecordTooLargeException
     * and not written; a smaller one on the same producer still goes through.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void recordLargerThanTheTopicAllowsIsRefused(Target t) throws Exception {
        String topic;
        try (Admin admin = Kit.admin(t)) {
            topic = Kit.createTopic(admin, t, "too-large", 1, Map.of("max.message.bytes", "10000"));
        }
        try (KafkaProducer<String, String> p = Kit.producer(t, Map.of("acks", "all", "enable.idempotence", true))) {
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> p.send(new ProducerRecord<>(topic, 0, "big", "x".repeat(20_000))).get());
            assertInstanceOf(RecordTooLargeException.class, e.getCause(), "a 20 kB record on a 10 kB topic");
            RecordMetadata small = p.send(new ProducerRecord<>(topic, 0, "small", "fits")).get();
            assertEquals(0, small.offset(), "the first record written");
        }
        List<ConsumerRecord<String, String>> read = Kit.readAll(t, Kit.partitions(topic, 1), Map.of());
        assertEquals(List.of("fits"), read.stream().map(ConsumerRecord::value).toList(), "what the topic holds");
    }
}
