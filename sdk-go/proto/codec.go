package proto

import (
	"encoding/binary"
	"reflect"
)

// messages maps every operation code of the protocol (requests,
// responses, the push and the error frame) to a constructor.
var messages = map[byte]func() Message{}

// names maps each message to its name in the conformance corpus.
var names = map[byte]string{}

func register(name string, mk func() Message) {
	op := mk().Op()
	messages[op] = mk
	names[op] = name
}

func init() {
	register("Hello", func() Message { return &Hello{} })
	register("HelloResponse", func() Message { return &HelloResponse{} })
	register("Authenticate", func() Message { return &Authenticate{} })
	register("AuthenticateResponse", func() Message { return &AuthenticateResponse{} })
	register("Ping", func() Message { return &Ping{} })
	register("Pong", func() Message { return &Pong{} })
	register("ErrorFrame", func() Message { return &ErrorFrame{} })
	register("Metadata", func() Message { return &Metadata{} })
	register("MetadataResponse", func() Message { return &MetadataResponse{} })
	register("CreateTopic", func() Message { return &CreateTopic{} })
	register("CreateTopicResponse", func() Message { return &CreateTopicResponse{} })
	register("DeleteTopic", func() Message { return &DeleteTopic{} })
	register("DeleteTopicResponse", func() Message { return &DeleteTopicResponse{} })
	register("InitProducer", func() Message { return &InitProducer{} })
	register("InitProducerResponse", func() Message { return &InitProducerResponse{} })
	register("Produce", func() Message { return &Produce{} })
	register("ProduceResponse", func() Message { return &ProduceResponse{} })
	register("Fetch", func() Message { return &Fetch{} })
	register("FetchResponse", func() Message { return &FetchResponse{} })
	register("ListOffsets", func() Message { return &ListOffsets{} })
	register("ListOffsetsResponse", func() Message { return &ListOffsetsResponse{} })
	register("CommitOffsets", func() Message { return &CommitOffsets{} })
	register("CommitOffsetsResponse", func() Message { return &CommitOffsetsResponse{} })
	register("FetchOffsets", func() Message { return &FetchOffsets{} })
	register("FetchOffsetsResponse", func() Message { return &FetchOffsetsResponse{} })
	register("Subscribe", func() Message { return &Subscribe{} })
	register("SubscribeResponse", func() Message { return &SubscribeResponse{} })
	register("Push", func() Message { return &Push{} })
	register("Credit", func() Message { return &Credit{} })
	register("Unsubscribe", func() Message { return &Unsubscribe{} })
	register("UnsubscribeResponse", func() Message { return &UnsubscribeResponse{} })
	register("FindCoordinator", func() Message { return &FindCoordinator{} })
	register("FindCoordinatorResponse", func() Message { return &FindCoordinatorResponse{} })
	register("JoinGroup", func() Message { return &JoinGroup{} })
	register("JoinGroupResponse", func() Message { return &JoinGroupResponse{} })
	register("Heartbeat", func() Message { return &Heartbeat{} })
	register("HeartbeatResponse", func() Message { return &HeartbeatResponse{} })
	register("LeaveGroup", func() Message { return &LeaveGroup{} })
	register("LeaveGroupResponse", func() Message { return &LeaveGroupResponse{} })
	register("FindTxnCoordinator", func() Message { return &FindTxnCoordinator{} })
	register("FindTxnCoordinatorResponse", func() Message { return &FindTxnCoordinatorResponse{} })
	register("InitTxn", func() Message { return &InitTxn{} })
	register("InitTxnResponse", func() Message { return &InitTxnResponse{} })
	register("AddTxnPartitions", func() Message { return &AddTxnPartitions{} })
	register("AddTxnPartitionsResponse", func() Message { return &AddTxnPartitionsResponse{} })
	register("AddTxnOffsets", func() Message { return &AddTxnOffsets{} })
	register("AddTxnOffsetsResponse", func() Message { return &AddTxnOffsetsResponse{} })
	register("TxnOffsetCommit", func() Message { return &TxnOffsetCommit{} })
	register("TxnOffsetCommitResponse", func() Message { return &TxnOffsetCommitResponse{} })
	register("EndTxn", func() Message { return &EndTxn{} })
	register("EndTxnResponse", func() Message { return &EndTxnResponse{} })
	register("TxnProduce", func() Message { return &TxnProduce{} })
	register("TxnProduceResponse", func() Message { return &TxnProduceResponse{} })
	register("FetchIsolated", func() Message { return &FetchIsolated{} })
	register("FetchIsolatedResponse", func() Message { return &FetchIsolatedResponse{} })
}

// NewMessage gives an empty message of an operation code, or nil for a
// code the protocol does not define.
func NewMessage(op byte) Message {
	if mk, ok := messages[op]; ok {
		return mk()
	}
	return nil
}

// NewMessageNamed gives an empty message by its name in the corpus.
func NewMessageNamed(name string) Message {
	for op, n := range names {
		if n == name {
			return messages[op]()
		}
	}
	return nil
}

// MessageName is a message's name in the conformance corpus.
func MessageName(m Message) string { return names[m.Op()] }

// Ops lists every operation code the codec knows.
func Ops() []byte {
	out := make([]byte, 0, len(messages))
	for op := range messages {
		out = append(out, op)
	}
	return out
}

// AppendFrame appends m's whole frame (header and body) to dst.
func AppendFrame(dst []byte, m Message) []byte {
	start := len(dst)
	w := writer{b: append(dst, make([]byte, HeaderLen)...)}
	m.encode(&w)
	h := EncodeHeader(Header{Op: m.Op(), Len: uint32(len(w.b) - start - HeaderLen)})
	copy(w.b[start:], h[:])
	return w.b
}

// Encode gives m's whole frame.
func Encode(m Message) []byte { return AppendFrame(nil, m) }

// DecodeBody decodes a body of the given operation code. Every byte must
// belong to the message.
func DecodeBody(op byte, body []byte) (Message, error) {
	m := NewMessage(op)
	if m == nil {
		return nil, refuse(ClassUnknownOp, "operation %#02x is not one this client knows", op)
	}
	r := reader{b: body}
	m.decode(&r)
	if err := r.finish(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeFrame decodes buf as exactly one frame: its header (refusing a
// body over maxBody), a body of the announced length, and the message.
func DecodeFrame(buf []byte, maxBody uint32) (Message, error) {
	h, err := DecodeHeader(buf, maxBody)
	if err != nil {
		return nil, err
	}
	body := buf[HeaderLen:]
	if uint64(len(body)) < uint64(h.Len) {
		return nil, refuse(ClassTruncated, "the input ended %d bytes into a body of %d", len(body), h.Len)
	}
	if uint64(len(body)) > uint64(h.Len) {
		return nil, refuse(ClassTrailing, "%d bytes follow the frame", uint64(len(body))-uint64(h.Len))
	}
	return DecodeBody(h.Op, body)
}

// CorrelationOf reads the correlation id at the start of a body.
func CorrelationOf(body []byte) (uint32, bool) {
	if len(body) < 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(body), true
}

// Correlation gives a message's correlation id; false for the push and
// the credit, which carry a subscription id instead.
func Correlation(m Message) (uint32, bool) {
	switch m.(type) {
	case *Push, *Credit:
		return 0, false
	case *TxnProduce:
		return m.(*TxnProduce).Produce.Correlation, true
	}
	v := reflect.ValueOf(m).Elem().FieldByName("Correlation")
	if !v.IsValid() {
		return 0, false
	}
	return uint32(v.Uint()), true
}

// SetCorrelation sets a request's correlation id (a no-op for the
// credit, which has none).
func SetCorrelation(m Message, id uint32) {
	if tp, ok := m.(*TxnProduce); ok {
		tp.Produce.Correlation = id
		return
	}
	v := reflect.ValueOf(m).Elem().FieldByName("Correlation")
	if v.IsValid() && v.CanSet() {
		v.SetUint(uint64(id))
	}
}
