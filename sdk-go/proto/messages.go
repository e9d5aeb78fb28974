package proto

// Operation codes of requests; a response has Response set.
const (
	OpHello              byte = 0x01
	OpPing               byte = 0x02
	OpMetadata           byte = 0x03
	OpCreateTopic        byte = 0x04
	OpDeleteTopic        byte = 0x05
	OpInitProducer       byte = 0x06
	OpProduce            byte = 0x07
	OpFetch              byte = 0x08
	OpListOffsets        byte = 0x09
	OpCommitOffsets      byte = 0x0A
	OpFetchOffsets       byte = 0x0B
	OpSubscribe          byte = 0x0C
	OpPush               byte = 0x0D // only ever sent as 0x8D
	OpCredit             byte = 0x0E
	OpUnsubscribe        byte = 0x0F
	OpFindCoordinator    byte = 0x10
	OpJoinGroup          byte = 0x11
	OpHeartbeat          byte = 0x12
	OpLeaveGroup         byte = 0x13
	OpAuthenticate       byte = 0x14
	OpFindTxnCoordinator byte = 0x15
	OpInitTxn            byte = 0x16
	OpAddTxnPartitions   byte = 0x17
	OpAddTxnOffsets      byte = 0x18
	OpTxnOffsetCommit    byte = 0x19
	OpEndTxn             byte = 0x1A
	OpTxnProduce         byte = 0x1B
	OpFetchIsolated      byte = 0x1C
	OpError              byte = 0x7F
)

// Message is a body of the protocol.
type Message interface {
	// Op is the operation code in the frame header.
	Op() byte
	encode(w *writer)
	decode(r *reader)
}

// Correlated is a message that carries a correlation id.
type Correlated interface {
	Message
	CorrelationID() uint32
}

// --- connection ---

type Hello struct {
	Correlation   uint32 `json:"correlation"`
	MinVersion    uint16 `json:"min_version"`
	MaxVersion    uint16 `json:"max_version"`
	ClientID      string `json:"client_id"`
	AuthMechanism string `json:"auth_mechanism"`
	AuthBytes     Blob   `json:"auth_bytes"`
}

func (*Hello) Op() byte { return OpHello }
func (m *Hello) encode(w *writer) {
	w.u32(m.Correlation)
	w.u16(m.MinVersion)
	w.u16(m.MaxVersion)
	w.str(m.ClientID)
	w.str(m.AuthMechanism)
	w.blob(m.AuthBytes)
}
func (m *Hello) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.MinVersion = r.u16("min version")
	m.MaxVersion = r.u16("max version")
	m.ClientID = r.str("client id")
	m.AuthMechanism = r.str("auth mechanism")
	m.AuthBytes = r.blob("auth bytes")
}

type HelloResponse struct {
	Correlation   uint32    `json:"correlation"`
	Error         ErrorCode `json:"error"`
	Version       uint16    `json:"version"`
	NodeID        uint32    `json:"node_id"`
	MaxFrameBytes uint32    `json:"max_frame_bytes"`
	Server        string    `json:"server"`
}

func (*HelloResponse) Op() byte { return OpHello | Response }
func (m *HelloResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.u16(uint16(m.Error))
	w.u16(m.Version)
	w.u32(m.NodeID)
	w.u32(m.MaxFrameBytes)
	w.str(m.Server)
}
func (m *HelloResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
	m.Version = r.u16("version")
	m.NodeID = r.u32("node id")
	m.MaxFrameBytes = r.u32("max frame bytes")
	m.Server = r.str("server")
}

type Authenticate struct {
	Correlation uint32 `json:"correlation"`
	Mechanism   string `json:"mechanism"`
	AuthBytes   Blob   `json:"auth_bytes"`
}

func (*Authenticate) Op() byte { return OpAuthenticate }
func (m *Authenticate) encode(w *writer) {
	w.u32(m.Correlation)
	w.str(m.Mechanism)
	w.blob(m.AuthBytes)
}
func (m *Authenticate) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Mechanism = r.str("mechanism")
	m.AuthBytes = r.blob("auth bytes")
}

type AuthenticateResponse struct {
	Correlation       uint32    `json:"correlation"`
	Error             ErrorCode `json:"error"`
	AuthBytes         Blob      `json:"auth_bytes"`
	Complete          bool      `json:"complete"`
	SessionLifetimeMs uint64    `json:"session_lifetime_ms"`
}

func (*AuthenticateResponse) Op() byte { return OpAuthenticate | Response }
func (m *AuthenticateResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.u16(uint16(m.Error))
	w.blob(m.AuthBytes)
	w.boolean(m.Complete)
	w.u64(m.SessionLifetimeMs)
}
func (m *AuthenticateResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
	m.AuthBytes = r.blob("auth bytes")
	m.Complete = r.boolean("complete")
	m.SessionLifetimeMs = r.u64("session lifetime")
}

type Ping struct {
	Correlation uint32 `json:"correlation"`
	Nonce       uint64 `json:"nonce"`
}

func (*Ping) Op() byte           { return OpPing }
func (m *Ping) encode(w *writer) { w.u32(m.Correlation); w.u64(m.Nonce) }
func (m *Ping) decode(r *reader) { m.Correlation = r.u32("correlation id"); m.Nonce = r.u64("nonce") }

type Pong struct {
	Correlation uint32 `json:"correlation"`
	Nonce       uint64 `json:"nonce"`
}

func (*Pong) Op() byte           { return OpPing | Response }
func (m *Pong) encode(w *writer) { w.u32(m.Correlation); w.u64(m.Nonce) }
func (m *Pong) decode(r *reader) { m.Correlation = r.u32("correlation id"); m.Nonce = r.u64("nonce") }

// ErrorFrame is sent by the server right before it closes a connection.
type ErrorFrame struct {
	Correlation uint32    `json:"correlation"`
	Error       ErrorCode `json:"error"`
	Message     string    `json:"message"`
}

func (*ErrorFrame) Op() byte { return OpError }
func (m *ErrorFrame) encode(w *writer) {
	w.u32(m.Correlation)
	w.u16(uint16(m.Error))
	w.str(m.Message)
}
func (m *ErrorFrame) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
	m.Message = r.str("message")
}

// --- metadata and topics ---

type Metadata struct {
	Correlation uint32   `json:"correlation"`
	Topics      []string `json:"topics"`
}

func (*Metadata) Op() byte { return OpMetadata }
func (m *Metadata) encode(w *writer) {
	w.u32(m.Correlation)
	w.count(len(m.Topics))
	for _, t := range m.Topics {
		w.str(t)
	}
}
func (m *Metadata) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Topics = make([]string, r.count("topics", 2))
	for i := range m.Topics {
		m.Topics[i] = r.str("topic")
	}
}

type Node struct {
	ID   uint32 `json:"id"`
	Host string `json:"host"`
	Port uint16 `json:"port"`
	Rack string `json:"rack"`
}

type PartitionMetadata struct {
	Index       uint32   `json:"index"`
	Leader      int32    `json:"leader"`
	LeaderEpoch int32    `json:"leader_epoch"`
	Replicas    []uint32 `json:"replicas"`
	InSync      []uint32 `json:"in_sync"`
}

type TopicMetadata struct {
	Name       string              `json:"name"`
	Error      ErrorCode           `json:"error"`
	Partitions []PartitionMetadata `json:"partitions"`
}

type MetadataResponse struct {
	Correlation uint32          `json:"correlation"`
	Nodes       []Node          `json:"nodes"`
	Topics      []TopicMetadata `json:"topics"`
}

func (*MetadataResponse) Op() byte { return OpMetadata | Response }
func (m *MetadataResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.count(len(m.Nodes))
	for _, n := range m.Nodes {
		w.u32(n.ID)
		w.str(n.Host)
		w.u16(n.Port)
		w.str(n.Rack)
	}
	w.count(len(m.Topics))
	for _, t := range m.Topics {
		w.str(t.Name)
		w.u16(uint16(t.Error))
		w.count(len(t.Partitions))
		for _, p := range t.Partitions {
			w.u32(p.Index)
			w.i32(p.Leader)
			w.i32(p.LeaderEpoch)
			w.ids(p.Replicas)
			w.ids(p.InSync)
		}
	}
}
func (m *MetadataResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Nodes = make([]Node, r.count("nodes", 10))
	for i := range m.Nodes {
		n := &m.Nodes[i]
		n.ID = r.u32("node id")
		n.Host = r.str("host")
		n.Port = r.u16("port")
		n.Rack = r.str("rack")
	}
	m.Topics = make([]TopicMetadata, r.count("topics", 8))
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Name = r.str("topic")
		t.Error = ErrorCode(r.u16("error"))
		t.Partitions = make([]PartitionMetadata, r.count("partitions", 20))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Index = r.u32("partition")
			p.Leader = r.i32("leader")
			p.LeaderEpoch = r.i32("leader epoch")
			p.Replicas = r.ids("replicas")
			p.InSync = r.ids("in-sync replicas")
		}
	}
}

// ConfigEntry is a topic setting of a CreateTopic.
type ConfigEntry struct {
	Name  string
	Value string
}

type CreateTopic struct {
	Correlation       uint32        `json:"correlation"`
	Name              string        `json:"name"`
	Partitions        int32         `json:"partitions"`
	ReplicationFactor int16         `json:"replication_factor"`
	Configs           []ConfigEntry `json:"configs"`
}

func (*CreateTopic) Op() byte { return OpCreateTopic }
func (m *CreateTopic) encode(w *writer) {
	w.u32(m.Correlation)
	w.str(m.Name)
	w.i32(m.Partitions)
	w.i16(m.ReplicationFactor)
	w.count(len(m.Configs))
	for _, c := range m.Configs {
		w.str(c.Name)
		w.str(c.Value)
	}
}
func (m *CreateTopic) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Name = r.str("topic")
	m.Partitions = r.i32("partitions")
	m.ReplicationFactor = r.i16("replication factor")
	m.Configs = make([]ConfigEntry, r.count("configs", 4))
	for i := range m.Configs {
		m.Configs[i].Name = r.str("config name")
		m.Configs[i].Value = r.str("config value")
	}
}

type DeleteTopic struct {
	Correlation uint32 `json:"correlation"`
	Name        string `json:"name"`
}

func (*DeleteTopic) Op() byte           { return OpDeleteTopic }
func (m *DeleteTopic) encode(w *writer) { w.u32(m.Correlation); w.str(m.Name) }
func (m *DeleteTopic) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Name = r.str("topic")
}

// TopicResponse is the layout of CreateTopicResponse and DeleteTopicResponse.
type TopicResponse struct {
	Correlation uint32    `json:"correlation"`
	Error       ErrorCode `json:"error"`
	Message     string    `json:"message"`
}

func (m *TopicResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.u16(uint16(m.Error))
	w.str(m.Message)
}
func (m *TopicResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
	m.Message = r.str("message")
}

type CreateTopicResponse TopicResponse

func (*CreateTopicResponse) Op() byte           { return OpCreateTopic | Response }
func (m *CreateTopicResponse) encode(w *writer) { (*TopicResponse)(m).encode(w) }
func (m *CreateTopicResponse) decode(r *reader) { (*TopicResponse)(m).decode(r) }

type DeleteTopicResponse TopicResponse

func (*DeleteTopicResponse) Op() byte           { return OpDeleteTopic | Response }
func (m *DeleteTopicResponse) encode(w *writer) { (*TopicResponse)(m).encode(w) }
func (m *DeleteTopicResponse) decode(r *reader) { (*TopicResponse)(m).decode(r) }

// --- produce ---

type InitProducer struct {
	Correlation uint32 `json:"correlation"`
}

func (*InitProducer) Op() byte           { return OpInitProducer }
func (m *InitProducer) encode(w *writer) { w.u32(m.Correlation) }
func (m *InitProducer) decode(r *reader) { m.Correlation = r.u32("correlation id") }

type InitProducerResponse struct {
	Correlation   uint32    `json:"correlation"`
	Error         ErrorCode `json:"error"`
	ProducerID    int64     `json:"producer_id"`
	ProducerEpoch int16     `json:"producer_epoch"`
}

func (*InitProducerResponse) Op() byte { return OpInitProducer | Response }
func (m *InitProducerResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.u16(uint16(m.Error))
	w.i64(m.ProducerID)
	w.i16(m.ProducerEpoch)
}
func (m *InitProducerResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
	m.ProducerID = r.i64("producer id")
	m.ProducerEpoch = r.i16("producer epoch")
}

type ProducePartition struct {
	Partition uint32 `json:"partition"`
	// Batch is exactly one Kafka RecordBatch v2.
	Batch Blob `json:"batch"`
}

type ProduceTopic struct {
	Name       string             `json:"name"`
	Partitions []ProducePartition `json:"partitions"`
}

// Produce writes one batch per partition. Acks: 0 (no answer), 1 (the
// leader's append), -1 (every in-sync replica).
type Produce struct {
	Correlation uint32         `json:"correlation"`
	Acks        int8           `json:"acks"`
	TimeoutMs   uint32         `json:"timeout_ms"`
	Topics      []ProduceTopic `json:"topics"`
}

func (*Produce) Op() byte { return OpProduce }
func (m *Produce) encode(w *writer) {
	w.u32(m.Correlation)
	m.encodeFields(w)
}
func (m *Produce) encodeFields(w *writer) {
	w.i8(m.Acks)
	w.u32(m.TimeoutMs)
	w.count(len(m.Topics))
	for _, t := range m.Topics {
		w.str(t.Name)
		w.count(len(t.Partitions))
		for _, p := range t.Partitions {
			w.u32(p.Partition)
			w.blob(p.Batch)
		}
	}
}
func (m *Produce) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.decodeFields(r)
}
func (m *Produce) decodeFields(r *reader) {
	m.Acks = r.i8("acks")
	m.TimeoutMs = r.u32("timeout")
	m.Topics = make([]ProduceTopic, r.count("topics", 6))
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Name = r.str("topic")
		t.Partitions = make([]ProducePartition, r.count("partitions", 8))
		for j := range t.Partitions {
			t.Partitions[j].Partition = r.u32("partition")
			t.Partitions[j].Batch = r.blob("batch")
		}
	}
}

type PartitionProduced struct {
	Partition       uint32    `json:"partition"`
	Error           ErrorCode `json:"error"`
	BaseOffset      int64     `json:"base_offset"`
	LogAppendTimeMs int64     `json:"log_append_time_ms"`
	LogStartOffset  int64     `json:"log_start_offset"`
	Message         string    `json:"message"`
}

type TopicProduced struct {
	Name       string              `json:"name"`
	Partitions []PartitionProduced `json:"partitions"`
}

type ProduceResponse struct {
	Correlation uint32          `json:"correlation"`
	Topics      []TopicProduced `json:"topics"`
}

func (*ProduceResponse) Op() byte { return OpProduce | Response }
func (m *ProduceResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.count(len(m.Topics))
	for _, t := range m.Topics {
		w.str(t.Name)
		w.count(len(t.Partitions))
		for _, p := range t.Partitions {
			w.u32(p.Partition)
			w.u16(uint16(p.Error))
			w.i64(p.BaseOffset)
			w.i64(p.LogAppendTimeMs)
			w.i64(p.LogStartOffset)
			w.str(p.Message)
		}
	}
}
func (m *ProduceResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Topics = make([]TopicProduced, r.count("topics", 6))
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Name = r.str("topic")
		t.Partitions = make([]PartitionProduced, r.count("partitions", 32))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.u32("partition")
			p.Error = ErrorCode(r.u16("error"))
			p.BaseOffset = r.i64("base offset")
			p.LogAppendTimeMs = r.i64("log append time")
			p.LogStartOffset = r.i64("log start offset")
			p.Message = r.str("message")
		}
	}
}

// --- fetch and offsets ---

type FetchPartition struct {
	Partition uint32 `json:"partition"`
	Offset    int64  `json:"offset"`
	MaxBytes  uint32 `json:"max_bytes"`
}

type FetchTopic struct {
	Name       string           `json:"name"`
	Partitions []FetchPartition `json:"partitions"`
}

func encodeFetchTopics(w *writer, topics []FetchTopic) {
	w.count(len(topics))
	for _, t := range topics {
		w.str(t.Name)
		w.count(len(t.Partitions))
		for _, p := range t.Partitions {
			w.u32(p.Partition)
			w.i64(p.Offset)
			w.u32(p.MaxBytes)
		}
	}
}

func decodeFetchTopics(r *reader) []FetchTopic {
	topics := make([]FetchTopic, r.count("topics", 6))
	for i := range topics {
		t := &topics[i]
		t.Name = r.str("topic")
		t.Partitions = make([]FetchPartition, r.count("partitions", 16))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.u32("partition")
			p.Offset = r.i64("offset")
			p.MaxBytes = r.u32("partition max bytes")
		}
	}
	return topics
}

type Fetch struct {
	Correlation uint32       `json:"correlation"`
	MaxWaitMs   uint32       `json:"max_wait_ms"`
	MinBytes    uint32       `json:"min_bytes"`
	MaxBytes    uint32       `json:"max_bytes"`
	Topics      []FetchTopic `json:"topics"`
}

func (*Fetch) Op() byte { return OpFetch }
func (m *Fetch) encode(w *writer) {
	w.u32(m.Correlation)
	w.u32(m.MaxWaitMs)
	w.u32(m.MinBytes)
	w.u32(m.MaxBytes)
	encodeFetchTopics(w, m.Topics)
}
func (m *Fetch) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.MaxWaitMs = r.u32("max wait")
	m.MinBytes = r.u32("min bytes")
	m.MaxBytes = r.u32("max bytes")
	m.Topics = decodeFetchTopics(r)
}

type PartitionFetched struct {
	Partition      uint32    `json:"partition"`
	Error          ErrorCode `json:"error"`
	HighWatermark  int64     `json:"high_watermark"`
	LogStartOffset int64     `json:"log_start_offset"`
	// Records are whole RecordBatches, possibly followed by a partial one.
	Records Blob `json:"records"`
}

type TopicFetched struct {
	Name       string             `json:"name"`
	Partitions []PartitionFetched `json:"partitions"`
}

type FetchResponse struct {
	Correlation uint32         `json:"correlation"`
	Topics      []TopicFetched `json:"topics"`
}

func (*FetchResponse) Op() byte { return OpFetch | Response }
func (m *FetchResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.count(len(m.Topics))
	for _, t := range m.Topics {
		w.str(t.Name)
		w.count(len(t.Partitions))
		for _, p := range t.Partitions {
			w.u32(p.Partition)
			w.u16(uint16(p.Error))
			w.i64(p.HighWatermark)
			w.i64(p.LogStartOffset)
			w.blob(p.Records)
		}
	}
}
func (m *FetchResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Topics = make([]TopicFetched, r.count("topics", 6))
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Name = r.str("topic")
		t.Partitions = make([]PartitionFetched, r.count("partitions", 26))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.u32("partition")
			p.Error = ErrorCode(r.u16("error"))
			p.HighWatermark = r.i64("high watermark")
			p.LogStartOffset = r.i64("log start offset")
			p.Records = r.blob("records")
		}
	}
}

// Offset specs of ListOffsets: a timestamp (ms, >= 0) or one of these.
const (
	SpecEarliest int64 = -2
	SpecLatest   int64 = -1
)

// ListOffsetsPartition asks for one partition's offset; JSON [topic, partition, spec].
type ListOffsetsPartition struct {
	Topic     string
	Partition uint32
	Spec      int64
}

type ListOffsets struct {
	Correlation uint32                 `json:"correlation"`
	Partitions  []ListOffsetsPartition `json:"partitions"`
}

func (*ListOffsets) Op() byte { return OpListOffsets }
func (m *ListOffsets) encode(w *writer) {
	w.u32(m.Correlation)
	w.count(len(m.Partitions))
	for _, p := range m.Partitions {
		w.str(p.Topic)
		w.u32(p.Partition)
		w.i64(p.Spec)
	}
}
func (m *ListOffsets) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Partitions = make([]ListOffsetsPartition, r.count("partitions", 14))
	for i := range m.Partitions {
		p := &m.Partitions[i]
		p.Topic = r.str("topic")
		p.Partition = r.u32("partition")
		p.Spec = r.i64("spec")
	}
}

type OffsetFound struct {
	Topic     string    `json:"topic"`
	Partition uint32    `json:"partition"`
	Error     ErrorCode `json:"error"`
	Offset    int64     `json:"offset"`
	Timestamp int64     `json:"timestamp"`
}

type ListOffsetsResponse struct {
	Correlation uint32        `json:"correlation"`
	Partitions  []OffsetFound `json:"partitions"`
}

func (*ListOffsetsResponse) Op() byte { return OpListOffsets | Response }
func (m *ListOffsetsResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.count(len(m.Partitions))
	for _, p := range m.Partitions {
		w.str(p.Topic)
		w.u32(p.Partition)
		w.u16(uint16(p.Error))
		w.i64(p.Offset)
		w.i64(p.Timestamp)
	}
}
func (m *ListOffsetsResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Partitions = make([]OffsetFound, r.count("partitions", 24))
	for i := range m.Partitions {
		p := &m.Partitions[i]
		p.Topic = r.str("topic")
		p.Partition = r.u32("partition")
		p.Error = ErrorCode(r.u16("error"))
		p.Offset = r.i64("offset")
		p.Timestamp = r.i64("timestamp")
	}
}

// --- group offsets and membership ---

type CommittedOffset struct {
	Topic     string `json:"topic"`
	Partition uint32 `json:"partition"`
	Offset    int64  `json:"offset"`
	Metadata  string `json:"metadata"`
}

// CommitOffsets commits a group's offsets; Generation -1 and an empty
// MemberID commit without membership.
type CommitOffsets struct {
	Correlation uint32            `json:"correlation"`
	Group       string            `json:"group"`
	Offsets     []CommittedOffset `json:"offsets"`
	Generation  int32             `json:"generation"`
	MemberID    string            `json:"member_id"`
}

func (*CommitOffsets) Op() byte { return OpCommitOffsets }
func (m *CommitOffsets) encode(w *writer) {
	w.u32(m.Correlation)
	w.str(m.Group)
	w.count(len(m.Offsets))
	for _, o := range m.Offsets {
		w.str(o.Topic)
		w.u32(o.Partition)
		w.i64(o.Offset)
		w.str(o.Metadata)
	}
	w.i32(m.Generation)
	w.str(m.MemberID)
}
func (m *CommitOffsets) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Group = r.str("group")
	m.Offsets = make([]CommittedOffset, r.count("offsets", 16))
	for i := range m.Offsets {
		o := &m.Offsets[i]
		o.Topic = r.str("topic")
		o.Partition = r.u32("partition")
		o.Offset = r.i64("offset")
		o.Metadata = r.str("metadata")
	}
	m.Generation = r.i32("generation")
	m.MemberID = r.str("member id")
}

// CommitResult is one partition's answer to a commit; JSON [topic, partition, error].
type CommitResult struct {
	Topic     string
	Partition uint32
	Error     ErrorCode
}

type CommitOffsetsResponse struct {
	Correlation uint32         `json:"correlation"`
	Partitions  []CommitResult `json:"partitions"`
}

func (*CommitOffsetsResponse) Op() byte { return OpCommitOffsets | Response }
func (m *CommitOffsetsResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.count(len(m.Partitions))
	for _, p := range m.Partitions {
		w.str(p.Topic)
		w.u32(p.Partition)
		w.u16(uint16(p.Error))
	}
}
func (m *CommitOffsetsResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Partitions = make([]CommitResult, r.count("partitions", 8))
	for i := range m.Partitions {
		p := &m.Partitions[i]
		p.Topic = r.str("topic")
		p.Partition = r.u32("partition")
		p.Error = ErrorCode(r.u16("error"))
	}
}

// TopicPartition names a partition; JSON [topic, partition].
type TopicPartition struct {
	Topic     string
	Partition uint32
}

type FetchOffsets struct {
	Correlation uint32           `json:"correlation"`
	Group       string           `json:"group"`
	Partitions  []TopicPartition `json:"partitions"`
}

func (*FetchOffsets) Op() byte { return OpFetchOffsets }
func (m *FetchOffsets) encode(w *writer) {
	w.u32(m.Correlation)
	w.str(m.Group)
	w.count(len(m.Partitions))
	for _, p := range m.Partitions {
		w.str(p.Topic)
		w.u32(p.Partition)
	}
}
func (m *FetchOffsets) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Group = r.str("group")
	m.Partitions = make([]TopicPartition, r.count("partitions", 6))
	for i := range m.Partitions {
		m.Partitions[i].Topic = r.str("topic")
		m.Partitions[i].Partition = r.u32("partition")
	}
}

// FetchedOffset is a committed offset (-1: none) and its error; JSON
// [{topic, partition, offset, metadata}, error].
type FetchedOffset struct {
	CommittedOffset
	Error ErrorCode
}

type FetchOffsetsResponse struct {
	Correlation uint32          `json:"correlation"`
	Offsets     []FetchedOffset `json:"offsets"`
}

func (*FetchOffsetsResponse) Op() byte { return OpFetchOffsets | Response }
func (m *FetchOffsetsResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.count(len(m.Offsets))
	for _, o := range m.Offsets {
		w.str(o.Topic)
		w.u32(o.Partition)
		w.u16(uint16(o.Error))
		w.i64(o.Offset)
		w.str(o.Metadata)
	}
}
func (m *FetchOffsetsResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Offsets = make([]FetchedOffset, r.count("offsets", 18))
	for i := range m.Offsets {
		o := &m.Offsets[i]
		o.Topic = r.str("topic")
		o.Partition = r.u32("partition")
		o.Error = ErrorCode(r.u16("error"))
		o.Offset = r.i64("offset")
		o.Metadata = r.str("metadata")
	}
}

type FindCoordinator struct {
	Correlation uint32 `json:"correlation"`
	Group       string `json:"group"`
}

func (*FindCoordinator) Op() byte           { return OpFindCoordinator }
func (m *FindCoordinator) encode(w *writer) { w.u32(m.Correlation); w.str(m.Group) }
func (m *FindCoordinator) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Group = r.str("group")
}

// CoordinatorResponse is the layout of FindCoordinatorResponse and
// FindTxnCoordinatorResponse.
type CoordinatorResponse struct {
	Correlation uint32    `json:"correlation"`
	Error       ErrorCode `json:"error"`
	NodeID      uint32    `json:"node_id"`
	Host        string    `json:"host"`
	Port        uint16    `json:"port"`
}

func (m *CoordinatorResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.u16(uint16(m.Error))
	w.u32(m.NodeID)
	w.str(m.Host)
	w.u16(m.Port)
}
func (m *CoordinatorResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
	m.NodeID = r.u32("node id")
	m.Host = r.str("host")
	m.Port = r.u16("port")
}

type FindCoordinatorResponse CoordinatorResponse

func (*FindCoordinatorResponse) Op() byte           { return OpFindCoordinator | Response }
func (m *FindCoordinatorResponse) encode(w *writer) { (*CoordinatorResponse)(m).encode(w) }
func (m *FindCoordinatorResponse) decode(r *reader) { (*CoordinatorResponse)(m).decode(r) }

type JoinGroup struct {
	Correlation        uint32   `json:"correlation"`
	Group              string   `json:"group"`
	MemberID           string   `json:"member_id"`
	Topics             []string `json:"topics"`
	SessionTimeoutMs   uint32   `json:"session_timeout_ms"`
	RebalanceTimeoutMs uint32   `json:"rebalance_timeout_ms"`
}

func (*JoinGroup) Op() byte { return OpJoinGroup }
func (m *JoinGroup) encode(w *writer) {
	w.u32(m.Correlation)
	w.str(m.Group)
	w.str(m.MemberID)
	w.count(len(m.Topics))
	for _, t := range m.Topics {
		w.str(t)
	}
	w.u32(m.SessionTimeoutMs)
	w.u32(m.RebalanceTimeoutMs)
}
func (m *JoinGroup) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Group = r.str("group")
	m.MemberID = r.str("member id")
	m.Topics = make([]string, r.count("topics", 2))
	for i := range m.Topics {
		m.Topics[i] = r.str("topic")
	}
	m.SessionTimeoutMs = r.u32("session timeout")
	m.RebalanceTimeoutMs = r.u32("rebalance timeout")
}

type TopicAssignment struct {
	Topic      string   `json:"topic"`
	Partitions []uint32 `json:"partitions"`
}

type JoinGroupResponse struct {
	Correlation uint32            `json:"correlation"`
	Error       ErrorCode         `json:"error"`
	Generation  int32             `json:"generation"`
	MemberID    string            `json:"member_id"`
	Assignment  []TopicAssignment `json:"assignment"`
}

func (*JoinGroupResponse) Op() byte { return OpJoinGroup | Response }
func (m *JoinGroupResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.u16(uint16(m.Error))
	w.i32(m.Generation)
	w.str(m.MemberID)
	w.count(len(m.Assignment))
	for _, a := range m.Assignment {
		w.str(a.Topic)
		w.ids(a.Partitions)
	}
}
func (m *JoinGroupResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
	m.Generation = r.i32("generation")
	m.MemberID = r.str("member id")
	m.Assignment = make([]TopicAssignment, r.count("assignment", 6))
	for i := range m.Assignment {
		m.Assignment[i].Topic = r.str("topic")
		m.Assignment[i].Partitions = r.ids("partitions")
	}
}

type Heartbeat struct {
	Correlation uint32 `json:"correlation"`
	Group       string `json:"group"`
	MemberID    string `json:"member_id"`
	Generation  int32  `json:"generation"`
}

func (*Heartbeat) Op() byte { return OpHeartbeat }
func (m *Heartbeat) encode(w *writer) {
	w.u32(m.Correlation)
	w.str(m.Group)
	w.str(m.MemberID)
	w.i32(m.Generation)
}
func (m *Heartbeat) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Group = r.str("group")
	m.MemberID = r.str("member id")
	m.Generation = r.i32("generation")
}

// GroupResponse is the layout of HeartbeatResponse and LeaveGroupResponse.
type GroupResponse struct {
	Correlation uint32    `json:"correlation"`
	Error       ErrorCode `json:"error"`
}

func (m *GroupResponse) encode(w *writer) { w.u32(m.Correlation); w.u16(uint16(m.Error)) }
func (m *GroupResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
}

type HeartbeatResponse GroupResponse

func (*HeartbeatResponse) Op() byte           { return OpHeartbeat | Response }
func (m *HeartbeatResponse) encode(w *writer) { (*GroupResponse)(m).encode(w) }
func (m *HeartbeatResponse) decode(r *reader) { (*GroupResponse)(m).decode(r) }

type LeaveGroup struct {
	Correlation uint32 `json:"correlation"`
	Group       string `json:"group"`
	MemberID    string `json:"member_id"`
}

func (*LeaveGroup) Op() byte { return OpLeaveGroup }
func (m *LeaveGroup) encode(w *writer) {
	w.u32(m.Correlation)
	w.str(m.Group)
	w.str(m.MemberID)
}
func (m *LeaveGroup) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Group = r.str("group")
	m.MemberID = r.str("member id")
}

type LeaveGroupResponse GroupResponse

func (*LeaveGroupResponse) Op() byte           { return OpLeaveGroup | Response }
func (m *LeaveGroupResponse) encode(w *writer) { (*GroupResponse)(m).encode(w) }
func (m *LeaveGroupResponse) decode(r *reader) { (*GroupResponse)(m).decode(r) }

// --- subscriptions ---

// Start kinds of a Subscribe.
const (
	StartOffset    uint8 = 0
	StartEarliest  uint8 = 1
	StartLatest    uint8 = 2
	StartTimestamp uint8 = 3
)

type Subscribe struct {
	Correlation  uint32 `json:"correlation"`
	Subscription uint32 `json:"subscription"`
	Topic        string `json:"topic"`
	Partition    uint32 `json:"partition"`
	StartKind    uint8  `json:"start_kind"`
	StartValue   int64  `json:"start_value"`
	Credit       uint32 `json:"credit"`
}

func (*Subscribe) Op() byte { return OpSubscribe }
func (m *Subscribe) encode(w *writer) {
	w.u32(m.Correlation)
	w.u32(m.Subscription)
	w.str(m.Topic)
	w.u32(m.Partition)
	w.u8(m.StartKind)
	w.i64(m.StartValue)
	w.u32(m.Credit)
}
func (m *Subscribe) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Subscription = r.u32("subscription")
	m.Topic = r.str("topic")
	m.Partition = r.u32("partition")
	m.StartKind = r.u8("start kind")
	m.StartValue = r.i64("start value")
	m.Credit = r.u32("credit")
}

type SubscribeResponse struct {
	Correlation   uint32    `json:"correlation"`
	Error         ErrorCode `json:"error"`
	Subscription  uint32    `json:"subscription"`
	Offset        int64     `json:"offset"`
	HighWatermark int64     `json:"high_watermark"`
	Message       string    `json:"message"`
}

func (*SubscribeResponse) Op() byte { return OpSubscribe | Response }
func (m *SubscribeResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.u16(uint16(m.Error))
	w.u32(m.Subscription)
	w.i64(m.Offset)
	w.i64(m.HighWatermark)
	w.str(m.Message)
}
func (m *SubscribeResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
	m.Subscription = r.u32("subscription")
	m.Offset = r.i64("offset")
	m.HighWatermark = r.i64("high watermark")
	m.Message = r.str("message")
}

// Push carries a subscription's records, sent by the server unasked.
type Push struct {
	Subscription   uint32    `json:"subscription"`
	Error          ErrorCode `json:"error"`
	HighWatermark  int64     `json:"high_watermark"`
	LogStartOffset int64     `json:"log_start_offset"`
	NextOffset     int64     `json:"next_offset"`
	Records        Blob      `json:"records"`
}

func (*Push) Op() byte { return OpPush | Response }
func (m *Push) encode(w *writer) {
	w.u32(m.Subscription)
	w.u16(uint16(m.Error))
	w.i64(m.HighWatermark)
	w.i64(m.LogStartOffset)
	w.i64(m.NextOffset)
	w.blob(m.Records)
}
func (m *Push) decode(r *reader) {
	m.Subscription = r.u32("subscription")
	m.Error = ErrorCode(r.u16("error"))
	m.HighWatermark = r.i64("high watermark")
	m.LogStartOffset = r.i64("log start offset")
	m.NextOffset = r.i64("next offset")
	m.Records = r.blob("records")
}

// Credit grants a subscription more record bytes; it is never answered.
type Credit struct {
	Subscription uint32 `json:"subscription"`
	Bytes        uint32 `json:"bytes"`
}

func (*Credit) Op() byte           { return OpCredit }
func (m *Credit) encode(w *writer) { w.u32(m.Subscription); w.u32(m.Bytes) }
func (m *Credit) decode(r *reader) {
	m.Subscription = r.u32("subscription")
	m.Bytes = r.u32("bytes")
}

type Unsubscribe struct {
	Correlation  uint32 `json:"correlation"`
	Subscription uint32 `json:"subscription"`
}

func (*Unsubscribe) Op() byte           { return OpUnsubscribe }
func (m *Unsubscribe) encode(w *writer) { w.u32(m.Correlation); w.u32(m.Subscription) }
func (m *Unsubscribe) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Subscription = r.u32("subscription")
}

type UnsubscribeResponse struct {
	Correlation uint32    `json:"correlation"`
	Error       ErrorCode `json:"error"`
}

func (*UnsubscribeResponse) Op() byte           { return OpUnsubscribe | Response }
func (m *UnsubscribeResponse) encode(w *writer) { w.u32(m.Correlation); w.u16(uint16(m.Error)) }
func (m *UnsubscribeResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
}

// --- transactions ---

type FindTxnCoordinator struct {
	Correlation     uint32 `json:"correlation"`
	TransactionalID string `json:"transactional_id"`
}

func (*FindTxnCoordinator) Op() byte { return OpFindTxnCoordinator }
func (m *FindTxnCoordinator) encode(w *writer) {
	w.u32(m.Correlation)
	w.str(m.TransactionalID)
}
func (m *FindTxnCoordinator) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.TransactionalID = r.str("transactional id")
}

type FindTxnCoordinatorResponse CoordinatorResponse

func (*FindTxnCoordinatorResponse) Op() byte           { return OpFindTxnCoordinator | Response }
func (m *FindTxnCoordinatorResponse) encode(w *writer) { (*CoordinatorResponse)(m).encode(w) }
func (m *FindTxnCoordinatorResponse) decode(r *reader) { (*CoordinatorResponse)(m).decode(r) }

type InitTxn struct {
	Correlation     uint32 `json:"correlation"`
	TransactionalID string `json:"transactional_id"`
	TimeoutMs       uint32 `json:"timeout_ms"`
}

func (*InitTxn) Op() byte { return OpInitTxn }
func (m *InitTxn) encode(w *writer) {
	w.u32(m.Correlation)
	w.str(m.TransactionalID)
	w.u32(m.TimeoutMs)
}
func (m *InitTxn) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.TransactionalID = r.str("transactional id")
	m.TimeoutMs = r.u32("transaction timeout")
}

type InitTxnResponse struct {
	Correlation   uint32    `json:"correlation"`
	Error         ErrorCode `json:"error"`
	ProducerID    int64     `json:"producer_id"`
	ProducerEpoch int16     `json:"producer_epoch"`
	Message       string    `json:"message"`
}

func (*InitTxnResponse) Op() byte { return OpInitTxn | Response }
func (m *InitTxnResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.u16(uint16(m.Error))
	w.i64(m.ProducerID)
	w.i16(m.ProducerEpoch)
	w.str(m.Message)
}
func (m *InitTxnResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
	m.ProducerID = r.i64("producer id")
	m.ProducerEpoch = r.i16("producer epoch")
	m.Message = r.str("message")
}

// TxnResponse is the layout of the transaction operations' answers.
type TxnResponse struct {
	Correlation uint32    `json:"correlation"`
	Error       ErrorCode `json:"error"`
	Message     string    `json:"message"`
}

func (m *TxnResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.u16(uint16(m.Error))
	w.str(m.Message)
}
func (m *TxnResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Error = ErrorCode(r.u16("error"))
	m.Message = r.str("message")
}

// TxnProducer identifies a transactional producer.
type TxnProducer struct {
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
}

func (p *TxnProducer) encode(w *writer) {
	w.str(p.TransactionalID)
	w.i64(p.ProducerID)
	w.i16(p.ProducerEpoch)
}
func (p *TxnProducer) decode(r *reader) {
	p.TransactionalID = r.str("transactional id")
	p.ProducerID = r.i64("producer id")
	p.ProducerEpoch = r.i16("producer epoch")
}

// TxnTopic is a topic's partitions added to a transaction; JSON [topic, [partitions]].
type TxnTopic struct {
	Topic      string
	Partitions []uint32
}

type AddTxnPartitions struct {
	Correlation uint32      `json:"correlation"`
	Producer    TxnProducer `json:"producer"`
	Topics      []TxnTopic  `json:"topics"`
}

func (*AddTxnPartitions) Op() byte { return OpAddTxnPartitions }
func (m *AddTxnPartitions) encode(w *writer) {
	w.u32(m.Correlation)
	m.Producer.encode(w)
	w.count(len(m.Topics))
	for _, t := range m.Topics {
		w.str(t.Topic)
		w.ids(t.Partitions)
	}
}
func (m *AddTxnPartitions) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Producer.decode(r)
	m.Topics = make([]TxnTopic, r.count("topics", 6))
	for i := range m.Topics {
		m.Topics[i].Topic = r.str("topic")
		m.Topics[i].Partitions = r.ids("partitions")
	}
}

type AddTxnPartitionsResponse TxnResponse

func (*AddTxnPartitionsResponse) Op() byte           { return OpAddTxnPartitions | Response }
func (m *AddTxnPartitionsResponse) encode(w *writer) { (*TxnResponse)(m).encode(w) }
func (m *AddTxnPartitionsResponse) decode(r *reader) { (*TxnResponse)(m).decode(r) }

type AddTxnOffsets struct {
	Correlation uint32      `json:"correlation"`
	Producer    TxnProducer `json:"producer"`
	Group       string      `json:"group"`
}

func (*AddTxnOffsets) Op() byte { return OpAddTxnOffsets }
func (m *AddTxnOffsets) encode(w *writer) {
	w.u32(m.Correlation)
	m.Producer.encode(w)
	w.str(m.Group)
}
func (m *AddTxnOffsets) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Producer.decode(r)
	m.Group = r.str("group")
}

type AddTxnOffsetsResponse TxnResponse

func (*AddTxnOffsetsResponse) Op() byte           { return OpAddTxnOffsets | Response }
func (m *AddTxnOffsetsResponse) encode(w *writer) { (*TxnResponse)(m).encode(w) }
func (m *AddTxnOffsetsResponse) decode(r *reader) { (*TxnResponse)(m).decode(r) }

// TxnOffset is an offset committed in a transaction; JSON [topic, partition, offset].
type TxnOffset struct {
	Topic     string
	Partition uint32
	Offset    int64
}

type TxnOffsetCommit struct {
	Correlation uint32      `json:"correlation"`
	Producer    TxnProducer `json:"producer"`
	Group       string      `json:"group"`
	Generation  int32       `json:"generation"`
	MemberID    string      `json:"member_id"`
	Offsets     []TxnOffset `json:"offsets"`
}

func (*TxnOffsetCommit) Op() byte { return OpTxnOffsetCommit }
func (m *TxnOffsetCommit) encode(w *writer) {
	w.u32(m.Correlation)
	m.Producer.encode(w)
	w.str(m.Group)
	w.i32(m.Generation)
	w.str(m.MemberID)
	w.count(len(m.Offsets))
	for _, o := range m.Offsets {
		w.str(o.Topic)
		w.u32(o.Partition)
		w.i64(o.Offset)
	}
}
func (m *TxnOffsetCommit) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Producer.decode(r)
	m.Group = r.str("group")
	m.Generation = r.i32("generation")
	m.MemberID = r.str("member id")
	m.Offsets = make([]TxnOffset, r.count("offsets", 14))
	for i := range m.Offsets {
		o := &m.Offsets[i]
		o.Topic = r.str("topic")
		o.Partition = r.u32("partition")
		o.Offset = r.i64("offset")
	}
}

type TxnOffsetCommitResponse TxnResponse

func (*TxnOffsetCommitResponse) Op() byte           { return OpTxnOffsetCommit | Response }
func (m *TxnOffsetCommitResponse) encode(w *writer) { (*TxnResponse)(m).encode(w) }
func (m *TxnOffsetCommitResponse) decode(r *reader) { (*TxnResponse)(m).decode(r) }

type EndTxn struct {
	Correlation uint32      `json:"correlation"`
	Producer    TxnProducer `json:"producer"`
	Commit      bool        `json:"commit"`
}

func (*EndTxn) Op() byte { return OpEndTxn }
func (m *EndTxn) encode(w *writer) {
	w.u32(m.Correlation)
	m.Producer.encode(w)
	w.boolean(m.Commit)
}
func (m *EndTxn) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Producer.decode(r)
	switch v := r.u8("commit"); v {
	case 0:
		m.Commit = false
	case 1:
		m.Commit = true
	default:
		r.fail(refuse(ClassInvalid, "invalid commit flag (0 or 1): %d", v))
	}
}

type EndTxnResponse TxnResponse

func (*EndTxnResponse) Op() byte           { return OpEndTxn | Response }
func (m *EndTxnResponse) encode(w *writer) { (*TxnResponse)(m).encode(w) }
func (m *EndTxnResponse) decode(r *reader) { (*TxnResponse)(m).decode(r) }

// TxnProduce is a Produce of transactional batches; on the wire the
// transactional id follows the correlation id.
type TxnProduce struct {
	TransactionalID string  `json:"transactional_id"`
	Produce         Produce `json:"produce"`
}

func (*TxnProduce) Op() byte { return OpTxnProduce }
func (m *TxnProduce) encode(w *writer) {
	w.u32(m.Produce.Correlation)
	w.str(m.TransactionalID)
	m.Produce.encodeFields(w)
}
func (m *TxnProduce) decode(r *reader) {
	m.Produce.Correlation = r.u32("correlation id")
	m.TransactionalID = r.str("transactional id")
	m.Produce.decodeFields(r)
}

type TxnProduceResponse ProduceResponse

func (*TxnProduceResponse) Op() byte           { return OpTxnProduce | Response }
func (m *TxnProduceResponse) encode(w *writer) { (*ProduceResponse)(m).encode(w) }
func (m *TxnProduceResponse) decode(r *reader) { (*ProduceResponse)(m).decode(r) }

type FetchIsolated struct {
	Correlation uint32       `json:"correlation"`
	Isolation   Isolation    `json:"isolation"`
	MaxWaitMs   uint32       `json:"max_wait_ms"`
	MinBytes    uint32       `json:"min_bytes"`
	MaxBytes    uint32       `json:"max_bytes"`
	Topics      []FetchTopic `json:"topics"`
}

func (*FetchIsolated) Op() byte { return OpFetchIsolated }
func (m *FetchIsolated) encode(w *writer) {
	w.u32(m.Correlation)
	w.u8(uint8(m.Isolation))
	w.u32(m.MaxWaitMs)
	w.u32(m.MinBytes)
	w.u32(m.MaxBytes)
	encodeFetchTopics(w, m.Topics)
}
func (m *FetchIsolated) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	level := r.u8("isolation")
	if level > 1 && r.bad == nil {
		r.fail(refuse(ClassInvalid, "invalid isolation level (0 or 1): %d", level))
	}
	m.Isolation = Isolation(level)
	m.MaxWaitMs = r.u32("max wait")
	m.MinBytes = r.u32("min bytes")
	m.MaxBytes = r.u32("max bytes")
	m.Topics = decodeFetchTopics(r)
}

type AbortedTxn struct {
	ProducerID  int64 `json:"producer_id"`
	FirstOffset int64 `json:"first_offset"`
}

type PartitionFetchedIsolated struct {
	Partition        uint32       `json:"partition"`
	Error            ErrorCode    `json:"error"`
	HighWatermark    int64        `json:"high_watermark"`
	LastStableOffset int64        `json:"last_stable_offset"`
	LogStartOffset   int64        `json:"log_start_offset"`
	Aborted          []AbortedTxn `json:"aborted"`
	Records          Blob         `json:"records"`
}

type TopicFetchedIsolated struct {
	Name       string                     `json:"name"`
	Partitions []PartitionFetchedIsolated `json:"partitions"`
}

type FetchIsolatedResponse struct {
	Correlation uint32                 `json:"correlation"`
	Topics      []TopicFetchedIsolated `json:"topics"`
}

func (*FetchIsolatedResponse) Op() byte { return OpFetchIsolated | Response }
func (m *FetchIsolatedResponse) encode(w *writer) {
	w.u32(m.Correlation)
	w.count(len(m.Topics))
	for _, t := range m.Topics {
		w.str(t.Name)
		w.count(len(t.Partitions))
		for _, p := range t.Partitions {
			w.u32(p.Partition)
			w.u16(uint16(p.Error))
			w.i64(p.HighWatermark)
			w.i64(p.LastStableOffset)
			w.i64(p.LogStartOffset)
			w.count(len(p.Aborted))
			for _, a := range p.Aborted {
				w.i64(a.ProducerID)
				w.i64(a.FirstOffset)
			}
			w.blob(p.Records)
		}
	}
}
func (m *FetchIsolatedResponse) decode(r *reader) {
	m.Correlation = r.u32("correlation id")
	m.Topics = make([]TopicFetchedIsolated, r.count("topics", 6))
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Name = r.str("topic")
		t.Partitions = make([]PartitionFetchedIsolated, r.count("partitions", 38))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.u32("partition")
			p.Error = ErrorCode(r.u16("error"))
			p.HighWatermark = r.i64("high watermark")
			p.LastStableOffset = r.i64("last stable offset")
			p.LogStartOffset = r.i64("log start offset")
			p.Aborted = make([]AbortedTxn, r.count("aborted transactions", 16))
			for k := range p.Aborted {
				p.Aborted[k].ProducerID = r.i64("producer id")
				p.Aborted[k].FirstOffset = r.i64("first offset")
			}
			p.Records = r.blob("records")
		}
	}
}
