package io.aerostream.clients;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;
import java.util.stream.LongStream;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Kafka Streams applications with {@code processing.guarantee=exactly_once_v2} and RocksDB
 * stores, each run in a JVM of its own ({@link StreamsApp}) so that it can be killed with
 * SIGKILL mid-run and started again: what they wrote, read with read_committed, must be exact.
 */
class StreamsTest {
    /** Partitions of every topic here, so of the applications' internal topics too. */
    private static final int PARTITIONS = 3;
    /** How long an application gets to catch up with its input after a restart (a hang guard). */
    private static final Duration CATCH_UP = Duration.ofSeconds(120);
    private static final Map<String, Object> READ_COMMITTED = Map.of("isolation.level", "read_committed");

    /**
     * Word count (a repartition by word, a count into a RocksDB store with a compacted
     * changelog): the application is killed with SIGKILL while lines flow in and started
     * again. Every word's counts in the output are then exactly 1, 2, ... up to its number
     * of occurrences (nothing counted twice, nothing lost, no count restarted from zero); the
     * restarted instance restored the counts from the changelog, and continued each word
     * from the count committed before the kill. Streams' internal topics carry the configs
     * it asked for, and the repartition topic is purged with DeleteRecords.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void wordCountSurvivesKillOfTheApp(Target t) throws Exception {
        try (Admin admin = Kit.admin(t); WordCount run = new WordCount(admin, t, 2400)) {
            Future<?> first;
            try (App app = run.start("first")) {
                app.awaitRunning();
                first = run.feed.send(0, 1200);
                run.awaitOutput(app, 300);
                app.kill();
            }
            // nothing more is committed until the restart: the dead instance's open
            // transaction can only be aborted
            Map<TopicPartition, Long> lsoAtKill = run.output.readToEnd();
            Map<String, Long> countsAtKill = new TreeMap<>();
            run.output.latest.forEach((w, c) -> countsAtKill.put(w, Long.parseLong(c)));
            Kit.eventually("the first part of the input is written", first::isDone);
            first.get();

            try (App app = run.start("second")) {
                app.awaitRunning();
                run.feed.send(1200, 2400).get(CATCH_UP.toSeconds(), TimeUnit.SECONDS);
                run.awaitExact(app);
                run.checkInput();
                run.checkCounts(run.output.records);
                run.checkContinued(run.output.records, lsoAtKill, countsAtKill);
                run.checkRestored(app, countsAtKill.size());
                run.checkInternalTopics();
                assertEquals(List.of(), app.lines("UNCAUGHT"), "stream thread failures");
            }
        }
    }

    /**
     * A windowed KStream-KStream join of orders and payments (each side waits for the other
     * in a RocksDB window store with a changelog), killed with SIGKILL mid-run and started
     * again: every order is joined with its payment exactly once in the committed output,
     * and the restarted instance restored the windows from their changelogs.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void joinSurvivesKillOfTheApp(Target t) throws Exception {
        try (Admin admin = Kit.admin(t); Join run = new Join(admin, t, 1500)) {
            int half = run.feed.size() / 2;
            Future<?> first;
            try (App app = run.start("first")) {
                app.awaitRunning();
                first = run.feed.send(0, half);
                run.awaitOutput(app, 100);
                app.kill();
            }
            Kit.eventually("the first part of the input is written", first::isDone);
            first.get();
            try (App app = run.start("second")) {
                app.awaitRunning();
                run.feed.send(half, run.feed.size()).get(CATCH_UP.toSeconds(), TimeUnit.SECONDS);
                run.awaitExact(app);
                run.checkInput();
                Map<String, List<String>> byOrder = run.output.records.stream().collect(Collectors.groupingBy(
                        ConsumerRecord::key, TreeMap::new, Collectors.mapping(ConsumerRecord::value,
                                Collectors.toList())));
                Map<String, List<String>> want = new TreeMap<>();
                run.expected.forEach((k, v) -> want.put(k, List.of(v)));
                assertEquals(want, byOrder, "each order joined with its payment once, read_committed");

                long restored = app.restored(StreamsApp.JOIN);
                assertTrue(restored > 0, "the restarted instance restored the join windows from their changelogs: "
                        + app.lines("RESTORED"));
                List<String> changelogs = run.internalTopics("-changelog");
                assertEquals(2, changelogs.size(), "the join's changelogs: " + changelogs);
                for (String c : changelogs) {
                    // a join's window stores keep duplicates, which compaction would lose:
                    // their changelogs are deleted by time only, a day past the windows' retention
                    assertEquals("delete", run.config(c, "cleanup.policy"), "cleanup.policy of " + c);
                    assertEquals(Long.toString(Duration.ofMinutes(30).plusDays(1).toMillis()),
                            run.config(c, "retention.ms"), "retention.ms of " + c);
                    run.checkLayout(c);
                }
                assertEquals(List.of(), app.lines("UNCAUGHT"), "stream thread failures");
            }
        }
    }

    /**
     * Word count on three agents with replication factor 3 while one agent is killed with
     * SIGKILL and later started again. The agent coordinates the application's transactions
     * (else it leads the most of its partitions). While it is down the application counts
     * the next part of the input exactly; after it is back, the rest; the committed counts
     * are exact throughout.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void wordCountSurvivesKillOfAnAgent(Target t) throws Exception {
        Assumptions.assumeTrue(t.agents().size() >= 3, "Apache Kafka runs here as one node (scripts/kafka.sh) "
                + "and AeroStream as one agent: killing it would stop the whole cluster; the agent kill runs "
                + "against AeroStream on three agents");
        try (Admin admin = Kit.admin(t); WordCount run = new WordCount(admin, t, 2400);
                App app = run.start("only")) {
            app.awaitRunning();
            run.feed.send(0, 800).get(CATCH_UP.toSeconds(), TimeUnit.SECONDS);
            run.awaitCounts(app, 800);
            int victim = run.victim();
            Agent agent = new Agent(t.agents().get(victim));
            agent.kill();
            try {
                run.feed.send(800, 1600).get(CATCH_UP.toSeconds(), TimeUnit.SECONDS);
                run.awaitCounts(app, 1600);
            } finally {
                agent.restart();
            }
            run.feed.send(1600, 2400).get(CATCH_UP.toSeconds(), TimeUnit.SECONDS);
            run.awaitExact(app);
            run.checkInput();
            run.checkCounts(run.output.records);
            assertEquals(List.of(), app.lines("UNCAUGHT"), "stream thread failures");
        }
    }

    // ---------------------------------------------------------------- the applications

    /** An application's topics, its input feed and a read_committed view of its output. */
    private abstract static class Run implements AutoCloseable {
        final Admin admin;
        final Target t;
        final String appId;
        final Path stateDir;
        final String outputTopic;
        final Feed feed;
        final Output output;
        /** The final value of each output key. */
        final Map<String, String> expected = new TreeMap<>();

        Run(Admin admin, Target t, String kind, List<ProducerRecord<String, String>> input) throws Exception {
            this.admin = admin;
            this.t = t;
            this.appId = Kit.unique("streams-" + kind);
            note(appId + ": creating topics");
            this.stateDir = Path.of("target", "streams", appId).toAbsolutePath();
            this.outputTopic = Kit.createTopic(admin, t, kind + "-out", PARTITIONS, Map.of());
            this.feed = new Feed(t, input);
            this.output = new Output(t, outputTps());
            note(appId + ": topics created");
        }

        abstract void topology(Properties p);

        List<TopicPartition> outputTps() {
            return Kit.partitions(outputTopic, PARTITIONS);
        }

        App start(String label) throws IOException {
            Properties p = new Properties();
            t.clientConfig().forEach((k, v) -> p.setProperty(k, v.toString()));
            p.remove("client.id");
            p.setProperty("application.id", appId);
            p.setProperty("processing.guarantee", "exactly_once_v2");
            p.setProperty("state.dir", stateDir.toString());
            p.setProperty("replication.factor", Integer.toString(t.replicationFactor()));
            p.setProperty("num.stream.threads", "1");
            p.setProperty("commit.interval.ms", "100");
            // every update goes downstream: a word's counts are 1, 2, 3, ...
            p.setProperty("statestore.cache.max.bytes", "0");
            p.setProperty("repartition.purge.interval.ms", "500");
            // a static member (KIP-345): the restarted instance takes the killed one's
            // place in the group at once, without waiting for its session to time out
            p.setProperty("group.instance.id", appId);
            p.setProperty("consumer.session.timeout.ms", "10000");
            p.setProperty("consumer.heartbeat.interval.ms", "1000");
            // The admin client's partition-leader cache (KAFKA-20673) sends ListOffsets to a
            // cached leader that has left the cluster's metadata until this times out: after an
            // agent is killed, Streams' assignor waits that long for its changelogs' end offsets
            // (it then assigns anyway and rebalances again); 60 s by default
            p.setProperty("admin.default.api.timeout.ms", "10000");
            p.setProperty("admin.request.timeout.ms", "10000");
            topology(p);
            return App.start(stateDir.resolveSibling(appId + "-" + label), p);
        }

        /** Waits until the application committed {@code records} output records. */
        void awaitOutput(App app, int records) {
            await("the application commits " + records + " records", app, expected,
                    () -> output.records.size() >= records);
        }

        /** Waits until the latest committed value of each output key is the expected one. */
        void awaitExact(App app) {
            await("the committed output is " + expected.size() + " keys with their final values", app, expected,
                    () -> output.latest.equals(expected));
        }

        /** Waits until {@code done}; on a time-out, the failure names the keys not yet at {@code expected}. */
        void await(String what, App app, Map<String, String> expected, BooleanSupplier done) {
            long deadline = System.nanoTime() + CATCH_UP.toNanos();
            while (true) {
                output.poll();
                if (done.getAsBoolean()) {
                    note(appId + ": " + what);
                    return;
                }
                if (System.nanoTime() > deadline || !app.alive()) {
                    Map<String, String> wrong = new TreeMap<>();
                    expected.forEach((k, v) -> {
                        if (!v.equals(output.latest.get(k))) {
                            wrong.put(k, output.latest.get(k) + " (want " + v + ")");
                        }
                    });
                    fail((app.alive() ? "timed out after " + CATCH_UP : "the application exited")
                            + " waiting until " + what + "; read " + output.records.size()
                            + " committed records; keys not at the value awaited: "
                            + wrong.entrySet().stream().limit(10).toList() + " (of " + wrong.size() + ")"
                            + "; the application's log ends with:\n" + app.tail(40));
                }
            }
        }

        /** The input topics read back hold exactly what the feed sent. */
        void checkInput() {
            Map<String, List<String>> sent = new TreeMap<>();
            Map<String, List<String>> read = new TreeMap<>();
            for (ProducerRecord<String, String> r : feed.records) {
                sent.computeIfAbsent(r.topic(), k -> new ArrayList<>()).add(r.key() + "=" + r.value());
            }
            for (String topic : sent.keySet()) {
                read.put(topic, Kit.readAll(t, Kit.partitions(topic, PARTITIONS), Map.of()).stream()
                        .map(r -> r.key() + "=" + r.value()).sorted().toList());
                sent.get(topic).sort(Comparator.naturalOrder());
            }
            assertEquals(sent, read, "the input as sent");
        }

        /** Streams' internal topics of this application whose names end with {@code suffix}. */
        List<String> internalTopics(String suffix) throws Exception {
            return admin.listTopics().names().get().stream()
                    .filter(n -> n.startsWith(appId + "-") && n.endsWith(suffix)).sorted().toList();
        }

        String config(String topic, String name) throws Exception {
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
            return c.get(name) == null ? null : c.get(name).value();
        }

        /** An internal topic has the partitions and replicas Streams asked for. */
        void checkLayout(String topic) throws Exception {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            assertEquals(PARTITIONS, d.partitions().size(), "partitions of " + topic);
            for (TopicPartitionInfo p : d.partitions()) {
                assertEquals(t.replicationFactor(), p.replicas().size(), "replicas of " + topic + "-" + p.partition());
            }
        }

        /**
         * The agent to kill: the coordinator of the application's transactions, else the one
         * leading the most of its partitions.
         */
        int victim() throws Exception {
            Set<Integer> agents = t.agents().keySet();
            List<String> ids = admin.listTransactions().all().get().stream()
                    .map(TransactionListing::transactionalId).filter(id -> id.startsWith(appId + "-")).distinct()
                    .toList();
            List<Integer> coordinators = new ArrayList<>();
            if (!ids.isEmpty()) {
                admin.describeTransactions(ids).all().get().values()
                        .forEach(d -> coordinators.add(d.coordinatorId()));
            }
            Map<Integer, List<String>> leads = new TreeMap<>();
            List<String> topics = new ArrayList<>(feed.topics());
            topics.add(outputTopic);
            topics.addAll(internalTopics("-changelog"));
            topics.addAll(internalTopics("-repartition"));
            for (TopicDescription d : admin.describeTopics(topics).allTopicNames().get().values()) {
                for (TopicPartitionInfo p : d.partitions()) {
                    String tp = d.name() + "-" + p.partition();
                    leads.computeIfAbsent(p.leader().id(), k -> new ArrayList<>()).add(tp);
                }
            }
            int victim = coordinators.stream().filter(agents::contains).findFirst()
                    .orElseGet(() -> leads.entrySet().stream().filter(e -> agents.contains(e.getKey()))
                            .max(Comparator.comparingInt(e -> e.getValue().size())).orElseThrow().getKey());
            assertTrue(coordinators.contains(victim) || leads.containsKey(victim),
                    "agent " + victim + " coordinates a transaction or leads a partition");
            note("killing agent " + victim + ": transaction coordinator of " + ids + ": "
                    + coordinators.contains(victim) + "; leads " + leads.getOrDefault(victim, List.of()));
            return victim;
        }

        @Override
        public void close() throws Exception {
            output.close();
            feed.close();
        }
    }

    /** Word count: lines of 1 to 4 words out of 40, keyed by line number. */
    private static final class WordCount extends Run {
        final String input;

        WordCount(Admin admin, Target t, int lines) throws Exception {
            this(admin, t, Kit.createTopic(admin, t, "words-in", PARTITIONS, Map.of()), lines);
        }

        private WordCount(Admin admin, Target t, String input, int lines) throws Exception {
            super(admin, t, "wordcount", lines(input, lines));
            this.input = input;
            expected.putAll(countsOf(lines));
        }

        /** The count of each word in the first {@code lines} lines. */
        Map<String, String> countsOf(int lines) {
            Map<String, Long> counts = new TreeMap<>();
            for (ProducerRecord<String, String> r : feed.records.subList(0, lines)) {
                for (String w : r.value().split(" ")) {
                    counts.merge(w, 1L, Long::sum);
                }
            }
            Map<String, String> out = new TreeMap<>();
            counts.forEach((w, c) -> out.put(w, Long.toString(c)));
            return out;
        }

        /** Waits until the committed counts are those of the first {@code lines} lines. */
        void awaitCounts(App app, int lines) {
            Map<String, String> want = countsOf(lines);
            await("the committed counts are those of the first " + lines + " lines", app, want,
                    () -> output.latest.equals(want));
        }

        private static List<ProducerRecord<String, String>> lines(String topic, int lines) {
            Random random = new Random(lines);
            List<ProducerRecord<String, String>> out = new ArrayList<>();
            for (int i = 0; i < lines; i++) {
                int n = 1 + random.nextInt(4);
                String line = Stream.generate(() -> String.format("w%02d", random.nextInt(40))).limit(n)
                        .collect(Collectors.joining(" "));
                out.add(new ProducerRecord<>(topic, "line-" + i, line));
            }
            return out;
        }

        @Override
        void topology(Properties p) {
            p.setProperty("app.topology", "wordcount");
            p.setProperty("app.input", input);
            p.setProperty("app.output", outputTopic);
        }

        /** Each word's committed counts, in order, are 1, 2, ... up to its occurrences. */
        void checkCounts(List<ConsumerRecord<String, String>> out) {
            Map<String, List<Long>> seen = new TreeMap<>();
            out.forEach(r -> seen.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(Long.parseLong(r.value())));
            Map<String, List<Long>> want = new TreeMap<>();
            expected.forEach((w, c) -> want.put(w,
                    LongStream.rangeClosed(1, Long.parseLong(c)).boxed().toList()));
            for (String w : want.keySet()) {
                assertEquals(want.get(w), seen.get(w), "the committed counts of " + w);
            }
            assertEquals(want.keySet(), seen.keySet(), "the words counted");
        }

        /**
         * Past the read_committed end at the kill, the restarted instance's first count of each
         * word is one more than the count committed before the kill.
         */
        void checkContinued(List<ConsumerRecord<String, String>> out, Map<TopicPartition, Long> lsoAtKill,
                Map<String, Long> countsAtKill) {
            Map<String, Long> firstAfter = new TreeMap<>();
            for (ConsumerRecord<String, String> r : out) {
                if (r.offset() >= lsoAtKill.get(new TopicPartition(r.topic(), r.partition()))) {
                    firstAfter.putIfAbsent(r.key(), Long.parseLong(r.value()));
                }
            }
            Map<String, Long> want = new TreeMap<>();
            firstAfter.keySet().forEach(w -> want.put(w, countsAtKill.getOrDefault(w, 0L) + 1));
            assertEquals(want, firstAfter, "each word's first count after the restart, given the counts at the kill "
                    + countsAtKill);
            assertTrue(firstAfter.keySet().stream().anyMatch(countsAtKill::containsKey),
                    "some word counted before the kill is counted again after it");
        }

        /** The restarted instance restored at least each word counted before the kill. */
        void checkRestored(App app, int words) throws Exception {
            String changelog = appId + "-" + StreamsApp.COUNTS + "-changelog";
            long restored = app.restored(StreamsApp.COUNTS);
            assertTrue(restored >= words, "the restarted instance restored the counts of the " + words
                    + " words committed before the kill from " + changelog + ": " + app.lines("RESTORED"));
            assertTrue(app.lines("RESTORED").stream().allMatch(l -> l.contains(" " + changelog + "-")),
                    "restored from " + changelog + ": " + app.lines("RESTORED"));
        }

        /**
         * The changelog is compacted, the repartition topic deleted by time and purged by
         * Streams with DeleteRecords once its records are processed.
         */
        void checkInternalTopics() throws Exception {
            String changelog = appId + "-" + StreamsApp.COUNTS + "-changelog";
            String repartition = appId + "-" + StreamsApp.WORDS + "-repartition";
            assertEquals(List.of(changelog), internalTopics("-changelog"), "the changelog");
            assertEquals(List.of(repartition), internalTopics("-repartition"), "the repartition topic");
            assertEquals("compact", config(changelog, "cleanup.policy"), "the changelog's cleanup.policy");
            assertEquals("delete", config(repartition, "cleanup.policy"), "the repartition topic's cleanup.policy");
            assertEquals("-1", config(repartition, "retention.ms"), "the repartition topic's retention.ms");
            checkLayout(changelog);
            checkLayout(repartition);
            Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
            Kit.partitions(repartition, PARTITIONS).forEach(tp -> earliest.put(tp, OffsetSpec.earliest()));
            Kit.eventually("Streams purges " + repartition + " with DeleteRecords", () -> {
                try {
                    return admin.listOffsets(earliest).all().get().values().stream()
                            .anyMatch(i -> i.offset() > 0);
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
        }
    }

    /** Orders and payments keyed by order id; the payment of an order comes 40 orders later. */
    private static final class Join extends Run {
        final String orders;
        final String payments;

        Join(Admin admin, Target t, int count) throws Exception {
            this(admin, t, Kit.createTopic(admin, t, "orders", PARTITIONS, Map.of()),
                    Kit.createTopic(admin, t, "payments", PARTITIONS, Map.of()), count);
        }

        private Join(Admin admin, Target t, String orders, String payments, int count) throws Exception {
            super(admin, t, "join", records(orders, payments, count));
            this.orders = orders;
            this.payments = payments;
            for (int i = 0; i < count; i++) {
                expected.put(order(i), "o" + i + "|p" + i);
            }
        }

        private static String order(int i) {
            return String.format("order-%05d", i);
        }

        private static List<ProducerRecord<String, String>> records(String orders, String payments, int count) {
            List<ProducerRecord<String, String>> out = new ArrayList<>();
            int lag = 40;
            for (int i = 0; i < count + lag; i++) {
                if (i < count) {
                    out.add(new ProducerRecord<>(orders, order(i), "o" + i));
                }
                if (i >= lag) {
                    out.add(new ProducerRecord<>(payments, order(i - lag), "p" + (i - lag)));
                }
            }
            return out;
        }

        @Override
        void topology(Properties p) {
            p.setProperty("app.topology", "join");
            p.setProperty("app.orders", orders);
            p.setProperty("app.payments", payments);
            p.setProperty("app.output", outputTopic);
        }
    }

    // ---------------------------------------------------------------- the test's means

    /** Sends the input in the background, a slice at a time, paced so it flows while the application runs. */
    private static final class Feed implements AutoCloseable {
        final List<ProducerRecord<String, String>> records;
        private final KafkaProducer<String, String> producer;
        private final ExecutorService sender = Executors.newSingleThreadExecutor();

        Feed(Target t, List<ProducerRecord<String, String>> records) {
            this.records = records;
            this.producer = Kit.producer(t, Map.of("acks", "all", "enable.idempotence", true,
                    "delivery.timeout.ms", 120_000, "linger.ms", 5));
        }

        int size() {
            return records.size();
        }

        Set<String> topics() {
            return records.stream().map(ProducerRecord::topic).collect(Collectors.toCollection(java.util.TreeSet::new));
        }

        /** Sends records [from, to); the future completes when every one is acknowledged. */
        Future<?> send(int from, int to) {
            return sender.submit(() -> {
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                for (int i = from; i < to; i++) {
                    acks.add(producer.send(records.get(i)));
                    if ((i - from) % 50 == 49) {
                        Thread.sleep(20);
                    }
                }
                producer.flush();
                for (Future<RecordMetadata> a : acks) {
                    a.get();
                }
                return null;
            });
        }

        @Override
        public void close() throws Exception {
            sender.shutdownNow();
            sender.awaitTermination(30, TimeUnit.SECONDS);
            producer.close(Duration.ofSeconds(10));
        }
    }

    /** The output as a read_committed consumer sees it, read as far as it goes at each poll. */
    private static final class Output implements AutoCloseable {
        final List<ConsumerRecord<String, String>> records = new ArrayList<>();
        final Map<String, String> latest = new HashMap<>();
        private final KafkaConsumer<String, String> consumer;

        Output(Target t, Collection<TopicPartition> tps) {
            consumer = Kit.consumer(t, READ_COMMITTED);
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
        }

        /** Reads up to the read_committed end offsets of now, and returns them. */
        Map<TopicPartition, Long> readToEnd() {
            Map<TopicPartition, Long> end = consumer.endOffsets(consumer.assignment());
            Kit.eventually("the output is read up to " + end,
                    () -> {
                        poll();
                        return end.entrySet().stream().allMatch(e -> consumer.position(e.getKey()) >= e.getValue());
                    });
            return end;
        }

        void poll() {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                records.add(r);
                latest.put(r.key(), r.value());
            }
        }

        @Override
        public void close() {
            consumer.close(Duration.ofSeconds(5));
        }
    }

    /** A {@link StreamsApp} in a JVM of its own, its output in a file. */
    private static final class App implements AutoCloseable {
        private final Process process;
        private final Path log;

        private App(Process process, Path log) {
            this.process = process;
            this.log = log;
        }

        static App start(Path base, Properties config) throws IOException {
            Files.createDirectories(base.getParent());
            Path props = Path.of(base + ".properties");
            try (OutputStream o = Files.newOutputStream(props)) {
                config.store(o, null);
            }
            Path log = Path.of(base + ".log");
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
            Process p = new ProcessBuilder(java, "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    "-Dorg.slf4j.simpleLogger.defaultLogLevel=" + System.getProperty("streams.log", "warn"),
                    "-cp", classpath, StreamsApp.class.getName(), props.toString())
                    .redirectErrorStream(true)
                    .redirectOutput(log.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                    .start();
            return new App(p, log);
        }

        boolean alive() {
            return process.isAlive();
        }

        void awaitRunning() {
            long deadline = System.nanoTime() + CATCH_UP.toNanos();
            while (!lines("STATE RUNNING").iterator().hasNext()) {
                if (!process.isAlive() || System.nanoTime() > deadline) {
                    fail("the Streams application did not reach RUNNING; its log ends with:\n" + tail(40));
                }
                sleep(100);
            }
            note(log.getFileName() + ": RUNNING");
        }

        /** SIGKILL, and waits until it is gone. */
        void kill() throws InterruptedException {
            process.destroyForcibly();
            assertTrue(process.waitFor(30, TimeUnit.SECONDS), "the Streams application exits on SIGKILL");
            note(log.getFileName() + ": killed");
        }

        List<String> lines(String prefix) {
            return all().stream().filter(l -> l.startsWith(prefix)).toList();
        }

        /** Records restored into stores whose names start with {@code store}. */
        long restored(String store) {
            return lines("RESTORED " + store).stream()
                    .mapToLong(l -> Long.parseLong(l.substring(l.lastIndexOf(' ') + 1))).sum();
        }

        String tail(int n) {
            List<String> all = all();
            return String.join("\n", all.subList(Math.max(0, all.size() - n), all.size()));
        }

        private List<String> all() {
            try {
                return Files.readAllLines(log);
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        }

        @Override
        public void close() throws InterruptedException {
            if (process.isAlive()) {
                process.destroy();
                if (!process.waitFor(30, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                    process.waitFor(10, TimeUnit.SECONDS);
                }
            }
        }
    }

    /** An agent started by scripts/java-tests.sh: its process id file, start script and log. */
    private static final class Agent {
        private final Path prefix;
        private int listening;

        Agent(Path prefix) {
            this.prefix = prefix;
        }

        private Path file(String suffix) {
            return Path.of(prefix + suffix);
        }

        private int listeningLines() {
            try {
                return (int) Files.readAllLines(file(".log")).stream()
                        .filter(l -> l.contains("aerostream listening")).count();
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        }

        void kill() throws Exception {
            long pid = Long.parseLong(Files.readString(file(".pid")).trim());
            listening = listeningLines();
            ProcessHandle h = ProcessHandle.of(pid).orElseThrow(() -> new AssertionError("no agent process " + pid));
            assertTrue(h.destroyForcibly(), "SIGKILL to agent process " + pid);
            Kit.eventually("agent process " + pid + " exits",
                    () -> ProcessHandle.of(pid).map(p -> !p.isAlive()).orElse(true));
            note("agent " + prefix.getFileName() + " killed");
        }

        void restart() throws Exception {
            Process p = new ProcessBuilder("bash", file(".run").toString())
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectErrorStream(true)
                    .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                    .start();
            Files.writeString(file(".pid"), p.pid() + "\n");
            Kit.eventually("the restarted agent serves (" + file(".log") + ")", () -> {
                if (!p.isAlive()) {
                    fail("the restarted agent exited; see " + file(".log"));
                }
                return listeningLines() > listening;
            });
            note("agent " + prefix.getFileName() + " serves again");
        }
    }

    /** A line in the test's output, for reading what happened when. */
    private static void note(String what) {
        System.out.println(java.time.LocalTime.now() + " " + what);
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }
}
