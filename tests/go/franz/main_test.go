// Package franz runs franz-go (kgo and kadm) against every target: the same
// assertions against AeroStream and against Apache Kafka, whose behaviour is
// the expected one.
package franz

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/aerostream/aerostream/tests/go/internal/target"
)

func TestMain(m *testing.M) { target.Main(m) }

// sentinel is the value readCommitted appends to each partition to know
// where the partition ended.
const sentinel = "--end-of-test--"

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*target.Patience)
	t.Cleanup(cancel)
	return ctx
}

// opts are the options every client of the target starts from.
func opts(t *testing.T, tg target.Target, extra ...kgo.Opt) []kgo.Opt {
	t.Helper()
	o := []kgo.Opt{
		kgo.SeedBrokers(tg.Addrs()...),
		kgo.ClientID("aerostream-go-tests"),
		kgo.RequestTimeoutOverhead(30 * time.Second),
		kgo.RetryTimeout(target.Patience),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
	// KGO_LOG=debug (or info, warn, error) logs what the clients do, to stderr
	if level, ok := map[string]kgo.LogLevel{
		"debug": kgo.LogLevelDebug, "info": kgo.LogLevelInfo, "warn": kgo.LogLevelWarn, "error": kgo.LogLevelError,
	}[os.Getenv("KGO_LOG")]; ok {
		name := tg.Name + " " + t.Name()
		o = append(o, kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, func() string { return name + " " })))
	}
	if mech, user, pass, ok := tg.Login(); ok {
		switch mech {
		case "SCRAM-SHA-512":
			o = append(o, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		case "SCRAM-SHA-256":
			o = append(o, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case "PLAIN":
			o = append(o, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		default:
			t.Fatalf("target %s: unknown SASL mechanism %q", tg.Name, mech)
		}
	}
	return append(o, extra...)
}

// client is a kgo client of the target, closed when the test ends.
func client(t *testing.T, tg target.Target, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts(t, tg, extra...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func admin(t *testing.T, tg target.Target) *kadm.Client {
	t.Helper()
	adm := kadm.NewClient(client(t, tg))
	adm.SetTimeoutMillis(30_000)
	return adm
}

// createTopic creates a topic replicated on every broker (up to three) and
// waits until every partition's leader serves it: a broker may name a new
// partition's leader a moment before it takes writes, and ListOffsets is
// answered by leaders only.
func createTopic(t *testing.T, tg target.Target, prefix string, partitions int32, configs map[string]*string) string {
	t.Helper()
	ctx := ctxFor(t)
	adm := admin(t, tg)
	name := target.Unique(prefix)
	resp, err := adm.CreateTopic(ctx, partitions, tg.ReplicationFactor(), configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	target.Eventually(t, "every partition of "+name+" has a serving leader", func() error {
		offsets, err := adm.ListEndOffsets(ctx, name)
		if err != nil {
			return err
		}
		if err := offsets.Error(); err != nil {
			return err
		}
		if n := len(offsets[name]); n != int(partitions) {
			return fmt.Errorf("%d of %d partitions answer", n, partitions)
		}
		return nil
	})
	return name
}

// fromStart consumes every partition of the topic from its beginning.
func fromStart(topic string, partitions int32) kgo.Opt {
	ps := map[int32]kgo.Offset{}
	for p := range partitions {
		ps[p] = kgo.NewOffset().AtStart()
	}
	return kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: ps})
}

// readUncommitted reads the topic from its beginning up to its end offsets
// as they are when it starts, read_uncommitted.
func readUncommitted(t *testing.T, tg target.Target, topic string, partitions int32) []*kgo.Record {
	t.Helper()
	ctx := ctxFor(t)
	ends, err := admin(t, tg).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	cl := client(t, tg, fromStart(topic, partitions), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	next := map[int32]int64{}
	var out []*kgo.Record
	done := func() bool {
		for p := range partitions {
			end, _ := ends.Lookup(topic, p)
			if next[p] < end.Offset {
				return false
			}
		}
		return true
	}
	pollUntil(t, cl, done, func(r *kgo.Record) {
		out = append(out, r)
		next[r.Partition] = r.Offset + 1
	})
	return out
}

// readCommitted appends a sentinel record to every partition of the topic,
// then reads it read_committed from the beginning up to the sentinels: the
// records a read_committed consumer sees, without the sentinels. The
// topic must have no open transaction, or this waits for it to end.
func readCommitted(t *testing.T, tg target.Target, topic string, partitions int32) []*kgo.Record {
	t.Helper()
	ctx := ctxFor(t)
	p := client(t, tg, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for part := range partitions {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: part, Value: []byte(sentinel)})
	}
	if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce sentinels to %s: %v", topic, err)
	}
	cl := client(t, tg, fromStart(topic, partitions), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ended := map[int32]bool{}
	var out []*kgo.Record
	pollUntil(t, cl, func() bool { return len(ended) == int(partitions) }, func(r *kgo.Record) {
		if string(r.Value) == sentinel {
			ended[r.Partition] = true
			return
		}
		if ended[r.Partition] {
			t.Errorf("read %s/%d@%d past the sentinel", topic, r.Partition, r.Offset)
		}
		out = append(out, r)
	})
	return out
}

// pollUntil polls the client, handing each record to each, until done holds;
// fails the test after target.Patience.
func pollUntil(t *testing.T, cl *kgo.Client, done func() bool, each func(*kgo.Record)) {
	t.Helper()
	deadline := time.Now().Add(target.Patience)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out polling")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(each)
	}
}

func values(rs []*kgo.Record) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	return out
}

func str(s string) *string { return &s }
