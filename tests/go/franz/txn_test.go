package franz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aerostream/aerostream/tests/go/internal/target"
)

// byPartition groups values by partition, each in offset order.
func byPartition(rs []*kgo.Record) map[int32][]string {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b *kgo.Record) int { return int(a.Offset - b.Offset) })
	out := map[int32][]string{}
	for _, r := range sorted {
		out[r.Partition] = append(out[r.Partition], string(r.Value))
	}
	return out
}

// A transactional producer commits, aborts and commits again: read_committed
// reads exactly the committed records, in order, and never the aborted
// ones; read_uncommitted reads them all; while a transaction is open the
// last stable offset stays at its first record.
func TestTransactionsCommitAbort(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		ctx := ctxFor(t)
		adm := admin(t, tg)
		topic := createTopic(t, tg, "txn", 2, nil)
		p := client(t, tg,
			kgo.TransactionalID(target.Unique("txn")),
			kgo.TransactionTimeout(45*time.Second),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
		)
		transaction := func(partition func(i int) int32, values ...string) []*kgo.Record {
			t.Helper()
			if err := p.BeginTransaction(); err != nil {
				t.Fatalf("begin: %v", err)
			}
			var rs []*kgo.Record
			for i, v := range values {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: partition(i), Value: []byte(v)})
			}
			if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("produce in a transaction: %v", err)
			}
			return rs
		}
		end := func(commit kgo.TransactionEndTry) {
			t.Helper()
			if err := p.EndTransaction(ctx, commit); err != nil {
				t.Fatalf("end the transaction (commit %v): %v", commit, err)
			}
		}
		alternate := func(i int) int32 { return int32(i % 2) }
		first := func(int) int32 { return 0 }

		transaction(alternate, "c0", "c1", "c2", "c3", "c4")
		end(kgo.TryCommit)
		aborted := transaction(first, "a0", "a1", "a2", "a3", "a4")
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = stable.Error()
		}
		if err != nil {
			t.Fatalf("list the last stable offsets: %v", err)
		}
		if o, _ := stable.Lookup(topic, 0); o.Offset != aborted[0].Offset {
			t.Errorf("last stable offset of partition 0 while a transaction is open: %d, want its first offset %d",
				o.Offset, aborted[0].Offset)
		}
		end(kgo.TryAbort)
		transaction(alternate, "c5", "c6", "c7")
		end(kgo.TryCommit)

		committed := byPartition(readCommitted(t, tg, topic, 2))
		want := map[int32][]string{0: {"c0", "c2", "c4", "c5", "c7"}, 1: {"c1", "c3", "c6"}}
		for part, vs := range want {
			if !slices.Equal(committed[part], vs) {
				t.Errorf("read_committed, partition %d: %v, want %v", part, committed[part], vs)
			}
		}
		all := byPartition(readUncommitted(t, tg, topic, 2))
		want[0] = []string{"c0", "c2", "c4", "a0", "a1", "a2", "a3", "a4", "c5", "c7", sentinel}
		want[1] = append(want[1], sentinel)
		for part, vs := range want {
			if !slices.Equal(all[part], vs) {
				t.Errorf("read_uncommitted, partition %d: %v, want %v", part, all[part], vs)
			}
		}
	})
}

// Consume, transform, produce with kgo.GroupTransactSession, exactly once:
// two sessions in one group (the second joins midway, so the group
// rebalances), one of them aborting a transaction on purpose. The output,
// read_committed, is the input transformed, each record once, each
// partition in the input's order.
func TestGroupTransactSessionExactlyOnce(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		const partitions, perPartition = 2, 100
		ctx := ctxFor(t)
		adm := admin(t, tg)
		input := createTopic(t, tg, "eos-in", partitions, nil)
		output := createTopic(t, tg, "eos-out", partitions, nil)
		group := target.Unique("eos")
		produceSpread(t, tg, input, partitions, perPartition, "in")

		var wg sync.WaitGroup
		stop, stopAll := context.WithCancel(context.Background())
		defer stopAll()
		var failures sync.Map
		var abortedRecords atomic.Int64
		run := func(name string, committed *atomic.Int64, abortAt int) {
			defer wg.Done()
			s, err := kgo.NewGroupTransactSession(opts(t, tg,
				kgo.TransactionalID(target.Unique("eos-"+name)),
				kgo.TransactionTimeout(45*time.Second),
				kgo.ConsumerGroup(group),
				kgo.ConsumeTopics(input),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
			)...)
			if err != nil {
				failures.Store(name, err)
				return
			}
			defer s.Close()
			for n := 1; stop.Err() == nil; {
				pollCtx, cancel := context.WithTimeout(stop, time.Second)
				fs := s.PollRecords(pollCtx, 15)
				cancel()
				fs.EachError(func(topic string, p int32, err error) {
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						failures.Store(name, fmt.Errorf("fetch %s/%d: %w", topic, p, err))
					}
				})
				if fs.Empty() {
					continue
				}
				if err := s.Begin(); err != nil {
					failures.Store(name, fmt.Errorf("begin: %w", err))
					return
				}
				var out []*kgo.Record
				fs.EachRecord(func(r *kgo.Record) {
					out = append(out, &kgo.Record{Topic: output, Partition: r.Partition, Key: r.Key,
						Value: []byte("out-" + string(r.Value))})
				})
				produced := s.ProduceSync(ctx, out...)
				try := kgo.TryCommit
				if n == abortAt {
					try = kgo.TryAbort
				}
				ok, err := s.End(ctx, try && produced.FirstErr() == nil)
				if err != nil {
					failures.Store(name, fmt.Errorf("end: %w", err))
					return
				}
				if ok {
					committed.Add(1)
				} else if try == kgo.TryAbort {
					abortedRecords.Add(int64(len(out)))
				}
				n++
			}
		}
		var committedA, committedB atomic.Int64
		wg.Add(1)
		go run("a", &committedA, 3)
		target.Eventually(t, "the first session commits a transaction", func() error {
			if committedA.Load() == 0 {
				return fmt.Errorf("none committed yet")
			}
			return nil
		})
		wg.Add(1)
		go run("b", &committedB, 0)

		target.Eventually(t, "the group has committed offsets at the input's end", func() error {
			failures.Range(func(k, v any) bool {
				t.Fatalf("session %v: %v", k, v)
				return false
			})
			os, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return err
			}
			for p := range int32(partitions) {
				if o, ok := os.Lookup(input, p); !ok || o.At != perPartition {
					return fmt.Errorf("partition %d at %v", p, o.At)
				}
			}
			return nil
		})
		stopAll()
		wg.Wait()
		failures.Range(func(k, v any) bool {
			t.Errorf("session %v: %v", k, v)
			return true
		})
		if abortedRecords.Load() == 0 {
			t.Fatalf("the transaction aborted on purpose had no records")
		}

		got := byPartition(readCommitted(t, tg, output, partitions))
		for p := range int32(partitions) {
			var want []string
			for i := range perPartition {
				want = append(want, fmt.Sprintf("out-in-%d-%d", p, i))
			}
			if !slices.Equal(got[p], want) {
				t.Errorf("read_committed output, partition %d (%d records): %v\nwant (%d records) %v",
					p, len(got[p]), got[p], len(want), want)
			}
		}
		// the aborted records are in the log, only hidden from read_committed
		if n := len(readUncommitted(t, tg, output, partitions)); n < partitions*perPartition+int(abortedRecords.Load())+partitions {
			t.Errorf("read_uncommitted output: %d records, want at least %d input, %d aborted and %d sentinels",
				n, partitions*perPartition, abortedRecords.Load(), partitions)
		}
	})
}
