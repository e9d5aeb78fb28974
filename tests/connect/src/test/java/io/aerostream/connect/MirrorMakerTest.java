package io.aerostream.connect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.connect.mirror.Checkpoint;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * MirrorMaker 2 (its dedicated driver, {@code org.apache.kafka.connect.mirror.MirrorMaker})
 * between AeroStream and Apache Kafka, both ways at once: each copies a topic of its own to
 * the other, and a consumer group's committed offsets are translated into checkpoints on the
 * other cluster and synced to the group there.
 */
class MirrorMakerTest {
    private static final int RECORDS = 100;

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.connect.Target#aerostream")
    void mirrorsTopicsAndGroupOffsetsBothWaysWithKafka(Target aero) throws Exception {
        assumeTrue(Target.kafka().isPresent(), "needs Apache Kafka's broker as the other cluster (target kafka)");
        Target kafka = Target.kafka().get();
        // the cluster aliases name the remote topics: <alias>.<topic> on the other cluster
        String a = aero.name();
        String k = "kafka";
        Path dir = Kit.workDir(aero, "mirror-maker");
        try (Admin aeroAdmin = Kit.admin(aero); Admin kafkaAdmin = Kit.admin(kafka)) {
            String aeroTopic = Kit.createTopic(aeroAdmin, aero, "mm-from-aerostream", 1);
            String kafkaTopic = Kit.createTopic(kafkaAdmin, kafka, "mm-from-kafka", 1);
            String aeroGroup = Kit.unique("mm-group-aerostream");
            String kafkaGroup = Kit.unique("mm-group-kafka");
            List<ProducerRecord<byte[], byte[]>> aeroRecords = produce(aero, aeroTopic);
            List<ProducerRecord<byte[], byte[]>> kafkaRecords = produce(kafka, kafkaTopic);
            commit(aero, aeroGroup, new TopicPartition(aeroTopic, 0), RECORDS);
            commit(kafka, kafkaGroup, new TopicPartition(kafkaTopic, 0), RECORDS);

            Map<String, String> p = new TreeMap<>();
            p.put("clusters", a + ", " + k);
            p.put(a + ".bootstrap.servers", aero.bootstrap());
            p.put(k + ".bootstrap.servers", kafka.bootstrap());
            flow(p, a, k, aeroTopic, aeroGroup, aero, kafka);
            flow(p, k, a, kafkaTopic, kafkaGroup, kafka, aero);
            // the settings of the Connect worker MirrorMaker runs for each target cluster
            for (String cluster : List.of(a, k)) {
                String rf = Short.toString((cluster.equals(a) ? aero : kafka).replicationFactor());
                for (String topic : List.of("config", "offset", "status")) {
                    p.put(cluster + "." + topic + ".storage.replication.factor", rf);
                }
                p.put(cluster + ".offset.flush.interval.ms", "1000");
                // the connectors come from the classpath's service manifests: no scan of every class
                p.put(cluster + ".plugin.discovery", "service_load");
            }
            p.put("tasks.max", "1");
            p.put("sync.topic.acls.enabled", "false");
            p.put("refresh.topics.interval.seconds", "2");
            p.put("refresh.groups.interval.seconds", "2");
            p.put("emit.heartbeats.interval.seconds", "1");
            p.put("emit.checkpoints.interval.seconds", "1");
            p.put("sync.group.offsets.enabled", "true");
            p.put("sync.group.offsets.interval.seconds", "1");
            // an offset sync for every record copied: checkpoints translate offsets exactly
            p.put("offset.lag.max", "0");
            p.put("plugin.discovery", "service_load");
            Path props = dir.resolve("mm2.properties");
            StringBuilder b = new StringBuilder();
            p.forEach((key, v) -> b.append(key).append('=').append(v).append('\n'));
            Files.writeString(props, b);

            try (JvmProcess mm = new JvmProcess("org.apache.kafka.connect.mirror.MirrorMaker",
                    List.of(props.toString()), dir.resolve("mirror-maker.log"))) {
                mm.start();
                Kit.log(aero, "MirrorMaker started; its log is " + mm.log());

                assertCopied(kafka, a + "." + aeroTopic, aeroRecords);
                Kit.log(aero, "copied to kafka");
                assertCopied(aero, k + "." + kafkaTopic, kafkaRecords);
                Kit.log(aero, "copied from kafka");

                assertCheckpointed(kafka, kafkaAdmin, a, aeroGroup, new TopicPartition(a + "." + aeroTopic, 0));
                Kit.log(aero, "group offsets checkpointed and synced on kafka");
                assertCheckpointed(aero, aeroAdmin, k, kafkaGroup, new TopicPartition(k + "." + kafkaTopic, 0));
                Kit.log(aero, "group offsets checkpointed and synced on " + a);
            }
        }
    }

    /** The settings of the flow from cluster {@code src} to cluster {@code dst}. */
    private static void flow(Map<String, String> p, String src, String dst, String topic, String group,
            Target source, Target target) {
        String f = src + "->" + dst + ".";
        p.put(f + "enabled", "true");
        p.put(f + "topics", topic);
        p.put(f + "groups", group);
        // the remote topic, the checkpoints and heartbeats are on the target cluster, the offset
        // syncs on the source
        p.put(f + "replication.factor", Short.toString(target.replicationFactor()));
        p.put(f + "checkpoints.topic.replication.factor", Short.toString(target.replicationFactor()));
        p.put(f + "heartbeats.topic.replication.factor", Short.toString(target.replicationFactor()));
        p.put(f + "offset-syncs.topic.replication.factor", Short.toString(source.replicationFactor()));
    }

    /** Produces {@link #RECORDS} records with keys, values and headers; returns them. */
    private static List<ProducerRecord<byte[], byte[]>> produce(Target t, String topic) throws Exception {
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = Kit.producer(t)) {
            for (int i = 0; i < RECORDS; i++) {
                RecordHeaders h = new RecordHeaders();
                h.add("origin", Kit.utf8(t.name()));
                h.add("n", Kit.utf8(Integer.toString(i)));
                if (i % 10 == 0) {
                    h.add("empty", null);
                }
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, 0,
                        i % 7 == 0 ? null : Kit.utf8("key-" + i), Kit.utf8("value " + i + " from " + t.name()), h);
                out.add(r);
                producer.send(r);
            }
            producer.flush();
        }
        return out;
    }

    /** Commits {@code offset} for the group, as a consumer that read that far and left. */
    private static void commit(Target t, String group, TopicPartition tp, long offset) {
        try (KafkaConsumer<byte[], byte[]> c = Kit.consumer(t, Map.of("group.id", group))) {
            c.commitSync(Map.of(tp, new OffsetAndMetadata(offset)));
        }
    }

    private static void assertCopied(Target t, String remoteTopic, List<ProducerRecord<byte[], byte[]>> sent) {
        Kit.eventually("MirrorMaker creates " + remoteTopic + " on " + t, () -> {
            try (Admin admin = Kit.admin(t)) {
                return admin.listTopics().names().get().contains(remoteTopic);
            } catch (ExecutionException e) {
                return false;
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        });
        List<ConsumerRecord<byte[], byte[]>> got = Kit.read(t, new TopicPartition(remoteTopic, 0), Map.of(),
                rs -> rs.size() >= sent.size());
        assertEquals(show(sent.stream().map(r -> List.of(str(r.key()), str(r.value()), headers(r.headers())))
                .toList()), show(got.stream().map(r -> List.of(str(r.key()), str(r.value()), headers(r.headers())))
                .toList()), remoteTopic + " on " + t + ": keys, values and headers as sent, in order");
    }

    /**
     * The checkpoint topic on the target has the group's committed offset translated to the
     * remote topic, and MirrorMaker commits that offset for the group on the target cluster.
     * MirrorMaker translates from the offset syncs it wrote last, so a translated offset may
     * stay behind the group's position (a consumer then reads some records again) but never
     * passes it: it is at most {@link #RECORDS}, and above 0 since the first sync is of offset 0.
     */
    private static void assertCheckpointed(Target target, Admin admin, String sourceAlias, String group,
            TopicPartition remote) {
        String checkpoints = sourceAlias + ".checkpoints.internal";
        List<Checkpoint> got = Kit.read(target, new TopicPartition(checkpoints, 0), Map.of(),
                rs -> rs.stream().map(Checkpoint::deserializeRecord).anyMatch(c -> c.consumerGroupId().equals(group)))
                .stream().map(Checkpoint::deserializeRecord).filter(c -> c.consumerGroupId().equals(group)).toList();
        Checkpoint last = got.get(got.size() - 1);
        Kit.log(target, checkpoints + ": " + got.size() + " checkpoints of " + group + ", the last " + last);
        assertEquals(remote, last.topicPartition(), "the checkpoint names the remote topic");
        assertEquals(RECORDS, last.upstreamOffset(), "the checkpoint has the offset the group committed");
        assertTrue(last.downstreamOffset() > 0 && last.downstreamOffset() <= RECORDS,
                "the translated offset is in (0, " + RECORDS + "]: " + last);
        long[] synced = {-1};
        Kit.eventually(() -> "MirrorMaker commits a translated offset of " + remote + " for group " + group + " on "
                + target + " (last seen " + synced[0] + ")", () -> {
                    try {
                        OffsetAndMetadata o = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                                .get().get(remote);
                        synced[0] = o == null ? -1 : o.offset();
                        return o != null && o.offset() > 0 && o.offset() <= RECORDS;
                    } catch (ExecutionException e) {
                        return false;
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                });
        Kit.log(target, "group " + group + " on " + target + " synced at " + synced[0]);
    }

    private static String str(byte[] b) {
        return b == null ? "<null>" : new String(b, StandardCharsets.UTF_8);
    }

    private static String headers(Iterable<Header> headers) {
        StringBuilder b = new StringBuilder();
        headers.forEach(h -> b.append(h.key()).append('=').append(str(h.value())).append(';'));
        return b.toString();
    }

    private static String show(List<List<String>> records) {
        StringBuilder b = new StringBuilder();
        records.forEach(r -> b.append(r).append('\n'));
        return b.toString();
    }
}
