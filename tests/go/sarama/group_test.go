package sarama

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/aerostream/aerostream/tests/go/internal/target"
)

// member is one consumer of a group (the classic protocol) consuming in the
// background: it keeps its claims and the values it reads.
type member struct {
	group  sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	claims  []int32
	read    []string
	readErr error
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = nil
	for _, ps := range s.Claims() {
		m.claims = append(m.claims, ps...)
	}
	slices.Sort(m.claims)
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = nil
	return nil
}

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		m.mu.Lock()
		m.read = append(m.read, string(msg.Value))
		m.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

func joinGroup(t *testing.T, tg target.Target, group, topic string) *member {
	t.Helper()
	c := config(t, tg)
	c.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	c.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	g, err := sarama.NewConsumerGroup(tg.Addrs(), group, c)
	if err != nil {
		t.Fatalf("sarama.NewConsumerGroup: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{group: g, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, m); err != nil && ctx.Err() == nil {
				m.mu.Lock()
				m.readErr = err
				m.mu.Unlock()
				return
			}
		}
	}()
	t.Cleanup(m.leave)
	return m
}

// leave stops consuming and closes the member, which leaves the group.
func (m *member) leave() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	<-m.done
	_ = m.group.Close()
	m.cancel = nil
}

func (m *member) state() ([]int32, []string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.claims), slices.Clone(m.read), m.readErr
}

func produceSpread(t *testing.T, tg target.Target, topic string, partitions int32, perPartition int, prefix string) []string {
	t.Helper()
	p := syncProducer(t, tg, idempotent(config(t, tg)))
	var ms []*sarama.ProducerMessage
	var vs []string
	for part := range partitions {
		for i := range perPartition {
			v := fmt.Sprintf("%s-%d-%d", prefix, part, i)
			vs = append(vs, v)
			ms = append(ms, &sarama.ProducerMessage{Topic: topic, Partition: part, Value: sarama.StringEncoder(v)})
		}
	}
	if err := p.SendMessages(ms); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return vs
}

func waitRead(t *testing.T, ms []*member, n int) []string {
	t.Helper()
	var read []string
	target.Eventually(t, fmt.Sprintf("the group reads %d records", n), func() error {
		read = read[:0]
		for _, m := range ms {
			_, r, err := m.state()
			if err != nil {
				t.Fatalf("consume: %v", err)
			}
			read = append(read, r...)
		}
		if len(read) < n {
			return fmt.Errorf("read %d", len(read))
		}
		return nil
	})
	sort.Strings(read)
	return read
}

// Two members of a classic group split four partitions (sarama's range
// assignor) and read each record once, committing what they marked; one
// leaves and the other resumes its partitions from the commits. The admin
// lists and describes the group and its offsets.
func TestConsumerGroup(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		const partitions = 4
		topic := createTopic(t, tg, "sarama-group", partitions, nil)
		group := target.Unique("sarama-group")
		adm := admin(t, tg)
		a := joinGroup(t, tg, group, topic)
		b := joinGroup(t, tg, group, topic)
		target.Eventually(t, "the members split the partitions two and two", func() error {
			pa, _, _ := a.state()
			pb, _, _ := b.state()
			if len(pa) != 2 || len(pb) != 2 || slices.ContainsFunc(pa, func(p int32) bool { return slices.Contains(pb, p) }) {
				return fmt.Errorf("claims %v and %v", pa, pb)
			}
			return nil
		})
		first := produceSpread(t, tg, topic, partitions, 10, "first")
		waitRead(t, []*member{a, b}, len(first))
		target.Eventually(t, "the group commits what it read", func() error {
			r, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2, 3}})
			if err != nil {
				return err
			}
			for p := range int32(partitions) {
				if blk := r.GetBlock(topic, p); blk == nil || blk.Err != sarama.ErrNoError || blk.Offset != 10 {
					return fmt.Errorf("partition %d: %+v", p, blk)
				}
			}
			return nil
		})
		groups, err := adm.ListConsumerGroups()
		if err != nil {
			t.Fatalf("list groups: %v", err)
		}
		if groups[group] != "consumer" {
			t.Errorf("list groups: %s is %q, want consumer", group, groups[group])
		}
		ds, err := adm.DescribeConsumerGroups([]string{group})
		if err != nil || len(ds) != 1 {
			t.Fatalf("describe %s: %v %v", group, ds, err)
		}
		if d := ds[0]; d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "range" || len(d.Members) != 2 {
			t.Errorf("described %s: state %s, protocol %s/%s, %d members; want Stable, consumer/range, 2",
				group, d.State, d.ProtocolType, d.Protocol, len(d.Members))
		}

		b.leave()
		target.Eventually(t, "the remaining member claims every partition", func() error {
			if pa, _, _ := a.state(); len(pa) != partitions {
				return fmt.Errorf("claims %v", pa)
			}
			return nil
		})
		second := produceSpread(t, tg, topic, partitions, 5, "second")
		read := waitRead(t, []*member{a, b}, len(first)+len(second))
		want := slices.Concat(first, second)
		sort.Strings(want)
		if !slices.Equal(read, want) {
			t.Fatalf("read %v, want each of %v once", read, want)
		}
	})
}
