package io.aerostream;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.HttpURLConnection;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real agent for the integration tests: the binary of AEROSTREAM_BIN on
 * free ports of 127.0.0.1, its data in a temporary folder, killed at close.
 * Tests that need one are skipped when AEROSTREAM_BIN is unset.
 */
final class TestAgent implements AutoCloseable {
    final String nativeAddr;
    final String kafka;
    final String bootstrap;
    final Path dir;
    final Path dataDir;
    private final String http;
    private final Path log;
    private final Process process;
    private final Thread reaper;

    static String bin() {
        String b = System.getenv("AEROSTREAM_BIN");
        return b == null || b.isEmpty() ? null : b;
    }

    /** Skips the calling test unless AEROSTREAM_BIN names an agent binary. */
    static String need() {
        String b = bin();
        assumeTrue(b != null, "AEROSTREAM_BIN is unset: set it to an aerostream binary "
                + "(cargo build -p agent --bin aerostream) to run the tests against a real agent");
        return b;
    }

    static List<Integer> freePorts(int n) throws IOException {
        List<Integer> out = new ArrayList<>();
        Set<Integer> seen = new HashSet<>();
        InetAddress lo = InetAddress.getByName("127.0.0.1");
        for (int tries = 0; out.size() < n && tries < 1000; tries++) {
            int p;
            try (ServerSocket s = new ServerSocket(0, 1, lo)) {
                p = s.getLocalPort();
            }
            try (DatagramSocket u = new DatagramSocket(p, lo)) {
                if (seen.add(p)) {
                    out.add(p);
                }
            } catch (IOException e) {
                // the UDP port of that number is taken: another
            }
        }
        if (out.size() < n) {
            throw new IOException("no free ports");
        }
        return out;
    }

    static TestAgent start(String... extra) throws Exception {
        String bin = need();
        List<Integer> ports = freePorts(3);
        TestAgent a = new TestAgent(bin, Files.createTempDirectory("aerostream-java-agent"), ports, extra);
        a.ready();
        return a;
    }

    /** Agents forming one cluster, closed together. */
    record Cluster(List<TestAgent> agents, Path dir) implements AutoCloseable {
        @Override
        public void close() throws Exception {
            for (TestAgent a : agents) {
                a.close();
            }
            deleteTree(dir);
        }
    }

    /** A cluster of n agents (node ids 1..n, racks rack-1..rack-n) with their own cluster CA. */
    static Cluster startCluster(int n, String... extra) throws Exception {
        String bin = need();
        Path dir = Files.createTempDirectory("aerostream-java-cluster");
        Path certs = dir.resolve("certs");
        List<String> ids = new ArrayList<>();
        for (int i = 1; i <= n; i++) {
            ids.add(Integer.toString(i));
        }
        Process ca = new ProcessBuilder(bin, "cluster-ca", "--out", certs.toString(), "--nodes", String.join(",", ids))
                .redirectErrorStream(true).start();
        String caOut = new String(ca.getInputStream().readAllBytes());
        if (ca.waitFor() != 0) {
            throw new IllegalStateException("cluster-ca: " + caOut);
        }
        List<Integer> ports = freePorts(4 * n);
        List<String> voters = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            voters.add((i + 1) + "@127.0.0.1:" + ports.get(4 * i + 3));
        }
        List<TestAgent> agents = new ArrayList<>();
        Cluster cluster = new Cluster(agents, dir);
        try {
            for (int i = 0; i < n; i++) {
                List<String> args = new ArrayList<>(List.of("--node-id", ids.get(i), "--rack", "rack-" + ids.get(i),
                        "--cluster-addr", "127.0.0.1:" + ports.get(4 * i + 3),
                        "--voters", String.join(",", voters),
                        "--cluster-certs", certs.toString()));
                args.addAll(List.of(extra));
                Path node = dir.resolve("node-" + ids.get(i));
                Files.createDirectories(node);
                agents.add(new TestAgent(bin, node, ports.subList(4 * i, 4 * i + 3), args.toArray(new String[0])));
            }
            for (TestAgent a : agents) {
                a.ready();
            }
        } catch (Exception e) {
            cluster.close();
            throw e;
        }
        return cluster;
    }

    private TestAgent(String bin, Path dir, List<Integer> ports, String[] extra) throws Exception {
        this.dir = dir;
        this.dataDir = dir.resolve("data");
        this.nativeAddr = "127.0.0.1:" + ports.get(0);
        this.kafka = "127.0.0.1:" + ports.get(1);
        this.http = "127.0.0.1:" + ports.get(2);
        this.bootstrap = "aero://" + nativeAddr;
        this.log = dir.resolve("agent.log");
        List<String> cmd = new ArrayList<>(List.of(bin, "serve",
                "--data-dir", dataDir.toString(),
                "--native-addr", nativeAddr,
                "--kafka-addr", kafka,
                "--http-addr", http,
                "--shards", "2",
                "--group-initial-rebalance-delay-ms", "200",
                "--schema-registry-addr", "off",
                "--connect-addr", "off"));
        cmd.addAll(List.of(extra));
        process = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        reaper = new Thread(process::destroyForcibly);
        Runtime.getRuntime().addShutdownHook(reaper);
    }

    private void ready() throws Exception {
        try {
            waitReady();
        } catch (Exception e) {
            close();
            throw e;
        }
    }

    String logTail() {
        try {
            List<String> lines = Files.readAllLines(log);
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    private void waitReady() throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        while (true) {
            if (!process.isAlive()) {
                throw new IllegalStateException("the agent exited (" + process.exitValue() + "); its log:\n" + logTail());
            }
            try {
                HttpURLConnection c = (HttpURLConnection) new URL("http://" + http + "/health").openConnection();
                c.setConnectTimeout(1000);
                c.setReadTimeout(1000);
                int code = c.getResponseCode();
                c.disconnect();
                if (code == 200 && Files.readString(log).contains("aerostream listening")) {
                    return;
                }
            } catch (IOException e) {
                // not serving yet
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the agent does not serve after 90 s; its log:\n" + logTail());
            }
            Thread.sleep(100);
        }
    }

    @Override
    public void close() throws Exception {
        process.destroy();
        if (!process.waitFor(15, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
        }
        try {
            Runtime.getRuntime().removeShutdownHook(reaper);
        } catch (IllegalStateException e) {
            // shutting down already
        }
        deleteTree(dir);
    }

    static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }
}
