package proto

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Blob is a protocol `bytes` field: record batches, SASL messages. In JSON
// (the corpus's decoded form) it is lowercase hex.
type Blob []byte

func (b Blob) MarshalJSON() ([]byte, error) { return json.Marshal(hex.EncodeToString(b)) }

func (b *Blob) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	raw, err := hex.DecodeString(s)
	if err != nil {
		return err
	}
	*b = raw
	return nil
}

// Isolation is the isolation level of a FetchIsolated.
type Isolation uint8

const (
	ReadUncommitted Isolation = 0
	ReadCommitted   Isolation = 1
)

func (i Isolation) String() string {
	switch i {
	case ReadUncommitted:
		return "read_uncommitted"
	case ReadCommitted:
		return "read_committed"
	}
	return fmt.Sprintf("isolation(%d)", uint8(i))
}

func (i Isolation) MarshalJSON() ([]byte, error) { return json.Marshal(i.String()) }

func (i *Isolation) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	switch s {
	case "read_uncommitted":
		*i = ReadUncommitted
	case "read_committed":
		*i = ReadCommitted
	default:
		return fmt.Errorf("unknown isolation level %q", s)
	}
	return nil
}

// tuple decodes a JSON array into the given pointers, one per element.
func tuple(data []byte, into ...any) error {
	var parts []json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil {
		return err
	}
	if len(parts) != len(into) {
		return fmt.Errorf("expected an array of %d entries, got %d", len(into), len(parts))
	}
	for i, p := range parts {
		if err := json.Unmarshal(p, into[i]); err != nil {
			return err
		}
	}
	return nil
}

// The entries the corpus writes as arrays (the Rust SDK's tuples).

func (p ListOffsetsPartition) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{p.Topic, p.Partition, p.Spec})
}
func (p *ListOffsetsPartition) UnmarshalJSON(d []byte) error {
	return tuple(d, &p.Topic, &p.Partition, &p.Spec)
}

func (p TxnOffset) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{p.Topic, p.Partition, p.Offset})
}
func (p *TxnOffset) UnmarshalJSON(d []byte) error {
	return tuple(d, &p.Topic, &p.Partition, &p.Offset)
}

func (p CommitResult) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{p.Topic, p.Partition, p.Error})
}
func (p *CommitResult) UnmarshalJSON(d []byte) error {
	return tuple(d, &p.Topic, &p.Partition, &p.Error)
}

func (p TopicPartition) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{p.Topic, p.Partition})
}
func (p *TopicPartition) UnmarshalJSON(d []byte) error { return tuple(d, &p.Topic, &p.Partition) }

func (p FetchedOffset) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{p.CommittedOffset, p.Error})
}
func (p *FetchedOffset) UnmarshalJSON(d []byte) error {
	return tuple(d, &p.CommittedOffset, &p.Error)
}

func (c ConfigEntry) MarshalJSON() ([]byte, error)  { return json.Marshal([]any{c.Name, c.Value}) }
func (c *ConfigEntry) UnmarshalJSON(d []byte) error { return tuple(d, &c.Name, &c.Value) }

func (t TxnTopic) MarshalJSON() ([]byte, error) {
	ps := t.Partitions
	if ps == nil {
		ps = []uint32{}
	}
	return json.Marshal([]any{t.Topic, ps})
}
func (t *TxnTopic) UnmarshalJSON(d []byte) error { return tuple(d, &t.Topic, &t.Partitions) }
