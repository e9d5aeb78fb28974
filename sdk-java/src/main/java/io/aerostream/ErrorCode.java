package io.aerostream;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The native protocol's error codes (docs/native-protocol.md section 6.3).
 * A code this client does not know is not retriable.
 */
public record ErrorCode(int code, String name, boolean retriable, String description) {
    public static final int NONE = 0;
    public static final int UNKNOWN_TOPIC = 8;
    public static final int UNKNOWN_PARTITION = 9;
    public static final int NOT_LEADER = 10;
    public static final int OFFSET_OUT_OF_RANGE = 11;
    public static final int TOPIC_ALREADY_EXISTS = 17;
    public static final int DUPLICATE_SEQUENCE = 22;
    public static final int NOT_AVAILABLE = 27;
    public static final int NOT_COORDINATOR = 32;
    public static final int REBALANCE_IN_PROGRESS = 33;
    public static final int ILLEGAL_GENERATION = 34;
    public static final int UNKNOWN_MEMBER = 35;
    public static final int AUTHENTICATION_FAILED = 42;
    public static final int AUTHENTICATION_REQUIRED = 43;
    public static final int SESSION_EXPIRED = 44;
    public static final int CONCURRENT_TRANSACTIONS = 46;

    private static final List<ErrorCode> ALL = List.of(
        new ErrorCode(0, "NONE", false, "no error"),
        new ErrorCode(1, "UNKNOWN_SERVER_ERROR", false, "the server failed in a way it could not classify"),
        new ErrorCode(2, "UNSUPPORTED_VERSION", false, "no protocol version is spoken by both sides"),
        new ErrorCode(3, "HELLO_REQUIRED", false, "the first frame of a connection must be a hello"),
        new ErrorCode(4, "BAD_FRAME", false, "the frame header is wrong (magic, framing version)"),
        new ErrorCode(5, "FRAME_TOO_LARGE", false, "the frame is longer than the server accepts"),
        new ErrorCode(6, "INVALID_REQUEST", false, "the body could not be decoded or breaks a rule of the operation"),
        new ErrorCode(7, "UNKNOWN_OPERATION", false, "the operation code is not one the server knows"),
        new ErrorCode(8, "UNKNOWN_TOPIC", true, "no topic has this name (it may still be being created)"),
        new ErrorCode(9, "UNKNOWN_PARTITION", false, "the topic has no partition with this index"),
        new ErrorCode(10, "NOT_LEADER", true, "this server does not lead the partition; refresh metadata"),
        new ErrorCode(11, "OFFSET_OUT_OF_RANGE", false, "the offset is below the log start or past the high watermark"),
        new ErrorCode(12, "INVALID_RECORDS", false, "the record batch is malformed or fails its checksum"),
        new ErrorCode(13, "RECORDS_TOO_LARGE", false, "the batch is larger than the topic's max.message.bytes"),
        new ErrorCode(14, "NOT_ENOUGH_REPLICAS", true, "fewer in-sync replicas than min.insync.replicas; nothing was written"),
        new ErrorCode(15, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true, "written by the leader, but too few replicas confirmed it"),
        new ErrorCode(16, "TIMED_OUT", true, "the request's timeout passed before it completed"),
        new ErrorCode(17, "TOPIC_ALREADY_EXISTS", false, "a topic with this name exists"),
        new ErrorCode(18, "INVALID_TOPIC", false, "the topic name is not allowed"),
        new ErrorCode(19, "INVALID_PARTITIONS", false, "the partition count is not allowed"),
        new ErrorCode(20, "INVALID_REPLICATION_FACTOR", false, "the replication factor cannot be met"),
        new ErrorCode(21, "INVALID_CONFIG", false, "a topic setting is unknown or has a bad value"),
        new ErrorCode(22, "DUPLICATE_SEQUENCE", false, "the batch was written before; its first offset is returned"),
        new ErrorCode(23, "OUT_OF_ORDER_SEQUENCE", false, "the producer's sequence number skips ahead"),
        new ErrorCode(24, "PRODUCER_FENCED", false, "a newer epoch of this producer id exists"),
        new ErrorCode(25, "UNKNOWN_PRODUCER", false, "the producer id is not known to the partition"),
        new ErrorCode(26, "STORAGE_ERROR", true, "the partition's log is offline or its disk failed"),
        new ErrorCode(27, "NOT_AVAILABLE", true, "the server is starting, shutting down or has no leader for this yet"),
        new ErrorCode(28, "INVALID_GROUP", false, "the group id is empty or not allowed"),
        new ErrorCode(29, "GROUP_BUSY", false, "the group has members managed by its coordinator; offsets are committed through membership"),
        new ErrorCode(30, "UNAUTHORIZED", false, "the client is not allowed to do this"),
        new ErrorCode(31, "INVALID_ACKS", false, "acks must be 0, 1 or -1"),
        new ErrorCode(32, "NOT_COORDINATOR", true, "this server does not coordinate the group; find its coordinator again"),
        new ErrorCode(33, "REBALANCE_IN_PROGRESS", false, "the group is rebalancing: give up the partitions and join again"),
        new ErrorCode(34, "ILLEGAL_GENERATION", false, "the generation is not the group's current one: join again"),
        new ErrorCode(35, "UNKNOWN_MEMBER", false, "the group has no member of this id (it left or its session expired): join again as a new member"),
        new ErrorCode(36, "INCONSISTENT_GROUP_PROTOCOL", false, "the group's members are of another kind (Kafka consumers) or the request does not fit the group"),
        new ErrorCode(37, "INVALID_SESSION_TIMEOUT", false, "the session timeout is outside the server's group.min.session.timeout.ms..group.max.session.timeout.ms"),
        new ErrorCode(38, "GROUP_FULL", false, "the group has group.max.size members already"),
        new ErrorCode(39, "DUPLICATE_SUBSCRIPTION", false, "the subscription id is already open on this connection"),
        new ErrorCode(40, "TOO_MANY_SUBSCRIPTIONS", false, "the connection has as many subscriptions open as the server allows"),
        new ErrorCode(41, "UNKNOWN_SUBSCRIPTION", false, "no subscription with this id is open on this connection"),
        new ErrorCode(42, "AUTHENTICATION_FAILED", false, "the credentials were refused, or the mechanism is not enabled on the server"),
        new ErrorCode(43, "AUTHENTICATION_REQUIRED", false, "the server serves nothing but authentication until the client authenticated"),
        new ErrorCode(44, "SESSION_EXPIRED", true, "the authenticated session reached its lifetime: connect and authenticate again"),
        new ErrorCode(45, "INVALID_TXN_STATE", false, "the request does not fit the transaction's state (no transaction open, a partition not added to it, or it is ending)"),
        new ErrorCode(46, "CONCURRENT_TRANSACTIONS", true, "the transactional id's previous transaction is still being completed"),
        new ErrorCode(47, "INVALID_TXN_TIMEOUT", false, "the transaction timeout is above the server's transaction.max.timeout.ms")
    );
    private static final Map<Integer, ErrorCode> BY_CODE = new HashMap<>();

    static {
        for (ErrorCode c : ALL) {
            BY_CODE.put(c.code, c);
        }
    }

    /** Every code this client knows. */
    public static List<ErrorCode> all() {
        return ALL;
    }

    /** The code's entry; an unknown code is named UNKNOWN_CODE_n and not retriable. */
    public static ErrorCode of(int code) {
        ErrorCode c = BY_CODE.get(code);
        return c != null ? c : new ErrorCode(code, "UNKNOWN_CODE_" + code, false, "a code this client does not know");
    }

    public static boolean isRetriable(int code) {
        return of(code).retriable;
    }
}
