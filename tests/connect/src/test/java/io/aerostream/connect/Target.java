package io.aerostream.connect;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * A running broker (or cluster) the tests run Connect against.
 *
 * <p>Named by system properties: {@code -Dtargets=aerostream-single,kafka} and for each
 * name {@code target.NAME.bootstrap} (required) and {@code target.NAME.brokers} (how many
 * brokers it has, default 1). The target named {@code kafka} is Apache Kafka's broker,
 * the reference: MirrorMaker 2 copies between it and each AeroStream target.
 */
public record Target(String name, String bootstrap, int brokers) {

    private static final List<Target> ALL = load();

    /** For {@code @MethodSource}: every configured target. */
    public static Stream<Target> all() {
        return ALL.stream();
    }

    /** For {@code @MethodSource}: every configured AeroStream target (all but {@code kafka}). */
    public static Stream<Target> aerostream() {
        return ALL.stream().filter(t -> !t.isKafka());
    }

    /** Apache Kafka's broker, when it is one of the targets. */
    public static Optional<Target> kafka() {
        return ALL.stream().filter(Target::isKafka).findFirst();
    }

    private static List<Target> load() {
        String names = System.getProperty("targets", "");
        if (names.isBlank()) {
            throw new IllegalStateException("no broker to test: set -Dtargets=NAME,... with "
                    + "-Dtarget.NAME.bootstrap=HOST:PORT (scripts/connect-tests.sh starts the brokers and does this)");
        }
        List<Target> out = new ArrayList<>();
        for (String name : names.split(",")) {
            name = name.trim();
            String bootstrap = System.getProperty("target." + name + ".bootstrap");
            if (bootstrap == null) {
                throw new IllegalStateException("target " + name + " has no -Dtarget." + name + ".bootstrap");
            }
            out.add(new Target(name, bootstrap,
                    Integer.parseInt(System.getProperty("target." + name + ".brokers", "1"))));
        }
        return out;
    }

    public boolean isKafka() {
        return name.equals("kafka");
    }

    /** Replicas per partition for the topics the tests and Connect create: all brokers, up to 3. */
    public short replicationFactor() {
        return (short) Math.min(3, brokers);
    }

    /** Connection settings every client of this target starts from. */
    public Map<String, Object> clientConfig() {
        Map<String, Object> c = new HashMap<>();
        c.put("bootstrap.servers", bootstrap);
        c.put("client.id", "aerostream-connect-tests");
        c.put("request.timeout.ms", 30_000);
        c.put("default.api.timeout.ms", 60_000);
        return c;
    }

    @Override
    public String toString() {
        return name;
    }
}
