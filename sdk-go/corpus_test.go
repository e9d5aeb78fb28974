package aerostream

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func readVectors(t *testing.T, name string, into any) {
	t.Helper()
	dir := os.Getenv("AEROSTREAM_VECTORS")
	if dir == "" {
		dir = filepath.Join("..", "sdk", "vectors")
	}
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("cannot read the corpus file %s: %v", name, err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func unhex(t *testing.T, s *string) []byte {
	t.Helper()
	if s == nil {
		return nil
	}
	b, err := hex.DecodeString(*s)
	if err != nil {
		t.Fatalf("not hex: %q", *s)
	}
	return b
}

// Keys go to the partition Kafka's Java client and the Rust SDK pick.
func TestPartitionerMatchesTheCorpus(t *testing.T) {
	var doc struct {
		Keys []struct {
			Key        string            `json:"key"`
			Murmur2    int32             `json:"murmur2"`
			Partitions map[string]uint32 `json:"partitions"`
		} `json:"keys"`
	}
	readVectors(t, "partitioner.json", &doc)
	if len(doc.Keys) == 0 {
		t.Fatal("no key")
	}
	for _, k := range doc.Keys {
		key := unhex(t, &k.Key)
		if got := Murmur2(key); got != k.Murmur2 {
			t.Errorf("murmur2(%q) = %d, want %d", key, got, k.Murmur2)
		}
		for n, want := range k.Partitions {
			count, _ := strconv.Atoi(n)
			if got := PartitionForKey(key, uint32(count)); got != want {
				t.Errorf("partition of %q among %d = %d, want %d", key, count, got, want)
			}
		}
	}
}

// Apache Kafka's own test values of Utils.murmur2 (UtilsTest).
func TestMurmur2KnownKafkaValues(t *testing.T) {
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
	}
	for k, want := range cases {
		if got := Murmur2([]byte(k)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", k, got, want)
		}
	}
}

// The producer's batches are byte for byte those of the reference encoder,
// and the consumer reads them back.
func TestRecordBatchesMatchTheCorpus(t *testing.T) {
	var doc struct {
		Batches []struct {
			Name    string `json:"name"`
			Records []struct {
				Key       *string      `json:"key"`
				Value     *string      `json:"value"`
				Headers   [][2]*string `json:"headers"`
				Timestamp int64        `json:"timestamp"`
			} `json:"records"`
			Producer *struct {
				ID       int64 `json:"producer_id"`
				Epoch    int16 `json:"producer_epoch"`
				Sequence int32 `json:"base_sequence"`
			} `json:"producer"`
			Transactional bool   `json:"transactional"`
			Batch         string `json:"batch"`
		} `json:"batches"`
	}
	readVectors(t, "record_batches.json", &doc)
	if len(doc.Batches) == 0 {
		t.Fatal("no batch")
	}
	for _, b := range doc.Batches {
		var records []Record
		var stamps []int64
		for _, r := range b.Records {
			rec := Record{Key: unhex(t, r.Key), Value: unhex(t, r.Value), Timestamp: time.UnixMilli(r.Timestamp)}
			if r.Value != nil && rec.Value == nil {
				rec.Value = []byte{}
			}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, Header{Key: *h[0], Value: unhex(t, h[1])})
			}
			records = append(records, rec)
			stamps = append(stamps, r.Timestamp)
		}
		who := producerIdentity{id: -1, epoch: -1, baseSequence: -1}
		if b.Producer != nil {
			who = producerIdentity{id: b.Producer.ID, epoch: b.Producer.Epoch, baseSequence: b.Producer.Sequence}
		}
		got, err := encodeBatch(records, stamps, who, b.Transactional)
		if err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		if hex.EncodeToString(got) != b.Batch {
			t.Errorf("%s: encodes to\n%x\nwant\n%s", b.Name, got, b.Batch)
		}
		want, _ := hex.DecodeString(b.Batch)
		d, err := decodeBatches("t", 0, want, 0)
		if err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		if len(d.records) != len(records) || d.next != int64(len(records)) {
			t.Fatalf("%s: read %d records up to %d, want %d", b.Name, len(d.records), d.next, len(records))
		}
		for i, r := range d.records {
			w := records[i]
			if r.Offset != int64(i) || r.Timestamp != stamps[i] || string(r.Key) != string(w.Key) ||
				(r.Key == nil) != (w.Key == nil) || string(r.Value) != string(w.Value) ||
				(r.Value == nil) != (w.Value == nil) || len(r.Headers) != len(w.Headers) {
				t.Errorf("%s: record %d read back as %+v, want %+v", b.Name, i, r, w)
			}
		}
		// a batch cut short is left for the next fetch, not an error
		d, err = decodeBatches("t", 0, want[:len(want)-1], 0)
		if err != nil || len(d.records) != 0 || d.next != -1 {
			t.Errorf("%s: a partial batch gave %d records, next %d, %v", b.Name, len(d.records), d.next, err)
		}
		// a flipped byte fails the CRC
		bad := append([]byte(nil), want...)
		bad[len(bad)-1] ^= 0xFF
		if _, err := decodeBatches("t", 0, bad, 0); err == nil {
			t.Errorf("%s: a corrupted batch was read", b.Name)
		}
	}
}

// No fetched bytes make the batch reader panic: every one-byte change of
// the corpus's batches, with the CRC recomputed so that the records
// themselves are read, is read or refused.
func TestBatchReaderNeverPanicsOnMutations(t *testing.T) {
	var doc struct {
		Batches []struct {
			Batch string `json:"batch"`
		} `json:"batches"`
	}
	readVectors(t, "record_batches.json", &doc)
	for _, b := range doc.Batches {
		orig, _ := hex.DecodeString(b.Batch)
		for i := range orig {
			for _, v := range []byte{0x00, 0x01, 0x7F, 0x80, 0xFF} {
				m := append([]byte(nil), orig...)
				m[i] = v
				if len(m) >= batchHeaderLen {
					binary.BigEndian.PutUint32(m[17:], crc32.Checksum(m[21:], castagnoli))
				}
				_, _ = decodeBatches("t", 0, m, 0)
				_, _ = decodeBatches("t", 0, append(m, m...), 0)
			}
		}
		for n := 0; n <= len(orig); n++ {
			_, _ = decodeBatches("t", 0, orig[:n], 0)
		}
	}
}

// A batch of every compression reads back as the records written.
func TestCompressedBatchesReadBack(t *testing.T) {
	records := []Record{
		{Key: []byte("k"), Value: []byte("first"), Headers: []Header{{Key: "h", Value: []byte("v")}}},
		{Value: []byte(strings.Repeat("a long and repetitive value ", 4000))},
		{Key: []byte("tomb")},
	}
	stamps := []int64{1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002}
	for codec := CompressionNone; codec <= CompressionZstd; codec++ {
		b, err := encodeBatch(records, stamps, producerIdentity{id: -1, epoch: -1, baseSequence: -1}, false, codec)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if got := Compression(binary.BigEndian.Uint16(b[21:]) & attrCompression); got != codec {
			t.Fatalf("codec %d: the batch says %d", codec, got)
		}
		if codec != CompressionNone && len(b) > 20000 {
			t.Errorf("codec %d: %d bytes: not compressed", codec, len(b))
		}
		d, err := decodeBatches("t", 0, b, 0)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if len(d.records) != 3 || string(d.records[1].Value) != string(records[1].Value) ||
			d.records[2].Value != nil || string(d.records[0].Headers[0].Value) != "v" {
			t.Fatalf("codec %d: read back %d records", codec, len(d.records))
		}
	}
}
