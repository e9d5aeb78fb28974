package sarama

import (
	"fmt"
	"slices"
	"testing"

	"github.com/IBM/sarama"

	"github.com/aerostream/aerostream/tests/go/internal/target"
)

func transactional(t *testing.T, tg target.Target) sarama.SyncProducer {
	t.Helper()
	c := idempotent(config(t, tg))
	c.Producer.Transaction.ID = target.Unique("sarama-txn")
	c.Producer.Transaction.Retry.Max = 20
	return syncProducer(t, tg, c)
}

// sarama's transactional producer commits, aborts and commits again:
// read_committed reads exactly the committed records, in order, never the
// aborted ones; read_uncommitted reads them all.
func TestTransactions(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		topic := createTopic(t, tg, "sarama-txn", 2, nil)
		p := transactional(t, tg)
		transaction := func(commit bool, values ...string) {
			t.Helper()
			if err := p.BeginTxn(); err != nil {
				t.Fatalf("begin: %v", err)
			}
			var ms []*sarama.ProducerMessage
			for i, v := range values {
				ms = append(ms, &sarama.ProducerMessage{Topic: topic, Partition: int32(i % 2), Value: sarama.StringEncoder(v)})
			}
			if err := p.SendMessages(ms); err != nil {
				t.Fatalf("send in a transaction: %v", err)
			}
			end := p.CommitTxn
			if !commit {
				end = p.AbortTxn
			}
			if err := end(); err != nil {
				t.Fatalf("end the transaction (commit %v): %v", commit, err)
			}
		}
		transaction(true, "c0", "c1", "c2")
		transaction(false, "a0", "a1", "a2", "a3")
		transaction(true, "c3", "c4")

		committed := readCommitted(t, tg, topic, 2)
		want := map[int32][]string{0: {"c0", "c2", "c3"}, 1: {"c1", "c4"}}
		for part, vs := range want {
			if got := values(committed[part]); !slices.Equal(got, vs) {
				t.Errorf("read_committed, partition %d: %v, want %v", part, got, vs)
			}
		}
		all := readUncommitted(t, tg, topic, 2)
		want = map[int32][]string{0: {"c0", "c2", "a0", "a2", "c3", sentinel}, 1: {"c1", "a1", "a3", "c4", sentinel}}
		for part, vs := range want {
			if got := values(all[part]); !slices.Equal(got, vs) {
				t.Errorf("read_uncommitted, partition %d: %v, want %v", part, got, vs)
			}
		}
	})
}

// Consume, transform, produce with sarama: the consumed offsets are sent
// to the transaction (AddMessageToTxn), so they are committed with it, and
// an aborted transaction commits neither its records nor its offsets.
func TestTransactionalOffsets(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		input := createTopic(t, tg, "sarama-ctp-in", 1, nil)
		output := createTopic(t, tg, "sarama-ctp-out", 1, nil)
		group := target.Unique("sarama-ctp")
		produceSpread(t, tg, input, 1, 6, "in")
		in := readUncommitted(t, tg, input, 1)[0]
		p := transactional(t, tg)
		transform := func(commit bool, ms []*sarama.ConsumerMessage) {
			t.Helper()
			if err := p.BeginTxn(); err != nil {
				t.Fatalf("begin: %v", err)
			}
			for _, m := range ms {
				if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: output, Partition: 0,
					Value: sarama.StringEncoder("out-" + string(m.Value))}); err != nil {
					t.Fatalf("send: %v", err)
				}
				if err := p.AddMessageToTxn(m, group, nil); err != nil {
					t.Fatalf("add the consumed offset to the transaction: %v", err)
				}
			}
			end := p.CommitTxn
			if !commit {
				end = p.AbortTxn
			}
			if err := end(); err != nil {
				t.Fatalf("end the transaction (commit %v): %v", commit, err)
			}
		}
		// the group's offset as a stable OffsetFetch (KIP-447) answers it:
		// while a transaction's offsets are pending the broker answers
		// UNSTABLE_OFFSET_COMMIT, and a transaction's end is applied to the
		// group after EndTxn returns
		cl := client(t, tg, config(t, tg))
		committedOffset := func() int64 {
			t.Helper()
			var offset int64
			target.Eventually(t, "a stable offset", func() error {
				coordinator, err := cl.Coordinator(group)
				if err != nil {
					return err
				}
				req := sarama.NewOffsetFetchRequest(sarama.V2_8_0_0, group, map[string][]int32{input: {0}})
				req.RequireStable = true
				r, err := coordinator.FetchOffset(req)
				if err != nil {
					_ = cl.RefreshCoordinator(group)
					return err
				}
				blk := r.GetBlock(input, 0)
				if blk == nil {
					return fmt.Errorf("no offset listed")
				}
				if blk.Err != sarama.ErrNoError {
					return blk.Err
				}
				offset = blk.Offset
				return nil
			})
			return offset
		}
		transform(true, in[:3])
		if got := committedOffset(); got != 3 {
			t.Errorf("after the first transaction the group is at %d, want 3", got)
		}
		transform(false, in[3:])
		if got := committedOffset(); got != 3 {
			t.Errorf("after an aborted transaction the group is at %d, want still 3", got)
		}
		transform(true, in[3:])
		if got := committedOffset(); got != 6 {
			t.Errorf("after the last transaction the group is at %d, want 6", got)
		}
		var want []string
		for i := range 6 {
			want = append(want, fmt.Sprintf("out-in-0-%d", i))
		}
		if got := values(readCommitted(t, tg, output, 1)[0]); !slices.Equal(got, want) {
			t.Errorf("read_committed output %v, want %v", got, want)
		}
	})
}
