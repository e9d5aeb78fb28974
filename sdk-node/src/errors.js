// The native protocol's error codes (docs/native-protocol.md section 6.3).

/** [code, name, retriable, meaning] of every code this SDK knows. */
export const ERROR_CODES = [
  [0, "NONE", false, "no error"],
  [1, "UNKNOWN_SERVER_ERROR", false, "the server failed in a way it could not classify"],
  [2, "UNSUPPORTED_VERSION", false, "no protocol version is spoken by both sides"],
  [3, "HELLO_REQUIRED", false, "the first frame of a connection must be a hello"],
  [4, "BAD_FRAME", false, "the frame header is wrong (magic, framing version)"],
  [5, "FRAME_TOO_LARGE", false, "the frame is longer than the server accepts"],
  [6, "INVALID_REQUEST", false, "the body could not be decoded or breaks a rule of the operation"],
  [7, "UNKNOWN_OPERATION", false, "the operation code is not one the server knows"],
  [8, "UNKNOWN_TOPIC", true, "no topic has this name (it may still be being created)"],
  [9, "UNKNOWN_PARTITION", false, "the topic has no partition with this index"],
  [10, "NOT_LEADER", true, "this server does not lead the partition; refresh metadata"],
  [11, "OFFSET_OUT_OF_RANGE", false, "the offset is below the log start or past the high watermark"],
  [12, "INVALID_RECORDS", false, "the record batch is malformed or fails its checksum"],
  [13, "RECORDS_TOO_LARGE", false, "the batch is larger than the topic's max.message.bytes"],
  [14, "NOT_ENOUGH_REPLICAS", true, "fewer in-sync replicas than min.insync.replicas; nothing was written"],
  [15, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true, "written by the leader, but too few replicas confirmed it"],
  [16, "TIMED_OUT", true, "the request's timeout passed before it completed"],
  [17, "TOPIC_ALREADY_EXISTS", false, "a topic with this name exists"],
  [18, "INVALID_TOPIC", false, "the topic name is not allowed"],
  [19, "INVALID_PARTITIONS", false, "the partition count is not allowed"],
  [20, "INVALID_REPLICATION_FACTOR", false, "the replication factor cannot be met"],
  [21, "INVALID_CONFIG", false, "a topic setting is unknown or has a bad value"],
  [22, "DUPLICATE_SEQUENCE", false, "the batch was written before; its first offset is returned"],
  [23, "OUT_OF_ORDER_SEQUENCE", false, "the producer's sequence number skips ahead"],
  [24, "PRODUCER_FENCED", false, "a newer epoch of this producer id exists"],
  [25, "UNKNOWN_PRODUCER", false, "the producer id is not known to the partition"],
  [26, "STORAGE_ERROR", true, "the partition's log is offline or its disk failed"],
  [27, "NOT_AVAILABLE", true, "the server is starting, shutting down or has no leader for this yet"],
  [28, "INVALID_GROUP", false, "the group id is empty or not allowed"],
  [29, "GROUP_BUSY", false, "the group has members managed by its coordinator; offsets are committed through membership"],
  [30, "UNAUTHORIZED", false, "the client is not allowed to do this"],
  [31, "INVALID_ACKS", false, "acks must be 0, 1 or -1"],
  [32, "NOT_COORDINATOR", true, "this server does not coordinate the group; find its coordinator again"],
  [33, "REBALANCE_IN_PROGRESS", false, "the group is rebalancing: give up the partitions and join again"],
  [34, "ILLEGAL_GENERATION", false, "the generation is not the group's current one: join again"],
  [35, "UNKNOWN_MEMBER", false, "the group has no member of this id (it left or its session expired): join again as a new member"],
  [36, "INCONSISTENT_GROUP_PROTOCOL", false, "the group's members are of another kind (Kafka consumers) or the request does not fit the group"],
  [37, "INVALID_SESSION_TIMEOUT", false, "the session timeout is outside the server's group.min.session.timeout.ms..group.max.session.timeout.ms"],
  [38, "GROUP_FULL", false, "the group has group.max.size members already"],
  [39, "DUPLICATE_SUBSCRIPTION", false, "the subscription id is already open on this connection"],
  [40, "TOO_MANY_SUBSCRIPTIONS", false, "the connection has as many subscriptions open as the server allows"],
  [41, "UNKNOWN_SUBSCRIPTION", false, "no subscription with this id is open on this connection"],
  [42, "AUTHENTICATION_FAILED", false, "the credentials were refused, or the mechanism is not enabled on the server"],
  [43, "AUTHENTICATION_REQUIRED", false, "the server serves nothing but authentication until the client authenticated"],
  [44, "SESSION_EXPIRED", true, "the authenticated session reached its lifetime: connect and authenticate again"],
  [45, "INVALID_TXN_STATE", false, "the request does not fit the transaction's state (no transaction open, a partition not added to it, or it is ending)"],
  [46, "CONCURRENT_TRANSACTIONS", true, "the transactional id's previous transaction is still being completed"],
  [47, "INVALID_TXN_TIMEOUT", false, "the transaction timeout is above the server's transaction.max.timeout.ms"],
];

const BY_CODE = new Map(ERROR_CODES.map(([code, name, retriable, meaning]) => [code, { code, name, retriable, meaning }]));

/** Error codes by name, e.g. ErrorCode.NOT_LEADER === 10. */
export const ErrorCode = Object.freeze(Object.fromEntries(ERROR_CODES.map(([code, name]) => [name, code])));

/** The name of a code; UNKNOWN_CODE_N for a code this SDK does not know. */
export function errorName(code) {
  return BY_CODE.get(code)?.name ?? `UNKNOWN_CODE_${code}`;
}

/** Whether the same request may succeed later; false for unknown codes. */
export function isRetriable(code) {
  return BY_CODE.get(code)?.retriable ?? false;
}

/**
 * An error the server answered (a code in a response or an error frame), or
 * that the client met. `code` is the protocol's code (0 when the error is
 * the client's own, e.g. a lost connection), `retriable` says whether trying
 * again may help.
 */
export class AeroStreamError extends Error {
  constructor(code, message, { retriable, cause } = {}) {
    const name = code ? errorName(code) : 'CLIENT_ERROR';
    super(message ? `${name}: ${message}` : `${name}: ${BY_CODE.get(code)?.meaning ?? 'unknown error code'}`, cause ? { cause } : undefined);
    this.name = 'AeroStreamError';
    this.code = code;
    this.codeName = name;
    this.retriable = retriable ?? isRetriable(code);
  }
}

/** A connection was lost or could not be made; requests on it have an unknown outcome. */
export class ConnectionError extends AeroStreamError {
  constructor(message, cause) {
    super(0, message, { retriable: true, cause });
    this.name = 'ConnectionError';
  }
}
