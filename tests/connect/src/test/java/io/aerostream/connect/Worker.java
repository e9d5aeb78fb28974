package io.aerostream.connect;

import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * One Kafka Connect worker in distributed mode ({@code ConnectDistributed}), alone in its
 * Connect cluster, and the REST API it serves.
 */
final class Worker implements AutoCloseable {
    static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    final String group;
    private final int port;
    private final JvmProcess process;

    /**
     * A worker of the Connect cluster {@code group} on the target, its internal topics named
     * after the group, with {@code extra} worker settings on top of the ones below.
     */
    Worker(Target t, Path dir, String group, Map<String, String> extra) {
        this.group = group;
        this.port = Kit.freePort();
        Map<String, String> p = new TreeMap<>();
        p.put("bootstrap.servers", t.bootstrap());
        p.put("group.id", group);
        p.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("config.storage.topic", configTopic());
        p.put("offset.storage.topic", offsetTopic());
        p.put("status.storage.topic", statusTopic());
        String rf = Short.toString(t.replicationFactor());
        p.put("config.storage.replication.factor", rf);
        p.put("offset.storage.replication.factor", rf);
        p.put("status.storage.replication.factor", rf);
        p.put("offset.storage.partitions", "5");
        p.put("status.storage.partitions", "3");
        // source offsets are committed often, so that what a killed worker's restart
        // produces again is little
        p.put("offset.flush.interval.ms", "250");
        p.put("listeners", "http://127.0.0.1:" + port);
        p.put("rest.advertised.host.name", "127.0.0.1");
        p.put("rest.advertised.port", Integer.toString(port));
        // the connectors come from the classpath's service manifests: no scan of every class
        p.put("plugin.discovery", "service_load");
        // a killed worker's tasks are reassigned as soon as its session has expired
        p.put("scheduled.rebalance.max.delay.ms", "0");
        p.put("session.timeout.ms", "6000");
        p.put("heartbeat.interval.ms", "1000");
        p.put("consumer.session.timeout.ms", "6000");
        p.put("consumer.heartbeat.interval.ms", "1000");
        p.putAll(extra);
        Path props = dir.resolve(group + ".properties");
        StringBuilder b = new StringBuilder();
        p.forEach((k, v) -> b.append(k).append('=').append(v).append('\n'));
        try {
            Files.writeString(props, b);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        process = new JvmProcess("org.apache.kafka.connect.cli.ConnectDistributed", List.of(props.toString()),
                dir.resolve(group + ".log"));
    }

    String configTopic() {
        return group + "-configs";
    }

    String offsetTopic() {
        return group + "-offsets";
    }

    String statusTopic() {
        return group + "-status";
    }

    /** Starts the worker and waits until it serves its REST API and has joined its cluster. */
    void start() {
        process.start();
        Kit.eventually("the Connect worker " + group + " serves (log " + process.log() + ")", () -> {
            if (!process.alive()) {
                fail("the Connect worker " + group + " exited; see " + process.log());
            }
            try {
                // the list of connectors is answered once the worker has read its config topic
                return request("GET", "/connectors", null).statusCode() == 200;
            } catch (IOException e) {
                return false;
            }
        });
    }

    /** kill -9: the worker ends at once, committing nothing more. */
    void kill() throws InterruptedException {
        process.kill();
    }

    /** Creates or updates a connector, retrying while the cluster rebalances or has no leader yet. */
    void putConnector(String name, Map<String, String> config) {
        String body;
        try {
            body = JSON.writeValueAsString(config);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        String[] last = {""};
        Kit.eventually(() -> "the worker takes connector " + name + "'s config (last answer: " + last[0] + ")", () -> {
            try {
                HttpResponse<String> r = request("PUT", "/connectors/" + name + "/config", body);
                last[0] = r.statusCode() + " " + r.body();
                if (r.statusCode() == 400) {
                    fail("connector " + name + " rejected: " + last[0]);
                }
                return r.statusCode() == 200 || r.statusCode() == 201;
            } catch (IOException e) {
                last[0] = e.toString();
                return false;
            }
        });
    }

    /** Waits until the connector and its tasks all run; fails at once when one of them failed. */
    void awaitRunning(String name) {
        String[] last = {""};
        Kit.eventually(() -> "connector " + name + " and its tasks are RUNNING (last status: " + last[0] + ")", () -> {
            try {
                HttpResponse<String> r = request("GET", "/connectors/" + name + "/status", null);
                last[0] = r.body();
                if (r.statusCode() != 200) {
                    return false;
                }
                JsonNode s = JSON.readTree(r.body());
                if (s.path("connector").path("state").asText().equals("FAILED")) {
                    fail("connector " + name + " failed: " + r.body());
                }
                boolean tasksRunning = s.path("tasks").size() > 0;
                for (JsonNode task : s.path("tasks")) {
                    if (task.path("state").asText().equals("FAILED")) {
                        fail("a task of connector " + name + " failed: " + r.body());
                    }
                    tasksRunning &= task.path("state").asText().equals("RUNNING");
                }
                return s.path("connector").path("state").asText().equals("RUNNING") && tasksRunning;
            } catch (IOException e) {
                last[0] = e.toString();
                return false;
            }
        });
    }

    private HttpResponse<String> request(String method, String path, String body) throws IOException {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                .timeout(Duration.ofSeconds(30))
                .header("Content-Type", "application/json")
                .header("Accept", "application/json")
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                        : HttpRequest.BodyPublishers.ofString(body));
        try {
            return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException(e);
        }
    }

    @Override
    public void close() throws InterruptedException {
        process.close();
    }
}
