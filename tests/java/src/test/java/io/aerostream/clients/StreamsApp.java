package io.aerostream.clients;

import java.io.FileInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A Kafka Streams application run in a JVM of its own by {@link StreamsTest}, so the test can
 * kill it with SIGKILL. Its one argument is a properties file: the Streams configuration, and
 * {@code app.topology} ({@code wordcount} or {@code join}) with the topics it names.
 *
 * <p>It prints one line per event the test waits for or checks, to its standard output:
 * {@code STATE <new state>}, {@code RESTORED <store> <topic-partition> <records>} when a
 * store's restoration from its changelog ends, and {@code UNCAUGHT <exception>} when a stream
 * thread fails (it is then replaced).
 */
public final class StreamsApp {
    private StreamsApp() {}

    /** The word count's store; its changelog is {@code <application.id>-counts-changelog}. */
    static final String COUNTS = "counts";
    /** The word count's repartition (by word); the topic is {@code <application.id>-words-repartition}. */
    static final String WORDS = "words";
    /** The join's window stores are named from this. */
    static final String JOIN = "orders-payments";

    public static void main(String[] args) throws Exception {
        say("START " + java.time.LocalTime.now());
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        String kind = (String) props.remove("app.topology");
        String output = (String) props.remove("app.output");
        Topology topology = switch (kind) {
            case "wordcount" -> wordCount((String) props.remove("app.input"), output);
            case "join" -> join((String) props.remove("app.orders"), (String) props.remove("app.payments"), output);
            default -> throw new IllegalArgumentException("unknown app.topology " + kind);
        };
        KafkaStreams streams = new KafkaStreams(topology, props);
        streams.setStateListener((now, before) -> say("STATE " + now + " " + java.time.LocalTime.now()));
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {}

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long restored) {}

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long restored) {
                say("RESTORED " + store + " " + tp + " " + restored);
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            say("UNCAUGHT " + e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /**
     * Lines of words in, the count of each word out (key: the word, value: its count in
     * decimal): a repartition by word, a RocksDB key-value store and its changelog.
     */
    static Topology wordCount(String input, String output) {
        StreamsBuilder b = new StreamsBuilder();
        b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.split(" ")))
                .groupBy((key, word) -> word, Grouped.with(WORDS, Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(COUNTS)
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .mapValues(count -> Long.toString(count))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return b.build();
    }

    /**
     * Orders and payments keyed by order id, joined within a window into one record per order
     * ({@code order|payment}): each side waits for the other in a RocksDB window store with a
     * changelog.
     */
    static Topology join(String orders, String payments, String output) {
        StreamsBuilder b = new StreamsBuilder();
        KStream<String, String> o = b.stream(orders, Consumed.with(Serdes.String(), Serdes.String()));
        KStream<String, String> p = b.stream(payments, Consumed.with(Serdes.String(), Serdes.String()));
        o.join(p, (order, payment) -> order + "|" + payment,
                        JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMinutes(10), Duration.ofMinutes(10)),
                        StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String())
                                .withStoreName(JOIN))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return b.build();
    }
}
