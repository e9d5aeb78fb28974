package aerostream

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aerostream/aerostream/sdk-go/proto"
)

// subQueue holds a subscription's pushes until the consumer takes them.
// It never blocks the connection's reader: the credit granted bounds what
// it holds.
type subQueue struct {
	mu    sync.Mutex
	items []*proto.Push
	err   error
	ready chan struct{}
}

func newSubQueue() *subQueue { return &subQueue{ready: make(chan struct{}, 1)} }

func (q *subQueue) notify() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *subQueue) put(p *proto.Push) {
	q.mu.Lock()
	q.items = append(q.items, p)
	q.mu.Unlock()
	q.notify()
}

// end makes take return err once the pushes held are taken.
func (q *subQueue) end(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.mu.Unlock()
	q.notify()
}

func (q *subQueue) take(ctx context.Context) (*proto.Push, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			p := q.items[0]
			q.items = q.items[1:]
			q.mu.Unlock()
			return p, nil
		}
		err := q.err
		q.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// subscribe opens a subscription to a partition from offset with the
// given credit. Its queue is registered before the request is sent: the
// server may push right after its answer.
func (c *conn) subscribe(ctx context.Context, topic string, partition uint32, offset int64, credit uint32) (uint32, *subQueue, *proto.SubscribeResponse, error) {
	q := newSubQueue()
	c.mu.Lock()
	if c.dead != nil {
		err := c.dead
		c.mu.Unlock()
		return 0, nil, nil, err
	}
	id := c.nextSub
	c.nextSub++
	c.subs[id] = q
	c.mu.Unlock()
	reply, err := c.request(ctx, &proto.Subscribe{
		Subscription: id, Topic: topic, Partition: partition,
		StartKind: proto.StartOffset, StartValue: offset, Credit: credit,
	})
	var r *proto.SubscribeResponse
	if err == nil {
		var ok bool
		if r, ok = reply.(*proto.SubscribeResponse); !ok {
			err = unexpected("Subscribe", reply)
		} else {
			err = serverError(r.Error, r.Message, fmt.Sprintf("subscribing to %s-%d", topic, partition))
		}
	}
	if err != nil {
		c.dropSub(id)
		return 0, nil, nil, err
	}
	return id, q, r, nil
}

func (c *conn) dropSub(id uint32) {
	c.mu.Lock()
	delete(c.subs, id)
	c.mu.Unlock()
}

// send writes a frame that gets no answer (a Credit).
func (c *conn) send(m proto.Message) error {
	frame := proto.Encode(m)
	c.wmu.Lock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(60 * time.Second))
	_, err := c.nc.Write(frame)
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
	}
	return err
}

// pushLoop reads one partition through a subscription: the server pushes
// batches within the credit granted, and each batch handed over is
// granted again. It resubscribes from the position reached when the
// subscription ends (leader moved, connection lost).
func (cs *Consumer) pushLoop(ctx context.Context, gen int64, tp topicPartition, pos int64) {
	defer cs.fetchers.Done()
	// at least the largest batch a topic takes by default
	// (max.message.bytes, 1 MiB): a batch larger than the credit left
	// waits for more
	credit := max(4*cs.cfg.PartitionMaxBytes, 1<<20)
	failures := 0
	retry := func(err error) bool {
		failures++
		if !retriable(err) {
			cs.deliver(ctx, item{err: err, generation: gen})
			return false
		}
		cs.c.forget(tp.topic)
		return sleep(ctx, backoff(failures))
	}
	for ctx.Err() == nil {
		addr, err := cs.c.leader(ctx, tp.topic, tp.partition)
		var cn *conn
		if err == nil {
			cn, err = cs.c.connTo(ctx, addr)
		}
		var id uint32
		var q *subQueue
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, cs.c.cfg.RequestTimeout)
			id, q, _, err = cn.subscribe(sctx, tp.topic, tp.partition, pos, credit)
			cancel()
		}
		if err != nil {
			if ctx.Err() != nil || !retry(err) {
				return
			}
			continue
		}
		if !cs.drain(ctx, gen, tp, &pos, cn, id, q, &failures) {
			// the consumer stops reading the partition
			cn.dropSub(id)
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = cn.request(uctx, &proto.Unsubscribe{Subscription: id})
			cancel()
			return
		}
	}
}

// drain hands a subscription's records over until it ends; false when
// the consumer stops reading the partition.
func (cs *Consumer) drain(ctx context.Context, gen int64, tp topicPartition, pos *int64, cn *conn, id uint32, q *subQueue, failures *int) bool {
	for {
		push, err := q.take(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			// the connection ended: subscribe again
			*failures++
			return sleep(ctx, backoff(*failures))
		}
		switch push.Error {
		case proto.ErrNone:
		case proto.ErrOffsetOutOfRange:
			off, err := cs.resolve(ctx, tp.topic, tp.partition, cs.cfg.Reset)
			if err == nil {
				*pos = off
			}
			return ctx.Err() == nil
		default:
			err := &Error{Code: push.Error, What: fmt.Sprintf("subscription to %s-%d", tp.topic, tp.partition)}
			if !err.Retriable() {
				cs.deliver(ctx, item{err: err, generation: gen})
				return false
			}
			cs.c.forget(tp.topic)
			*failures++
			return sleep(ctx, backoff(*failures))
		}
		*failures = 0
		d, err := decodeBatches(tp.topic, tp.partition, push.Records, *pos)
		if err != nil {
			cs.deliver(ctx, item{err: err, generation: gen})
			return false
		}
		for _, rec := range d.records {
			if !cs.deliver(ctx, item{rec: rec, generation: gen}) {
				return false
			}
		}
		if d.next > *pos {
			*pos = d.next
		}
		if n := len(push.Records); n > 0 {
			if err := cn.send(&proto.Credit{Subscription: id, Bytes: uint32(n)}); err != nil {
				continue // the connection ended: take tells
			}
		}
	}
}
