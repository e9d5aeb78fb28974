package aerostream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/aerostream/aerostream/sdk-go/proto"
)

// Where a consumer starts reading a partition without a committed offset.
type StartAt struct {
	kind   int8 // 0 offset, 1 earliest, 2 latest
	offset int64
}

var (
	// Earliest is the first offset a partition still has.
	Earliest = StartAt{kind: 1}
	// Latest is the partition's end: only records written from now on.
	Latest = StartAt{kind: 2}
)

// AtOffset starts at a given offset.
func AtOffset(o int64) StartAt { return StartAt{kind: 0, offset: o} }

func (s StartAt) String() string {
	switch s.kind {
	case 1:
		return "earliest"
	case 2:
		return "latest"
	}
	return strconv.FormatInt(s.offset, 10)
}

// ConsumerConfig is a consumer's settings; the zero value reads assigned
// partitions from their earliest offset.
type ConsumerConfig struct {
	// Group makes the consumer a member of this consumer group: the group
	// assigns it partitions, and it commits what it consumed.
	Group string
	// Reset is where a partition starts without a committed offset (and
	// after OFFSET_OUT_OF_RANGE): Earliest (default) or Latest.
	Reset StartAt
	// MaxWait is how long a fetch waits for records (default 500 ms).
	MaxWait time.Duration
	// PartitionMaxBytes bounds a partition's bytes per fetch (default 1 MiB).
	PartitionMaxBytes uint32
	// Group timings: session (default 10 s), rebalance (default 30 s),
	// heartbeat (default 3 s), auto-commit (default 5 s).
	SessionTimeout     time.Duration
	RebalanceTimeout   time.Duration
	HeartbeatInterval  time.Duration
	AutoCommitInterval time.Duration
	// Isolation: proto.ReadUncommitted (default) returns every record;
	// proto.ReadCommitted returns transactional records once committed and
	// never those of aborted transactions.
	Isolation proto.Isolation
	// Push reads through subscriptions: the server pushes each partition's
	// new batches within the credit the consumer grants, instead of the
	// consumer long-polling with fetches. read_committed consumers always
	// fetch (subscriptions read uncommitted).
	Push bool
	// DisableAutoCommit: a group member commits only when Commit is
	// called (or its offsets go with a transaction), not every
	// AutoCommitInterval, nor when its partitions are revoked or it closes.
	DisableAutoCommit bool
}

type item struct {
	rec        ConsumedRecord
	err        error
	generation int64
}

// Consumer reads records of assigned partitions, or of the partitions a
// consumer group gives it. Next gives records one at a time, in offset
// order within a partition. Safe for concurrent use.
type Consumer struct {
	c   *Client
	cfg ConsumerConfig
	out chan item

	mu         sync.Mutex
	generation int64 // local count of assignments, to drop revoked records
	consumed   map[topicPartition]int64
	stopFetch  context.CancelFunc
	fetchers   sync.WaitGroup
	closed     bool
	group      *groupMember
	done       chan struct{}
}

// NewConsumer makes a consumer; give it partitions with Assign, or topics
// with Subscribe when it has a Group.
func (c *Client) NewConsumer(cfg ConsumerConfig) *Consumer {
	if cfg.Reset == (StartAt{}) {
		cfg.Reset = Earliest
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.PartitionMaxBytes == 0 {
		cfg.PartitionMaxBytes = 1 << 20
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.RebalanceTimeout == 0 {
		cfg.RebalanceTimeout = 30 * time.Second
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 3 * time.Second
	}
	if cfg.AutoCommitInterval == 0 {
		cfg.AutoCommitInterval = 5 * time.Second
	}
	return &Consumer{c: c, cfg: cfg, out: make(chan item, 1024), consumed: map[topicPartition]int64{}, done: make(chan struct{})}
}

// Assign adds the given partitions of a topic (every partition when none
// is given) to those read, from start. Partitions assigned before go on
// from the position consumed.
func (cs *Consumer) Assign(ctx context.Context, topic string, partitions []uint32, start StartAt) error {
	if cs.cfg.Group != "" {
		return errors.New("a group member is given its partitions: use Subscribe")
	}
	if partitions == nil {
		n, err := cs.c.Partitions(ctx, topic)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			partitions = append(partitions, uint32(i))
		}
	}
	positions := cs.positions()
	for _, p := range partitions {
		off, err := cs.resolve(ctx, topic, p, start)
		if err != nil {
			return err
		}
		positions[topicPartition{topic, p}] = off
	}
	cs.startFetchers(positions)
	return nil
}

// resolve turns a start into an offset.
func (cs *Consumer) resolve(ctx context.Context, topic string, partition uint32, start StartAt) (int64, error) {
	switch start.kind {
	case 1:
		return cs.c.ListOffset(ctx, topic, partition, proto.SpecEarliest)
	case 2:
		return cs.c.ListOffset(ctx, topic, partition, proto.SpecLatest)
	}
	return start.offset, nil
}

// startFetchers replaces the partitions read with these, from these
// positions.
func (cs *Consumer) startFetchers(positions map[topicPartition]int64) {
	cs.stopFetchers()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return
	}
	cs.generation++
	gen := cs.generation
	cs.consumed = map[topicPartition]int64{}
	ctx, cancel := context.WithCancel(context.Background())
	cs.stopFetch = cancel
	for tp, pos := range positions {
		cs.consumed[tp] = pos
		cs.fetchers.Add(1)
		if cs.cfg.Push && cs.cfg.Isolation == proto.ReadUncommitted {
			go cs.pushLoop(ctx, gen, tp, pos)
		} else {
			go cs.fetch(ctx, gen, tp, pos)
		}
	}
}

func (cs *Consumer) stopFetchers() {
	cs.mu.Lock()
	cancel := cs.stopFetch
	cs.stopFetch = nil
	cs.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	cs.fetchers.Wait()
}

// fetch reads one partition from its leader until ctx ends.
func (cs *Consumer) fetch(ctx context.Context, gen int64, tp topicPartition, pos int64) {
	defer cs.fetchers.Done()
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
		if err != nil {
			if !retry(err) {
				return
			}
			continue
		}
		fp, err := cs.fetchOnce(ctx, addr, tp, pos)
		if err != nil {
			if ctx.Err() != nil || !retry(err) {
				return
			}
			continue
		}
		switch fp.Error {
		case proto.ErrNone:
		case proto.ErrOffsetOutOfRange:
			off, err := cs.resolve(ctx, tp.topic, tp.partition, cs.cfg.Reset)
			if err != nil {
				if !retry(err) {
					return
				}
				continue
			}
			pos = off
			continue
		default:
			if !retry(&Error{Code: fp.Error, What: fmt.Sprintf("fetching %s-%d", tp.topic, tp.partition)}) {
				return
			}
			continue
		}
		failures = 0
		d, err := decodeCommitted(tp.topic, tp.partition, fp.Records, pos, fp.Aborted)
		if err != nil {
			cs.deliver(ctx, item{err: err, generation: gen})
			return
		}
		if d.next < 0 && len(fp.Records) >= int(cs.cfg.PartitionMaxBytes) {
			cs.deliver(ctx, item{err: fmt.Errorf("%s-%d: a batch at offset %d is larger than the fetch size of %d bytes", tp.topic, tp.partition, pos, cs.cfg.PartitionMaxBytes), generation: gen})
			return
		}
		for _, rec := range d.records {
			if !cs.deliver(ctx, item{rec: rec, generation: gen}) {
				return
			}
		}
		if d.next > pos {
			pos = d.next
		}
	}
}

// fetched is one partition's fetch answer, either isolation.
type fetched struct {
	Error   proto.ErrorCode
	Records []byte
	Aborted []proto.AbortedTxn
}

// fetchOnce long-polls one partition from pos.
func (cs *Consumer) fetchOnce(ctx context.Context, addr string, tp topicPartition, pos int64) (fetched, error) {
	topics := []proto.FetchTopic{{Name: tp.topic, Partitions: []proto.FetchPartition{{
		Partition: tp.partition, Offset: pos, MaxBytes: cs.cfg.PartitionMaxBytes,
	}}}}
	wait := uint32(cs.cfg.MaxWait.Milliseconds())
	var req proto.Message = &proto.Fetch{MaxWaitMs: wait, MinBytes: 1, MaxBytes: cs.cfg.PartitionMaxBytes, Topics: topics}
	if cs.cfg.Isolation == proto.ReadCommitted {
		req = &proto.FetchIsolated{Isolation: proto.ReadCommitted, MaxWaitMs: wait, MinBytes: 1, MaxBytes: cs.cfg.PartitionMaxBytes, Topics: topics}
	}
	reply, err := cs.c.callAt(ctx, addr, req, cs.cfg.MaxWait+30*time.Second)
	if err != nil {
		return fetched{}, err
	}
	switch r := reply.(type) {
	case *proto.FetchResponse:
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			p := r.Topics[0].Partitions[0]
			return fetched{Error: p.Error, Records: p.Records}, nil
		}
	case *proto.FetchIsolatedResponse:
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			p := r.Topics[0].Partitions[0]
			return fetched{Error: p.Error, Records: p.Records, Aborted: p.Aborted}, nil
		}
	}
	return fetched{}, unexpected("Fetch", reply)
}

func (cs *Consumer) deliver(ctx context.Context, it item) bool {
	select {
	case cs.out <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// Next gives the next record, waiting for one until ctx ends.
func (cs *Consumer) Next(ctx context.Context) (*ConsumedRecord, error) {
	for {
		select {
		case <-cs.done: // closed: records still buffered are not handed out
			return nil, ErrClosed
		default:
		}
		select {
		case it := <-cs.out:
			cs.mu.Lock()
			stale := it.generation != cs.generation
			if !stale && it.err == nil {
				cs.consumed[topicPartition{it.rec.Topic, it.rec.Partition}] = it.rec.Offset + 1
			}
			cs.mu.Unlock()
			if stale {
				continue // a partition given up in a rebalance
			}
			if it.err != nil {
				return nil, it.err
			}
			rec := it.rec
			return &rec, nil
		case <-cs.done:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close stops reading; a group member commits what it consumed and
// leaves its group.
func (cs *Consumer) Close(ctx context.Context) error {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		return nil
	}
	cs.closed = true
	g := cs.group
	close(cs.done)
	cs.mu.Unlock()
	cs.stopFetchers()
	if g != nil {
		return g.close(ctx)
	}
	return nil
}

// positions gives the consumed position of each partition read.
func (cs *Consumer) positions() map[topicPartition]int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make(map[topicPartition]int64, len(cs.consumed))
	for tp, o := range cs.consumed {
		out[tp] = o
	}
	return out
}

func hostPort(host string, port uint16) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
