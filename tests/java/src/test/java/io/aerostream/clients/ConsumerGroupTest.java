package io.aerostream.clients;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.GroupSubscribedToTopicException;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class ConsumerGroupTest {

    private static Map<String, Object> member(String group) {
        return Map.of(
                "group.id", group,
                "group.protocol", "classic",
                "session.timeout.ms", 10_000,
                "heartbeat.interval.ms", 500);
    }

    private static void produce(Target t, String topic, int partitions, int perPartition, String round)
            throws Exception {
        try (KafkaProducer<String, String> p = Kit.producer(t, Map.of("acks", "all"))) {
            for (int part = 0; part < partitions; part++) {
                for (int i = 0; i < perPartition; i++) {
                    p.send(new ProducerRecord<>(topic, part, "k" + i, round + "-" + part + "-" + i));
                }
            }
            p.flush();
        }
    }

    /** Commits what the member read before its partitions go elsewhere, as applications do. */
    private static ConsumerRebalanceListener commitOnRevoke(KafkaConsumer<String, String> c) {
        return new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                c.commitSync();
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
        };
    }

    /** Polls both members once each; what each read goes to its list. */
    private static void pollBoth(KafkaConsumer<String, String> a, List<ConsumerRecord<String, String>> readA,
            KafkaConsumer<String, String> b, List<ConsumerRecord<String, String>> readB) {
        a.poll(Duration.ofMillis(100)).forEach(readA::add);
        b.poll(Duration.ofMillis(100)).forEach(readB::add);
    }

    private static Set<String> values(List<ConsumerRecord<String, String>> records) {
        return records.stream().map(ConsumerRecord::value).collect(Collectors.toSet());
    }

    /**
     * Two members of a classic group split four partitions between them, each reads only its
     * own partitions, and their commits are the group's offsets; when one leaves, the other
     * takes every partition and resumes the leaver's from its committed offsets, reading
     * nothing twice (each member commits what it read when its partitions are revoked).
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void twoMembersSplitCommitAndRebalance(Target t) throws Exception {
        int partitions = 4;
        String group = Kit.unique("group");
        try (Admin admin = Kit.admin(t)) {
            String topic = Kit.createTopic(admin, t, "group", partitions, Map.of());
            Set<TopicPartition> all = new HashSet<>(Kit.partitions(topic, partitions));
            List<ConsumerRecord<String, String>> readA = new ArrayList<>();
            List<ConsumerRecord<String, String>> readB = new ArrayList<>();
            KafkaConsumer<String, String> a = Kit.consumer(t, member(group));
            KafkaConsumer<String, String> b = Kit.consumer(t, member(group));
            try {
                a.subscribe(List.of(topic), commitOnRevoke(a));
                b.subscribe(List.of(topic), commitOnRevoke(b));
                long deadline = System.nanoTime() + Kit.PATIENCE.toNanos();
                while (true) {
                    pollBoth(a, readA, b, readB);
                    Set<TopicPartition> both = new HashSet<>(a.assignment());
                    both.addAll(b.assignment());
                    if (a.assignment().size() == 2 && b.assignment().size() == 2 && both.equals(all)) {
                        break;
                    }
                    if (System.nanoTime() > deadline) {
                        fail("the two members did not split the partitions 2 and 2: " + a.assignment() + " and "
                                + b.assignment());
                    }
                }
                assertEquals(0, readA.size() + readB.size(), "nothing was produced yet");

                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                        .describedGroups().get(group).get();
                assertEquals(GroupState.STABLE, d.groupState(), "group state with two members");
                assertEquals(2, d.members().size(), "members");
                Set<TopicPartition> described = new HashSet<>();
                for (MemberDescription m : d.members()) {
                    described.addAll(m.assignment().topicPartitions());
                }
                assertEquals(all, described, "the members' assignments as described");

                produce(t, topic, partitions, 10, "first");
                deadline = System.nanoTime() + Kit.PATIENCE.toNanos();
                while (readA.size() + readB.size() < 40) {
                    pollBoth(a, readA, b, readB);
                    if (System.nanoTime() > deadline) {
                        fail("read " + (readA.size() + readB.size()) + " of 40 records");
                    }
                }
                Set<TopicPartition> ofA = Set.copyOf(a.assignment());
                Set<TopicPartition> ofB = Set.copyOf(b.assignment());
                for (ConsumerRecord<String, String> r : readA) {
                    assertTrue(ofA.contains(new TopicPartition(r.topic(), r.partition())),
                            "member A read " + r.value() + " from a partition of B's");
                }
                for (ConsumerRecord<String, String> r : readB) {
                    assertTrue(ofB.contains(new TopicPartition(r.topic(), r.partition())),
                            "member B read " + r.value() + " from a partition of A's");
                }
                Set<String> first = new HashSet<>(values(readA));
                first.addAll(values(readB));
                assertEquals(40, first.size(), "every record read once by the group");
                assertEquals(40, readA.size() + readB.size(), "no record read twice");
                a.commitSync();
                b.commitSync();

                Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group)
                        .partitionsToOffsetAndMetadata().get();
                for (TopicPartition tp : all) {
                    assertEquals(10L, committed.get(tp) == null ? -1 : committed.get(tp).offset(),
                            "committed offset of " + tp);
                }

                // B leaves; A takes its partitions from where B committed
                produce(t, topic, partitions, 10, "second");
                b.close();
                readA.clear();
                deadline = System.nanoTime() + Kit.PATIENCE.toNanos();
                while (!(a.assignment().equals(all) && readA.size() >= 40)) {
                    a.poll(Duration.ofMillis(100)).forEach(readA::add);
                    if (System.nanoTime() > deadline) {
                        fail("after B left, A has " + a.assignment() + " and read " + readA.size() + " of 40");
                    }
                }
                Set<String> second = values(readA);
                assertEquals(40, readA.size(), "A read nothing twice and nothing from before the commits: "
                        + readA.stream().map(ConsumerRecord::value).filter(v -> v.startsWith("first")).toList());
                assertTrue(second.stream().allMatch(v -> v.startsWith("second-")), "A read only new records");
                assertEquals(40, second.size(), "A read each new record once");
                a.commitSync();
                committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                Map<TopicPartition, Long> offsets = new HashMap<>();
                committed.forEach((tp, o) -> offsets.put(tp, o.offset()));
                Map<TopicPartition, Long> expected = new HashMap<>();
                all.forEach(tp -> expected.put(tp, 20L));
                assertEquals(expected, offsets, "committed offsets after the rebalance");
            } finally {
                a.close();
                b.close();
            }
            Kit.eventually("the group is empty once both members left", () -> {
                try {
                    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                            .describedGroups().get(group).get();
                    return d.groupState() == GroupState.EMPTY && d.members().isEmpty();
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
        }
    }

    private static Map<TopicPartition, Long> committedOffsets(Admin admin, String group) throws Exception {
        Map<TopicPartition, Long> out = new HashMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                .forEach((tp, o) -> out.put(tp, o == null ? null : o.offset()));
        return out;
    }

    private static Optional<GroupListing> listed(Admin admin, String group) throws Exception {
        return admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get().stream()
                .filter(g -> g.groupId().equals(group)).findFirst();
    }

    /**
     * What kafka-consumer-groups.sh does: list groups, reset a group's offsets with the admin
     * (a member then starts there), refuse to delete a group or its offsets while a member
     * reads them, and delete them once it left.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void groupAdministration(Target t) throws Exception {
        String group = Kit.unique("admin-group");
        try (Admin admin = Kit.admin(t)) {
            String topic = Kit.createTopic(admin, t, "admin-group", 2, Map.of());
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);
            produce(t, topic, 2, 10, "rec");
            try (KafkaConsumer<String, String> c = Kit.consumer(t, member(group))) {
                c.subscribe(List.of(topic));
                int[] read = {0};
                Kit.eventually("the member reads 20 records", () -> {
                    read[0] += c.poll(Duration.ofMillis(200)).count();
                    return read[0] >= 20;
                });
                c.commitSync();
            }
            assertEquals(Map.of(p0, 10L, p1, 10L), committedOffsets(admin, group), "offsets after the commit");
            Kit.eventually("the group is listed as empty", () -> {
                try {
                    Optional<GroupListing> g = listed(admin, group);
                    return g.isPresent() && g.get().groupState().equals(Optional.of(GroupState.EMPTY));
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });

            admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(3), p1, new OffsetAndMetadata(5)))
                    .all().get();
            assertEquals(Map.of(p0, 3L, p1, 5L), committedOffsets(admin, group), "offsets after the reset");
            try (KafkaConsumer<String, String> c = Kit.consumer(t, member(group))) {
                c.subscribe(List.of(topic));
                Map<Integer, Long> first = new HashMap<>();
                Kit.eventually("the member reads from the reset offsets", () -> {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        first.putIfAbsent(r.partition(), r.offset());
                    }
                    return first.size() == 2;
                });
                assertEquals(Map.of(0, 3L, 1, 5L), first, "the first offset read from each partition");

                assertInstanceOf(GroupNotEmptyException.class, Kit.failure(admin.deleteConsumerGroups(List.of(group))
                        .all()), "deleting a group with a member");
                assertInstanceOf(GroupSubscribedToTopicException.class,
                        Kit.failure(admin.deleteConsumerGroupOffsets(group, Set.of(p0)).all()),
                        "deleting offsets of a topic a member reads");
            }
            admin.deleteConsumerGroupOffsets(group, Set.of(p0)).all().get();
            assertEquals(Map.of(p1, 5L), committedOffsets(admin, group), "offsets after deleting p0's");
            admin.deleteConsumerGroups(List.of(group)).all().get();
            assertTrue(listed(admin, group).isEmpty(), "the deleted group is not listed");
            assertEquals(Map.of(), committedOffsets(admin, group), "the deleted group has no offsets");
        }
    }

    /** Records every partition a member gives up. */
    private static ConsumerRebalanceListener recordRevoked(Set<TopicPartition> revoked) {
        return new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                revoked.addAll(partitions);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
        };
    }

    /**
     * Incremental cooperative rebalancing (CooperativeStickyAssignor, two rounds of the classic
     * protocol): when a second member joins, the first gives up only the partitions that move
     * to it and keeps reading the rest.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void cooperativeRebalanceMovesOnlyWhatItMust(Target t) throws Exception {
        int partitions = 4;
        String group = Kit.unique("cooperative");
        Map<String, Object> config = new HashMap<>(member(group));
        config.put("partition.assignment.strategy", CooperativeStickyAssignor.class.getName());
        try (Admin admin = Kit.admin(t);
                KafkaConsumer<String, String> a = Kit.consumer(t, config);
                KafkaConsumer<String, String> b = Kit.consumer(t, config)) {
            String topic = Kit.createTopic(admin, t, "cooperative", partitions, Map.of());
            Set<TopicPartition> all = new HashSet<>(Kit.partitions(topic, partitions));
            Set<TopicPartition> revokedA = new HashSet<>();
            Set<TopicPartition> revokedB = new HashSet<>();
            a.subscribe(List.of(topic), recordRevoked(revokedA));
            Kit.eventually("the first member has every partition", () -> {
                a.poll(Duration.ofMillis(100));
                return a.assignment().equals(all);
            });
            b.subscribe(List.of(topic), recordRevoked(revokedB));
            long deadline = System.nanoTime() + Kit.PATIENCE.toNanos();
            while (!(a.assignment().size() == 2 && b.assignment().size() == 2)) {
                a.poll(Duration.ofMillis(100));
                b.poll(Duration.ofMillis(100));
                if (System.nanoTime() > deadline) {
                    fail("the members did not split the partitions: " + a.assignment() + " and " + b.assignment());
                }
            }
            Set<TopicPartition> both = new HashSet<>(a.assignment());
            both.addAll(b.assignment());
            assertEquals(all, both, "the two members' partitions");
            assertEquals(b.assignment(), revokedA, "the first member gave up exactly what the second got");
            assertEquals(Set.of(), revokedB, "the second member gave up nothing");
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                    .get();
            assertEquals("cooperative-sticky", d.partitionAssignor(), "the group's assignor");
        }
    }
}
