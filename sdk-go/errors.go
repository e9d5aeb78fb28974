// Package aerostream is a Go client of AeroStream's native protocol
// (docs/native-protocol.md): a client that logs in and keeps the cluster's
// metadata, a batching producer with Kafka's murmur2 key partitioner, a
// consumer of assigned partitions or of a consumer group, and topic
// administration. The codec is in the proto package.
package aerostream

import (
	"errors"
	"fmt"

	"github.com/aerostream/aerostream/sdk-go/proto"
)

// Error is an error code a server answered with.
type Error struct {
	Code proto.ErrorCode
	// Message is the server's explanation, when it gave one.
	Message string
	// What says which request or partition the error is about.
	What string
}

func (e *Error) Error() string {
	s := e.Code.String()
	if e.What != "" {
		s = e.What + ": " + s
	}
	if e.Message != "" {
		s += ": " + e.Message
	} else {
		s += ": " + e.Code.Description()
	}
	return s
}

// Retriable says whether the same request may succeed later.
func (e *Error) Retriable() bool { return e.Code.Retriable() }

// ErrClosed is returned by a closed client, producer or consumer.
var ErrClosed = errors.New("aerostream: closed")

// errConnLost is a connection that ended while requests were waiting:
// their outcome is unknown.
type errConnLost struct {
	addr string
	err  error
}

func (e *errConnLost) Error() string {
	return fmt.Sprintf("connection to %s lost: %v", e.addr, e.err)
}
func (e *errConnLost) Unwrap() error { return e.err }

// codeOf gives the error code of err, if it is a server's.
func codeOf(err error) (proto.ErrorCode, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}

// retriable says whether an operation that failed with err may be tried
// again: retriable codes and lost connections.
func retriable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Retriable()
	}
	if errors.Is(err, ErrClosed) {
		return false
	}
	var lost *errConnLost
	return errors.As(err, &lost)
}

func serverError(code proto.ErrorCode, message, what string) error {
	if code == proto.ErrNone {
		return nil
	}
	return &Error{Code: code, Message: message, What: what}
}
