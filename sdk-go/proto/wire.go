// Package proto is the codec of AeroStream's native protocol
// (docs/native-protocol.md): frames, primitive types and every message
// body of protocol version 1. It checks itself against the conformance
// corpus in sdk/vectors/.
//
// Decoding is strict and never trusts a length or a count: each is checked
// against the bytes left before anything is allocated, so a hostile frame
// costs at most its own size, and no input makes the decoder panic.
package proto

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

const (
	// Magic is the first byte of every frame.
	Magic byte = 0xAE
	// FramingVersion is the second byte of every frame.
	FramingVersion byte = 0x01
	// HeaderLen is the size of a frame header.
	HeaderLen = 7
	// Response is set on a response's operation code.
	Response byte = 0x80
	// MinVersion and MaxVersion are the protocol versions this codec speaks.
	MinVersion uint16 = 1
	MaxVersion uint16 = 1
)

// Classes of refusal, as the conformance corpus names them.
const (
	ClassShortHeader = "short_header"
	ClassBadMagic    = "bad_magic"
	ClassBadVersion  = "bad_version"
	ClassTooLarge    = "too_large"
	ClassUnknownOp   = "unknown_op"
	ClassTruncated   = "truncated"
	ClassTrailing    = "trailing"
	ClassCount       = "count"
	ClassNotUTF8     = "not_utf8"
	ClassInvalid     = "invalid"
)

// DecodeError says why a frame or a body was refused. Class is one of the
// Class constants; Detail says where.
type DecodeError struct {
	Class  string
	Detail string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("native protocol: %s (%s)", e.Detail, e.Class)
}

func refuse(class, format string, args ...any) *DecodeError {
	return &DecodeError{Class: class, Detail: fmt.Sprintf(format, args...)}
}

// Header is a frame's fixed header.
type Header struct {
	Op  byte
	Len uint32
}

// DecodeHeader reads the header at the start of buf, refusing a body
// longer than maxBody before it is read.
func DecodeHeader(buf []byte, maxBody uint32) (Header, error) {
	if len(buf) < HeaderLen {
		return Header{}, refuse(ClassShortHeader, "frame header needs %d bytes, got %d", HeaderLen, len(buf))
	}
	if buf[0] != Magic {
		return Header{}, refuse(ClassBadMagic, "frame starts with byte %#02x, not the AeroStream magic %#02x", buf[0], Magic)
	}
	if buf[1] != FramingVersion {
		return Header{}, refuse(ClassBadVersion, "frame uses framing version %d, this client speaks %d", buf[1], FramingVersion)
	}
	n := binary.BigEndian.Uint32(buf[3:7])
	if n > maxBody {
		return Header{}, refuse(ClassTooLarge, "frame body of %d bytes exceeds the limit of %d bytes", n, maxBody)
	}
	return Header{Op: buf[2], Len: n}, nil
}

// EncodeHeader gives the wire form of a header.
func EncodeHeader(h Header) [HeaderLen]byte {
	var out [HeaderLen]byte
	out[0] = Magic
	out[1] = FramingVersion
	out[2] = h.Op
	binary.BigEndian.PutUint32(out[3:], h.Len)
	return out
}

// writer appends primitives to a body.
type writer struct{ b []byte }

func (w *writer) u8(v uint8)   { w.b = append(w.b, v) }
func (w *writer) i8(v int8)    { w.b = append(w.b, byte(v)) }
func (w *writer) u16(v uint16) { w.b = binary.BigEndian.AppendUint16(w.b, v) }
func (w *writer) i16(v int16)  { w.u16(uint16(v)) }
func (w *writer) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *writer) i32(v int32)  { w.u32(uint32(v)) }
func (w *writer) u64(v uint64) { w.b = binary.BigEndian.AppendUint64(w.b, v) }
func (w *writer) i64(v int64)  { w.u64(uint64(v)) }
func (w *writer) boolean(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

// str writes a u16 length and the bytes; longer strings are cut at
// 65,535 bytes on a character boundary, as the reference encoder does.
func (w *writer) str(s string) {
	end := len(s)
	if end > 0xFFFF {
		end = 0xFFFF
		for end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
	}
	w.u16(uint16(end))
	w.b = append(w.b, s[:end]...)
}

func (w *writer) blob(b []byte) {
	w.u32(uint32(len(b)))
	w.b = append(w.b, b...)
}

func (w *writer) count(n int) { w.u32(uint32(n)) }

func (w *writer) ids(ids []uint32) {
	w.count(len(ids))
	for _, id := range ids {
		w.u32(id)
	}
}

// reader reads primitives from a body. The first error sticks: later reads
// give zero values, counts give 0, and err() reports the first.
type reader struct {
	b   []byte
	bad *DecodeError
}

func (r *reader) fail(e *DecodeError) {
	if r.bad == nil {
		r.bad = e
	}
}

func (r *reader) take(n int, what string) []byte {
	if r.bad != nil {
		return nil
	}
	if len(r.b) < n {
		r.fail(refuse(ClassTruncated, "the body ended inside %s", what))
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8(what string) uint8 {
	if b := r.take(1, what); b != nil {
		return b[0]
	}
	return 0
}
func (r *reader) i8(what string) int8 { return int8(r.u8(what)) }
func (r *reader) u16(what string) uint16 {
	if b := r.take(2, what); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}
func (r *reader) i16(what string) int16 { return int16(r.u16(what)) }
func (r *reader) u32(what string) uint32 {
	if b := r.take(4, what); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}
func (r *reader) i32(what string) int32 { return int32(r.u32(what)) }
func (r *reader) u64(what string) uint64 {
	if b := r.take(8, what); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}
func (r *reader) i64(what string) int64 { return int64(r.u64(what)) }

func (r *reader) str(what string) string {
	n := int(r.u16(what))
	b := r.take(n, what)
	if r.bad != nil {
		return ""
	}
	if !utf8.Valid(b) {
		r.fail(refuse(ClassNotUTF8, "%s is not valid UTF-8", what))
		return ""
	}
	return string(b)
}

// blob is a copy: a message outlives the buffer it was read from.
func (r *reader) blob(what string) Blob {
	n := r.u32(what)
	if r.bad != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.fail(refuse(ClassTruncated, "the body ended inside %s", what))
		return nil
	}
	out := make(Blob, n)
	copy(out, r.take(int(n), what))
	return out
}

func (r *reader) boolean(what string) bool { return r.u8(what) != 0 }

// count reads an entry count and refuses it when count × minEntry bytes
// cannot fit in what is left.
func (r *reader) count(what string, minEntry int) int {
	n := r.u32(what)
	if r.bad != nil {
		return 0
	}
	if minEntry < 1 {
		minEntry = 1
	}
	if uint64(n)*uint64(minEntry) > uint64(len(r.b)) {
		r.fail(refuse(ClassCount, "%s: %d entries cannot fit in the %d bytes left", what, n, len(r.b)))
		return 0
	}
	return int(n)
}

func (r *reader) ids(what string) []uint32 {
	n := r.count(what, 4)
	out := make([]uint32, n)
	for i := range out {
		out[i] = r.u32(what)
	}
	return out
}

func (r *reader) finish() error {
	if r.bad != nil {
		return r.bad
	}
	if len(r.b) != 0 {
		return refuse(ClassTrailing, "%d bytes follow the end of the body", len(r.b))
	}
	return nil
}
