package io.aerostream.cli;

import io.aerostream.AeroStreamClient;
import io.aerostream.AeroStreamException;
import io.aerostream.Consumer;
import io.aerostream.ConsumerConfig;
import io.aerostream.ConsumerRecord;
import io.aerostream.ErrorCode;
import io.aerostream.Producer;
import io.aerostream.ProducerConfig;
import io.aerostream.ProducerRecord;
import io.aerostream.TopicPartition;
import io.aerostream.proto.Messages;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The load generator's "small" workload against a running agent (bin/bench):
 * producers at a paced rate (or as fast as their buffers take), consumers
 * measuring end-to-end latency, one JSON report in the shape every
 * AeroStream SDK's bench writes.
 */
public final class Bench {
    private Bench() {}

    public static void main(String[] args) {
        try {
            System.exit(run(args));
        } catch (Exception e) {
            Flags.fail("bench", e);
        }
    }

    /** Latencies in nanoseconds, kept whole and sorted for percentiles. */
    static final class Latencies {
        private long[] v = new long[1 << 16];
        private int n;

        synchronized void add(long nanos) {
            if (n == v.length) {
                v = Arrays.copyOf(v, v.length * 2);
            }
            v[n++] = nanos;
        }

        synchronized void addAll(Latencies o) {
            synchronized (o) {
                for (int i = 0; i < o.n; i++) {
                    add(o.v[i]);
                }
            }
        }

        synchronized String json() {
            long[] s = Arrays.copyOf(v, n);
            Arrays.sort(s);
            return String.format(Locale.ROOT, "{\"p50_ms\": %s, \"p99_ms\": %s, \"p999_ms\": %s, \"max_ms\": %s}",
                    ms(pct(s, 0.50)), ms(pct(s, 0.99)), ms(pct(s, 0.999)), ms(n == 0 ? 0 : s[n - 1]));
        }

        synchronized double p(double q) {
            long[] s = Arrays.copyOf(v, n);
            Arrays.sort(s);
            return pct(s, q) / 1e6;
        }

        private static long pct(long[] s, double q) {
            if (s.length == 0) {
                return 0;
            }
            int i = (int) Math.ceil(q * s.length) - 1;
            return s[Math.max(0, Math.min(s.length - 1, i))];
        }

        private static String ms(long nanos) {
            return String.format(Locale.ROOT, "%.3f", nanos / 1e6);
        }
    }

    /** Wall-clock time in nanoseconds since the Unix epoch, monotonic within this process. */
    static final long EPOCH_BASE = System.currentTimeMillis() * 1_000_000L - System.nanoTime();

    static long nowEpochNanos() {
        return EPOCH_BASE + System.nanoTime();
    }

    static int run(String[] args) throws Exception {
        Map<String, String> help = new HashMap<>();
        help.put("topic", "topic to load (created when missing)");
        help.put("partitions", "partitions of the topic when it is created (default 8)");
        help.put("size", "bytes per record value (default 1024, at least 8)");
        help.put("producers", "independent producers, each its own connection (default 2)");
        help.put("consumers", "consumers sharing the partitions (default 2)");
        help.put("rate", "records per second in total, or max (default 20000)");
        help.put("warmup", "seconds run before measuring (default 5)");
        help.put("duration", "seconds measured (default 30)");
        help.put("json", "write the JSON report to this file (default: stdout only)");
        Flags flags = new Flags("bench", help, java.util.Set.of());
        if (!flags.parse(args)) {
            return 0;
        }
        String topic = flags.require("topic", "");
        String transport = flags.get("bootstrap", "").startsWith("aero+quic://") ? "quic" : "tcp";
        int partitions = (int) flags.getLong("partitions", 8);
        int size = (int) flags.getLong("size", 1024);
        int producers = (int) flags.getLong("producers", 2);
        int consumers = (int) flags.getLong("consumers", 2);
        String rateFlag = flags.get("rate", "20000");
        boolean max = rateFlag.equals("max");
        long rate = max ? 0 : Long.parseLong(rateFlag);
        long warmup = flags.getLong("warmup", 5);
        long duration = flags.getLong("duration", 30);
        if (size < 8 || producers < 1 || consumers < 0 || duration < 1 || warmup < 0 || (!max && rate < 1)) {
            throw new IllegalArgumentException("--size >= 8, --producers >= 1, --consumers >= 0, --duration >= 1, "
                    + "--warmup >= 0 and --rate >= 1 or max");
        }

        // the topic, usable: every partition answers ListOffsets
        AeroStreamClient admin = flags.connect("aerostream-java-bench");
        try {
            admin.createTopic(topic, partitions, (short) -1, Map.of());
        } catch (AeroStreamException e) {
            if (e.code() != ErrorCode.TOPIC_ALREADY_EXISTS) {
                throw e;
            }
        }
        long usableBy = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        int parts;
        Map<TopicPartition, Long> latest = new HashMap<>();
        while (true) {
            try {
                parts = admin.partitions(topic);
                latest.clear();
                for (int p = 0; p < parts; p++) {
                    latest.put(new TopicPartition(topic, p), admin.listOffset(topic, p, Messages.SPEC_LATEST));
                }
                break;
            } catch (AeroStreamException e) {
                if (System.nanoTime() > usableBy) {
                    throw new AeroStreamException("topic " + topic + " is not usable after 30 s: " + e.getMessage(), e);
                }
                Thread.sleep(200);
            }
        }

        long start = nowEpochNanos() + 200_000_000L; // everyone starts together
        long windowStart = start + warmup * 1_000_000_000L;
        long windowEnd = windowStart + duration * 1_000_000_000L;

        // consumers: partitions round-robin, from the latest offsets taken before producing
        List<AeroStreamClient> clients = new ArrayList<>();
        clients.add(admin);
        Latencies e2e = new Latencies();
        AtomicLong consumed = new AtomicLong();
        List<Thread> consumerThreads = new ArrayList<>();
        List<Consumer> consumerList = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            Map<TopicPartition, Long> mine = new HashMap<>();
            for (int p = i; p < parts; p += consumers) {
                TopicPartition tp = new TopicPartition(topic, p);
                mine.put(tp, latest.get(tp));
            }
            if (mine.isEmpty()) {
                continue;
            }
            AeroStreamClient c = flags.connect("aerostream-java-bench-consumer-" + i);
            clients.add(c);
            Consumer consumer = c.consumer(new ConsumerConfig().maxWait(Duration.ofMillis(100)));
            consumer.assign(mine);
            consumerList.add(consumer);
            Latencies mineLat = new Latencies();
            Thread t = new Thread(() -> {
                long count = 0;
                try {
                    while (!Thread.currentThread().isInterrupted()) {
                        ConsumerRecord r = consumer.poll(Duration.ofMillis(100));
                        if (r == null || r.value() == null || r.value().length < 8) {
                            continue;
                        }
                        long now = nowEpochNanos();
                        long sent = ByteBuffer.wrap(r.value(), 0, 8).getLong();
                        if (sent >= windowStart && sent < windowEnd) {
                            mineLat.add(now - sent);
                            consumed.incrementAndGet();
                        }
                    }
                } catch (AeroStreamException e) {
                    if (!Thread.currentThread().isInterrupted()) {
                        System.err.println("bench: consumer failed: " + e.getMessage());
                    }
                }
                e2e.addAll(mineLat);
            }, "bench-consumer-" + i);
            consumerThreads.add(t);
            t.start();
        }

        // producers: open-loop schedule, R/N records per second each
        Latencies publish = new Latencies();
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicLong failedAll = new AtomicLong();
        List<Thread> producerThreads = new ArrayList<>();
        List<Producer> producerList = new ArrayList<>();
        double perProducer = max ? 0 : (double) rate / producers;
        for (int i = 0; i < producers; i++) {
            AeroStreamClient c = flags.connect("aerostream-java-bench-producer-" + i);
            clients.add(c);
            Producer producer = c.producer(new ProducerConfig().acks(-1).linger(Duration.ofMillis(1))
                    .batchBytes(128 << 10));
            producerList.add(producer);
            Thread t = new Thread(() -> {
                byte[] filler = new byte[size];
                ThreadLocalRandom.current().nextBytes(filler);
                long sentCount = 0;
                while (true) {
                    long now = nowEpochNanos();
                    if (now >= windowEnd) {
                        break;
                    }
                    if (!max) {
                        long due = start + (long) (sentCount * 1e9 / perProducer);
                        if (due > now) {
                            LockSupport.parkNanos(Math.min(due - now, 50_000_000L));
                            continue;
                        }
                    } else if (now < start) {
                        LockSupport.parkNanos(start - now);
                        continue;
                    }
                    byte[] value = filler.clone();
                    long sendAt = nowEpochNanos();
                    ByteBuffer.wrap(value).putLong(0, sendAt);
                    boolean counted = sendAt >= windowStart && sendAt < windowEnd;
                    long t0 = System.nanoTime();
                    try {
                        producer.send(new ProducerRecord(topic, value)).whenComplete((md, err) -> {
                            if (err != null) {
                                if (failedAll.incrementAndGet() <= 5) {
                                    System.err.println("bench: send failed: " + err.getMessage());
                                }
                                if (counted) {
                                    failed.incrementAndGet();
                                }
                            } else if (counted) {
                                publish.add(System.nanoTime() - t0);
                                acked.incrementAndGet();
                            }
                        });
                    } catch (AeroStreamException e) {
                        failedAll.incrementAndGet();
                        if (counted) {
                            failed.incrementAndGet();
                        }
                    }
                    sentCount++;
                }
                producer.flush();
            }, "bench-producer-" + i);
            producerThreads.add(t);
        }
        producerThreads.forEach(Thread::start);

        var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        sleepUntil(windowStart);
        long cpu0 = os.getProcessCpuTime();
        long wall0 = System.nanoTime();
        sleepUntil(windowEnd);
        long cpu1 = os.getProcessCpuTime();
        long wall1 = System.nanoTime();
        for (Thread t : producerThreads) {
            t.join();
        }
        // drain: every record acknowledged in the window read back, for up to 30 s
        long drainBy = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        boolean drained = consumers == 0;
        while (!drained && System.nanoTime() < drainBy) {
            drained = consumed.get() >= acked.get();
            if (!drained) {
                Thread.sleep(50);
            }
        }
        for (Thread t : consumerThreads) {
            t.interrupt();
        }
        for (Thread t : consumerThreads) {
            t.join(10000);
        }
        for (Consumer c : consumerList) {
            c.close();
        }
        for (Producer p : producerList) {
            p.close();
        }
        for (AeroStreamClient c : clients) {
            c.close();
        }

        double secs = duration;
        double cpuPct = (cpu1 - cpu0) / (double) (wall1 - wall0) * 100.0;
        String json = String.format(Locale.ROOT, "{\"sdk\": \"java\", \"transport\": \"%s\", \"rate\": %s, "
                + "\"size\": %d, \"partitions\": %d, \"producers\": %d, \"consumers\": %d, \"measured_secs\": %.1f, "
                + "\"publish\": {\"messages\": %d, \"msgs_per_sec\": %.1f, \"failed\": %d}, "
                + "\"consume\": {\"messages\": %d, \"msgs_per_sec\": %.1f}, "
                + "\"publish_latency\": %s, \"end_to_end_latency\": %s, \"cpu_percent\": %.1f, \"rss_max_mib\": %.1f}",
                transport, max ? "\"max\"" : Long.toString(rate), size, parts, producers, consumers, secs,
                acked.get(), acked.get() / secs, failed.get(), consumed.get(), consumed.get() / secs,
                publish.json(), e2e.json(), cpuPct, rssMaxMib());
        System.out.println(json);
        if (flags.has("json")) {
            Files.writeString(Path.of(flags.get("json", "")), json + "\n", StandardCharsets.UTF_8);
        }
        System.err.printf(Locale.ROOT, "bench: java/%s rate %s: published %d (%.0f/s, %d failed), consumed %d "
                + "(%.0f/s); publish p50 %.3f ms p99 %.3f ms; end-to-end p50 %.3f ms p99 %.3f ms; cpu %.0f%%%s%n",
                transport, rateFlag, acked.get(), acked.get() / secs, failed.get(), consumed.get(), consumed.get() / secs,
                publish.p(0.5), publish.p(0.99), e2e.p(0.5), e2e.p(0.99), cpuPct,
                drained ? "" : "; the consumers did NOT drain within 30 s");
        return failedAll.get() > 0 || !drained ? 1 : 0;
    }

    private static void sleepUntil(long epochNanos) throws InterruptedException {
        long left;
        while ((left = epochNanos - nowEpochNanos()) > 0) {
            Thread.sleep(Math.max(1, Math.min(left / 1_000_000, 200)));
        }
    }

    private static double rssMaxMib() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    String kb = line.substring(6).trim().split("\\s+")[0];
                    return Long.parseLong(kb) / 1024.0;
                }
            }
        } catch (IOException | RuntimeException e) {
            // not Linux: unknown
        }
        return -1;
    }
}
