package aerostream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aerostream/aerostream/sdk-go/proto"
)

// SASL names the login of a server that requires authentication
// (started with --sasl-mechanisms): PLAIN within the hello, or
// SCRAM-SHA-256 / SCRAM-SHA-512 with Authenticate messages.
type SASL struct {
	Mechanism string
	User      string
	Password  string
}

// Config is a client's settings; the zero value works.
type Config struct {
	// ClientID is the Hello's client id (group tools show it).
	ClientID string
	SASL     SASL
	// DialTimeout bounds a connection and its login (default 10 s).
	DialTimeout time.Duration
	// RequestTimeout bounds requests that are not long polls (default 30 s).
	RequestTimeout time.Duration
	// TLSCAFile is, for aero+quic://, the PEM file of the CA certificates
	// that signed the servers' certificates (an agent's own CA is
	// DATA_DIR/native-tls/ca.pem). No system roots are used.
	TLSCAFile string
	// InsecureSkipVerify accepts any server certificate over QUIC: the
	// traffic is encrypted, but anyone on the path can pose as the server.
	// For trying things out only.
	InsecureSkipVerify bool
}

// Client is a connection to an AeroStream cluster over the native
// protocol: one connection per server, the cluster's metadata, admin
// operations, and the producers and consumers made from it. It is safe for
// concurrent use.
type Client struct {
	cfg       Config
	bootstrap []string
	quic      bool

	mu     sync.Mutex
	conns  map[string]*conn
	dials  map[string]*dialing
	nodes  map[uint32]string
	topics map[string][]proto.PartitionMetadata
	closed bool
}

type dialing struct {
	done chan struct{}
	c    *conn
	err  error
}

// ParseBootstrap gives the host:port addresses of a bootstrap URL, and
// whether it is over QUIC: aero://HOST:PORT (TCP) or aero+quic://HOST:PORT
// (QUIC on the UDP port of that number), or a list aero://h1:9091,h2:9091.
func ParseBootstrap(url string) (addrs []string, overQUIC bool, err error) {
	scheme := "aero://"
	rest, ok := strings.CutPrefix(url, scheme)
	if !ok {
		scheme = "aero+quic://"
		rest, ok = strings.CutPrefix(url, scheme)
		overQUIC = true
	}
	if !ok {
		return nil, false, fmt.Errorf("%q is not an aero://HOST:PORT or aero+quic://HOST:PORT URL", url)
	}
	var out []string
	for _, part := range strings.Split(rest, ",") {
		part = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(part), scheme), "/")
		host, port, err := net.SplitHostPort(part)
		if err != nil || host == "" {
			return nil, false, fmt.Errorf("%q: %q is not HOST:PORT", url, part)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, false, fmt.Errorf("%q: %q is not a port", url, port)
		}
		out = append(out, part)
	}
	return out, overQUIC, nil
}

// Connect logs in to one of the bootstrap servers and reads the cluster's
// metadata.
func Connect(ctx context.Context, bootstrap string, cfg Config) (*Client, error) {
	addrs, overQUIC, err := ParseBootstrap(bootstrap)
	if err != nil {
		return nil, err
	}
	if !overQUIC && (cfg.TLSCAFile != "" || cfg.InsecureSkipVerify) {
		return nil, fmt.Errorf("%q: a TLS CA or InsecureSkipVerify applies to aero+quic:// only (aero:// is plain TCP)", bootstrap)
	}
	if overQUIC && cfg.TLSCAFile == "" && !cfg.InsecureSkipVerify {
		return nil, fmt.Errorf("%q: QUIC needs the servers' CA (TLSCAFile, e.g. DATA_DIR/native-tls/ca.pem) or InsecureSkipVerify", bootstrap)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "aerostream-go"
	}
	c := &Client{
		cfg:       cfg,
		bootstrap: addrs,
		quic:      overQUIC,
		conns:     map[string]*conn{},
		dials:     map[string]*dialing{},
		nodes:     map[uint32]string{},
		topics:    map[string][]proto.PartitionMetadata{},
	}
	if _, err := c.Metadata(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close closes every connection.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := c.conns
	c.conns = map[string]*conn{}
	c.mu.Unlock()
	for _, cn := range conns {
		cn.close()
	}
	return nil
}

// connTo gives the connection to addr, dialing it once for every caller.
func (c *Client) connTo(ctx context.Context, addr string) (*conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if cn, ok := c.conns[addr]; ok {
		if cn.alive() {
			c.mu.Unlock()
			return cn, nil
		}
		delete(c.conns, addr)
	}
	d, ok := c.dials[addr]
	if !ok {
		d = &dialing{done: make(chan struct{})}
		c.dials[addr] = d
		go func() {
			dctx, cancel := context.WithTimeout(context.Background(), c.cfg.DialTimeout)
			defer cancel()
			d.c, d.err = dial(dctx, addr, &c.cfg, c.quic)
			c.mu.Lock()
			delete(c.dials, addr)
			if d.err == nil {
				if c.closed {
					d.c.close()
					d.err = ErrClosed
				} else {
					c.conns[addr] = d.c
				}
			}
			c.mu.Unlock()
			close(d.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-d.done:
		return d.c, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// anyConn gives a connection to some server: a bootstrap one, or one the
// metadata named.
func (c *Client) anyConn(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	for _, cn := range c.conns {
		if cn.alive() {
			c.mu.Unlock()
			return cn, nil
		}
	}
	addrs := append([]string(nil), c.bootstrap...)
	for _, a := range c.nodes {
		addrs = append(addrs, a)
	}
	c.mu.Unlock()
	var errs []error
	for _, a := range addrs {
		cn, err := c.connTo(ctx, a)
		if err == nil {
			return cn, nil
		}
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return nil, err
		}
		var se *Error
		if errors.As(err, &se) && se.Code == proto.ErrAuthenticationFailed {
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("no server answers: %w", errors.Join(errs...))
}

// call sends a request to some server with the request timeout.
func (c *Client) call(ctx context.Context, req proto.Message) (proto.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	cn, err := c.anyConn(ctx)
	if err != nil {
		return nil, err
	}
	return cn.request(ctx, req)
}

// callAt sends a request to the server at addr.
func (c *Client) callAt(ctx context.Context, addr string, req proto.Message, timeout time.Duration) (proto.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cn, err := c.connTo(ctx, addr)
	if err != nil {
		return nil, err
	}
	return cn.request(ctx, req)
}

func unexpected(req string, m proto.Message) error {
	return fmt.Errorf("the server answered %s with %s", req, proto.MessageName(m))
}

// Metadata asks for the servers and the given topics (every topic when
// none is named), and keeps what it learns for routing.
func (c *Client) Metadata(ctx context.Context, topics ...string) (*proto.MetadataResponse, error) {
	reply, err := c.call(ctx, &proto.Metadata{Topics: append([]string{}, topics...)})
	if err != nil {
		return nil, err
	}
	md, ok := reply.(*proto.MetadataResponse)
	if !ok {
		return nil, unexpected("Metadata", reply)
	}
	c.mu.Lock()
	for _, n := range md.Nodes {
		c.nodes[n.ID] = net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))
	}
	for _, t := range md.Topics {
		if t.Error == proto.ErrNone {
			c.topics[t.Name] = t.Partitions
		} else {
			delete(c.topics, t.Name)
		}
	}
	c.mu.Unlock()
	return md, nil
}

// Partitions gives a topic's partition count, asking the cluster when the
// topic is not known yet.
func (c *Client) Partitions(ctx context.Context, topic string) (int, error) {
	c.mu.Lock()
	ps, ok := c.topics[topic]
	c.mu.Unlock()
	if ok {
		return len(ps), nil
	}
	md, err := c.Metadata(ctx, topic)
	if err != nil {
		return 0, err
	}
	for _, t := range md.Topics {
		if t.Name == topic {
			if t.Error != proto.ErrNone {
				return 0, &Error{Code: t.Error, What: "topic " + topic}
			}
			return len(t.Partitions), nil
		}
	}
	return 0, &Error{Code: proto.ErrUnknownTopic, What: "topic " + topic}
}

// leader gives the address of a partition's leader from the metadata
// kept, refreshing it when it has none.
func (c *Client) leader(ctx context.Context, topic string, partition uint32) (string, error) {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		ps := c.topics[topic]
		addr := ""
		known := false
		if int(partition) < len(ps) {
			known = true
			if l := ps[partition].Leader; l >= 0 {
				addr = c.nodes[uint32(l)]
			}
		}
		c.mu.Unlock()
		if addr != "" {
			return addr, nil
		}
		if attempt > 0 {
			if !known {
				return "", &Error{Code: proto.ErrUnknownPartition, What: fmt.Sprintf("%s-%d", topic, partition)}
			}
			return "", &Error{Code: proto.ErrNotAvailable, What: fmt.Sprintf("%s-%d has no leader", topic, partition)}
		}
		if _, err := c.Metadata(ctx, topic); err != nil {
			return "", err
		}
	}
}

// forget drops what is known of a topic's leaders, after a NOT_LEADER.
func (c *Client) forget(topic string) {
	c.mu.Lock()
	delete(c.topics, topic)
	c.mu.Unlock()
}

// CreateTopic creates a topic; replicationFactor -1 takes the cluster's
// default. Configs are topic settings (retention.ms, cleanup.policy, ...).
func (c *Client) CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int16, configs map[string]string) error {
	req := &proto.CreateTopic{Name: name, Partitions: partitions, ReplicationFactor: replicationFactor, Configs: []proto.ConfigEntry{}}
	for k, v := range configs {
		req.Configs = append(req.Configs, proto.ConfigEntry{Name: k, Value: v})
	}
	reply, err := c.call(ctx, req)
	if err != nil {
		return err
	}
	r, ok := reply.(*proto.CreateTopicResponse)
	if !ok {
		return unexpected("CreateTopic", reply)
	}
	return serverError(r.Error, r.Message, "creating topic "+name)
}

// DeleteTopic deletes a topic and its data.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	reply, err := c.call(ctx, &proto.DeleteTopic{Name: name})
	if err != nil {
		return err
	}
	r, ok := reply.(*proto.DeleteTopicResponse)
	if !ok {
		return unexpected("DeleteTopic", reply)
	}
	c.forget(name)
	return serverError(r.Error, r.Message, "deleting topic "+name)
}

// Ping measures a round trip to some server.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	nonce := uint64(start.UnixNano())
	reply, err := c.call(ctx, &proto.Ping{Nonce: nonce})
	if err != nil {
		return 0, err
	}
	if p, ok := reply.(*proto.Pong); !ok || p.Nonce != nonce {
		return 0, unexpected("Ping", reply)
	}
	return time.Since(start), nil
}

// ListOffset gives a partition's offset for spec: proto.SpecEarliest,
// proto.SpecLatest (the high watermark), or a timestamp in ms.
func (c *Client) ListOffset(ctx context.Context, topic string, partition uint32, spec int64) (int64, error) {
	for attempt := 0; ; attempt++ {
		addr, err := c.leader(ctx, topic, partition)
		if err == nil {
			var reply proto.Message
			reply, err = c.callAt(ctx, addr, &proto.ListOffsets{Partitions: []proto.ListOffsetsPartition{{Topic: topic, Partition: partition, Spec: spec}}}, c.cfg.RequestTimeout)
			if err == nil {
				r, ok := reply.(*proto.ListOffsetsResponse)
				if !ok || len(r.Partitions) != 1 {
					return 0, unexpected("ListOffsets", reply)
				}
				p := r.Partitions[0]
				err = serverError(p.Error, "", fmt.Sprintf("offsets of %s-%d", topic, partition))
				if err == nil {
					return p.Offset, nil
				}
			}
		}
		if attempt >= 5 || !retriable(err) || ctx.Err() != nil {
			return 0, err
		}
		c.forget(topic)
		if !sleep(ctx, backoff(attempt)) {
			return 0, ctx.Err()
		}
	}
}

func backoff(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(attempt, 5)
	return min(d, time.Second)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// groupCoordinator gives the address of a group's coordinator.
func (c *Client) groupCoordinator(ctx context.Context, group string) (string, error) {
	reply, err := c.call(ctx, &proto.FindCoordinator{Group: group})
	if err != nil {
		return "", err
	}
	r, ok := reply.(*proto.FindCoordinatorResponse)
	if !ok {
		return "", unexpected("FindCoordinator", reply)
	}
	if err := serverError(r.Error, "", "finding the coordinator of group "+group); err != nil {
		return "", err
	}
	return hostPort(r.Host, r.Port), nil
}

// CommittedOffsets gives a group's committed offsets (the next offset to
// read) of the given partitions; -1 for a partition without one. It asks
// the group's coordinator, where members commit: another server reads its
// own copy of the metastore, which may not hold a commit just made.
func (c *Client) CommittedOffsets(ctx context.Context, group string, partitions ...proto.TopicPartition) (map[proto.TopicPartition]int64, error) {
	addr, err := c.groupCoordinator(ctx, group)
	if err != nil {
		return nil, err
	}
	reply, err := c.callAt(ctx, addr, &proto.FetchOffsets{Group: group, Partitions: append([]proto.TopicPartition{}, partitions...)}, c.cfg.RequestTimeout)
	if err != nil {
		return nil, err
	}
	r, ok := reply.(*proto.FetchOffsetsResponse)
	if !ok {
		return nil, unexpected("FetchOffsets", reply)
	}
	out := map[proto.TopicPartition]int64{}
	for _, o := range r.Offsets {
		if err := serverError(o.Error, "", fmt.Sprintf("committed offset of %s-%d", o.Topic, o.Partition)); err != nil {
			return nil, err
		}
		out[proto.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
	}
	return out, nil
}
