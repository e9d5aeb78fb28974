package aerostream

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aerostream/aerostream/sdk-go/internal/testagent"
	"github.com/aerostream/aerostream/sdk-go/proto"
)

func connect(t *testing.T, a *testagent.Agent, cfg Config) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, a.Bootstrap, cfg)
	if err != nil {
		t.Fatalf("connecting to %s: %v", a.Bootstrap, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestAgentAdminProduceConsume(t *testing.T) {
	a := testagent.Start(t, "--auto-create-topics", "false")
	c := connect(t, a, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := c.CreateTopic(ctx, "orders", 4, -1, map[string]string{"retention.ms": "3600000"}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	err := c.CreateTopic(ctx, "orders", 4, -1, nil)
	var se *Error
	if !errors.As(err, &se) || se.Code != proto.ErrTopicAlreadyExists {
		t.Fatalf("creating it again gave %v, want TOPIC_ALREADY_EXISTS", err)
	}
	md, err := c.Metadata(ctx, "orders")
	if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 4 || len(md.Nodes) == 0 {
		t.Fatalf("metadata: %+v, %v", md, err)
	}

	p, err := c.NewProducer(ctx, ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	deliveries := make([]*Delivery, n)
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("user-%d", i%37)
		deliveries[i], err = p.Send(ctx, Record{Topic: "orders", Key: []byte(key), Value: []byte(fmt.Sprintf("v%d", i))})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	last := map[uint32]int64{}
	for i, d := range deliveries {
		if d.Err != nil {
			t.Fatalf("record %d: %v", i, d.Err)
		}
		key := fmt.Sprintf("user-%d", i%37)
		if want := PartitionForKey([]byte(key), 4); d.Partition != want {
			t.Fatalf("key %s went to partition %d, Kafka's partitioner says %d", key, d.Partition, want)
		}
		if prev, ok := last[d.Partition]; ok && d.Offset <= prev {
			t.Fatalf("record %d: offset %d after %d in partition %d: order lost", i, d.Offset, prev, d.Partition)
		}
		last[d.Partition] = d.Offset
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, Record{Topic: "orders"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}

	// read everything back: every value once, in order per partition
	cs := c.NewConsumer(ConsumerConfig{})
	if err := cs.Assign(ctx, "orders", nil, Earliest); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	lastOff := map[uint32]int64{}
	for len(seen) < n {
		r, err := cs.Next(ctx)
		if err != nil {
			t.Fatalf("after %d records: %v", len(seen), err)
		}
		if seen[string(r.Value)] {
			t.Fatalf("%s read twice", r.Value)
		}
		seen[string(r.Value)] = true
		if prev, ok := lastOff[r.Partition]; ok && r.Offset != prev+1 {
			t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
		}
		lastOff[r.Partition] = r.Offset
		if PartitionForKey(r.Key, 4) != r.Partition {
			t.Fatalf("key %s read from partition %d", r.Key, r.Partition)
		}
	}
	cs.Close(ctx)
	if _, err := cs.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}

	// latest: only what is written afterwards
	late := c.NewConsumer(ConsumerConfig{})
	if err := late.Assign(ctx, "orders", []uint32{0}, Latest); err != nil {
		t.Fatal(err)
	}
	p2, _ := c.NewProducer(ctx, ProducerConfig{})
	part, off, err := p2.Produce(ctx, Record{Topic: "orders", Partition: 0, Partitioned: true, Value: []byte("late")})
	if err != nil || part != 0 {
		t.Fatalf("produce: %d %d %v", part, off, err)
	}
	r, err := late.Next(ctx)
	if err != nil || string(r.Value) != "late" || r.Offset != off {
		t.Fatalf("latest consumer read %+v, %v; want late at %d", r, err, off)
	}
	// a second Assign adds partitions: partition 0 goes on where it was
	if err := late.Assign(ctx, "orders", []uint32{1}, Latest); err != nil {
		t.Fatal(err)
	}
	_, off0, _ := p2.Produce(ctx, Record{Topic: "orders", Partition: 0, Partitioned: true, Value: []byte("p0")})
	_, off1, _ := p2.Produce(ctx, Record{Topic: "orders", Partition: 1, Partitioned: true, Value: []byte("p1")})
	both := map[string]int64{}
	for len(both) < 2 {
		r, err := late.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := both[string(r.Value)]; dup {
			t.Fatalf("%s read twice", r.Value)
		}
		both[string(r.Value)] = r.Offset
	}
	if both["p0"] != off0 || both["p1"] != off1 {
		t.Fatalf("read %v, want p0 at %d and p1 at %d", both, off0, off1)
	}
	late.Close(ctx)

	// a missing topic is named as such
	if _, err := c.Partitions(ctx, "missing"); !errors.As(err, &se) || se.Code != proto.ErrUnknownTopic {
		t.Fatalf("partitions of a missing topic: %v, want UNKNOWN_TOPIC", err)
	}
	if _, err := p2.Send(ctx, Record{Topic: "missing", Value: []byte("x")}); err == nil {
		t.Fatal("a record for a missing topic was queued")
	}
	p2.Close(ctx)
	if err := c.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

func TestAgentConsumerGroup(t *testing.T) {
	a := testagent.Start(t)
	c := connect(t, a, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := c.CreateTopic(ctx, "events", 3, -1, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		if _, err := p.Send(ctx, Record{Topic: "events", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// a member reads 100 records, commits and leaves
	first := c.NewConsumer(ConsumerConfig{Group: "readers", HeartbeatInterval: 500 * time.Millisecond})
	if err := first.Subscribe("events"); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < 100 {
		r, err := first.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got[string(r.Value)] = true
	}
	if err := first.Close(ctx); err != nil {
		t.Fatalf("close (commit and leave): %v", err)
	}
	// the next member goes on from the committed offsets: it reads the
	// other 200 and nothing read before
	second := c.NewConsumer(ConsumerConfig{Group: "readers", HeartbeatInterval: 500 * time.Millisecond})
	if err := second.Subscribe("events"); err != nil {
		t.Fatal(err)
	}
	rest := map[string]bool{}
	for len(rest) < 200 {
		r, err := second.Next(ctx)
		if err != nil {
			t.Fatalf("after %d: %v", len(rest), err)
		}
		if got[string(r.Value)] {
			t.Fatalf("record %s read again by the next member", r.Value)
		}
		rest[string(r.Value)] = true
	}
	second.Close(ctx)
	all := make([]string, 0, 300)
	for k := range got {
		all = append(all, k)
	}
	for k := range rest {
		all = append(all, k)
	}
	sort.Strings(all)
	if len(all) != 300 {
		t.Fatalf("read %d distinct records, want 300", len(all))
	}
}

func TestAgentLogins(t *testing.T) {
	a := testagent.Start(t, "--sasl-mechanisms", "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN", "--admin-user", "admin:admin-secret")
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		c := connect(t, a, Config{SASL: SASL{Mechanism: mech, User: "admin", Password: "admin-secret"}})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := c.CreateTopic(ctx, "t-"+mech, 1, -1, nil); err != nil {
			t.Errorf("%s: create topic as admin: %v", mech, err)
		}
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
		_, err := Connect(ctx, a.Bootstrap, Config{SASL: SASL{Mechanism: mech, User: "admin", Password: "wrong"}})
		cancel()
		var se *Error
		if !errors.As(err, &se) || se.Code != proto.ErrAuthenticationFailed {
			t.Errorf("%s with a wrong password: %v, want AUTHENTICATION_FAILED", mech, err)
		}
	}
	// no login on a server that requires one
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Connect(ctx, a.Bootstrap, Config{})
	var se *Error
	if !errors.As(err, &se) || se.Code != proto.ErrAuthenticationRequired {
		t.Errorf("without login: %v, want AUTHENTICATION_REQUIRED", err)
	}
}

// Over QUIC, trusting the CA the agent wrote into its data folder: the
// same operations as over TCP, and a server the CA did not sign is refused.
func TestAgentOverQUIC(t *testing.T) {
	a := testagent.Start(t)
	ca := filepath.Join(a.DataDir, "native-tls", "ca.pem")
	url := "aero+quic://" + a.Native
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Connect(ctx, url, Config{TLSCAFile: ca})
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	defer c.Close()
	if err := c.CreateTopic(ctx, "over-quic", 2, -1, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if _, err := p.Send(ctx, Record{Topic: "over-quic", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cs := c.NewConsumer(ConsumerConfig{})
	if err := cs.Assign(ctx, "over-quic", nil, Earliest); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 200 {
		r, err := cs.Next(ctx)
		if err != nil {
			t.Fatalf("after %d: %v", len(seen), err)
		}
		seen[string(r.Value)] = true
	}
	cs.Close(ctx)

	// a CA that did not sign the server's certificate
	otherAgent := testagent.Start(t)
	wrong := filepath.Join(otherAgent.DataDir, "native-tls", "ca.pem")
	if _, err := Connect(ctx, url, Config{TLSCAFile: wrong}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a server certified by another CA: %v, want a certificate error", err)
	}
	if _, err := Connect(ctx, url, Config{}); err == nil {
		t.Fatal("QUIC without a CA nor InsecureSkipVerify was accepted")
	}
	c2, err := Connect(ctx, url, Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("InsecureSkipVerify: %v", err)
	}
	c2.Close()
}

// A transactional producer's records reach read_committed readers all or
// nothing; read_uncommitted readers see the aborted ones too, and a second
// producer of the same id fences the first.
func TestAgentTransactions(t *testing.T) {
	a := testagent.Start(t)
	c := connect(t, a, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := c.CreateTopic(ctx, "txn", 2, -1, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, ProducerConfig{TransactionalID: "go-txn"})
	if err != nil {
		t.Fatalf("transactional producer: %v", err)
	}
	if _, err := p.Send(ctx, Record{Topic: "txn", Value: []byte("outside")}); !errors.Is(err, ErrNoTransaction) {
		t.Fatalf("send outside a transaction: %v", err)
	}
	send := func(prefix string, n int) {
		for i := 0; i < n; i++ {
			if _, err := p.Send(ctx, Record{Topic: "txn", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, step := range []struct {
		prefix string
		n      int
		commit bool
	}{{"committed", 10, true}, {"aborted", 5, false}, {"again", 3, true}} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		send(step.prefix, step.n)
		if step.commit {
			err = p.CommitTransaction(ctx)
		} else {
			err = p.AbortTransaction(ctx)
		}
		if err != nil {
			t.Fatalf("%s: %v", step.prefix, err)
		}
	}

	read := func(iso proto.Isolation, n int) map[string]bool {
		cs := c.NewConsumer(ConsumerConfig{Isolation: iso})
		defer cs.Close(ctx)
		if err := cs.Assign(ctx, "txn", nil, Earliest); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for len(got) < n {
			r, err := cs.Next(ctx)
			if err != nil {
				t.Fatalf("%v after %d: %v", iso, len(got), err)
			}
			got[string(r.Value)] = true
		}
		// nothing more comes
		short, stop := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer stop()
		if r, err := cs.Next(short); err == nil {
			t.Fatalf("%v: read %s beyond the %d records expected", iso, r.Value, n)
		}
		return got
	}
	committed := read(proto.ReadCommitted, 13)
	for v := range committed {
		if strings.HasPrefix(v, "aborted") {
			t.Fatalf("read_committed returned %s", v)
		}
	}
	all := read(proto.ReadUncommitted, 18)
	if !all["aborted-0"] {
		t.Fatal("read_uncommitted misses the aborted records")
	}

	// a new producer of the id fences this one
	p2, err := c.NewProducer(ctx, ProducerConfig{TransactionalID: "go-txn"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	send("fenced", 1)
	err = p.CommitTransaction(ctx)
	var se *Error
	if !errors.As(err, &se) || se.Code != proto.ErrProducerFenced {
		t.Fatalf("the fenced producer committed: %v, want PRODUCER_FENCED", err)
	}
	p2.Close(ctx)
}

// A push consumer reads through subscriptions: what was written before
// it subscribed, then what is written while it reads, in order, once.
func TestAgentPushConsumer(t *testing.T) {
	a := testagent.Start(t)
	c := connect(t, a, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.CreateTopic(ctx, "pushed", 3, -1, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			value := fmt.Sprintf("%d:%s", i, strings.Repeat("x", 2000))
			if _, err := p.Send(ctx, Record{Topic: "pushed", Key: []byte(fmt.Sprint(i)), Value: []byte(value)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 500)
	// 5 MB of records against 1 MiB of credit per partition: the credit
	// runs out and is granted again as records are handed over
	cs := c.NewConsumer(ConsumerConfig{Push: true, PartitionMaxBytes: 64 << 10})
	defer cs.Close(ctx)
	if err := cs.Assign(ctx, "pushed", nil, Earliest); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	last := map[uint32]int64{}
	read := func(n int) {
		for len(seen) < n {
			r, err := cs.Next(ctx)
			if err != nil {
				t.Fatalf("after %d: %v", len(seen), err)
			}
			if seen[string(r.Value)] {
				t.Fatalf("%s pushed twice", r.Value)
			}
			seen[string(r.Value)] = true
			if prev, ok := last[r.Partition]; ok && r.Offset != prev+1 {
				t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
			}
			last[r.Partition] = r.Offset
		}
	}
	read(500)
	produce(500, 2500) // pushed to the open subscriptions as they are written
	read(2500)
}

// Consume-transform-produce: the records written and the group's offsets
// commit together, or not at all.
func TestAgentOffsetsInTransactions(t *testing.T) {
	a := testagent.Start(t)
	c := connect(t, a, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, topic := range []string{"src", "sink"} {
		if err := c.CreateTopic(ctx, topic, 1, -1, nil); err != nil {
			t.Fatal(err)
		}
	}
	plain, _ := c.NewProducer(ctx, ProducerConfig{})
	defer plain.Close(ctx)
	write := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := plain.Send(ctx, Record{Topic: "src", Value: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := plain.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cs := c.NewConsumer(ConsumerConfig{Group: "ctp", DisableAutoCommit: true, HeartbeatInterval: 500 * time.Millisecond})
	if err := cs.Subscribe("src"); err != nil {
		t.Fatal(err)
	}
	txp, err := c.NewProducer(ctx, ProducerConfig{TransactionalID: "ctp-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer txp.Close(ctx)
	src0 := proto.TopicPartition{Topic: "src", Partition: 0}
	committed := func() int64 {
		got, err := c.CommittedOffsets(ctx, "ctp", src0)
		if err != nil {
			t.Fatal(err)
		}
		return got[src0]
	}
	round := func(n int, commit bool) {
		if err := txp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			r, err := cs.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := txp.Send(ctx, Record{Topic: "sink", Value: append([]byte("seen "), r.Value...)}); err != nil {
				t.Fatal(err)
			}
		}
		member, ok := cs.GroupMember()
		if !ok {
			t.Fatal("the consumer is not a group member")
		}
		if err := txp.SendOffsetsToTransaction(ctx, member, cs.Positions()); err != nil {
			t.Fatalf("offsets in the transaction: %v", err)
		}
		if commit {
			err = txp.CommitTransaction(ctx)
		} else {
			err = txp.AbortTransaction(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	write(0, 10)
	round(10, true)
	if got := committed(); got != 10 {
		t.Fatalf("after a committed transaction the group is at %d, want 10", got)
	}
	write(10, 15)
	round(5, false)
	if got := committed(); got != 10 {
		t.Fatalf("after an aborted transaction the group is at %d, want still 10", got)
	}
	if err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != 10 {
		t.Fatalf("a consumer without auto-commit committed %d on close", got)
	}
}

// On three agents the client sends each partition's requests to its
// leader, wherever it bootstrapped, and a group's to its coordinator.
func TestAgentCluster(t *testing.T) {
	agents := testagent.StartCluster(t, 3)
	c := connect(t, agents[0], Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := c.CreateTopic(ctx, "spread", 6, 3, nil); err != nil {
		t.Fatal(err)
	}
	// leaders are elected shortly after the creation
	leaders := map[int32]bool{}
	for len(leaders) < 2 {
		md, err := c.Metadata(ctx, "spread")
		if err != nil {
			t.Fatal(err)
		}
		if len(md.Nodes) != 3 {
			t.Fatalf("metadata lists %d servers, want 3", len(md.Nodes))
		}
		leaders = map[int32]bool{}
		for _, tm := range md.Topics {
			for _, p := range tm.Partitions {
				if p.Leader >= 0 {
					leaders[p.Leader] = true
				}
			}
		}
		if len(leaders) < 2 && !sleep(ctx, 200*time.Millisecond) {
			t.Fatalf("the partitions' leaders are %v: not spread over the servers", leaders)
		}
	}
	p, err := c.NewProducer(ctx, ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 600; i++ {
		if _, err := p.Send(ctx, Record{Topic: "spread", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("producing to the leaders: %v", err)
	}
	cs := c.NewConsumer(ConsumerConfig{Group: "spread-readers", HeartbeatInterval: 500 * time.Millisecond})
	if err := cs.Subscribe("spread"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 600 {
		r, err := cs.Next(ctx)
		if err != nil {
			t.Fatalf("after %d: %v", len(seen), err)
		}
		if PartitionForKey(r.Key, 6) != r.Partition {
			t.Fatalf("key %s in partition %d", r.Key, r.Partition)
		}
		seen[string(r.Value)] = true
	}
	if err := cs.Close(ctx); err != nil {
		t.Fatalf("commit and leave: %v", err)
	}
	got, err := c.CommittedOffsets(ctx, "spread-readers", proto.TopicPartition{Topic: "spread", Partition: 0})
	if err != nil || got[proto.TopicPartition{Topic: "spread", Partition: 0}] <= 0 {
		t.Fatalf("committed offsets %v, %v", got, err)
	}
}
