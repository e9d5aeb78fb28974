package io.aerostream.clients;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The consumer group protocol of KIP-848 ({@code group.protocol=consumer}). */
class ConsumerProtocolTest {

    /**
     * Two members of a KIP-848 group split four partitions, the group is described as a
     * consumer group, and together they read every record once and commit.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void consumerProtocolGroup(Target t) throws Exception {
        String group = Kit.unique("kip848");
        Map<String, Object> member = Map.of("group.id", group, "group.protocol", "consumer");
        try (Admin admin = Kit.admin(t)) {
            String topic = Kit.createTopic(admin, t, "kip848", 4, Map.of());
            try (KafkaProducer<String, String> p = Kit.producer(t, Map.of("acks", "all"))) {
                for (int i = 0; i < 40; i++) {
                    p.send(new ProducerRecord<>(topic, i % 4, "k", "v" + i));
                }
                p.flush();
            }
            try (KafkaConsumer<String, String> a = Kit.consumer(t, member);
                    KafkaConsumer<String, String> b = Kit.consumer(t, member)) {
                a.subscribe(List.of(topic));
                b.subscribe(List.of(topic));
                Set<String> read = new HashSet<>();
                int count = 0;
                long deadline = System.nanoTime() + Kit.PATIENCE.toNanos();
                while (count < 40 || a.assignment().size() != 2 || b.assignment().size() != 2) {
                    for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(100))) {
                        read.add(r.value());
                        count++;
                    }
                    for (ConsumerRecord<String, String> r : b.poll(Duration.ofMillis(100))) {
                        read.add(r.value());
                        count++;
                    }
                    if (System.nanoTime() > deadline) {
                        fail("read " + count + " records; assignments " + a.assignment() + " and " + b.assignment());
                    }
                }
                Set<TopicPartition> both = new HashSet<>(a.assignment());
                both.addAll(b.assignment());
                assertEquals(new HashSet<>(Kit.partitions(topic, 4)), both, "the members' partitions");
                assertEquals(40, read.size(), "every record read");
                a.commitSync();
                b.commitSync();
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups()
                        .get(group).get();
                assertEquals(GroupType.CONSUMER, d.type(), "the group's protocol");
                assertEquals(2, d.members().size(), "members");
            }
        }
    }
}
