package io.aerostream.clients;

import static io.aerostream.clients.Kit.failure;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class AdminTest {

    /**
     * Creates a topic with a config, finds it listed and described (partitions, leaders,
     * replicas, its id), refuses to create it twice, adds partitions, deletes it, and then
     * neither lists nor describes it.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void createDescribeGrowAndDeleteTopics(Target t) throws Exception {
        try (Admin admin = Kit.admin(t)) {
            String topic = Kit.createTopic(admin, t, "admin", 2, Map.of("retention.ms", "3600000"));
            assertTrue(admin.listTopics().names().get().contains(topic), "the new topic is listed");
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            assertEquals(topic, d.name());
            assertFalse(d.isInternal());
            assertNotNull(d.topicId(), "topic id");
            assertNotEquals(Uuid.ZERO_UUID, d.topicId(), "topic id");
            assertEquals(List.of(0, 1), d.partitions().stream().map(TopicPartitionInfo::partition).toList());
            Set<Integer> nodes = admin.describeCluster().nodes().get().stream().map(Node::id)
                    .collect(Collectors.toSet());
            for (TopicPartitionInfo p : d.partitions()) {
                assertEquals(t.replicationFactor(), p.replicas().size(), "replicas of partition " + p.partition());
                assertTrue(p.replicas().contains(p.leader()), "the leader is a replica");
                assertTrue(nodes.contains(p.leader().id()), "the leader is a broker of the cluster");
                assertEquals(new HashSet<>(p.replicas()), new HashSet<>(p.isr()), "every replica is in sync");
            }
            // the same topic by its id
            TopicDescription byId = admin.describeTopics(
                    org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(d.topicId())))
                    .allTopicIds().get().get(d.topicId());
            assertEquals(topic, byId.name(), "describe by topic id");

            Throwable again = failure(admin.createTopics(
                    List.of(new NewTopic(topic, 2, t.replicationFactor()))).all());
            assertInstanceOf(TopicExistsException.class, again, "creating it twice");

            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
            Kit.eventually("the topic has 4 partitions", () -> {
                try {
                    return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic)
                            .partitions().size() == 4;
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });

            admin.deleteTopics(List.of(topic)).all().get();
            Kit.eventually("the deleted topic is no longer listed", () -> {
                try {
                    return !admin.listTopics().names().get().contains(topic);
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
            Throwable gone = failure(admin.describeTopics(List.of(topic)).allTopicNames());
            assertInstanceOf(UnknownTopicOrPartitionException.class, gone, "describing the deleted topic");
        }
    }

    private static ConfigEntry entry(Admin admin, ConfigResource r, String name) throws Exception {
        Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
        return c.get(name);
    }

    /**
     * The entry once it satisfies {@code check}: a change is seen by every broker soon after
     * it is acknowledged, not at once (Apache Kafka's brokers answer from their copy of the
     * metadata, which follows the controller's).
     */
    private static ConfigEntry changed(Admin admin, ConfigResource r, String name,
            java.util.function.Predicate<ConfigEntry> check) throws Exception {
        long deadline = System.nanoTime() + Kit.PATIENCE.toNanos();
        while (true) {
            ConfigEntry e = entry(admin, r, name);
            if (e != null && check.test(e)) {
                return e;
            }
            if (System.nanoTime() > deadline) {
                return fail(name + " did not change in " + Kit.PATIENCE + "; last seen: " + e);
            }
            Thread.sleep(100);
        }
    }

    /**
     * Topic configs round-trip: a value given at creation is described as the topic's own,
     * IncrementalAlterConfigs SET and DELETE change and restore it, APPEND adds to a list, and
     * an unknown name or a bad value is refused without changing anything.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void describeAndAlterTopicConfigs(Target t) throws Exception {
        try (Admin admin = Kit.admin(t)) {
            String topic = Kit.createTopic(admin, t, "configs", 1,
                    Map.of("retention.ms", "3600000", "max.message.bytes", "200000"));
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);

            ConfigEntry retention = entry(admin, r, "retention.ms");
            assertEquals("3600000", retention.value());
            assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source());
            assertFalse(retention.isDefault());
            assertEquals("200000", entry(admin, r, "max.message.bytes").value());
            ConfigEntry policy = entry(admin, r, "cleanup.policy");
            assertNotNull(policy, "cleanup.policy is described");
            assertEquals("delete", policy.value());
            assertTrue(policy.isDefault(), "cleanup.policy is the default: " + policy);

            admin.incrementalAlterConfigs(Map.of(r, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                    .all().get();
            assertEquals("7200000", changed(admin, r, "retention.ms", e -> !e.value().equals("3600000")).value(),
                    "retention.ms after SET");
            ConfigEntry max = changed(admin, r, "max.message.bytes", e -> !e.value().equals("200000"));
            assertTrue(max.isDefault(), "max.message.bytes after DELETE is the default again: " + max);
            assertEquals(Set.of("delete", "compact"),
                    Set.of(changed(admin, r, "cleanup.policy", e -> !e.value().equals("delete")).value().split(",")),
                    "cleanup.policy after APPEND");

            Throwable unknown = failure(admin.incrementalAlterConfigs(Map.of(r, List.of(
                    new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all());
            assertInstanceOf(InvalidConfigurationException.class, unknown, "an unknown config name");
            Throwable bad = failure(admin.incrementalAlterConfigs(Map.of(r, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all());
            assertInstanceOf(InvalidConfigurationException.class, bad, "a value that is not a number");
            assertEquals("7200000", entry(admin, r, "retention.ms").value(), "retention.ms after the refusals");

            admin.incrementalAlterConfigs(Map.of(r, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
            ConfigEntry restored = changed(admin, r, "retention.ms", e -> !e.value().equals("7200000"));
            assertTrue(restored.isDefault(), "retention.ms after DELETE: " + restored);
            assertEquals("604800000", restored.value(), "the default retention is 7 days");
        }
    }

    /**
     * DescribeCluster names every broker at the address clients bootstrap from, a controller
     * among them and a cluster id; a broker's own configs can be described.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void describeClusterAndBrokerConfigs(Target t) throws Exception {
        try (Admin admin = Kit.admin(t)) {
            DescribeClusterResult c = admin.describeCluster();
            Collection<Node> nodes = c.nodes().get();
            assertEquals(t.brokers(), nodes.size(), "brokers: " + nodes);
            assertEquals(new HashSet<>(t.bootstrapAddresses()),
                    nodes.stream().map(n -> n.host() + ":" + n.port()).collect(Collectors.toSet()),
                    "the brokers' advertised addresses");
            String id = c.clusterId().get();
            assertNotNull(id, "cluster id");
            assertFalse(id.isBlank(), "cluster id");
            Node controller = c.controller().get();
            assertNotNull(controller, "controller");
            assertTrue(nodes.stream().anyMatch(n -> n.id() == controller.id()),
                    "the controller " + controller + " is one of " + nodes);

            Node first = nodes.iterator().next();
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(first.id()));
            Config configs = admin.describeConfigs(List.of(broker)).all().get().get(broker);
            assertEquals(Integer.toString(first.id()), configs.get("broker.id").value(), "broker.id");
            ConfigEntry partitions = configs.get("num.partitions");
            assertNotNull(partitions, "num.partitions is described");
            assertTrue(Integer.parseInt(partitions.value()) >= 1, "num.partitions " + partitions.value());
            ConfigEntry autoCreate = configs.get("auto.create.topics.enable");
            assertNotNull(autoCreate, "auto.create.topics.enable is described");
            assertTrue(Set.of("true", "false").contains(autoCreate.value()), autoCreate.toString());
        }
    }

    /**
     * With an authorizer: ACLs created are described by a filter, deleted by another, and the
     * rest stay. Without one the ACL APIs answer SECURITY_DISABLED, as Kafka's broker does.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void acls(Target t) throws Exception {
        try (Admin admin = Kit.admin(t)) {
            String user = "User:" + Kit.unique("alice");
            AclBindingFilter mine = new AclBindingFilter(ResourcePatternFilter.ANY,
                    new AccessControlEntryFilter(user, null, AclOperation.ANY, AclPermissionType.ANY));
            if (!t.authorizer()) {
                assertInstanceOf(SecurityDisabledException.class, failure(admin.describeAcls(mine).values()),
                        "DescribeAcls without an authorizer");
                return;
            }
            String topic = Kit.unique("acl-topic");
            AclBinding read = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                    new AccessControlEntry(user, "*", AclOperation.READ, AclPermissionType.ALLOW));
            AclBinding deny = new AclBinding(new ResourcePattern(ResourceType.GROUP, "acl-group-", PatternType.PREFIXED),
                    new AccessControlEntry(user, "127.0.0.1", AclOperation.DESCRIBE, AclPermissionType.DENY));
            admin.createAcls(List.of(read, deny)).all().get();
            Kit.eventually("both ACLs are described", () -> {
                try {
                    return new HashSet<>(admin.describeAcls(mine).values().get()).equals(Set.of(read, deny));
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
            AclBindingFilter topicOnly = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.MATCH),
                    new AccessControlEntryFilter(user, null, AclOperation.ANY, AclPermissionType.ANY));
            assertEquals(List.of(read), new ArrayList<>(admin.describeAcls(topicOnly).values().get()),
                    "a filter on the topic finds its ACL alone");
            Collection<AclBinding> deleted = admin.deleteAcls(List.of(topicOnly)).all().get();
            assertEquals(List.of(read), new ArrayList<>(deleted), "deleted by the topic's filter");
            Kit.eventually("only the group's ACL is left", () -> {
                try {
                    return new ArrayList<>(admin.describeAcls(mine).values().get()).equals(List.of(deny));
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
            admin.deleteAcls(List.of(mine)).all().get();
        }
    }

    /**
     * DescribeProducers lists an idempotent producer's state on a partition it wrote: its last
     * sequence and timestamp, and no open transaction.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void describeProducers(Target t) throws Exception {
        try (Admin admin = Kit.admin(t)) {
            String topic = Kit.createTopic(admin, t, "producers", 1, Map.of());
            TopicPartition tp = new TopicPartition(topic, 0);
            long t0 = System.currentTimeMillis() - 10_000;
            try (KafkaProducer<String, String> p = Kit.producer(t, Map.of("enable.idempotence", true, "acks", "all"))) {
                for (int i = 0; i < 5; i++) {
                    p.send(new ProducerRecord<>(topic, 0, t0 + i, "k", "v" + i)).get();
                }
            }
            List<ProducerState> states = admin.describeProducers(List.of(tp)).partitionResult(tp).get()
                    .activeProducers();
            assertEquals(1, states.size(), "one producer wrote: " + states);
            ProducerState s = states.get(0);
            assertTrue(s.producerId() >= 0, "producer id " + s.producerId());
            assertEquals(4, s.lastSequence(), "the last of five records' sequence");
            assertEquals(t0 + 4, s.lastTimestamp(), "the last record's timestamp");
            assertTrue(s.currentTransactionStartOffset().isEmpty(), "no transaction: " + s);
        }
    }

    /**
     * KIP-430: asked for them, DescribeTopics, DescribeCluster and DescribeConsumerGroups say
     * what the client may do
     * (tools such as UIs grey out what it may not); a superuser, or anyone on a broker
     * without an authorizer, may do everything.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.aerostream.clients.Target#all")
    void authorizedOperations(Target t) throws Exception {
        try (Admin admin = Kit.admin(t)) {
            String topic = Kit.createTopic(admin, t, "authorized-ops", 1, Map.of());
            TopicDescription d = admin.describeTopics(List.of(topic),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames().get().get(topic);
            assertNotNull(d.authorizedOperations(), "the topic's authorized operations");
            assertEquals(Set.of(AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                    AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS), d.authorizedOperations(), "the topic's authorized operations");
            Set<AclOperation> cluster = admin.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations().get();
            assertNotNull(cluster, "the cluster's authorized operations");
            assertTrue(cluster.containsAll(Set.of(AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.CREATE,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE)),
                    "the cluster's authorized operations: " + cluster);

            String group = Kit.unique("authorized-ops");
            try (KafkaConsumer<String, String> c = Kit.consumer(t, Map.of("group.id", group))) {
                c.commitSync(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(0)));
            }
            ConsumerGroupDescription g = admin.describeConsumerGroups(List.of(group),
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).describedGroups().get(group)
                    .get();
            assertEquals(Set.of(AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS), g.authorizedOperations(),
                    "the group's authorized operations");
        }
    }
}
