package aerostream

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/aerostream/aerostream/sdk-go/proto"
)

// Acks values of a producer.
const (
	// AcksAll answers once every in-sync replica has the batch (default).
	AcksAll int8 = -1
	// AcksLeader answers once the leader appended the batch.
	AcksLeader int8 = 1
)

// ProducerConfig is a producer's settings; the zero value is an
// idempotent producer with acks all.
type ProducerConfig struct {
	// Acks: AcksAll (0 also means AcksAll) or AcksLeader.
	Acks int8
	// Linger is how long a batch waits for more records (default 5 ms).
	Linger time.Duration
	// BatchBytes closes a batch once its records take this much
	// (default 512 KiB, below the default max.message.bytes of 1 MiB).
	BatchBytes int
	// BufferBytes bounds the records waiting to be sent; past it Send
	// waits (default 32 MiB).
	BufferBytes int
	// DeliveryTimeout bounds a record's retries (default 2 minutes).
	DeliveryTimeout time.Duration
	// DisableIdempotence sends batches without producer id: retries may
	// then write a batch twice.
	DisableIdempotence bool
	// Compression of the batches (default none).
	Compression Compression
	// TransactionalID makes a transactional producer: records are sent
	// between BeginTransaction and CommitTransaction (or
	// AbortTransaction), all or nothing to read_committed readers. It
	// fences older producers of the same id, native or Kafka.
	TransactionalID string
	// TransactionTimeout is how long a transaction may stay open before
	// the coordinator aborts it (default 60 s).
	TransactionTimeout time.Duration
}

// Delivery is a record's outcome, known once Done is closed.
type Delivery struct {
	done      chan struct{}
	Topic     string
	Partition uint32
	// Offset of the record; -1 until it is written.
	Offset int64
	Err    error
}

// Done is closed when the outcome is known.
func (d *Delivery) Done() <-chan struct{} { return d.done }

// Wait waits for the outcome.
func (d *Delivery) Wait(ctx context.Context) error {
	select {
	case <-d.done:
		return d.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

type topicPartition struct {
	topic     string
	partition uint32
}

type pendingRecord struct {
	rec       Record
	timestamp int64
	size      int
	delivery  *Delivery
}

type batch struct {
	tp       topicPartition
	records  []*pendingRecord
	size     int
	created  time.Time
	encoded  []byte // set when first sent, with its sequence
	sequence int32
	attempts int
}

type partitionState struct {
	open     *batch
	ready    []*batch
	inflight bool
	sequence int32
}

// Producer writes records in batches, one request in flight per partition
// so that a partition's records keep their order. Safe for concurrent use.
type Producer struct {
	c   *Client
	cfg ProducerConfig
	who producerIdentity

	mu         sync.Mutex
	parts      map[topicPartition]*partitionState
	sticky     map[string]uint32
	buffered   int
	space      chan struct{} // closed when buffer space frees up
	unfinished int
	drained    chan struct{} // closed when unfinished reaches 0
	flushing   bool
	closed     bool

	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	txn *txnState // nil unless transactional
}

// NewProducer makes a producer; an idempotent one gets its producer id
// from the cluster first.
func (c *Client) NewProducer(ctx context.Context, cfg ProducerConfig) (*Producer, error) {
	if cfg.Acks == 0 {
		cfg.Acks = AcksAll
	}
	if cfg.Acks != AcksAll && cfg.Acks != AcksLeader {
		return nil, fmt.Errorf("acks %d: use AcksAll or AcksLeader", cfg.Acks)
	}
	if cfg.Linger == 0 {
		cfg.Linger = 5 * time.Millisecond
	}
	if cfg.BatchBytes == 0 {
		cfg.BatchBytes = 512 << 10
	}
	if cfg.BufferBytes == 0 {
		cfg.BufferBytes = 32 << 20
	}
	if cfg.DeliveryTimeout == 0 {
		cfg.DeliveryTimeout = 2 * time.Minute
	}
	p := &Producer{
		c: c, cfg: cfg,
		who:     producerIdentity{id: -1, epoch: -1, baseSequence: -1},
		parts:   map[topicPartition]*partitionState{},
		sticky:  map[string]uint32{},
		space:   make(chan struct{}),
		drained: make(chan struct{}),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	close(p.drained)
	if cfg.TransactionalID != "" {
		if cfg.DisableIdempotence {
			return nil, errors.New("a transactional producer is idempotent")
		}
		if cfg.TransactionTimeout == 0 {
			cfg.TransactionTimeout = time.Minute
			p.cfg.TransactionTimeout = cfg.TransactionTimeout
		}
		p.cfg.Acks = AcksAll
		p.txn = &txnState{added: map[topicPartition]bool{}}
		if err := p.initTxn(ctx); err != nil {
			return nil, err
		}
	} else if !cfg.DisableIdempotence {
		reply, err := c.call(ctx, &proto.InitProducer{})
		if err != nil {
			return nil, fmt.Errorf("getting a producer id: %w", err)
		}
		r, ok := reply.(*proto.InitProducerResponse)
		if !ok {
			return nil, unexpected("InitProducer", reply)
		}
		if err := serverError(r.Error, "", "getting a producer id"); err != nil {
			return nil, err
		}
		p.who = producerIdentity{id: r.ProducerID, epoch: r.ProducerEpoch}
	}
	p.wg.Add(1)
	go p.run()
	return p, nil
}

func recordSize(r *Record) int {
	n := 21 + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// Send queues a record and gives its Delivery. It waits while the
// producer's buffer is full. The record's key, value and headers are not
// copied: leave them unchanged until the delivery is done.
func (p *Producer) Send(ctx context.Context, r Record) (*Delivery, error) {
	if r.Topic == "" {
		return nil, errors.New("a record needs a topic")
	}
	var partition uint32
	if r.Partitioned {
		partition = r.Partition
	} else {
		n, err := p.c.Partitions(ctx, r.Topic)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("topic %s has no partition", r.Topic)
		}
		if r.Key != nil {
			partition = PartitionForKey(r.Key, uint32(n))
		} else {
			p.mu.Lock()
			next, ok := p.sticky[r.Topic]
			if !ok {
				// producers start on different partitions
				next = uint32(rand.Intn(n))
				p.sticky[r.Topic] = next
			}
			partition = next % uint32(n)
			p.mu.Unlock()
		}
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	pr := &pendingRecord{
		rec: r, timestamp: ts.UnixMilli(), size: recordSize(&r),
		delivery: &Delivery{done: make(chan struct{}), Topic: r.Topic, Partition: partition, Offset: -1},
	}
	if p.txn != nil {
		if err := p.txn.check(); err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	for !p.closed && p.buffered > 0 && p.buffered+pr.size > p.cfg.BufferBytes {
		space := p.space
		p.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
	}
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	tp := topicPartition{r.Topic, partition}
	st := p.parts[tp]
	if st == nil {
		st = &partitionState{}
		p.parts[tp] = st
	}
	if st.open == nil {
		st.open = &batch{tp: tp, created: time.Now()}
	}
	st.open.records = append(st.open.records, pr)
	st.open.size += pr.size
	full := st.open.size >= p.cfg.BatchBytes
	if full {
		p.closeBatch(st)
	}
	p.buffered += pr.size
	if p.unfinished == 0 {
		p.drained = make(chan struct{})
	}
	p.unfinished++
	p.mu.Unlock()
	if full {
		p.signal()
	}
	return pr.delivery, nil
}

// Produce sends one record and waits for its offset.
func (p *Producer) Produce(ctx context.Context, r Record) (partition uint32, offset int64, err error) {
	d, err := p.Send(ctx, r)
	if err != nil {
		return 0, -1, err
	}
	if err := d.Wait(ctx); err != nil {
		return d.Partition, -1, err
	}
	return d.Partition, d.Offset, nil
}

// closeBatch moves the open batch to the ready ones; keyless records
// move on to the next partition. Called with p.mu held.
func (p *Producer) closeBatch(st *partitionState) {
	b := st.open
	st.open = nil
	st.ready = append(st.ready, b)
	if p.sticky[b.tp.topic] == b.tp.partition {
		p.sticky[b.tp.topic] = b.tp.partition + 1
	}
}

func (p *Producer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Flush sends every queued record and waits for all outcomes.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.flushing = true
	drained := p.drained
	p.mu.Unlock()
	p.signal()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close flushes and stops the producer.
func (p *Producer) Close(ctx context.Context) error {
	err := p.Flush(ctx)
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.stop)
		close(p.space)
	}
	p.mu.Unlock()
	p.wg.Wait()
	// what a flush cut short by ctx left unsent
	p.mu.Lock()
	var left []*batch
	for _, st := range p.parts {
		if st.open != nil {
			p.closeBatch(st)
		}
		left = append(left, st.ready...)
	}
	p.mu.Unlock()
	for _, b := range left {
		p.settle(b, -1, ErrClosed)
	}
	return err
}

func (p *Producer) run() {
	defer p.wg.Done()
	tick := time.NewTicker(max(p.cfg.Linger/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		case <-tick.C:
		}
		now := time.Now()
		var send []*batch
		p.mu.Lock()
		for _, st := range p.parts {
			if st.open != nil && (p.flushing || now.Sub(st.open.created) >= p.cfg.Linger) {
				p.closeBatch(st)
			}
			if !st.inflight && len(st.ready) > 0 {
				st.inflight = true
				send = append(send, st.ready[0])
			}
		}
		p.mu.Unlock()
		for _, b := range send {
			p.wg.Add(1)
			go p.send(b)
		}
	}
}

// send writes one batch, retrying what may succeed later, then settles
// its records.
func (p *Producer) send(b *batch) {
	defer p.wg.Done()
	ctx, cancel := context.WithDeadline(context.Background(), b.created.Add(p.cfg.DeliveryTimeout))
	defer cancel()
	p.mu.Lock()
	st := p.parts[b.tp]
	if b.encoded == nil {
		b.sequence = st.sequence
		who := p.who
		if who.id >= 0 {
			who.baseSequence = b.sequence
		}
		records := make([]Record, len(b.records))
		stamps := make([]int64, len(b.records))
		for i, r := range b.records {
			records[i] = r.rec
			stamps[i] = r.timestamp
		}
		var err error
		b.encoded, err = encodeBatch(records, stamps, who, p.txn != nil, p.cfg.Compression)
		if err != nil {
			p.mu.Unlock()
			p.settle(b, -1, err)
			return
		}
	}
	p.mu.Unlock()
	for {
		base, err := p.produceOnce(ctx, b)
		if err == nil {
			p.mu.Lock()
			st.sequence = b.sequence + int32(len(b.records))
			p.mu.Unlock()
			p.settle(b, base, nil)
			return
		}
		b.attempts++
		if !retriable(err) || ctx.Err() != nil {
			p.settle(b, -1, err)
			return
		}
		p.c.forget(b.tp.topic)
		if !sleep(ctx, backoff(b.attempts)) {
			p.settle(b, -1, fmt.Errorf("gave up after %d attempts: %w", b.attempts, err))
			return
		}
	}
}

func (p *Producer) produceOnce(ctx context.Context, b *batch) (int64, error) {
	if p.txn != nil {
		if err := p.addPartition(ctx, b.tp); err != nil {
			return -1, err
		}
	}
	addr, err := p.c.leader(ctx, b.tp.topic, b.tp.partition)
	if err != nil {
		return -1, err
	}
	req := &proto.Produce{
		Acks:      p.cfg.Acks,
		TimeoutMs: 30000,
		Topics: []proto.ProduceTopic{{
			Name:       b.tp.topic,
			Partitions: []proto.ProducePartition{{Partition: b.tp.partition, Batch: b.encoded}},
		}},
	}
	var msg proto.Message = req
	if p.txn != nil {
		msg = &proto.TxnProduce{TransactionalID: p.cfg.TransactionalID, Produce: *req}
	}
	reply, err := p.c.callAt(ctx, addr, msg, 45*time.Second)
	if err != nil {
		return -1, err
	}
	r, ok := reply.(*proto.ProduceResponse)
	if tr, isTxn := reply.(*proto.TxnProduceResponse); isTxn {
		r, ok = (*proto.ProduceResponse)(tr), true
	}
	if !ok || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return -1, unexpected("Produce", reply)
	}
	pp := r.Topics[0].Partitions[0]
	switch pp.Error {
	case proto.ErrNone, proto.ErrDuplicateSequence:
		return pp.BaseOffset, nil
	}
	return -1, &Error{Code: pp.Error, Message: pp.Message, What: fmt.Sprintf("producing to %s-%d", b.tp.topic, b.tp.partition)}
}

// settle gives the batch's records their outcome and lets the
// partition's next batch go.
func (p *Producer) settle(b *batch, base int64, err error) {
	if err != nil && p.txn != nil {
		p.txn.fail(err)
	}
	for i, r := range b.records {
		if err == nil {
			r.delivery.Offset = base + int64(i)
		}
		r.delivery.Err = err
		close(r.delivery.done)
	}
	p.mu.Lock()
	st := p.parts[b.tp]
	st.ready = st.ready[1:]
	st.inflight = false
	p.buffered -= b.size
	if !p.closed { // a closed producer's space channel stays closed
		close(p.space)
		p.space = make(chan struct{})
	}
	p.unfinished -= len(b.records)
	if p.unfinished == 0 {
		p.flushing = false
		close(p.drained)
	}
	p.mu.Unlock()
	p.signal()
}
