package aerostream

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/aerostream/aerostream/sdk-go/proto"
)

// conn is one TCP connection to a server: requests are pipelined, and a
// reader goroutine hands each response to the request of its correlation
// id.
type conn struct {
	addr string
	nc   transport

	wmu sync.Mutex // one frame written at a time

	mu       sync.Mutex
	next     uint32
	pending  map[uint32]chan result
	dead     error // set once the connection ended
	done     chan struct{}
	maxFrame uint32 // the largest request body the server takes
	nodeID   uint32
	subs     map[uint32]*subQueue // open subscriptions, by id
	nextSub  uint32
}

type result struct {
	m   proto.Message
	err error
}

// Largest response body this client reads; a header announcing more
// closes the connection (responses are bounded by the client's fetch sizes).
const maxResponseBytes = 256 << 20

// transport is a TCP connection, or the first stream of a QUIC one.
type transport interface {
	io.ReadWriter
	SetDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
	Close() error
}

// dial connects, says hello and logs in.
func dial(ctx context.Context, addr string, cfg *Config, overQUIC bool) (*conn, error) {
	var nc transport
	var err error
	if overQUIC {
		nc, err = dialQUIC(ctx, addr, cfg)
	} else {
		d := net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	c := &conn{addr: addr, nc: nc, pending: map[uint32]chan result{}, done: make(chan struct{}), next: 1, subs: map[uint32]*subQueue{}, nextSub: 1}
	if err := c.handshake(ctx, cfg); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	go c.readLoop()
	return c, nil
}

// exchange sends one frame and reads the next, before the reader runs.
func (c *conn) exchange(ctx context.Context, m proto.Message) (proto.Message, error) {
	deadline := time.Now().Add(15 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.nc.SetDeadline(deadline)
	defer c.nc.SetDeadline(time.Time{})
	if _, err := c.nc.Write(proto.Encode(m)); err != nil {
		return nil, err
	}
	reply, err := readFrame(c.nc)
	if err != nil {
		return nil, err
	}
	if ef, ok := reply.(*proto.ErrorFrame); ok {
		return nil, &Error{Code: ef.Error, Message: ef.Message, What: "login"}
	}
	return reply, nil
}

func (c *conn) handshake(ctx context.Context, cfg *Config) error {
	hello := &proto.Hello{
		MinVersion: proto.MinVersion,
		MaxVersion: proto.MaxVersion,
		ClientID:   cfg.ClientID,
	}
	mech := cfg.SASL.Mechanism
	if mech == "PLAIN" {
		hello.AuthMechanism = "PLAIN"
		hello.AuthBytes = []byte("\x00" + cfg.SASL.User + "\x00" + cfg.SASL.Password)
	}
	reply, err := c.exchange(ctx, hello)
	if err != nil {
		return err
	}
	hr, ok := reply.(*proto.HelloResponse)
	if !ok {
		return fmt.Errorf("answered the hello with %s", proto.MessageName(reply))
	}
	if err := serverError(hr.Error, "", "hello"); err != nil {
		return err
	}
	if hr.Version < proto.MinVersion || hr.Version > proto.MaxVersion {
		return fmt.Errorf("the server chose protocol version %d, this client speaks %d..%d", hr.Version, proto.MinVersion, proto.MaxVersion)
	}
	c.maxFrame = hr.MaxFrameBytes
	c.nodeID = hr.NodeID
	switch mech {
	case "", "PLAIN":
		return nil
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		return c.scram(ctx, mech, cfg.SASL.User, cfg.SASL.Password)
	default:
		return fmt.Errorf("SASL mechanism %q is not one this client offers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", mech)
	}
}

// readFrame reads one whole frame and decodes it.
func readFrame(r io.Reader) (proto.Message, error) {
	var head [proto.HeaderLen]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	h, err := proto.DecodeHeader(head[:], maxResponseBytes)
	if err != nil {
		return nil, err
	}
	body := make([]byte, h.Len)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return proto.DecodeBody(h.Op, body)
}

func (c *conn) readLoop() {
	for {
		m, err := readFrame(c.nc)
		if err != nil {
			c.fail(err)
			return
		}
		if ef, ok := m.(*proto.ErrorFrame); ok {
			// the server closes the connection after it
			c.fail(&Error{Code: ef.Error, Message: ef.Message, What: "connection to " + c.addr})
			return
		}
		if push, ok := m.(*proto.Push); ok {
			c.mu.Lock()
			q := c.subs[push.Subscription]
			if push.Error != proto.ErrNone {
				delete(c.subs, push.Subscription) // an error push ends it
			}
			c.mu.Unlock()
			if q != nil {
				q.put(push)
			}
			continue
		}
		corr, ok := proto.Correlation(m)
		if !ok {
			continue
		}
		c.mu.Lock()
		ch := c.pending[corr]
		delete(c.pending, corr)
		c.mu.Unlock()
		if ch != nil {
			ch <- result{m: m}
		}
	}
}

// fail ends the connection: every waiting request gets err.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return
	}
	if _, isServer := err.(*Error); !isServer {
		err = &errConnLost{addr: c.addr, err: err}
	}
	c.dead = err
	pending := c.pending
	c.pending = map[uint32]chan result{}
	subs := c.subs
	c.subs = map[uint32]*subQueue{}
	close(c.done)
	c.mu.Unlock()
	c.nc.Close()
	for _, ch := range pending {
		ch <- result{err: err}
	}
	for _, q := range subs {
		q.end(err)
	}
}

func (c *conn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead == nil
}

func (c *conn) close() { c.fail(ErrClosed) }

// request sends m (its correlation id set here) and waits for the answer.
func (c *conn) request(ctx context.Context, m proto.Message) (proto.Message, error) {
	ch := make(chan result, 1)
	c.mu.Lock()
	if c.dead != nil {
		err := c.dead
		c.mu.Unlock()
		return nil, err
	}
	corr := c.next
	c.next++
	c.pending[corr] = ch
	c.mu.Unlock()
	proto.SetCorrelation(m, corr)
	frame := proto.Encode(m)
	if c.maxFrame != 0 && uint64(len(frame)-proto.HeaderLen) > uint64(c.maxFrame) {
		c.forget(corr)
		return nil, fmt.Errorf("%s request of %d bytes exceeds the server's limit of %d", proto.MessageName(m), len(frame)-proto.HeaderLen, c.maxFrame)
	}
	c.wmu.Lock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(60 * time.Second))
	_, err := c.nc.Write(frame)
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
	}
	select {
	case r := <-ch:
		return r.m, r.err
	case <-ctx.Done():
		c.forget(corr)
		return nil, ctx.Err()
	}
}

func (c *conn) forget(corr uint32) {
	c.mu.Lock()
	delete(c.pending, corr)
	c.mu.Unlock()
}
