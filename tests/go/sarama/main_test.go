// Package sarama runs IBM/sarama against every target: the same assertions
// against AeroStream and against Apache Kafka, whose behaviour is the
// expected one.
package sarama

import (
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"github.com/aerostream/aerostream/tests/go/internal/target"
)

func TestMain(m *testing.M) { target.Main(m) }

// sentinel is the value readCommitted appends to each partition to know
// where the partition ended.
const sentinel = "--end-of-test--"

// scramClient is sarama's SCRAMClient over xdg-go/scram, as sarama's own
// example has it.
type scramClient struct {
	gen  scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (s *scramClient) Begin(user, password, authzID string) error {
	c, err := s.gen.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *scramClient) Done() bool                            { return s.conv.Done() }

// config is what every client of the target starts from: sarama's default
// protocol version (2.8, the one it fully covers) and its defaults, with
// patience for a loaded machine.
func config(t *testing.T, tg target.Target) *sarama.Config {
	t.Helper()
	c := sarama.NewConfig()
	c.ClientID = "aerostream-go-tests"
	c.Net.ReadTimeout = 60 * time.Second
	c.Admin.Timeout = 30 * time.Second
	c.Metadata.Retry.Max = 20
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.MaxWaitTime = 500 * time.Millisecond
	c.Producer.Return.Successes = true
	c.Producer.Retry.Max = 20
	c.Producer.Retry.Backoff = 250 * time.Millisecond
	if mech, user, pass, ok := tg.Login(); ok {
		c.Net.SASL.Enable = true
		c.Net.SASL.User = user
		c.Net.SASL.Password = pass
		switch mech {
		case "SCRAM-SHA-512":
			c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{gen: sha512.New} }
		case "SCRAM-SHA-256":
			c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{gen: sha256.New} }
		case "PLAIN":
			c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		default:
			t.Fatalf("target %s: unknown SASL mechanism %q", tg.Name, mech)
		}
	}
	return c
}

// idempotent makes c an idempotent producer with acks=all, as sarama
// requires it.
func idempotent(c *sarama.Config) *sarama.Config {
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Partitioner = sarama.NewManualPartitioner
	return c
}

func client(t *testing.T, tg target.Target, c *sarama.Config) sarama.Client {
	t.Helper()
	cl, err := sarama.NewClient(tg.Addrs(), c)
	if err != nil {
		t.Fatalf("sarama.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func admin(t *testing.T, tg target.Target) sarama.ClusterAdmin {
	t.Helper()
	a, err := sarama.NewClusterAdmin(tg.Addrs(), config(t, tg))
	if err != nil {
		t.Fatalf("sarama.NewClusterAdmin: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func syncProducer(t *testing.T, tg target.Target, c *sarama.Config) sarama.SyncProducer {
	t.Helper()
	p, err := sarama.NewSyncProducer(tg.Addrs(), c)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// createTopic creates a topic replicated on every broker (up to three) and
// waits until every partition's leader answers ListOffsets for it.
func createTopic(t *testing.T, tg target.Target, prefix string, partitions int32, configs map[string]*string) string {
	t.Helper()
	name := target.Unique(prefix)
	err := admin(t, tg).CreateTopic(name, &sarama.TopicDetail{
		NumPartitions:     partitions,
		ReplicationFactor: tg.ReplicationFactor(),
		ConfigEntries:     configs,
	}, false)
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	cl := client(t, tg, config(t, tg))
	target.Eventually(t, "every partition of "+name+" has a serving leader", func() error {
		if err := cl.RefreshMetadata(name); err != nil {
			return err
		}
		for p := range partitions {
			if _, err := cl.GetOffset(name, p, sarama.OffsetNewest); err != nil {
				return fmt.Errorf("partition %d: %w", p, err)
			}
		}
		return nil
	})
	return name
}

// readUncommitted reads every partition from its beginning up to its end
// offset as it is when it starts.
func readUncommitted(t *testing.T, tg target.Target, topic string, partitions int32) map[int32][]*sarama.ConsumerMessage {
	t.Helper()
	c := config(t, tg)
	cl := client(t, tg, c)
	out := map[int32][]*sarama.ConsumerMessage{}
	for p := range partitions {
		end, err := cl.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("end offset of %s/%d: %v", topic, p, err)
		}
		out[p] = consumeUntil(t, tg, c, topic, p, func(m *sarama.ConsumerMessage) bool { return m.Offset+1 >= end }, end == 0)
	}
	return out
}

// readCommitted appends a sentinel record to every partition, then reads
// each read_committed from its beginning up to the sentinel: what a
// read_committed consumer sees, without the sentinels.
func readCommitted(t *testing.T, tg target.Target, topic string, partitions int32) map[int32][]*sarama.ConsumerMessage {
	t.Helper()
	p := syncProducer(t, tg, idempotent(config(t, tg)))
	for part := range partitions {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: part, Value: sarama.StringEncoder(sentinel)}); err != nil {
			t.Fatalf("produce a sentinel to %s/%d: %v", topic, part, err)
		}
	}
	c := config(t, tg)
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	out := map[int32][]*sarama.ConsumerMessage{}
	for part := range partitions {
		ms := consumeUntil(t, tg, c, topic, part, func(m *sarama.ConsumerMessage) bool { return string(m.Value) == sentinel }, false)
		out[part] = ms[:len(ms)-1]
	}
	return out
}

// consumeUntil reads one partition from its beginning until last holds for
// a message (which is kept); nothing is read when empty.
func consumeUntil(t *testing.T, tg target.Target, c *sarama.Config, topic string, partition int32, last func(*sarama.ConsumerMessage) bool, empty bool) []*sarama.ConsumerMessage {
	t.Helper()
	if empty {
		return nil
	}
	consumer, err := sarama.NewConsumer(tg.Addrs(), c)
	if err != nil {
		t.Fatalf("sarama.NewConsumer: %v", err)
	}
	defer func() { _ = consumer.Close() }()
	pc, err := consumer.ConsumePartition(topic, partition, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("consume %s/%d: %v", topic, partition, err)
	}
	defer func() { _ = pc.Close() }()
	var out []*sarama.ConsumerMessage
	timeout := time.After(target.Patience)
	for {
		select {
		case m := <-pc.Messages():
			out = append(out, m)
			if last(m) {
				return out
			}
		case err := <-pc.Errors():
			t.Fatalf("consume %s/%d: %v", topic, partition, err)
		case <-timeout:
			t.Fatalf("consume %s/%d: timed out after %d messages", topic, partition, len(out))
		}
	}
}

func values(ms []*sarama.ConsumerMessage) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, string(m.Value))
	}
	return out
}

// kerr is the Kafka error code err carries, if any.
func kerr(err error) sarama.KError {
	var k sarama.KError
	if errors.As(err, &k) {
		return k
	}
	var te *sarama.TopicError
	if errors.As(err, &te) {
		return te.Err
	}
	return sarama.ErrNoError
}

func str(s string) *string { return &s }
