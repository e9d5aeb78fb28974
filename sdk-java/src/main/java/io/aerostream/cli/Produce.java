package io.aerostream.cli;

import io.aerostream.AeroStreamClient;
import io.aerostream.Compression;
import io.aerostream.Producer;
import io.aerostream.ProducerConfig;
import io.aerostream.ProducerRecord;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

/** Produces each line of stdin as one record (bin/produce). */
public final class Produce {
    private Produce() {}

    public static void main(String[] args) {
        try {
            System.exit(run(args));
        } catch (Exception e) {
            Flags.fail("produce", e);
        }
    }

    static int run(String[] args) throws Exception {
        Flags flags = new Flags("produce", Map.of(
                "topic", "topic to produce to",
                "key-sep", "split each line at the first occurrence of this separator into key and value",
                "compression", "compression of the batches: none, gzip, snappy, lz4 or zstd (default none)",
                "transactional-id", "send all of stdin in one transaction of this transactional id, committed at the end of stdin (fences earlier producers of the id)",
                "abort", "with --transactional-id: abort the transaction instead of committing it"), Set.of("abort"));
        if (!flags.parse(args)) {
            return 0;
        }
        String topic = flags.require("topic", "");
        String sep = flags.get("key-sep", "");
        Compression codec = Compression.parse(flags.get("compression", "none"));
        String txn = flags.get("transactional-id", "");
        boolean abort = flags.has("abort");
        if (abort && txn.isEmpty()) {
            throw new IllegalArgumentException("--abort goes with --transactional-id");
        }
        AtomicLong failed = new AtomicLong();
        try (AeroStreamClient client = flags.connect("aerostream-java-produce");
                Producer producer = client.producer(new ProducerConfig().compression(codec).transactionalId(txn))) {
            if (!txn.isEmpty()) {
                producer.beginTransaction();
            }
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
            String line;
            while ((line = in.readLine()) != null) {
                byte[] key = null;
                String value = line;
                if (!sep.isEmpty()) {
                    int at = line.indexOf(sep);
                    if (at >= 0) {
                        key = line.substring(0, at).getBytes(StandardCharsets.UTF_8);
                        value = line.substring(at + sep.length());
                    }
                }
                producer.send(new ProducerRecord(topic, key, value.getBytes(StandardCharsets.UTF_8)))
                        .whenComplete((md, err) -> {
                            if (err != null && failed.incrementAndGet() <= 10) {
                                System.err.println("produce failed: " + err.getMessage());
                            }
                        });
            }
            producer.flush();
            if (!txn.isEmpty()) {
                if (abort || failed.get() > 0) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
        }
        if (failed.get() > 0) {
            System.err.println("produce: " + failed.get() + " records failed");
            return 1;
        }
        return 0;
    }
}
