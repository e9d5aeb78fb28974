package sarama

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/aerostream/aerostream/tests/go/internal/target"
)

// An idempotent sync producer with acks=all sends a batch with each codec;
// a consumer reads back every record at its acknowledged offset, with its
// key (or none), value (or null), headers and timestamp.
func TestSyncProducerCodecs(t *testing.T) {
	codecs := map[string]sarama.CompressionCodec{
		"none":   sarama.CompressionNone,
		"gzip":   sarama.CompressionGZIP,
		"snappy": sarama.CompressionSnappy,
		"lz4":    sarama.CompressionLZ4,
		"zstd":   sarama.CompressionZSTD,
	}
	target.Each(t, func(t *testing.T, tg target.Target) {
		for name, codec := range codecs {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				const partitions, n = 2, 60
				topic := createTopic(t, tg, "sarama-codec", partitions, nil)
				c := idempotent(config(t, tg))
				c.Producer.Compression = codec
				p := syncProducer(t, tg, c)
				base := time.UnixMilli(time.Now().UnixMilli() - 3_600_000)
				var sent []*sarama.ProducerMessage
				for i := range n {
					m := &sarama.ProducerMessage{
						Topic:     topic,
						Partition: int32(i % partitions),
						Timestamp: base.Add(time.Duration(i) * time.Millisecond),
						Value:     sarama.StringEncoder(fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i*7))),
						Headers: []sarama.RecordHeader{
							{Key: []byte("trace"), Value: []byte(fmt.Sprint(i))},
							{Key: []byte("trace"), Value: []byte("again")},
						},
					}
					if i%3 != 0 {
						m.Key = sarama.StringEncoder(fmt.Sprintf("key-%d", i))
					}
					if i%10 == 9 {
						m.Value = nil
					}
					sent = append(sent, m)
				}
				if err := p.SendMessages(sent); err != nil {
					t.Fatalf("send: %v", err)
				}
				next := map[int32]int64{}
				for _, m := range sent {
					if m.Offset != next[m.Partition] {
						t.Fatalf("partition %d: acknowledged offset %d, want %d", m.Partition, m.Offset, next[m.Partition])
					}
					next[m.Partition]++
				}
				read := readUncommitted(t, tg, topic, partitions)
				for _, s := range sent {
					ms := read[s.Partition]
					if int(s.Offset) >= len(ms) {
						t.Fatalf("nothing read at %d@%d", s.Partition, s.Offset)
					}
					r := ms[s.Offset]
					key, value := encoded(t, s.Key), encoded(t, s.Value)
					if r.Offset != s.Offset || !bytes.Equal(r.Key, key) || !bytes.Equal(r.Value, value) ||
						(r.Key == nil) != (key == nil) || (r.Value == nil) != (value == nil) {
						t.Errorf("%d@%d: read %d key %q value %q, sent key %q value %q",
							s.Partition, s.Offset, r.Offset, r.Key, r.Value, key, value)
					}
					if !r.Timestamp.Equal(s.Timestamp) {
						t.Errorf("%d@%d: timestamp %v, sent %v", s.Partition, s.Offset, r.Timestamp, s.Timestamp)
					}
					var headers []sarama.RecordHeader
					for _, h := range r.Headers {
						headers = append(headers, *h)
					}
					if !reflect.DeepEqual(headers, s.Headers) {
						t.Errorf("%d@%d: headers %q, sent %q", s.Partition, s.Offset, headers, s.Headers)
					}
				}
			})
		}
	})
}

func encoded(t *testing.T, e sarama.Encoder) []byte {
	if e == nil {
		return nil
	}
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An idempotent async producer sends many records to three partitions at
// once: each is acknowledged once, and each partition holds them in the
// order they were sent, at dense offsets.
func TestAsyncProducerIdempotent(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		const partitions, n = 3, 600
		topic := createTopic(t, tg, "sarama-async", partitions, nil)
		c := idempotent(config(t, tg))
		c.Producer.Return.Errors = true
		c.Producer.Flush.Messages = 25
		// a retried batch may come back short of 25 records: without a
		// frequency sarama holds such a remainder until more records come,
		// and none do once all were sent
		c.Producer.Flush.Frequency = 50 * time.Millisecond
		p, err := sarama.NewAsyncProducer(tg.Addrs(), c)
		if err != nil {
			t.Fatalf("sarama.NewAsyncProducer: %v", err)
		}
		go func() {
			for i := range n {
				p.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: int32(i % partitions),
					Value: sarama.StringEncoder(fmt.Sprint(i)), Metadata: i}
			}
		}()
		acked := map[int]int64{}
		timeout := time.After(target.Patience)
		for len(acked) < n {
			select {
			case m := <-p.Successes():
				i := m.Metadata.(int)
				if _, twice := acked[i]; twice {
					t.Fatalf("record %d acknowledged twice", i)
				}
				acked[i] = m.Offset
			case err := <-p.Errors():
				t.Fatalf("produce: %v", err)
			case <-timeout:
				t.Fatalf("timed out with %d of %d acknowledged", len(acked), n)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		read := readUncommitted(t, tg, topic, partitions)
		for part := range int32(partitions) {
			var want []string
			for i := int(part); i < n; i += partitions {
				want = append(want, fmt.Sprint(i))
				if acked[i] != int64(len(want)-1) {
					t.Errorf("record %d acknowledged at offset %d, want %d", i, acked[i], len(want)-1)
				}
			}
			if got := values(read[part]); !reflect.DeepEqual(got, want) {
				t.Errorf("partition %d holds %v, want %v", part, got, want)
			}
		}
	})
}
