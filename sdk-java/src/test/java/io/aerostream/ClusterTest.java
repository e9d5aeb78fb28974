package io.aerostream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.aerostream.proto.Message;
import io.aerostream.proto.Struct;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Three agents: requests go to each partition's leader and to the group's coordinator, wherever they are. */
@Timeout(180)
class ClusterTest {
    @Test
    void produceAndConsumeAGroupAcrossThreeAgents() throws Exception {
        try (TestAgent.Cluster cluster = TestAgent.startCluster(3);
                AeroStreamClient c = AeroStreamClient.connect(cluster.agents().get(0).bootstrap)) {
            c.createTopic("spread", 6, (short) 3, Map.of());
            Set<Long> leaders = new HashSet<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (leaders.size() < 2) {
                Message md = c.metadata("spread");
                assertEquals(3, md.getList("nodes").size(), "metadata lists every server");
                leaders.clear();
                for (Struct t : md.getList("topics")) {
                    for (Struct p : t.getList("partitions")) {
                        if (p.getLong("leader") >= 0) {
                            leaders.add(p.getLong("leader"));
                        }
                    }
                }
                assertTrue(System.nanoTime() < deadline, "the partitions' leaders are " + leaders
                        + ": not spread over the servers");
                Thread.sleep(200);
            }
            try (Producer p = c.producer(new ProducerConfig())) {
                for (int i = 0; i < 600; i++) {
                    p.send(new ProducerRecord("spread", Integer.toString(i).getBytes(StandardCharsets.UTF_8),
                            Integer.toString(i).getBytes(StandardCharsets.UTF_8)));
                }
                p.flush();
            }
            Set<String> seen = new HashSet<>();
            try (Consumer cs = c.consumer(new ConsumerConfig().group("spread-readers")
                    .heartbeatInterval(Duration.ofMillis(500)))) {
                cs.subscribe("spread");
                while (seen.size() < 600) {
                    ConsumerRecord r = cs.poll(Duration.ofSeconds(30));
                    assertNotNull(r, "no record after " + seen.size());
                    assertEquals(Partitioner.partitionForKey(r.key(), 6), r.partition(), "key " + r.keyString());
                    seen.add(r.valueString());
                }
            }
            Map<TopicPartition, Long> got = c.committedOffsets("spread-readers",
                    List.of(new TopicPartition("spread", 0)));
            assertTrue(got.get(new TopicPartition("spread", 0)) > 0, "committed offsets " + got);
        }
    }
}
