package franz

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aerostream/aerostream/tests/go/internal/target"
)

// ListOffsets through kadm: start, end, by time (the first record at or
// after it, the end offset past the last) and the record with the largest
// timestamp; DeleteRecords moves the start offset and a consumer starts
// there.
func TestListOffsetsAndDeleteRecords(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		ctx := ctxFor(t)
		adm := admin(t, tg)
		topic := createTopic(t, tg, "offsets", 1, nil)
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		p := client(t, tg)
		var rs []*kgo.Record
		for i := range 10 {
			ts := base.Add(time.Duration(i) * time.Second)
			if i == 6 {
				// out of order: the largest timestamp is not the last record's
				ts = base.Add(time.Minute)
			}
			rs = append(rs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i)), Timestamp: ts})
		}
		if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}

		offset := func(what string, list func() (kadm.ListedOffsets, error), want int64) {
			t.Helper()
			l, err := list()
			if err == nil {
				err = l.Error()
			}
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if o, _ := l.Lookup(topic, 0); o.Offset != want {
				t.Errorf("%s: offset %d, want %d", what, o.Offset, want)
			}
		}
		offset("start", func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, topic) }, 0)
		offset("end", func() (kadm.ListedOffsets, error) { return adm.ListEndOffsets(ctx, topic) }, 10)
		offset("at 3.5 s", func() (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, base.Add(3500*time.Millisecond).UnixMilli(), topic)
		}, 4)
		offset("at the first timestamp", func() (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, base.UnixMilli(), topic)
		}, 0)
		offset("after every timestamp", func() (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, base.Add(2*time.Minute).UnixMilli(), topic)
		}, 10)
		offset("max timestamp", func() (kadm.ListedOffsets, error) { return adm.ListMaxTimestampOffsets(ctx, topic) }, 6)

		var to kadm.Offsets
		to.Add(kadm.Offset{Topic: topic, Partition: 0, At: 4})
		deleted, err := adm.DeleteRecords(ctx, to)
		if err == nil {
			err = deleted.Error()
		}
		if err != nil {
			t.Fatalf("delete records before 4: %v", err)
		}
		if d, _ := deleted.Lookup(topic, 0); d.LowWatermark != 4 {
			t.Errorf("delete records: low watermark %d, want 4", d.LowWatermark)
		}
		offset("start after DeleteRecords", func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, topic) }, 4)
		got := readUncommitted(t, tg, topic, 1)
		if len(got) != 6 || got[0].Offset != 4 || string(got[0].Value) != "4" {
			t.Errorf("read %d records from the start, first %v; want 6 from offset 4", len(got), got[0])
		}
	})
}

// Group offsets through kadm: committed with metadata, fetched back, a
// group member starts at them; deleting the group removes them.
func TestGroupOffsets(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		ctx := ctxFor(t)
		adm := admin(t, tg)
		topic := createTopic(t, tg, "commits", 2, nil)
		group := target.Unique("commits")
		produceSpread(t, tg, topic, 2, 8, "v")

		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 5, LeaderEpoch: -1, Metadata: "five"})
		os.Add(kadm.Offset{Topic: topic, Partition: 1, At: 2, LeaderEpoch: -1, Metadata: "two"})
		if err := adm.CommitAllOffsets(ctx, group, os); err != nil {
			t.Fatalf("commit: %v", err)
		}
		fetched, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = fetched.Error()
		}
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		for p, want := range map[int32][2]string{0: {"5", "five"}, 1: {"2", "two"}} {
			o, ok := fetched.Lookup(topic, p)
			if !ok || fmt.Sprint(o.At) != want[0] || o.Metadata != want[1] {
				t.Errorf("partition %d: fetched %+v, want offset %s with metadata %q", p, o.Offset, want[0], want[1])
			}
		}
		lag, err := adm.Lag(ctx, group)
		if err == nil {
			err = lag.Error()
		}
		if err != nil {
			t.Fatalf("lag: %v", err)
		}
		if total := lag[group].Lag.Total(); total != 3+6 {
			t.Errorf("lag %d, want 9", total)
		}

		m := joinGroup(t, tg, group, topic)
		read := waitRead(t, []*member{m}, 3+6)
		if len(read) != 9 || read[0] != "v-0-5" || read[3] != "v-1-2" {
			t.Errorf("the member read %v, want from offsets 5 and 2", read)
		}
		m.leave()

		target.Eventually(t, "the empty group is deleted", func() error {
			r, err := adm.DeleteGroup(ctx, group)
			if err == nil {
				err = r.Err
			}
			return err
		})
		fetched, err = adm.FetchOffsets(ctx, group)
		if err == nil {
			err = fetched.Error()
		}
		if err != nil {
			t.Fatalf("fetch after delete: %v", err)
		}
		if len(fetched) != 0 {
			t.Errorf("offsets after the group was deleted: %v", fetched)
		}
	})
}
