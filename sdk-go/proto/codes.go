package proto

import "fmt"

// ErrorCode is a numeric error code of the protocol. Codes are stable; a
// client that meets a code it does not know treats it as not retriable.
type ErrorCode uint16

// The codes of docs/native-protocol.md section 6.3.
const (
	ErrNone                         ErrorCode = 0
	ErrUnknownServerError           ErrorCode = 1
	ErrUnsupportedVersion           ErrorCode = 2
	ErrHelloRequired                ErrorCode = 3
	ErrBadFrame                     ErrorCode = 4
	ErrFrameTooLarge                ErrorCode = 5
	ErrInvalidRequest               ErrorCode = 6
	ErrUnknownOperation             ErrorCode = 7
	ErrUnknownTopic                 ErrorCode = 8
	ErrUnknownPartition             ErrorCode = 9
	ErrNotLeader                    ErrorCode = 10
	ErrOffsetOutOfRange             ErrorCode = 11
	ErrInvalidRecords               ErrorCode = 12
	ErrRecordsTooLarge              ErrorCode = 13
	ErrNotEnoughReplicas            ErrorCode = 14
	ErrNotEnoughReplicasAfterAppend ErrorCode = 15
	ErrTimedOut                     ErrorCode = 16
	ErrTopicAlreadyExists           ErrorCode = 17
	ErrInvalidTopic                 ErrorCode = 18
	ErrInvalidPartitions            ErrorCode = 19
	ErrInvalidReplicationFactor     ErrorCode = 20
	ErrInvalidConfig                ErrorCode = 21
	ErrDuplicateSequence            ErrorCode = 22
	ErrOutOfOrderSequence           ErrorCode = 23
	ErrProducerFenced               ErrorCode = 24
	ErrUnknownProducer              ErrorCode = 25
	ErrStorageError                 ErrorCode = 26
	ErrNotAvailable                 ErrorCode = 27
	ErrInvalidGroup                 ErrorCode = 28
	ErrGroupBusy                    ErrorCode = 29
	ErrUnauthorized                 ErrorCode = 30
	ErrInvalidAcks                  ErrorCode = 31
	ErrNotCoordinator               ErrorCode = 32
	ErrRebalanceInProgress          ErrorCode = 33
	ErrIllegalGeneration            ErrorCode = 34
	ErrUnknownMember                ErrorCode = 35
	ErrInconsistentGroupProtocol    ErrorCode = 36
	ErrInvalidSessionTimeout        ErrorCode = 37
	ErrGroupFull                    ErrorCode = 38
	ErrDuplicateSubscription        ErrorCode = 39
	ErrTooManySubscriptions         ErrorCode = 40
	ErrUnknownSubscription          ErrorCode = 41
	ErrAuthenticationFailed         ErrorCode = 42
	ErrAuthenticationRequired       ErrorCode = 43
	ErrSessionExpired               ErrorCode = 44
	ErrInvalidTxnState              ErrorCode = 45
	ErrConcurrentTransactions       ErrorCode = 46
	ErrInvalidTxnTimeout            ErrorCode = 47
)

type codeInfo struct {
	name        string
	retriable   bool
	description string
}

var codeTable = map[ErrorCode]codeInfo{
	0:  {"NONE", false, "no error"},
	1:  {"UNKNOWN_SERVER_ERROR", false, "the server failed in a way it could not classify"},
	2:  {"UNSUPPORTED_VERSION", false, "no protocol version is spoken by both sides"},
	3:  {"HELLO_REQUIRED", false, "the first frame of a connection must be a hello"},
	4:  {"BAD_FRAME", false, "the frame header is wrong (magic, framing version)"},
	5:  {"FRAME_TOO_LARGE", false, "the frame is longer than the server accepts"},
	6:  {"INVALID_REQUEST", false, "the body could not be decoded or breaks a rule of the operation"},
	7:  {"UNKNOWN_OPERATION", false, "the operation code is not one the server knows"},
	8:  {"UNKNOWN_TOPIC", true, "no topic has this name (it may still be being created)"},
	9:  {"UNKNOWN_PARTITION", false, "the topic has no partition with this index"},
	10: {"NOT_LEADER", true, "this server does not lead the partition; refresh metadata"},
	11: {"OFFSET_OUT_OF_RANGE", false, "the offset is below the log start or past the high watermark"},
	12: {"INVALID_RECORDS", false, "the record batch is malformed or fails its checksum"},
	13: {"RECORDS_TOO_LARGE", false, "the batch is larger than the topic's max.message.bytes"},
	14: {"NOT_ENOUGH_REPLICAS", true, "fewer in-sync replicas than min.insync.replicas; nothing was written"},
	15: {"NOT_ENOUGH_REPLICAS_AFTER_APPEND", true, "written by the leader, but too few replicas confirmed it"},
	16: {"TIMED_OUT", true, "the request's timeout passed before it completed"},
	17: {"TOPIC_ALREADY_EXISTS", false, "a topic with this name exists"},
	18: {"INVALID_TOPIC", false, "the topic name is not allowed"},
	19: {"INVALID_PARTITIONS", false, "the partition count is not allowed"},
	20: {"INVALID_REPLICATION_FACTOR", false, "the replication factor cannot be met"},
	21: {"INVALID_CONFIG", false, "a topic setting is unknown or has a bad value"},
	22: {"DUPLICATE_SEQUENCE", false, "the batch was written before; its first offset is returned"},
	23: {"OUT_OF_ORDER_SEQUENCE", false, "the producer's sequence number skips ahead"},
	24: {"PRODUCER_FENCED", false, "a newer epoch of this producer id exists"},
	25: {"UNKNOWN_PRODUCER", false, "the producer id is not known to the partition"},
	26: {"STORAGE_ERROR", true, "the partition's log is offline or its disk failed"},
	27: {"NOT_AVAILABLE", true, "the server is starting, shutting down or has no leader for this yet"},
	28: {"INVALID_GROUP", false, "the group id is empty or not allowed"},
	29: {"GROUP_BUSY", false, "the group has members managed by its coordinator; offsets are committed through membership"},
	30: {"UNAUTHORIZED", false, "the client is not allowed to do this"},
	31: {"INVALID_ACKS", false, "acks must be 0, 1 or -1"},
	32: {"NOT_COORDINATOR", true, "this server does not coordinate the group; find its coordinator again"},
	33: {"REBALANCE_IN_PROGRESS", false, "the group is rebalancing: give up the partitions and join again"},
	34: {"ILLEGAL_GENERATION", false, "the generation is not the group's current one: join again"},
	35: {"UNKNOWN_MEMBER", false, "the group has no member of this id (it left or its session expired): join again as a new member"},
	36: {"INCONSISTENT_GROUP_PROTOCOL", false, "the group's members are of another kind (Kafka consumers) or the request does not fit the group"},
	37: {"INVALID_SESSION_TIMEOUT", false, "the session timeout is outside the server's group.min.session.timeout.ms..group.max.session.timeout.ms"},
	38: {"GROUP_FULL", false, "the group has group.max.size members already"},
	39: {"DUPLICATE_SUBSCRIPTION", false, "the subscription id is already open on this connection"},
	40: {"TOO_MANY_SUBSCRIPTIONS", false, "the connection has as many subscriptions open as the server allows"},
	41: {"UNKNOWN_SUBSCRIPTION", false, "no subscription with this id is open on this connection"},
	42: {"AUTHENTICATION_FAILED", false, "the credentials were refused, or the mechanism is not enabled on the server"},
	43: {"AUTHENTICATION_REQUIRED", false, "the server serves nothing but authentication until the client authenticated"},
	44: {"SESSION_EXPIRED", true, "the authenticated session reached its lifetime: connect and authenticate again"},
	45: {"INVALID_TXN_STATE", false, "the request does not fit the transaction's state (no transaction open, a partition not added to it, or it is ending)"},
	46: {"CONCURRENT_TRANSACTIONS", true, "the transactional id's previous transaction is still being completed"},
	47: {"INVALID_TXN_TIMEOUT", false, "the transaction timeout is above the server's transaction.max.timeout.ms"},
}

// Name is the code's name as the protocol document spells it.
func (c ErrorCode) Name() string {
	if i, ok := codeTable[c]; ok {
		return i.name
	}
	return "UNKNOWN_CODE"
}

// Retriable says whether the same request may succeed if sent again later.
func (c ErrorCode) Retriable() bool { return codeTable[c].retriable }

// Description says what the code means.
func (c ErrorCode) Description() string {
	if i, ok := codeTable[c]; ok {
		return i.description
	}
	return "an error this client does not know"
}

func (c ErrorCode) String() string { return fmt.Sprintf("%s (%d)", c.Name(), uint16(c)) }

// KnownErrorCodes lists every code this client knows, in numeric order.
func KnownErrorCodes() []ErrorCode {
	out := make([]ErrorCode, 0, len(codeTable))
	for c := ErrorCode(0); int(c) < 0x10000 && len(out) < len(codeTable); c++ {
		if _, ok := codeTable[c]; ok {
			out = append(out, c)
		}
	}
	return out
}
