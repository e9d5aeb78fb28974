package franz

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aerostream/aerostream/tests/go/internal/target"
)

// An idempotent producer with acks=all writes batches with each codec; a
// consumer reads back every record in order at the acknowledged offsets,
// with its key (or none), value (or null), headers (repeated, and without
// a value) and timestamp.
func TestProduceConsumeCodecs(t *testing.T) {
	codecs := map[string]kgo.CompressionCodec{
		"none":   kgo.NoCompression(),
		"gzip":   kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(),
		"lz4":    kgo.Lz4Compression(),
		"zstd":   kgo.ZstdCompression(),
	}
	target.Each(t, func(t *testing.T, tg target.Target) {
		for name, codec := range codecs {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				produceConsume(t, tg, codec)
			})
		}
	})
}

func produceConsume(t *testing.T, tg target.Target, codec kgo.CompressionCodec) {
	const partitions, n = 2, 60
	topic := createTopic(t, tg, "codec", partitions, nil)
	ctx := ctxFor(t)
	p := client(t, tg,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(50*time.Millisecond),
	)
	base := time.UnixMilli(time.Now().UnixMilli() - 3_600_000)
	var sent []*kgo.Record
	for i := range n {
		r := &kgo.Record{
			Topic:     topic,
			Partition: int32(i % partitions),
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
			// compressible values, so the codecs have something to do
			Value: []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i*7))),
			Headers: []kgo.RecordHeader{
				{Key: "trace", Value: []byte(fmt.Sprint(i))},
				{Key: "trace", Value: []byte("again")},
				{Key: "flag"},
			},
		}
		if i%3 != 0 {
			r.Key = []byte(fmt.Sprintf("key-%d", i))
		}
		if i%10 == 9 {
			r.Value = nil
		}
		sent = append(sent, r)
	}
	results := p.ProduceSync(ctx, sent...)
	if err := results.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	next := map[int32]int64{}
	for _, res := range results {
		if res.Record.Offset != next[res.Record.Partition] {
			t.Fatalf("partition %d: acknowledged offset %d, want %d (dense, in send order)",
				res.Record.Partition, res.Record.Offset, next[res.Record.Partition])
		}
		next[res.Record.Partition]++
	}

	got := readUncommitted(t, tg, topic, partitions)
	if len(got) != n {
		t.Fatalf("read %d records, want %d", len(got), n)
	}
	byOffset := map[[2]int64]*kgo.Record{}
	for _, r := range got {
		byOffset[[2]int64{int64(r.Partition), r.Offset}] = r
	}
	for _, s := range sent {
		r := byOffset[[2]int64{int64(s.Partition), s.Offset}]
		if r == nil {
			t.Fatalf("nothing read at %d@%d", s.Partition, s.Offset)
		}
		if !reflect.DeepEqual(r.Key, s.Key) || !reflect.DeepEqual(r.Value, s.Value) {
			t.Errorf("%d@%d: read key %q value %q, sent key %q value %q",
				s.Partition, s.Offset, r.Key, r.Value, s.Key, s.Value)
		}
		if (r.Value == nil) != (s.Value == nil) {
			t.Errorf("%d@%d: null value read as %q", s.Partition, s.Offset, r.Value)
		}
		if !r.Timestamp.Equal(s.Timestamp) {
			t.Errorf("%d@%d: timestamp %v, sent %v", s.Partition, s.Offset, r.Timestamp, s.Timestamp)
		}
		if !reflect.DeepEqual(r.Headers, s.Headers) {
			t.Errorf("%d@%d: headers %q, sent %q", s.Partition, s.Offset, r.Headers, s.Headers)
		}
	}
}

// A record over the topic's max.message.bytes is refused with
// MESSAGE_TOO_LARGE and nothing is written.
func TestRecordTooLarge(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		topic := createTopic(t, tg, "too-large", 1, map[string]*string{"max.message.bytes": str("10000")})
		ctx := ctxFor(t)
		// uncompressed, so the batch is as large as the record
		p := client(t, tg, kgo.ProducerBatchCompression(kgo.NoCompression()))
		err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strings.Repeat("y", 20_000))}).FirstErr()
		if !errors.Is(err, kerr.MessageTooLarge) {
			t.Fatalf("produce a 20000-byte record: %v, want %v", err, kerr.MessageTooLarge)
		}
		ends, err := admin(t, tg).ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if end, _ := ends.Lookup(topic, 0); end.Err != nil || end.Offset != 0 {
			t.Fatalf("end offset %d (%v) after a refused record, want 0", end.Offset, end.Err)
		}
	})
}
