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
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
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

// Compression of the batches a producer writes; consumers read every kind.
type Compression uint16

const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLz4    Compression = 3
	CompressionZstd   Compression = 4
)

// ParseCompression reads none, gzip, snappy, lz4 or zstd.
func ParseCompression(s string) (Compression, error) {
	for i, name := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		if s == name {
			return Compression(i), nil
		}
	}
	return 0, fmt.Errorf("compression %q is not none, gzip, snappy, lz4 or zstd", s)
}

// encodeBatch writes records as one Kafka RecordBatch v2, base offset 0,
// as a Produce carries it. timestamps are in ms.
func encodeBatch(records []Record, timestamps []int64, who producerIdentity, transactional bool, codecs ...Compression) ([]byte, error) {
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
	codec := CompressionNone
	if len(codecs) > 0 {
		codec = codecs[0]
	}
	if codec != CompressionNone {
		packed, err := compress(codec, b[batchHeaderLen:])
		if err != nil {
			return nil, err
		}
		b = append(b[:batchHeaderLen], packed...)
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)                 // base offset
	be.PutUint32(b[8:], uint32(len(b)-12)) // batch length
	be.PutUint32(b[12:], 0xFFFFFFFF)       // partition leader epoch -1
	b[16] = 2                              // magic
	attrs := uint16(codec) & attrCompression
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
// batch at the end is ignored. Batches of every Kafka compression are
// read.
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
		body, err := decompress(attrs&attrCompression, batch[batchHeaderLen:])
		if err != nil {
			return out, fmt.Errorf("%s-%d: record batch at offset %d: %w", topic, partition, baseOffset, err)
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

// maxBatchBytes bounds a decompressed batch: a batch is at most the
// topic's max.message.bytes, far below; more is a compression bomb.
const maxBatchBytes = 256 << 20

var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxBatchBytes), zstd.WithDecoderConcurrency(1))

// xerialMagic starts snappy data in the Java client's framing.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress gives the records of a batch compressed with codec (the
// batch attributes' low bits): 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
func decompress(codec uint16, data []byte) ([]byte, error) {
	switch codec {
	case 0:
		return data, nil
	case 1:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return readLimited(zr, "gzip")
	case 2:
		if !bytes.HasPrefix(data, xerialMagic) {
			return snappyBlock(data, nil)
		}
		// the Java client's framing: 16-byte header, then chunks of a
		// u32 length and a snappy block
		if len(data) < 16 {
			return nil, errors.New("snappy: framing header cut short")
		}
		var out []byte
		for rest := data[16:]; len(rest) > 0; {
			if len(rest) < 4 {
				return nil, errors.New("snappy: chunk length cut short")
			}
			n := binary.BigEndian.Uint32(rest)
			rest = rest[4:]
			if uint64(n) > uint64(len(rest)) {
				return nil, errors.New("snappy: chunk longer than the batch")
			}
			var err error
			if out, err = snappyBlock(rest[:n], out); err != nil {
				return nil, err
			}
			rest = rest[n:]
		}
		return out, nil
	case 3:
		return readLimited(lz4.NewReader(bytes.NewReader(data)), "lz4")
	case 4:
		if zstdDecoder == nil {
			return nil, errors.New("zstd: no decoder")
		}
		out, err := zstdDecoder.DecodeAll(data, nil)
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

// compress packs a batch's records with codec (Kafka's snappy is in the
// Java client's framing, which every Kafka client reads).
func compress(codec Compression, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch codec {
	case CompressionGzip:
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(data); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
	case CompressionSnappy:
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1}) // version 1, compatible with 1
		for len(data) > 0 {
			n := min(len(data), 32<<10)
			block := snappy.Encode(nil, data[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(block))))
			buf.Write(block)
			data = data[n:]
		}
	case CompressionLz4:
		zw := lz4.NewWriter(&buf)
		if _, err := zw.Write(data); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
	case CompressionZstd:
		zw, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		out := zw.EncodeAll(data, nil)
		_ = zw.Close()
		return out, nil
	default:
		return nil, fmt.Errorf("unknown compression codec %d", codec)
	}
	return buf.Bytes(), nil
}

// snappyBlock appends one decoded snappy block to out.
func snappyBlock(block, out []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if n > maxBatchBytes-len(out) {
		return nil, fmt.Errorf("snappy: %d bytes decompressed is more than a batch holds", n)
	}
	dec, err := snappy.Decode(nil, block)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	return append(out, dec...), nil
}

func readLimited(r io.Reader, what string) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxBatchBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(out) > maxBatchBytes {
		return nil, fmt.Errorf("%s: more than %d bytes decompressed", what, maxBatchBytes)
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
