package io.aerostream.connect;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.function.Predicate;
import java.util.function.Supplier;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Clients, topics, files and processes for the tests, and ways to wait for what a test expects. */
final class Kit {
    private Kit() {}

    /** How long a test waits for something that should happen soon (a hang guard, not a timing check). */
    static final Duration PATIENCE = Duration.ofSeconds(90);

    static String unique(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    /** A fresh directory for one test's files and its processes' logs, kept after the run. */
    static Path workDir(Target t, String test) {
        Path base = Path.of(System.getProperty("connect.work", System.getProperty("java.io.tmpdir")));
        try {
            return Files.createDirectories(base.resolve(t.name() + "-" + unique(test)));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A line in the test's output (surefire keeps it in target/surefire-reports). */
    static void log(Target t, String what) {
        System.out.printf("%s [%s] %s%n", java.time.LocalTime.now(), t.name(), what);
    }

    static int freePort() {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Admin admin(Target t) {
        return Admin.create(t.clientConfig());
    }

    static KafkaProducer<byte[], byte[]> producer(Target t) {
        Map<String, Object> c = t.clientConfig();
        c.put("key.serializer", ByteArraySerializer.class.getName());
        c.put("value.serializer", ByteArraySerializer.class.getName());
        c.put("max.block.ms", 60_000);
        return new KafkaProducer<>(c);
    }

    static KafkaConsumer<byte[], byte[]> consumer(Target t, Map<String, Object> extra) {
        Map<String, Object> c = t.clientConfig();
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        c.put("enable.auto.commit", false);
        c.put("auto.offset.reset", "earliest");
        c.putAll(extra);
        return new KafkaConsumer<>(c);
    }

    /**
     * Creates a topic replicated on all of the target's brokers (up to 3) and waits until
     * every partition has a leader that serves it.
     */
    static String createTopic(Admin admin, Target t, String prefix, int partitions) throws Exception {
        String name = unique(prefix);
        admin.createTopics(List.of(new NewTopic(name, partitions, t.replicationFactor()))).all().get();
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
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        partitions(name, partitions).forEach(tp -> latest.put(tp, OffsetSpec.latest()));
        admin.listOffsets(latest).all().get();
        return name;
    }

    static List<TopicPartition> partitions(String topic, int count) {
        return IntStream.range(0, count).mapToObj(p -> new TopicPartition(topic, p)).toList();
    }

    /**
     * Reads one partition from its beginning until {@code done} holds for what was read (or up
     * to its end offset when {@code done} is null), with a consumer of its own.
     */
    static List<ConsumerRecord<byte[], byte[]>> read(Target t, TopicPartition tp, Map<String, Object> extra,
            Predicate<List<ConsumerRecord<byte[], byte[]>>> done) {
        try (KafkaConsumer<byte[], byte[]> c = consumer(t, extra)) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long end = done == null ? c.endOffsets(List.of(tp)).get(tp) : Long.MAX_VALUE;
            List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
            long deadline = System.nanoTime() + PATIENCE.toNanos();
            while (done == null ? c.position(tp) < end : !done.test(out)) {
                if (System.nanoTime() > deadline) {
                    fail("reading " + tp + ": not done in " + PATIENCE + "; read " + out.size() + " records"
                            + (out.isEmpty() ? "" : ", the last " + utf8(out.get(out.size() - 1).value())));
                }
                c.poll(Duration.ofMillis(200)).forEach(out::add);
            }
            return out;
        }
    }

    /** The records' values as UTF-8 strings. */
    static List<String> values(List<ConsumerRecord<byte[], byte[]>> records) {
        return records.stream().map(r -> utf8(r.value())).toList();
    }

    /** Polls {@code check} until it holds; fails the test after {@link #PATIENCE}. */
    static void eventually(String what, Supplier<Boolean> check) {
        eventually(() -> what, check);
    }

    /** As {@link #eventually(String, Supplier)}, the failure told by {@code what} when it happens. */
    static void eventually(Supplier<String> what, Supplier<Boolean> check) {
        long deadline = System.nanoTime() + PATIENCE.toNanos();
        while (true) {
            if (Boolean.TRUE.equals(check.get())) {
                return;
            }
            if (System.nanoTime() > deadline) {
                fail("timed out waiting until " + what.get());
            }
            sleep(200);
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** Appends lines to a file, each ended by a newline, and flushes them. */
    static void append(Path file, List<String> lines) {
        StringBuilder b = new StringBuilder();
        lines.forEach(l -> b.append(l).append('\n'));
        try {
            Files.writeString(file, b, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND,
                    StandardOpenOption.WRITE);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A file's complete lines (a last line without its newline yet is left out); none when it is absent. */
    static List<String> lines(Path file) {
        try {
            if (!Files.exists(file)) {
                return List.of();
            }
            String s = Files.readString(file, StandardCharsets.UTF_8);
            int end = s.lastIndexOf('\n');
            return end < 0 ? List.of() : List.of(s.substring(0, end).split("\n", -1));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static String utf8(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
