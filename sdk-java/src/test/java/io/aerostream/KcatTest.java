package io.aerostream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * bin/produce and bin/consume beside kcat on the Kafka listener: records
 * written by one are read by the other, equal and in order.
 */
@Timeout(300)
class KcatTest {
    static List<String> lines(int n, String prefix) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(String.format("%s-%04d", prefix, i));
        }
        return out;
    }

    static List<String> run(String stdin, String... cmd) throws IOException, InterruptedException {
        Path err = Files.createTempFile("aerostream-cmd", ".err");
        Process p = new ProcessBuilder(cmd).redirectError(err.toFile()).start();
        p.getOutputStream().write(stdin.getBytes(StandardCharsets.UTF_8));
        p.getOutputStream().close();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(180, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError(String.join(" ", cmd) + " did not finish");
        }
        String errText = Files.readString(err);
        Files.delete(err);
        assertEquals(0, p.exitValue(), String.join(" ", cmd) + " failed:\n" + errText);
        String text = new String(out, StandardCharsets.UTF_8);
        if (text.endsWith("\n")) {
            text = text.substring(0, text.length() - 1);
        }
        return text.isEmpty() ? List.of() : Arrays.asList(text.split("\n", -1));
    }

    static String kcat() {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
            File f = new File(dir, "kcat");
            if (f.canExecute()) {
                return f.getPath();
            }
        }
        return null;
    }

    @Test
    void javaCommandsAndKcatShareRecords() throws Exception {
        TestAgent.need();
        String kcat = kcat();
        assumeTrue(kcat != null, "kcat is not installed");
        String bin = Path.of("bin").toAbsolutePath().toString();
        try (TestAgent a = TestAgent.start(); AeroStreamClient c = AeroStreamClient.connect(a.bootstrap)) {
            c.createTopic("from-java", 1, (short) -1, Map.of());
            c.createTopic("from-kcat", 1, (short) -1, Map.of());

            List<String> sent = lines(1000, "java");
            run(String.join("\n", sent) + "\n", bin + "/produce", "--bootstrap", a.bootstrap, "--topic", "from-java");
            List<String> got = run("", kcat, "-C", "-b", a.kafka, "-t", "from-java", "-o", "beginning", "-e", "-q",
                    "-f", "%s\n");
            assertEquals(sent, got, "kcat reading what bin/produce wrote");

            List<String> written = lines(1000, "kcat");
            run(String.join("\n", written) + "\n", kcat, "-P", "-b", a.kafka, "-t", "from-kcat");
            got = run("", bin + "/consume", "--bootstrap", a.bootstrap, "--topic", "from-kcat", "--from", "earliest",
                    "--count", "1000");
            assertEquals(written, got, "bin/consume reading what kcat wrote");
            got = run("", bin + "/consume", "--bootstrap", "aero+quic://" + a.nativeAddr, "--tls-ca",
                    a.dataDir.resolve("native-tls").resolve("ca.pem").toString(), "--topic", "from-kcat",
                    "--from", "earliest", "--count", "1000");
            assertEquals(written, got, "bin/consume over QUIC reading what kcat wrote");

            // kcat's compressed batches, and keys on the partition kcat's librdkafka would not choose by itself
            c.createTopic("kcat-zipped", 1, (short) -1, Map.of());
            List<String> zipped = new ArrayList<>();
            for (String codec : new String[] {"gzip", "snappy", "lz4", "zstd"}) {
                List<String> some = lines(100, "kcat-" + codec);
                run(String.join("\n", some) + "\n", kcat, "-P", "-b", a.kafka, "-t", "kcat-zipped", "-z", codec);
                zipped.addAll(some);
            }
            got = run("", bin + "/consume", "--bootstrap", a.bootstrap, "--topic", "kcat-zipped", "--count", "400");
            assertEquals(zipped, got, "bin/consume reading kcat's compressed batches");

            // transactions of bin/produce, as kcat's read_committed sees them
            run("t1\nt2\n", bin + "/produce", "--bootstrap", a.bootstrap, "--topic", "from-java-txn",
                    "--transactional-id", "cmd");
            run("t3\n", bin + "/produce", "--bootstrap", a.bootstrap, "--topic", "from-java-txn",
                    "--transactional-id", "cmd", "--abort");
            got = run("", kcat, "-C", "-b", a.kafka, "-t", "from-java-txn", "-o", "beginning", "-e", "-q",
                    "-f", "%s\n", "-X", "isolation.level=read_committed");
            assertEquals(List.of("t1", "t2"), got, "kcat read_committed of bin/produce's transactions");
            got = run("", bin + "/consume", "--bootstrap", a.bootstrap, "--topic", "from-java-txn",
                    "--isolation", "read-committed", "--count", "2");
            assertEquals(List.of("t1", "t2"), got, "bin/consume read-committed");

            c.createTopic("keyed", 3, (short) -1, Map.of());
            run("user-42:hello\n", bin + "/produce", "--bootstrap", a.bootstrap, "--topic", "keyed", "--key-sep", ":");
            List<String> part = run("", kcat, "-C", "-b", a.kafka, "-t", "keyed", "-o", "beginning", "-e", "-q",
                    "-f", "%k %p %s\n");
            String want = "user-42 " + Partitioner.partitionForKey("user-42".getBytes(StandardCharsets.UTF_8), 3)
                    + " hello";
            assertTrue(part.contains(want), "kcat reads " + part + ", want " + want);
        }
    }
}
