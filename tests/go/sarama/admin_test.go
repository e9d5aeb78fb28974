package sarama

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/aerostream/aerostream/tests/go/internal/target"
)

// ClusterAdmin topics: created with a config, listed with its partitions,
// replication factor and config, described; creating it again is refused
// with TOPIC_ALREADY_EXISTS; partitions are added; deleted, it is no longer
// listed.
func TestClusterAdminTopics(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		adm := admin(t, tg)
		topic := createTopic(t, tg, "sarama-admin", 3, map[string]*string{"retention.ms": str("3600000")})

		topics, err := adm.ListTopics()
		if err != nil {
			t.Fatalf("list topics: %v", err)
		}
		d, ok := topics[topic]
		if !ok || d.NumPartitions != 3 || d.ReplicationFactor != tg.ReplicationFactor() {
			t.Fatalf("listed %s: %v %+v; want 3 partitions with %d replicas", topic, ok, d, tg.ReplicationFactor())
		}
		if v := d.ConfigEntries["retention.ms"]; v == nil || *v != "3600000" {
			t.Errorf("listed retention.ms %v, want 3600000", v)
		}
		described, err := adm.DescribeTopics([]string{topic})
		if err != nil || len(described) != 1 || described[0].Err != sarama.ErrNoError || len(described[0].Partitions) != 3 {
			t.Fatalf("describe %s: %v %+v", topic, err, described)
		}
		for _, p := range described[0].Partitions {
			if len(p.Replicas) != int(tg.ReplicationFactor()) || !slices.Contains(p.Replicas, p.Leader) {
				t.Errorf("partition %d: leader %d, replicas %v", p.ID, p.Leader, p.Replicas)
			}
		}

		err = adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: tg.ReplicationFactor()}, false)
		if kerr(err) != sarama.ErrTopicAlreadyExists {
			t.Errorf("creating %s twice: %v, want %v", topic, err, sarama.ErrTopicAlreadyExists)
		}

		if err := adm.CreatePartitions(topic, 5, nil, false); err != nil {
			t.Fatalf("grow to 5 partitions: %v", err)
		}
		target.Eventually(t, topic+" has 5 partitions", func() error {
			ds, err := adm.DescribeTopics([]string{topic})
			if err != nil {
				return err
			}
			if len(ds) != 1 || len(ds[0].Partitions) != 5 {
				return fmt.Errorf("described %+v", ds)
			}
			return nil
		})

		if err := adm.DeleteTopic(topic); err != nil {
			t.Fatalf("delete %s: %v", topic, err)
		}
		target.Eventually(t, topic+" is no longer listed", func() error {
			ts, err := adm.ListTopics()
			if err != nil {
				return err
			}
			if _, ok := ts[topic]; ok {
				return fmt.Errorf("still listed")
			}
			return nil
		})
	})
}

// ClusterAdmin configs: DescribeConfig tells a topic's config and its
// source; IncrementalAlterConfig sets one; a bad value is refused with
// INVALID_CONFIG.
func TestClusterAdminConfigs(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		adm := admin(t, tg)
		topic := createTopic(t, tg, "sarama-configs", 1, map[string]*string{"retention.ms": str("3600000")})
		resource := sarama.ConfigResource{Type: sarama.TopicResource, Name: topic}
		has := func(name, value string, source sarama.ConfigSource) func() error {
			return func() error {
				entries, err := adm.DescribeConfig(resource)
				if err != nil {
					return err
				}
				for _, e := range entries {
					if e.Name == name {
						if e.Value != value || e.Source != source {
							return fmt.Errorf("%s=%q from %v, want %q from %v", name, e.Value, e.Source, value, source)
						}
						return nil
					}
				}
				return fmt.Errorf("%s not described", name)
			}
		}
		if err := has("retention.ms", "3600000", sarama.SourceTopic)(); err != nil {
			t.Error(err)
		}
		if err := has("cleanup.policy", "delete", sarama.SourceDefault)(); err != nil {
			t.Error(err)
		}
		err := adm.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
			"retention.bytes": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: str("1048576")},
		}, false)
		if err != nil {
			t.Fatalf("set retention.bytes: %v", err)
		}
		target.Eventually(t, "retention.bytes is set", has("retention.bytes", "1048576", sarama.SourceTopic))
		err = adm.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
			"retention.bytes": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: str("lots")},
		}, false)
		if kerr(err) != sarama.ErrInvalidConfig {
			t.Errorf("set retention.bytes=lots: %v, want %v", err, sarama.ErrInvalidConfig)
		}
		if err := has("retention.bytes", "1048576", sarama.SourceTopic)(); err != nil {
			t.Errorf("after a refused change: %v", err)
		}
	})
}

// ClusterAdmin DescribeCluster: every broker and a controller among them.
func TestClusterAdminDescribeCluster(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		brokers, controller, err := admin(t, tg).DescribeCluster()
		if err != nil {
			t.Fatalf("describe cluster: %v", err)
		}
		ids := []int32{}
		for _, b := range brokers {
			ids = append(ids, b.ID())
		}
		if len(brokers) != tg.Brokers || !slices.Contains(ids, controller) {
			t.Errorf("brokers %v, controller %d; want %d brokers, the controller among them", ids, controller, tg.Brokers)
		}
	})
}

// Offsets through sarama: the oldest and newest offsets and the offset of a
// time; an OffsetManager commits with metadata and a new one starts there;
// DeleteRecords moves the oldest offset; the admin reads and deletes the
// group's offsets.
func TestOffsets(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		topic := createTopic(t, tg, "sarama-offsets", 1, nil)
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		p := syncProducer(t, tg, idempotent(config(t, tg)))
		var ms []*sarama.ProducerMessage
		for i := range 10 {
			ms = append(ms, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprint(i)),
				Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
		if err := p.SendMessages(ms); err != nil {
			t.Fatalf("produce: %v", err)
		}
		cl := client(t, tg, config(t, tg))
		offset := func(what string, at, want int64) {
			t.Helper()
			got, err := cl.GetOffset(topic, 0, at)
			if err != nil || got != want {
				t.Errorf("%s: %d (%v), want %d", what, got, err, want)
			}
		}
		offset("oldest", sarama.OffsetOldest, 0)
		offset("newest", sarama.OffsetNewest, 10)
		offset("at 3.5 s", base.Add(3500*time.Millisecond).UnixMilli(), 4)

		group := target.Unique("sarama-offsets")
		commit := func(offset int64, metadata string) {
			t.Helper()
			om, err := sarama.NewOffsetManagerFromClient(group, cl)
			if err != nil {
				t.Fatalf("offset manager: %v", err)
			}
			pom, err := om.ManagePartition(topic, 0)
			if err != nil {
				t.Fatalf("manage partition: %v", err)
			}
			pom.MarkOffset(offset, metadata)
			om.Commit()
			if err := pom.Close(); err != nil {
				t.Fatalf("close the partition's offset manager: %v", err)
			}
			if err := om.Close(); err != nil {
				t.Fatalf("close the offset manager: %v", err)
			}
		}
		commit(6, "six")
		om, err := sarama.NewOffsetManagerFromClient(group, cl)
		if err != nil {
			t.Fatalf("offset manager: %v", err)
		}
		pom, err := om.ManagePartition(topic, 0)
		if err != nil {
			t.Fatalf("manage partition: %v", err)
		}
		if next, metadata := pom.NextOffset(); next != 6 || metadata != "six" {
			t.Errorf("a new offset manager starts at %d %q, want 6 \"six\"", next, metadata)
		}
		_ = pom.Close()
		_ = om.Close()

		adm := admin(t, tg)
		r, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
		if err != nil {
			t.Fatalf("list the group's offsets: %v", err)
		}
		if blk := r.GetBlock(topic, 0); blk == nil || blk.Offset != 6 || blk.Metadata != "six" {
			t.Errorf("listed %+v, want offset 6 with metadata six", blk)
		}
		if err := adm.DeleteConsumerGroupOffset(group, topic, 0); err != nil {
			t.Fatalf("delete the group's offset: %v", err)
		}
		r, err = adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
		if err != nil {
			t.Fatalf("list the group's offsets: %v", err)
		}
		if blk := r.GetBlock(topic, 0); blk == nil || blk.Offset != -1 {
			t.Errorf("after deleting it, listed %+v, want offset -1", blk)
		}

		if err := adm.DeleteRecords(topic, map[int32]int64{0: 4}); err != nil {
			t.Fatalf("delete records before 4: %v", err)
		}
		offset("oldest after DeleteRecords", sarama.OffsetOldest, 4)
		if got := values(readUncommitted(t, tg, topic, 1)[0]); !slices.Equal(got, []string{"4", "5", "6", "7", "8", "9"}) {
			t.Errorf("read %v after DeleteRecords, want 4..9", got)
		}
	})
}
