package io.aerostream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Over QUIC, trusting the CA the agent wrote into its data folder. */
@Timeout(120)
class QuicTest {
    @Test
    void theSameOperationsAsOverTcpAndAServerTheCaDidNotSignIsRefused() throws Exception {
        try (TestAgent a = TestAgent.start()) {
            Path ca = a.dataDir.resolve("native-tls").resolve("ca.pem");
            String url = "aero+quic://" + a.nativeAddr;
            try (AeroStreamClient c = AeroStreamClient.connect(url, new ClientConfig().tlsCaFile(ca))) {
                c.createTopic("over-quic", 2, (short) -1, Map.of());
                try (Producer p = c.producer(new ProducerConfig())) {
                    for (int i = 0; i < 500; i++) {
                        p.send(new ProducerRecord("over-quic", ("k" + i).getBytes(StandardCharsets.UTF_8),
                                ("v" + i).getBytes(StandardCharsets.UTF_8)));
                    }
                    p.flush();
                }
                try (Consumer consumer = c.consumer(new ConsumerConfig().group("quic-readers")
                        .heartbeatInterval(Duration.ofMillis(300)))) {
                    consumer.subscribe("over-quic");
                    java.util.Set<String> got = new java.util.HashSet<>();
                    while (got.size() < 500) {
                        ConsumerRecord r = consumer.poll(Duration.ofSeconds(20));
                        assertNotNull(r, "no record after " + got.size());
                        assertEquals(Partitioner.partitionForKey(r.key(), 2), r.partition());
                        got.add(r.valueString());
                    }
                }
            }
            // by name too: the certificate names localhost
            String port = a.nativeAddr.substring(a.nativeAddr.lastIndexOf(':') + 1);
            try (AeroStreamClient c = AeroStreamClient.connect("aero+quic://localhost:" + port,
                    new ClientConfig().tlsCaFile(ca))) {
                assertTrue(c.listTopics().containsKey("over-quic"));
            }
            // a CA that did not sign the server's certificate
            Path other = otherCa(a.dir);
            AeroStreamException e = assertThrows(AeroStreamException.class,
                    () -> AeroStreamClient.connect(url, new ClientConfig().tlsCaFile(other)));
            assertTrue(e.getMessage().contains("QUIC handshake") && !e.getMessage().contains("took longer"),
                    e.getMessage());
            // trying things out: any certificate
            try (AeroStreamClient c = AeroStreamClient.connect(url, new ClientConfig().insecureSkipVerify(true))) {
                assertTrue(c.ping().toMillis() < 5000);
            }
        }
    }

    /** A self-signed certificate of a CA of our own (keytool of the JDK running the tests). */
    static Path otherCa(Path dir) throws Exception {
        String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
        Path store = dir.resolve("other.p12");
        Path pem = dir.resolve("other-ca.pem");
        run(keytool, "-genkeypair", "-alias", "ca", "-keyalg", "EC", "-dname", "CN=not the agent's CA",
                "-ext", "bc:c", "-validity", "2", "-storetype", "PKCS12", "-keystore", store.toString(),
                "-storepass", "changeit");
        run(keytool, "-exportcert", "-rfc", "-alias", "ca", "-keystore", store.toString(), "-storepass", "changeit",
                "-file", pem.toString());
        assertTrue(Files.readString(pem).contains("BEGIN CERTIFICATE"));
        return pem;
    }

    private static void run(String... cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), String.join(" ", cmd) + ":\n" + out);
    }
}
