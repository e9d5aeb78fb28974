package io.aerostream.clients;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Clients and topics for the tests, and ways to wait for what a test expects. */
final class Kit {
    private Kit() {}

    /** How long a test waits for something the broker should do soon (a hang guard, not a timing check). */
    static final Duration PATIENCE = Duration.ofSeconds(60);

    static String unique(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Admin admin(Target t) {
        return Admin.create(t.clientConfig());
    }

    static KafkaProducer<String, String> producer(Target t, Map<String, Object> extra) {
        Map<String, Object> c = t.clientConfig();
        c.put("key.serializer", StringSerializer.class.getName());
        c.put("value.serializer", StringSerializer.class.getName());
        c.put("max.block.ms", 60_000);
        c.putAll(extra);
        return new KafkaProducer<>(c);
    }

    static KafkaConsumer<String, String> consumer(Target t, Map<String, Object> extra) {
        Map<String, Object> c = t.clientConfig();
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        c.put("enable.auto.commit", false);
        c.put("auto.offset.reset", "earliest");
        c.putAll(extra);
        return new KafkaConsumer<>(c);
    }

    /**
     * Creates a topic replicated on all of the target's brokers (up to 3) and waits until
     * every partition has a leader in the metadata clients are given, and that leader serves.
     */
    static String createTopic(Admin admin, Target t, String prefix, int partitions, Map<String, String> configs)
            throws Exception {
        String name = unique(prefix);
        admin.createTopics(List.of(new NewTopic(name, partitions, t.replicationFactor()).configs(configs)))
                .all().get();
        eventually("every partition of " + name + " has a leader", () -> {
            try {
                TopicDescription d = admin.describeTopics(List.of(name)).allTopicNames().get().get(name);
                return d.partitions().size() == partitions
                        && d.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty());
            } catch (ExecutionException e) {
                return false;
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        });
        // and until every leader serves it: a broker may name itself leader in
        // metadata a moment before it takes writes (Apache Kafka then answers
        // NOT_LEADER_OR_FOLLOWER, and an idempotent producer's next batches
        // OUT_OF_ORDER_SEQUENCE_NUMBER); ListOffsets is served by leaders only
        // and the admin retries it until they serve. Behind a load balancer
        // the admin's next metadata request may reach a broker that has not
        // learnt of the topic yet, which the admin does not retry: ask again.
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        partitions(name, partitions).forEach(tp -> latest.put(tp, OffsetSpec.latest()));
        eventually("every leader of " + name + " answers ListOffsets", () -> {
            try {
                admin.listOffsets(latest).all().get();
                return true;
            } catch (ExecutionException e) {
                if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                    return false;
                }
                throw new AssertionError(e);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        });
        return name;
    }

    static List<TopicPartition> partitions(String topic, int count) {
        return IntStream.range(0, count).mapToObj(p -> new TopicPartition(topic, p)).toList();
    }

    /**
     * Reads the partitions from their beginning up to the end offsets the consumer sees when it
     * starts (the last stable offsets for read_committed), with a consumer of its own.
     */
    static List<ConsumerRecord<String, String>> readAll(Target t, Collection<TopicPartition> tps,
            Map<String, Object> extra) {
        try (KafkaConsumer<String, String> c = consumer(t, extra)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            List<ConsumerRecord<String, String>> out = new ArrayList<>();
            long deadline = System.nanoTime() + PATIENCE.toNanos();
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (System.nanoTime() > deadline) {
                    Map<TopicPartition, Long> at = new HashMap<>();
                    tps.forEach(tp -> at.put(tp, c.position(tp)));
                    fail("did not read up to " + end + " in " + PATIENCE + ": positions " + at + ", read "
                            + out.size());
                }
                c.poll(Duration.ofMillis(200)).forEach(out::add);
            }
            return out;
        }
    }

    /** Polls {@code check} until it holds; fails the test after {@link #PATIENCE}. */
    static void eventually(String what, Supplier<Boolean> check) {
        eventually(what, PATIENCE, check);
    }

    /** Polls {@code check} until it holds; fails the test after {@code patience}. */
    static void eventually(String what, Duration patience, Supplier<Boolean> check) {
        long deadline = System.nanoTime() + patience.toNanos();
        while (true) {
            if (Boolean.TRUE.equals(check.get())) {
                return;
            }
            if (System.nanoTime() > deadline) {
                fail("timed out after " + patience + " waiting until " + what);
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
    }

    /** A record's headers as (key, UTF-8 value) pairs, in order. */
    static List<Map.Entry<String, String>> headers(Iterable<Header> headers) {
        List<Map.Entry<String, String>> out = new ArrayList<>();
        for (Header h : headers) {
            out.add(Map.entry(h.key(), h.value() == null ? "<null>" : new String(h.value(), StandardCharsets.UTF_8)));
        }
        return out;
    }

    /** The cause of an admin future's failure, for assertInstanceOf. */
    static Throwable failure(org.apache.kafka.common.KafkaFuture<?> f) {
        try {
            f.get();
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
        return fail("expected the request to fail, it succeeded");
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
