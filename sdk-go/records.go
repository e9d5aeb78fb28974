package aerostream

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"time"

	"github.com/aerostream/aerostream/sdk-go/proto"
)

// Header is a record header; a nil Value is a header without value.
type Header struct {
	Key   string
	Value []byte
}

// Record is a record to produce. A nil Key is no key (the partitioner
// spreads such records); a nil Value is a tombstone.
type Record struct {
	Topic   string
	Key     []byte
	Value   []byte
	Headers []Header
	// Timestamp is the creation time; zero takes the time it is sent.
	Timestamp time.Time
	// Partition, when Partitioned is set, overrides the partitioner.
	Partition   uint32
	Partitioned bool
}

// ConsumedRecord is a record read from a partition.
type ConsumedRecord struct {
	Topic     string
	Partition uint32
	Offset    int64
	// Timestamp in ms since the Unix epoch: creation or log-append time.
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []Header
}

// producerIdentity is an idempotent producer's id, epoch and sequence in
// a batch header; id -1 for a producer that is not idempotent.
type producerIdentity struct {
	id           int64
	epoch        int16
	baseSequence int32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	batchHeaderLen = 61
	// attribute bits of a batch
	attrCompression   = 0x07
	attrTransactional = 0x10
	attrControl       = 0x20
)

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func appendVarBytes(b, v []byte) []byte {
	if v == nil {
		return appendVarint(b, -1)
	}
	b = appendVarint(b, int64(len(v)))
	return append(b, v...)
}

// encodeBatch writes records as one Kafka RecordBatch v2, uncompressed,
// base offset 0, as a Produce carries it. timestamps are in ms.
func encodeBatch(records []Record, timestamps []int64, who producerIdentity, transactional bool) ([]byte, error) {
	if len(records) == 0 {
		return nil, errors.New("a batch needs at least one record")
	}
	if len(timestamps) != len(records) {
		return nil, errors.New("one timestamp per record")
	}
	// the base timestamp is the smallest, as Kafka's encoders write it
	base, max := timestamps[0], timestamps[0]
	for _, t := range timestamps {
		if t > max {
			max = t
		}
		if t < base {
			base = t
		}
	}
	b := make([]byte, batchHeaderLen, batchHeaderLen+64*len(records))
	var rec []byte
	for i, r := range records {
		rec = rec[:0]
		rec = append(rec, 0) // attributes
		rec = appendVarint(rec, timestamps[i]-base)
		rec = appendVarint(rec, int64(i))
		rec = appendVarBytes(rec, r.Key)
		rec = appendVarBytes(rec, r.Value)
		rec = appendVarint(rec, int64(len(r.Headers)))
		seen := map[string]bool{}
		for _, h := range r.Headers {
			if seen[h.Key] {
				return nil, fmt.Errorf("header %q appears more than once in a record", h.Key)
			}
			seen[h.Key] = true
			rec = appendVarBytes(rec, []byte(h.Key))
			rec = appendVarBytes(rec, h.Value)
		}
		b = appendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)                 // base offset
	be.PutUint32(b[8:], uint32(len(b)-12)) // batch length
	be.PutUint32(b[12:], 0xFFFFFFFF)       // partition leader epoch -1
	b[16] = 2                              // magic
	var attrs uint16
	if transactional {
		attrs |= attrTransactional
	}
	be.PutUint16(b[21:], attrs)
	be.PutUint32(b[23:], uint32(len(records)-1)) // last offset delta
	be.PutUint64(b[27:], uint64(base))
	be.PutUint64(b[35:], uint64(max))
	be.PutUint64(b[43:], uint64(who.id))
	be.PutUint16(b[51:], uint16(who.epoch))
	be.PutUint32(b[53:], uint32(who.baseSequence))
	be.PutUint32(b[57:], uint32(len(records)))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b, nil
}

// decoded is what decodeBatches found in a partition's fetched bytes.
type decoded struct {
	records []ConsumedRecord
	// next is where the next fetch starts: after the last whole batch;
	// -1 when the bytes held no whole batch.
	next int64
}

// decodeBatches reads the record batches of one partition's fetched bytes:
// records below from are left out, and so are control batches; a partial
// batch at the end is ignored. Uncompressed and gzip batches are read;
// another compression is an error.
func decodeBatches(topic string, partition uint32, data []byte, from int64) (decoded, error) {
	return decodeCommitted(topic, partition, data, from, nil)
}

// decodeCommitted is decodeBatches for a read_committed fetch: the records
// of the aborted transactions the answer lists are left out too. A
// transaction's records are its producer's transactional batches from its
// first offset up to the producer's next control batch (its abort marker).
func decodeCommitted(topic string, partition uint32, data []byte, from int64, aborted []proto.AbortedTxn) (decoded, error) {
	out := decoded{next: -1}
	be := binary.BigEndian
	pending := append([]proto.AbortedTxn(nil), aborted...)
	sort.Slice(pending, func(i, j int) bool { return pending[i].FirstOffset < pending[j].FirstOffset })
	aborting := map[int64]bool{}
	for len(data) >= 12 {
		baseOffset := int64(be.Uint64(data))
		length := int64(int32(be.Uint32(data[8:])))
		if length < batchHeaderLen-12 {
			return out, fmt.Errorf("%s-%d: record batch at offset %d announces %d bytes", topic, partition, baseOffset, length)
		}
		if int64(len(data)-12) < length {
			break // partial batch at the end
		}
		batch := data[:12+length]
		data = data[12+length:]
		if magic := int8(batch[16]); magic != 2 {
			return out, fmt.Errorf("%s-%d: record batch of magic %d: only magic 2 is supported", topic, partition, magic)
		}
		if crc := be.Uint32(batch[17:]); crc != crc32.Checksum(batch[21:], castagnoli) {
			return out, fmt.Errorf("%s-%d: record batch at offset %d fails its CRC", topic, partition, baseOffset)
		}
		attrs := be.Uint16(batch[21:])
		lastDelta := int64(int32(be.Uint32(batch[23:])))
		baseTimestamp := int64(be.Uint64(batch[27:]))
		maxTimestamp := int64(be.Uint64(batch[35:]))
		producerID := int64(be.Uint64(batch[43:]))
		count := int64(int32(be.Uint32(batch[57:])))
		out.next = baseOffset + lastDelta + 1
		// transactions aborted from this batch on
		for len(pending) > 0 && pending[0].FirstOffset < out.next {
			aborting[pending[0].ProducerID] = true
			pending = pending[1:]
		}
		if attrs&attrControl != 0 {
			delete(aborting, producerID) // the marker ends its transaction
			continue
		}
		if out.next <= from || (attrs&attrTransactional != 0 && aborting[producerID]) {
			continue
		}
		body := batch[batchHeaderLen:]
		switch attrs & attrCompression {
		case 0:
		case 1:
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				return out, fmt.Errorf("%s-%d: gzip batch: %w", topic, partition, err)
			}
			// a batch is at most max.message.bytes; refuse a bomb
			raw, err := io.ReadAll(io.LimitReader(zr, 256<<20))
			if err != nil {
				return out, fmt.Errorf("%s-%d: gzip batch: %w", topic, partition, err)
			}
			body = raw
		default:
			return out, fmt.Errorf("%s-%d: record batch compressed with codec %d: the Go client reads uncompressed and gzip batches only", topic, partition, attrs&attrCompression)
		}
		if count < 0 || count > int64(len(body)) {
			return out, fmt.Errorf("%s-%d: record batch claims %d records in %d bytes", topic, partition, count, len(body))
		}
		logAppend := attrs&0x08 != 0
		r := recReader{b: body}
		for i := int64(0); i < count; i++ {
			size := r.varint()
			if r.err != nil || size < 0 || size > int64(len(r.b)) {
				return out, fmt.Errorf("%s-%d: malformed record in the batch at offset %d", topic, partition, baseOffset)
			}
			rr := recReader{b: r.b[:size]}
			r.b = r.b[size:]
			rr.byte1()
			tsDelta := rr.varint()
			offDelta := rr.varint()
			key := rr.bytes()
			value := rr.bytes()
			nh := rr.varint()
			if rr.err != nil || nh < 0 || nh > int64(len(rr.b)) {
				return out, fmt.Errorf("%s-%d: malformed record in the batch at offset %d", topic, partition, baseOffset)
			}
			var headers []Header
			for h := int64(0); h < nh; h++ {
				k := rr.bytes()
				v := rr.bytes()
				headers = append(headers, Header{Key: string(k), Value: v})
			}
			if rr.err != nil {
				return out, fmt.Errorf("%s-%d: malformed record header in the batch at offset %d", topic, partition, baseOffset)
			}
			offset := baseOffset + offDelta
			if offset < from {
				continue
			}
			ts := baseTimestamp + tsDelta
			if logAppend {
				ts = maxTimestamp
			}
			out.records = append(out.records, ConsumedRecord{
				Topic: topic, Partition: partition, Offset: offset, Timestamp: ts,
				Key: key, Value: value, Headers: headers,
			})
		}
	}
	return out, nil
}

// recReader reads the varint fields of records; the first error sticks.
type recReader struct {
	b   []byte
	err error
}

func (r *recReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recReader) byte1() {
	if r.err == nil && len(r.b) == 0 {
		r.err = errors.New("record ended")
	} else if r.err == nil {
		r.b = r.b[1:]
	}
}

// bytes reads a varint length and that many bytes (nil for -1), copied.
func (r *recReader) bytes() []byte {
	n := r.varint()
	if r.err != nil || n == -1 {
		return nil
	}
	if n < -1 || n > int64(len(r.b)) {
		r.err = errors.New("length past the record")
		return nil
	}
	out := append([]byte{}, r.b[:n]...)
	r.b = r.b[n:]
	return out
}
