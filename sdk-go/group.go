package aerostream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aerostream/aerostream/sdk-go/proto"
)

// groupMember keeps a consumer in its group: it joins, starts the
// consumer on the partitions the group gives it, heartbeats, commits, and
// joins again when the group rebalances.
type groupMember struct {
	cs     *Consumer
	topics []string

	mu          sync.Mutex
	coordinator string
	memberID    string
	generation  int32
	assigned    bool

	stop chan struct{}
	done chan struct{}
}

// Subscribe makes the consumer a member of its group for these topics.
func (cs *Consumer) Subscribe(topics ...string) error {
	if cs.cfg.Group == "" {
		return errors.New("Subscribe needs a consumer with a Group; use Assign otherwise")
	}
	if len(topics) == 0 {
		return errors.New("Subscribe needs at least one topic")
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return ErrClosed
	}
	if cs.group != nil {
		return errors.New("the consumer is subscribed already")
	}
	g := &groupMember{cs: cs, topics: topics, generation: -1, stop: make(chan struct{}), done: make(chan struct{})}
	cs.group = g
	go g.run()
	return nil
}

// Commit commits the positions consumed so far (a group member only).
func (cs *Consumer) Commit(ctx context.Context) error {
	cs.mu.Lock()
	g := cs.group
	cs.mu.Unlock()
	if g == nil {
		return errors.New("only a group member commits")
	}
	return g.commit(ctx)
}

func (g *groupMember) group() string { return g.cs.cfg.Group }

func (g *groupMember) run() {
	defer close(g.done)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-g.stop
		cancel()
	}()
	failures := 0
	for ctx.Err() == nil {
		err := g.joinAndServe(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			if code, ok := codeOf(err); ok {
				switch code {
				case proto.ErrNotCoordinator, proto.ErrNotAvailable:
					g.mu.Lock()
					g.coordinator = ""
					g.mu.Unlock()
				case proto.ErrUnknownMember:
					g.mu.Lock()
					g.memberID = ""
					g.mu.Unlock()
				case proto.ErrRebalanceInProgress, proto.ErrIllegalGeneration:
				default:
					if !code.Retriable() {
						// a group that cannot be joined (INVALID_GROUP,
						// INCONSISTENT_GROUP_PROTOCOL, UNAUTHORIZED, ...):
						// the consumer reports it
						g.cs.deliver(ctx, item{err: err, generation: g.cs.currentGeneration()})
						return
					}
				}
			} else {
				g.mu.Lock()
				g.coordinator = ""
				g.mu.Unlock()
			}
			if !sleep(ctx, backoff(failures)) {
				return
			}
			continue
		}
		failures = 0
	}
}

func (cs *Consumer) currentGeneration() int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.generation
}

func (g *groupMember) findCoordinator(ctx context.Context) (string, error) {
	g.mu.Lock()
	addr := g.coordinator
	g.mu.Unlock()
	if addr != "" {
		return addr, nil
	}
	reply, err := g.cs.c.call(ctx, &proto.FindCoordinator{Group: g.group()})
	if err != nil {
		return "", err
	}
	r, ok := reply.(*proto.FindCoordinatorResponse)
	if !ok {
		return "", unexpected("FindCoordinator", reply)
	}
	if err := serverError(r.Error, "", "finding the coordinator of group "+g.group()); err != nil {
		return "", err
	}
	addr = hostPort(r.Host, r.Port)
	g.mu.Lock()
	g.coordinator = addr
	g.mu.Unlock()
	return addr, nil
}

// joinAndServe joins the group, reads the partitions it gives, and
// heartbeats until the group rebalances (an error) or the consumer closes.
func (g *groupMember) joinAndServe(ctx context.Context) error {
	cs := g.cs
	addr, err := g.findCoordinator(ctx)
	if err != nil {
		return err
	}
	g.mu.Lock()
	member := g.memberID
	g.mu.Unlock()
	join := &proto.JoinGroup{
		Group:              g.group(),
		MemberID:           member,
		Topics:             g.topics,
		SessionTimeoutMs:   uint32(cs.cfg.SessionTimeout.Milliseconds()),
		RebalanceTimeoutMs: uint32(cs.cfg.RebalanceTimeout.Milliseconds()),
	}
	reply, err := cs.c.callAt(ctx, addr, join, 2*cs.cfg.RebalanceTimeout+time.Minute)
	if err != nil {
		return err
	}
	jr, ok := reply.(*proto.JoinGroupResponse)
	if !ok {
		return unexpected("JoinGroup", reply)
	}
	if jr.MemberID != "" {
		g.mu.Lock()
		g.memberID = jr.MemberID
		g.mu.Unlock()
	}
	if err := serverError(jr.Error, "", "joining group "+g.group()); err != nil {
		return err
	}
	g.mu.Lock()
	g.memberID = jr.MemberID
	g.generation = jr.Generation
	g.mu.Unlock()

	// where each partition given starts: its committed offset, or Reset
	fetch := &proto.FetchOffsets{Group: g.group(), Partitions: []proto.TopicPartition{}}
	for _, a := range jr.Assignment {
		for _, p := range a.Partitions {
			fetch.Partitions = append(fetch.Partitions, proto.TopicPartition{Topic: a.Topic, Partition: p})
		}
	}
	positions := map[topicPartition]int64{}
	if len(fetch.Partitions) > 0 {
		reply, err = cs.c.callAt(ctx, addr, fetch, cs.c.cfg.RequestTimeout)
		if err != nil {
			return err
		}
		fr, ok := reply.(*proto.FetchOffsetsResponse)
		if !ok {
			return unexpected("FetchOffsets", reply)
		}
		for _, o := range fr.Offsets {
			if err := serverError(o.Error, "", fmt.Sprintf("committed offset of %s-%d", o.Topic, o.Partition)); err != nil {
				return err
			}
			off := o.Offset
			if off < 0 {
				off, err = cs.resolve(ctx, o.Topic, o.Partition, cs.cfg.Reset)
				if err != nil {
					return err
				}
			}
			positions[topicPartition{o.Topic, o.Partition}] = off
		}
	}
	cs.startFetchers(positions)
	g.mu.Lock()
	g.assigned = true
	g.mu.Unlock()

	beat := time.NewTicker(cs.cfg.HeartbeatInterval)
	defer beat.Stop()
	commit := time.NewTicker(cs.cfg.AutoCommitInterval)
	defer commit.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-commit.C:
			if !cs.cfg.DisableAutoCommit {
				_ = g.commit(ctx) // a failed commit is retried at the next tick
			}
		case <-beat.C:
			reply, err := cs.c.callAt(ctx, addr, &proto.Heartbeat{Group: g.group(), MemberID: jr.MemberID, Generation: jr.Generation}, cs.cfg.SessionTimeout)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				g.revoke(ctx, false)
				return err
			}
			hr, ok := reply.(*proto.HeartbeatResponse)
			if !ok {
				return unexpected("Heartbeat", reply)
			}
			if hr.Error != proto.ErrNone {
				// commit what was read while the generation may still
				// take it, then give the partitions up and join again
				g.revoke(ctx, hr.Error == proto.ErrRebalanceInProgress)
				return &Error{Code: hr.Error, What: "heartbeat of group " + g.group()}
			}
		}
	}
}

// revoke stops reading the partitions, committing first when asked.
func (g *groupMember) revoke(ctx context.Context, commit bool) {
	if commit && !g.cs.cfg.DisableAutoCommit {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = g.commit(cctx)
		cancel()
	}
	g.cs.stopFetchers()
	g.mu.Lock()
	g.assigned = false
	g.mu.Unlock()
}

// commit commits the consumed positions as this generation's member.
func (g *groupMember) commit(ctx context.Context) error {
	g.mu.Lock()
	addr, member, gen, assigned := g.coordinator, g.memberID, g.generation, g.assigned
	g.mu.Unlock()
	if !assigned || addr == "" {
		return nil
	}
	req := &proto.CommitOffsets{Group: g.group(), Generation: gen, MemberID: member, Offsets: []proto.CommittedOffset{}}
	for tp, off := range g.cs.positions() {
		req.Offsets = append(req.Offsets, proto.CommittedOffset{Topic: tp.topic, Partition: tp.partition, Offset: off})
	}
	if len(req.Offsets) == 0 {
		return nil
	}
	reply, err := g.cs.c.callAt(ctx, addr, req, g.cs.c.cfg.RequestTimeout)
	if err != nil {
		return err
	}
	r, ok := reply.(*proto.CommitOffsetsResponse)
	if !ok {
		return unexpected("CommitOffsets", reply)
	}
	var errs []error
	for _, p := range r.Partitions {
		if err := serverError(p.Error, "", fmt.Sprintf("committing %s-%d", p.Topic, p.Partition)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close commits, leaves the group and stops.
func (g *groupMember) close(ctx context.Context) error {
	var err error
	if !g.cs.cfg.DisableAutoCommit {
		err = g.commit(ctx)
	}
	g.mu.Lock()
	addr, member := g.coordinator, g.memberID
	g.mu.Unlock()
	close(g.stop)
	<-g.done
	if addr != "" && member != "" {
		if _, lerr := g.cs.c.callAt(ctx, addr, &proto.LeaveGroup{Group: g.group(), MemberID: member}, 5*time.Second); lerr != nil && err == nil {
			err = lerr
		}
	}
	return err
}

// GroupMember gives the consumer's group membership, for offsets committed
// in a transaction (Producer.SendOffsetsToTransaction); false when it is
// not a member now.
func (cs *Consumer) GroupMember() (GroupMember, bool) {
	cs.mu.Lock()
	g := cs.group
	cs.mu.Unlock()
	if g == nil {
		return GroupMember{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.assigned {
		return GroupMember{}, false
	}
	return GroupMember{Group: g.group(), Generation: g.generation, MemberID: g.memberID}, true
}

// Positions gives the next offset to read of each partition the consumer
// reads: what to commit for the records consumed so far.
func (cs *Consumer) Positions() map[proto.TopicPartition]int64 {
	out := map[proto.TopicPartition]int64{}
	for tp, off := range cs.positions() {
		out[proto.TopicPartition{Topic: tp.topic, Partition: tp.partition}] = off
	}
	return out
}
