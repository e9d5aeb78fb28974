package franz

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aerostream/aerostream/tests/go/internal/target"
)

// member is one consumer of a group, polling in the background: it keeps
// the partitions it is assigned and the records it reads.
type member struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	assigned map[int32]bool
	read     []*kgo.Record
	fetchErr error
}

func joinGroup(t *testing.T, tg target.Target, group, topic string, extra ...kgo.Opt) *member {
	t.Helper()
	m := &member{assigned: map[int32]bool{}, done: make(chan struct{})}
	o := []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ps[topic] {
				m.assigned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ps[topic] {
				delete(m.assigned, p)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ps[topic] {
				delete(m.assigned, p)
			}
		}),
	}
	cl, err := kgo.NewClient(opts(t, tg, append(o, extra...)...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			m.mu.Lock()
			fs.EachError(func(topic string, p int32, err error) {
				if ctx.Err() == nil && m.fetchErr == nil {
					m.fetchErr = fmt.Errorf("fetch %s/%d: %w", topic, p, err)
				}
			})
			m.read = append(m.read, fs.Records()...)
			m.mu.Unlock()
		}
	}()
	t.Cleanup(m.leave)
	return m
}

// leave stops polling and closes the client, which leaves the group.
func (m *member) leave() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	<-m.done
	m.cl.Close()
	m.cancel = nil
}

func (m *member) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.assigned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (m *member) records() ([]*kgo.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.read), m.fetchErr
}

// produceSpread writes perPartition records to every partition, valued
// prefix-PARTITION-I.
func produceSpread(t *testing.T, tg target.Target, topic string, partitions int32, perPartition int, prefix string) []string {
	t.Helper()
	p := client(t, tg, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	var vs []string
	for part := range partitions {
		for i := range perPartition {
			v := fmt.Sprintf("%s-%d-%d", prefix, part, i)
			vs = append(vs, v)
			rs = append(rs, &kgo.Record{Topic: topic, Partition: part, Value: []byte(v)})
		}
	}
	if err := p.ProduceSync(ctxFor(t), rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return vs
}

// Two members of a group split four partitions and read each record once;
// they commit; one leaves and the other takes its partitions on from the
// committed offsets, reading only what was written since. With the classic
// protocol (cooperative-sticky assignor, client side) and with KIP-848's
// (assignment by the broker).
func TestGroupSplitCommitResume(t *testing.T) {
	protocols := map[string][]kgo.Opt{
		"classic": {kgo.Balancers(kgo.CooperativeStickyBalancer())},
		"kip848":  {kgo.ServerSideBalancer()},
	}
	target.Each(t, func(t *testing.T, tg target.Target) {
		for name, extra := range protocols {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				groupSplitCommitResume(t, tg, name == "kip848", extra)
			})
		}
	})
}

func groupSplitCommitResume(t *testing.T, tg target.Target, kip848 bool, extra []kgo.Opt) {
	const partitions = 4
	topic := createTopic(t, tg, "group", partitions, nil)
	group := target.Unique("group")
	ctx := ctxFor(t)
	adm := admin(t, tg)

	a := joinGroup(t, tg, group, topic, extra...)
	b := joinGroup(t, tg, group, topic, extra...)
	target.Eventually(t, "the members split the partitions two and two", func() error {
		pa, pb := a.partitions(), b.partitions()
		if len(pa) != 2 || len(pb) != 2 || len(slices.Concat(pa, pb)) != 4 || slices.ContainsFunc(pa, func(p int32) bool { return slices.Contains(pb, p) }) {
			return fmt.Errorf("assigned %v and %v", pa, pb)
		}
		return nil
	})

	first := produceSpread(t, tg, topic, partitions, 10, "first")
	waitRead(t, []*member{a, b}, len(first))
	for _, m := range []*member{a, b} {
		rs, _ := m.records()
		for _, r := range rs {
			if !slices.Contains(m.partitions(), r.Partition) {
				t.Errorf("a member read partition %d, assigned %v", r.Partition, m.partitions())
			}
		}
		if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	offsets, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		t.Fatalf("fetch the group's offsets: %v", err)
	}
	for p := range int32(partitions) {
		if o, ok := offsets.Lookup(topic, p); !ok || o.At != 10 {
			t.Errorf("committed offset of partition %d: %+v, want 10", p, o)
		}
	}
	describeTwoMembers(t, tg, adm, group, topic, kip848)

	b.leave()
	target.Eventually(t, "the remaining member has every partition", func() error {
		if pa := a.partitions(); len(pa) != partitions {
			return fmt.Errorf("assigned %v", pa)
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
}

// waitRead waits until the members have read n records in all, and returns
// their values, sorted.
func waitRead(t *testing.T, ms []*member, n int) []string {
	t.Helper()
	var read []string
	target.Eventually(t, fmt.Sprintf("the group reads %d records", n), func() error {
		read = read[:0]
		for _, m := range ms {
			rs, err := m.records()
			if err != nil {
				t.Fatalf("%v", err)
			}
			read = append(read, values(rs)...)
		}
		if len(read) < n {
			return fmt.Errorf("read %d", len(read))
		}
		return nil
	})
	sort.Strings(read)
	return read
}

// describeTwoMembers checks what the admin tells of a stable group of two
// members that share the topic's partitions.
func describeTwoMembers(t *testing.T, tg target.Target, adm *kadm.Client, group, topic string, kip848 bool) {
	t.Helper()
	ctx := ctxFor(t)
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	if _, ok := listed[group]; !ok {
		t.Errorf("list groups: %s not among %v", group, listed.Groups())
	}
	if kip848 {
		target.Eventually(t, "the group is described stable with two members", func() error {
			ds, err := adm.DescribeConsumerGroups(ctx, group)
			if err != nil {
				return err
			}
			d := ds[group]
			if d.Err != nil {
				return d.Err
			}
			var assigned []int32
			for _, m := range d.Members {
				for p := range m.Assignment[topic] {
					assigned = append(assigned, p)
				}
			}
			slices.Sort(assigned)
			if d.State != "Stable" || len(d.Members) != 2 || !slices.Equal(assigned, []int32{0, 1, 2, 3}) ||
				!slices.Equal(d.SubscribedTopics(), []string{topic}) {
				return fmt.Errorf("state %s, %d members, assigned %v, subscribed to %v",
					d.State, len(d.Members), assigned, d.SubscribedTopics())
			}
			return nil
		})
		return
	}
	target.Eventually(t, "the group is described stable with two members", func() error {
		ds, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		d := ds[group]
		if d.Err != nil {
			return d.Err
		}
		var assigned []int32
		for _, m := range d.Members {
			if ca, ok := m.Assigned.AsConsumer(); ok {
				for _, tp := range ca.Topics {
					if tp.Topic == topic {
						assigned = append(assigned, tp.Partitions...)
					}
				}
			}
		}
		slices.Sort(assigned)
		if d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "cooperative-sticky" ||
			len(d.Members) != 2 || !slices.Equal(assigned, []int32{0, 1, 2, 3}) {
			return fmt.Errorf("state %s, protocol %s/%s, %d members, assigned %v",
				d.State, d.ProtocolType, d.Protocol, len(d.Members), assigned)
		}
		return nil
	})
}
