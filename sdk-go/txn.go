package aerostream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aerostream/aerostream/sdk-go/proto"
)

// txnState is a transactional producer's transaction.
type txnState struct {
	mu          sync.Mutex
	coordinator string
	open        bool
	added       map[topicPartition]bool
	groups      map[string]bool // groups added with AddTxnOffsets
	failed      error           // a record of the open transaction failed: abort it
}

// ErrNoTransaction is a transactional producer's Send outside a transaction.
var ErrNoTransaction = errors.New("aerostream: a transactional producer sends between BeginTransaction and CommitTransaction or AbortTransaction")

func (t *txnState) check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.open {
		return ErrNoTransaction
	}
	return nil
}

func (t *txnState) fail(err error) {
	t.mu.Lock()
	if t.failed == nil {
		t.failed = err
	}
	t.mu.Unlock()
}

// txnCall sends a request to the transactional id's coordinator, finding
// it first, retrying NOT_COORDINATOR, CONCURRENT_TRANSACTIONS and the
// other retriable answers until ctx ends. check gives the answer's error.
func (p *Producer) txnCall(ctx context.Context, req func() proto.Message, check func(proto.Message) error) error {
	for attempt := 0; ; attempt++ {
		err := p.txnCallOnce(ctx, req(), check)
		if err == nil {
			return nil
		}
		if !retriable(err) {
			return err
		}
		if code, ok := codeOf(err); !ok || code == proto.ErrNotCoordinator || code == proto.ErrNotAvailable {
			p.txn.mu.Lock()
			p.txn.coordinator = ""
			p.txn.mu.Unlock()
		}
		if !sleep(ctx, backoff(attempt)) {
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
	}
}

func (p *Producer) txnCallOnce(ctx context.Context, req proto.Message, check func(proto.Message) error) error {
	p.txn.mu.Lock()
	addr := p.txn.coordinator
	p.txn.mu.Unlock()
	if addr == "" {
		reply, err := p.c.call(ctx, &proto.FindTxnCoordinator{TransactionalID: p.cfg.TransactionalID})
		if err != nil {
			return err
		}
		r, ok := reply.(*proto.FindTxnCoordinatorResponse)
		if !ok {
			return unexpected("FindTxnCoordinator", reply)
		}
		if err := serverError(r.Error, "", "finding the coordinator of "+p.cfg.TransactionalID); err != nil {
			return err
		}
		addr = hostPort(r.Host, r.Port)
		p.txn.mu.Lock()
		p.txn.coordinator = addr
		p.txn.mu.Unlock()
	}
	reply, err := p.c.callAt(ctx, addr, req, p.c.cfg.RequestTimeout)
	if err != nil {
		return err
	}
	return check(reply)
}

func txnAnswer(op string) func(proto.Message) error {
	return func(m proto.Message) error {
		var r *proto.TxnResponse
		switch a := m.(type) {
		case *proto.AddTxnPartitionsResponse:
			r = (*proto.TxnResponse)(a)
		case *proto.EndTxnResponse:
			r = (*proto.TxnResponse)(a)
		case *proto.AddTxnOffsetsResponse:
			r = (*proto.TxnResponse)(a)
		case *proto.TxnOffsetCommitResponse:
			r = (*proto.TxnResponse)(a)
		default:
			return unexpected(op, m)
		}
		return serverError(r.Error, r.Message, op)
	}
}

// initTxn takes the id's producer id and a new epoch, fencing older
// producers, and starts every partition's sequence again.
func (p *Producer) initTxn(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.TransactionTimeout+30*time.Second)
	defer cancel()
	var got *proto.InitTxnResponse
	err := p.txnCall(ctx, func() proto.Message {
		return &proto.InitTxn{TransactionalID: p.cfg.TransactionalID, TimeoutMs: uint32(p.cfg.TransactionTimeout.Milliseconds())}
	}, func(m proto.Message) error {
		r, ok := m.(*proto.InitTxnResponse)
		if !ok {
			return unexpected("InitTxn", m)
		}
		got = r
		return serverError(r.Error, r.Message, "initializing transactional id "+p.cfg.TransactionalID)
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.who = producerIdentity{id: got.ProducerID, epoch: got.ProducerEpoch}
	for _, st := range p.parts {
		st.sequence = 0
	}
	p.mu.Unlock()
	return nil
}

func (p *Producer) txnProducer() proto.TxnProducer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return proto.TxnProducer{TransactionalID: p.cfg.TransactionalID, ProducerID: p.who.id, ProducerEpoch: p.who.epoch}
}

// addPartition adds a partition to the open transaction before its first
// batch.
func (p *Producer) addPartition(ctx context.Context, tp topicPartition) error {
	p.txn.mu.Lock()
	done := p.txn.added[tp]
	p.txn.mu.Unlock()
	if done {
		return nil
	}
	who := p.txnProducer()
	err := p.txnCall(ctx, func() proto.Message {
		return &proto.AddTxnPartitions{Producer: who, Topics: []proto.TxnTopic{{Topic: tp.topic, Partitions: []uint32{tp.partition}}}}
	}, txnAnswer("adding a partition to the transaction"))
	if err != nil {
		return err
	}
	p.txn.mu.Lock()
	p.txn.added[tp] = true
	p.txn.mu.Unlock()
	return nil
}

// BeginTransaction opens a transaction: Send is allowed until it ends.
func (p *Producer) BeginTransaction() error {
	if p.txn == nil {
		return errors.New("not a transactional producer: set ProducerConfig.TransactionalID")
	}
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	if p.txn.open {
		return errors.New("a transaction is open already")
	}
	p.txn.open = true
	p.txn.failed = nil
	p.txn.added = map[topicPartition]bool{}
	p.txn.groups = map[string]bool{}
	return nil
}

// CommitTransaction sends the transaction's records and commits them. If
// any record failed, nothing is committed: the transaction is aborted and
// the error returned.
func (p *Producer) CommitTransaction(ctx context.Context) error {
	return p.endTxn(ctx, true)
}

// AbortTransaction drops the transaction's records (read_committed readers
// never see them).
func (p *Producer) AbortTransaction(ctx context.Context) error {
	return p.endTxn(ctx, false)
}

func (p *Producer) endTxn(ctx context.Context, commit bool) error {
	if p.txn == nil {
		return errors.New("not a transactional producer: set ProducerConfig.TransactionalID")
	}
	if err := p.txn.check(); err != nil {
		return err
	}
	if err := p.Flush(ctx); err != nil {
		return err
	}
	p.txn.mu.Lock()
	failed := p.txn.failed
	anything := len(p.txn.added) > 0 || len(p.txn.groups) > 0
	p.txn.mu.Unlock()
	if failed != nil {
		commit = false
	}
	var err error
	if anything {
		who := p.txnProducer()
		err = p.txnCall(ctx, func() proto.Message {
			return &proto.EndTxn{Producer: who, Commit: commit}
		}, txnAnswer("ending the transaction"))
	}
	p.txn.mu.Lock()
	p.txn.open = false
	p.txn.added = map[topicPartition]bool{}
	p.txn.groups = map[string]bool{}
	p.txn.mu.Unlock()
	if err == nil && failed != nil {
		// a batch that failed left a gap in its partition's sequence: a
		// new epoch starts every sequence again
		err = p.initTxn(ctx)
		if err == nil {
			err = fmt.Errorf("the transaction was aborted: %w", failed)
		}
	}
	return err
}

// GroupMember is a consumer group member's identity, for offsets committed
// in a transaction: the group takes them only from a current member.
type GroupMember struct {
	Group      string
	Generation int32
	MemberID   string
}

// SendOffsetsToTransaction commits a group's offsets (the next offset to
// read of each partition) with the open transaction: they become the
// group's committed offsets if it commits, and are dropped if it aborts
// (a consume-transform-produce loop). member is the consumer's
// GroupMember(); a group without members takes Generation -1 and an
// empty MemberID.
func (p *Producer) SendOffsetsToTransaction(ctx context.Context, member GroupMember, offsets map[proto.TopicPartition]int64) error {
	if p.txn == nil {
		return errors.New("not a transactional producer: set ProducerConfig.TransactionalID")
	}
	if err := p.txn.check(); err != nil {
		return err
	}
	who := p.txnProducer()
	p.txn.mu.Lock()
	added := p.txn.groups[member.Group]
	p.txn.mu.Unlock()
	if !added {
		err := p.txnCall(ctx, func() proto.Message {
			return &proto.AddTxnOffsets{Producer: who, Group: member.Group}
		}, txnAnswer("adding group "+member.Group+" to the transaction"))
		if err != nil {
			return err
		}
		p.txn.mu.Lock()
		p.txn.groups[member.Group] = true
		p.txn.mu.Unlock()
	}
	req := &proto.TxnOffsetCommit{Producer: who, Group: member.Group, Generation: member.Generation, MemberID: member.MemberID, Offsets: []proto.TxnOffset{}}
	for tp, off := range offsets {
		req.Offsets = append(req.Offsets, proto.TxnOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: off})
	}
	// to the group's coordinator, found again when it moved
	for attempt := 0; ; attempt++ {
		addr, err := p.c.groupCoordinator(ctx, member.Group)
		if err == nil {
			var reply proto.Message
			reply, err = p.c.callAt(ctx, addr, req, p.c.cfg.RequestTimeout)
			if err == nil {
				err = txnAnswer("committing offsets of group " + member.Group + " in the transaction")(reply)
			}
		}
		if err == nil || !retriable(err) {
			return err
		}
		if !sleep(ctx, backoff(attempt)) {
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
	}
}
