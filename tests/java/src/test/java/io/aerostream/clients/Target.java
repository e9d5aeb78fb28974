package io.aerostream.clients;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * A running broker (or cluster) that every test is run against.
 *
 * <p>Named by system properties: {@code -Dtargets=aerostream-single,kafka} and for each
 * name {@code target.NAME.bootstrap} (required), {@code target.NAME.brokers} (how many
 * brokers it has, default 1), {@code target.NAME.authorizer} ({@code true} when the
 * broker authorizes requests, so the ACL APIs work) and {@code target.NAME.sasl}
 * ({@code MECHANISM:USER:PASSWORD}, to log in with SASL over plaintext) and
 * {@code target.NAME.agents} ({@code ID=PREFIX,...}: AeroStream's agents by node id, each
 * with a {@code PREFIX.pid} file holding its process id and a {@code PREFIX.run} script
 * that starts it again, so a test can kill and restart it). Without
 * {@code targets}, the environment's {@code BOOTSTRAP} (with {@code TARGET},
 * {@code BROKERS}, {@code AUTHORIZER}, {@code SASL}) names a single one.
 */
public record Target(String name, String bootstrap, int brokers, boolean authorizer, String sasl,
        Map<Integer, Path> agents) {

    private static final List<Target> ALL = load();

    /** For {@code @MethodSource}: every configured target. */
    public static Stream<Target> all() {
        return ALL.stream();
    }

    private static List<Target> load() {
        String names = System.getProperty("targets", "");
        List<Target> out = new ArrayList<>();
        if (names.isBlank()) {
            String bootstrap = System.getenv("BOOTSTRAP");
            if (bootstrap == null || bootstrap.isBlank()) {
                throw new IllegalStateException(
                        "no broker to test: set -Dtargets=NAME,... with -Dtarget.NAME.bootstrap=HOST:PORT, "
                                + "or BOOTSTRAP=HOST:PORT (scripts/java-tests.sh starts the brokers and does this)");
            }
            out.add(new Target(
                    env("TARGET", "default"),
                    bootstrap,
                    Integer.parseInt(env("BROKERS", "1")),
                    Boolean.parseBoolean(env("AUTHORIZER", "false")),
                    env("SASL", ""),
                    Map.of()));
            return out;
        }
        for (String name : names.split(",")) {
            name = name.trim();
            String bootstrap = System.getProperty("target." + name + ".bootstrap");
            if (bootstrap == null) {
                throw new IllegalStateException("target " + name + " has no -Dtarget." + name + ".bootstrap");
            }
            out.add(new Target(
                    name,
                    bootstrap,
                    Integer.parseInt(System.getProperty("target." + name + ".brokers", "1")),
                    Boolean.parseBoolean(System.getProperty("target." + name + ".authorizer", "false")),
                    System.getProperty("target." + name + ".sasl", ""),
                    agents(System.getProperty("target." + name + ".agents", ""))));
        }
        return out;
    }

    private static Map<Integer, Path> agents(String spec) {
        Map<Integer, Path> out = new TreeMap<>();
        for (String one : spec.split(",")) {
            if (one.isBlank()) {
                continue;
            }
            String[] parts = one.trim().split("=", 2);
            out.put(Integer.parseInt(parts[0]), Path.of(parts[1]));
        }
        return Map.copyOf(out);
    }

    private static String env(String name, String otherwise) {
        String v = System.getenv(name);
        return v == null || v.isBlank() ? otherwise : v;
    }

    /** Replicas per partition for the topics the tests create: all brokers, up to 3. */
    public short replicationFactor() {
        return (short) Math.min(3, brokers);
    }

    /** The addresses clients bootstrap from. */
    public List<String> bootstrapAddresses() {
        return Arrays.stream(bootstrap.split(",")).map(String::trim).toList();
    }

    /** Connection settings every client of this target starts from. */
    public Map<String, Object> clientConfig() {
        Map<String, Object> c = new HashMap<>();
        c.put("bootstrap.servers", bootstrap);
        c.put("client.id", "aerostream-java-tests");
        c.put("request.timeout.ms", 30_000);
        c.put("default.api.timeout.ms", 60_000);
        if (!sasl.isBlank()) {
            String[] parts = sasl.split(":", 3);
            String module = parts[0].startsWith("SCRAM")
                    ? "org.apache.kafka.common.security.scram.ScramLoginModule"
                    : "org.apache.kafka.common.security.plain.PlainLoginModule";
            c.put("security.protocol", "SASL_PLAINTEXT");
            c.put("sasl.mechanism", parts[0]);
            c.put("sasl.jaas.config",
                    module + " required username=\"" + parts[1] + "\" password=\"" + parts[2] + "\";");
        }
        return c;
    }

    public Properties properties() {
        Properties p = new Properties();
        p.putAll(clientConfig());
        return p;
    }

    @Override
    public String toString() {
        return name;
    }
}
