package io.aerostream.cli;

import io.aerostream.AeroStreamClient;
import io.aerostream.Consumer;
import io.aerostream.ConsumerConfig;
import io.aerostream.ConsumerRecord;
import io.aerostream.StartAt;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.time.Duration;
import java.util.Map;
import java.util.Set;

/** Prints the value of each record of a topic, one a line (bin/consume). */
public final class Consume {
    private Consume() {}

    public static void main(String[] args) {
        try {
            System.exit(run(args));
        } catch (Exception e) {
            Flags.fail("consume", e);
        }
    }

    static int run(String[] args) throws IOException {
        Flags flags = new Flags("consume", Map.of(
                "topic", "topic to read",
                "from", "earliest, latest or an offset (with --group: where partitions without a committed offset start; default earliest)",
                "count", "stop after this many records (default: run until interrupted)",
                "group", "read as a member of this consumer group, committing what was read",
                "isolation", "read-uncommitted (default), or read-committed: transactional records once committed, never aborted ones"),
                Set.of());
        if (!flags.parse(args)) {
            return 0;
        }
        String topic = flags.require("topic", "");
        StartAt from = StartAt.parse(flags.get("from", "earliest"));
        long count = flags.getLong("count", -1);
        String group = flags.get("group", "");
        String isolation = flags.get("isolation", "read-uncommitted");
        boolean committed;
        switch (isolation) {
            case "read-uncommitted", "read_uncommitted" -> committed = false;
            case "read-committed", "read_committed" -> committed = true;
            default -> throw new IllegalArgumentException("--isolation \"" + isolation
                    + "\" is not read-committed or read-uncommitted");
        }
        if (!group.isEmpty() && from.kind() == 0) {
            throw new IllegalArgumentException("--from with --group: use earliest or latest");
        }
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out, 1 << 16), false);
        try (AeroStreamClient client = flags.connect("aerostream-java-consume")) {
            ConsumerConfig cfg = new ConsumerConfig().group(group).readCommitted(committed);
            if (!group.isEmpty()) {
                cfg.reset(from);
            }
            Consumer consumer = client.consumer(cfg);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                out.flush();
            }));
            try {
                if (group.isEmpty()) {
                    consumer.assign(topic, null, from);
                } else {
                    consumer.subscribe(topic);
                }
                for (long seen = 0; count < 0 || seen < count; ) {
                    ConsumerRecord r = consumer.poll(Duration.ofMillis(200));
                    if (r == null) {
                        out.flush();
                        if (out.checkError()) {
                            break; // the reader went away
                        }
                        continue;
                    }
                    if (r.value() != null) {
                        out.write(r.value());
                    }
                    out.write('\n');
                    seen++;
                }
                out.flush();
            } finally {
                consumer.close();
            }
        }
        return 0;
    }
}
