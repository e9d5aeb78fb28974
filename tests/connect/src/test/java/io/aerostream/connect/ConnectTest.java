package io.aerostream.connect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Kafka Connect's distributed runtime against the broker: the worker creates its compacted
 * internal topics and keeps its cluster's state in them; the file connectors move lines from
 * a file to a topic and from the topic to another file, and a worker killed with SIGKILL
 * resumes from the source offsets it committed.
 */
class ConnectTest {
    private static final String SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector";
    private static final String SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector";
    /** Lines written before the worker is killed, while it runs, and in all. */
    private static final int FIRST = 200;
    private static final int TOTAL = 1200;

    private static List<String> lines() {
        return IntStream.range(0, TOTAL).mapToObj(i -> String.format("line %05d of the source file", i)).toList();
    }

    /**
     * At least once: after kill -9 and a restart, nothing is lost, and what the topic has twice
     * is exactly what the worker produced after its last source offset commit.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.connect.Target#all")
    void fileSourceAndSinkResumeAfterTheWorkerIsKilled(Target t) throws Exception {
        Path dir = Kit.workDir(t, "file-connectors");
        Path source = Files.createFile(dir.resolve("source.txt"));
        Path sink = dir.resolve("sink.txt");
        List<String> lines = lines();
        try (Admin admin = Kit.admin(t); Worker w = new Worker(t, dir, Kit.unique("connect"), Map.of())) {
            String topic = Kit.createTopic(admin, t, "file-lines", 1);
            TopicPartition tp = new TopicPartition(topic, 0);
            w.start();
            Kit.log(t, "worker " + w.group + " serves");
            assertInternalTopics(admin, t, w);

            w.putConnector("file-source", Map.of("connector.class", SOURCE, "tasks.max", "1",
                    "file", source.toString(), "topic", topic));
            w.putConnector("file-sink", Map.of("connector.class", SINK, "tasks.max", "1",
                    "file", sink.toString(), "topics", topic));
            Kit.append(source, lines.subList(0, FIRST));
            Kit.eventually("the sink file has the first " + FIRST + " lines", () -> Kit.lines(sink).size() >= FIRST);
            assertEquals(lines.subList(0, FIRST), Kit.values(Kit.read(t, tp, Map.of(), null)),
                    "the topic has every line of the source file once, in order");
            assertEquals(lines.subList(0, FIRST), Kit.lines(sink), "the sink file has every line once, in order");
            w.awaitRunning("file-source");
            w.awaitRunning("file-sink");

            // the worker is killed while the file grows and the source task produces
            Thread appender = appender(source, lines.subList(FIRST, TOTAL));
            Kit.eventually("the source task produces the lines appended", () -> endOffset(t, tp) >= FIRST + 200);
            w.kill();
            appender.join();
            int committed = committedLines(t, w, "file-source", source, lines);
            Kit.log(t, "worker " + w.group + " killed; its last source offset commit is after line " + committed);

            w.start();
            w.awaitRunning("file-source");
            List<String> got = Kit.values(Kit.read(t, tp, Map.of(),
                    rs -> !rs.isEmpty() && Kit.utf8(rs.get(rs.size() - 1).value()).equals(lines.get(TOTAL - 1))));
            // the restarted task reads the file again from the position it last committed:
            // the topic is lines [0, produced) then [committed, TOTAL)
            int produced = got.size() - (TOTAL - committed);
            assertTrue(produced >= committed && produced <= TOTAL,
                    "the topic has " + got.size() + " records; the last source offset committed is after line "
                            + committed);
            List<String> expected = new ArrayList<>(lines.subList(0, produced));
            expected.addAll(lines.subList(committed, TOTAL));
            Kit.log(t, "after the restart: " + got.size() + " records, " + (produced - committed) + " of them again");
            assertEquals(expected, got, "nothing lost; again only what was produced after the last offset commit ("
                    + (produced - committed) + " lines)");

            w.awaitRunning("file-sink");
            Kit.eventually("the sink file has the last line", () -> Kit.lines(sink).contains(lines.get(TOTAL - 1)));
            assertEquals(lines, List.copyOf(new LinkedHashSet<>(Kit.lines(sink))),
                    "the sink file has every line, in order");
        }
    }

    /**
     * Exactly once (KIP-618, exactly.once.source.support=enabled): the source task writes its
     * records and offsets in transactions, and its restart after kill -9 fences the killed
     * worker's producer: a read_committed consumer sees every line once.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.connect.Target#all")
    void exactlyOnceSourceResumesAfterTheWorkerIsKilled(Target t) throws Exception {
        Path dir = Kit.workDir(t, "exactly-once");
        Path source = Files.createFile(dir.resolve("source.txt"));
        List<String> lines = lines();
        Map<String, Object> readCommitted = Map.of("isolation.level", "read_committed");
        try (Admin admin = Kit.admin(t);
                Worker w = new Worker(t, dir, Kit.unique("connect-eos"),
                        Map.of("exactly.once.source.support", "enabled"))) {
            String topic = Kit.createTopic(admin, t, "eos-lines", 1);
            TopicPartition tp = new TopicPartition(topic, 0);
            w.start();
            assertInternalTopics(admin, t, w);
            w.putConnector("eos-source", Map.of("connector.class", SOURCE, "tasks.max", "1",
                    "file", source.toString(), "topic", topic, "exactly.once.support", "required",
                    "transaction.boundary", "poll"));
            w.awaitRunning("eos-source");
            Kit.append(source, lines.subList(0, FIRST));
            Kit.read(t, tp, readCommitted, rs -> rs.size() >= FIRST);

            Thread appender = appender(source, lines.subList(FIRST, TOTAL));
            Kit.eventually("the source task produces the lines appended", () -> endOffset(t, tp) >= FIRST + 200);
            w.kill();
            appender.join();
            Kit.log(t, "worker " + w.group + " killed at end offset " + endOffset(t, tp));

            w.start();
            w.awaitRunning("eos-source");
            List<String> got = Kit.values(Kit.read(t, tp, readCommitted,
                    rs -> !rs.isEmpty() && Kit.utf8(rs.get(rs.size() - 1).value()).equals(lines.get(TOTAL - 1))));
            Kit.log(t, "after the restart: " + got.size() + " committed records, end offset " + endOffset(t, tp)
                    + " (with the transactions' markers and what was aborted)");
            assertEquals(lines, got, "every line once, in order");
        }
    }

    /**
     * The worker created its config, offset and status topics as it asks: compacted, with the
     * partitions and replicas its settings name.
     */
    /**
     * The topics' descriptions. A broker may answer a topic created a moment ago as unknown until its
     * metadata has caught up (Apache Kafka's does): asked again for up to 30 s.
     */
    private static Map<String, TopicDescription> describeOnceKnown(Admin admin, Set<String> names)
            throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            try {
                return admin.describeTopics(names).allTopicNames().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException) || System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
    }

    private static void assertInternalTopics(Admin admin, Target t, Worker w) throws Exception {
        Map<String, Integer> partitions = Map.of(w.configTopic(), 1, w.offsetTopic(), 5, w.statusTopic(), 3);
        Map<String, TopicDescription> described = describeOnceKnown(admin, partitions.keySet());
        List<ConfigResource> resources = partitions.keySet().stream()
                .map(n -> new ConfigResource(ConfigResource.Type.TOPIC, n)).toList();
        Map<ConfigResource, Config> configs = admin.describeConfigs(resources).all().get();
        for (var e : partitions.entrySet()) {
            TopicDescription d = described.get(e.getKey());
            assertEquals(e.getValue(), d.partitions().size(), e.getKey() + ": partitions");
            d.partitions().forEach(p -> assertEquals(t.replicationFactor(), p.replicas().size(),
                    e.getKey() + "-" + p.partition() + ": replicas"));
            Config c = configs.get(new ConfigResource(ConfigResource.Type.TOPIC, e.getKey()));
            assertEquals(TopicConfig.CLEANUP_POLICY_COMPACT, c.get(TopicConfig.CLEANUP_POLICY_CONFIG).value(),
                    e.getKey() + ": " + TopicConfig.CLEANUP_POLICY_CONFIG);
        }
    }

    /** Appends the lines a few at a time, as a log file grows, on a thread of its own. */
    private static Thread appender(Path file, List<String> lines) {
        Thread th = new Thread(() -> {
            for (int i = 0; i < lines.size(); i += 5) {
                Kit.append(file, lines.subList(i, Math.min(lines.size(), i + 5)));
                Kit.sleep(25);
            }
        }, "appender");
        th.start();
        return th;
    }

    private static long endOffset(Target t, TopicPartition tp) {
        try (KafkaConsumer<byte[], byte[]> c = Kit.consumer(t, Map.of())) {
            return c.endOffsets(List.of(tp)).get(tp);
        }
    }

    /**
     * How many lines of the source file the connector's last committed source offset covers:
     * the offset is the file position after the last line produced, kept in the worker's
     * offset topic under the key ["connector", {"filename": file}].
     */
    private static int committedLines(Target t, Worker w, String connector, Path file, List<String> lines)
            throws Exception {
        Map<String, Object> extra = new HashMap<>();
        long position = -1;
        for (int p = 0; p < 5; p++) {
            for (ConsumerRecord<byte[], byte[]> r : Kit.read(t, new TopicPartition(w.offsetTopic(), p), extra, null)) {
                JsonNode key = Worker.JSON.readTree(r.key());
                if (key.path(0).asText().equals(connector)
                        && key.path(1).path("filename").asText().equals(file.toString()) && r.value() != null) {
                    position = Worker.JSON.readTree(r.value()).path("position").asLong();
                }
            }
        }
        long at = 0;
        for (int i = 0; i < lines.size(); i++) {
            if (at == position) {
                return i;
            }
            at += lines.get(i).length() + 1;
        }
        assertEquals(at, position, "the committed source offset is the end of a line of " + file);
        return lines.size();
    }
}
