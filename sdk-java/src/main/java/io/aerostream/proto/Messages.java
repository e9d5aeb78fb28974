package io.aerostream.proto;

import static io.aerostream.proto.Field.Kind.*;

import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Every message layout of protocol version 1 (docs/native-protocol.md
 * section 7): requests, responses, the push, the credit and the error
 * frame, with the names the conformance corpus gives them.
 */
public final class Messages {
    private static final Map<Integer, MessageType> BY_OP = new LinkedHashMap<>();
    private static final Map<String, MessageType> BY_NAME = new LinkedHashMap<>();

    private Messages() {}

    static Field f(String name, Field.Kind kind) {
        return new Field(name, kind, Field.Shape.OBJECT);
    }

    static Field array(String name, Field... children) {
        return new Field(name, ARRAY, Field.Shape.OBJECT, children);
    }

    static Field tuples(String name, Field... children) {
        return new Field(name, ARRAY, Field.Shape.TUPLE, children);
    }

    static Field struct(String name, Field... children) {
        return new Field(name, STRUCT, Field.Shape.OBJECT, children);
    }

    private static MessageType def(String name, int op, Field... fields) {
        MessageType t = new MessageType(name, op, fields);
        BY_OP.put(op, t);
        BY_NAME.put(name, t);
        return t;
    }

    private static final Field CORR = f("correlation", U32);
    private static final Field ERROR = f("error", U16);

    private static Field[] fetchTopics() {
        return new Field[] {array("topics", f("name", STR),
                array("partitions", f("partition", U32), f("offset", I64), f("max_bytes", U32)))};
    }

    private static Field[] produceFields() {
        return new Field[] {f("acks", I8), f("timeout_ms", U32),
                array("topics", f("name", STR), array("partitions", f("partition", U32), f("batch", BYTES)))};
    }

    private static Field[] produced() {
        return new Field[] {CORR, array("topics", f("name", STR), array("partitions",
                f("partition", U32), ERROR, f("base_offset", I64), f("log_append_time_ms", I64),
                f("log_start_offset", I64), f("message", STR)))};
    }

    private static Field txnProducer() {
        return struct("producer", f("transactional_id", STR), f("producer_id", I64), f("producer_epoch", I16));
    }

    private static Field[] coordinator() {
        return new Field[] {CORR, ERROR, f("node_id", U32), f("host", STR), f("port", U16)};
    }

    private static Field[] errorMessage() {
        return new Field[] {CORR, ERROR, f("message", STR)};
    }

    private static Field[] concat(Field[] a, Field... b) {
        Field[] out = new Field[a.length + b.length];
        System.arraycopy(a, 0, out, 0, a.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    // --- connection ---
    public static final MessageType HELLO = def("Hello", 0x01, CORR, f("min_version", U16), f("max_version", U16),
            f("client_id", STR), f("auth_mechanism", STR), f("auth_bytes", BYTES));
    public static final MessageType HELLO_RESPONSE = def("HelloResponse", 0x81, CORR, ERROR, f("version", U16),
            f("node_id", U32), f("max_frame_bytes", U32), f("server", STR));
    public static final MessageType AUTHENTICATE = def("Authenticate", 0x14, CORR, f("mechanism", STR),
            f("auth_bytes", BYTES));
    public static final MessageType AUTHENTICATE_RESPONSE = def("AuthenticateResponse", 0x94, CORR, ERROR,
            f("auth_bytes", BYTES), f("complete", BOOL), f("session_lifetime_ms", U64));
    public static final MessageType PING = def("Ping", 0x02, CORR, f("nonce", U64));
    public static final MessageType PONG = def("Pong", 0x82, CORR, f("nonce", U64));
    public static final MessageType ERROR_FRAME = def("ErrorFrame", 0x7F, CORR, ERROR, f("message", STR));

    // --- metadata and topics ---
    public static final MessageType METADATA = def("Metadata", 0x03, CORR, f("topics", STRS));
    public static final MessageType METADATA_RESPONSE = def("MetadataResponse", 0x83, CORR,
            array("nodes", f("id", U32), f("host", STR), f("port", U16), f("rack", STR)),
            array("topics", f("name", STR), ERROR, array("partitions", f("index", U32), f("leader", I32),
                    f("leader_epoch", I32), f("replicas", IDS), f("in_sync", IDS))));
    public static final MessageType CREATE_TOPIC = def("CreateTopic", 0x04, CORR, f("name", STR),
            f("partitions", I32), f("replication_factor", I16), tuples("configs", f("name", STR), f("value", STR)));
    public static final MessageType CREATE_TOPIC_RESPONSE = def("CreateTopicResponse", 0x84, errorMessage());
    public static final MessageType DELETE_TOPIC = def("DeleteTopic", 0x05, CORR, f("name", STR));
    public static final MessageType DELETE_TOPIC_RESPONSE = def("DeleteTopicResponse", 0x85, errorMessage());

    // --- produce ---
    public static final MessageType INIT_PRODUCER = def("InitProducer", 0x06, CORR);
    public static final MessageType INIT_PRODUCER_RESPONSE = def("InitProducerResponse", 0x86, CORR, ERROR,
            f("producer_id", I64), f("producer_epoch", I16));
    public static final MessageType PRODUCE = def("Produce", 0x07, concat(new Field[] {CORR}, produceFields()));
    public static final MessageType PRODUCE_RESPONSE = def("ProduceResponse", 0x87, produced());

    // --- fetch and offsets ---
    public static final MessageType FETCH = def("Fetch", 0x08, concat(new Field[] {CORR, f("max_wait_ms", U32),
            f("min_bytes", U32), f("max_bytes", U32)}, fetchTopics()));
    public static final MessageType FETCH_RESPONSE = def("FetchResponse", 0x88, CORR, array("topics",
            f("name", STR), array("partitions", f("partition", U32), ERROR, f("high_watermark", I64),
                    f("log_start_offset", I64), f("records", BYTES))));
    public static final MessageType LIST_OFFSETS = def("ListOffsets", 0x09, CORR,
            tuples("partitions", f("topic", STR), f("partition", U32), f("spec", I64)));
    public static final MessageType LIST_OFFSETS_RESPONSE = def("ListOffsetsResponse", 0x89, CORR,
            array("partitions", f("topic", STR), f("partition", U32), ERROR, f("offset", I64), f("timestamp", I64)));

    // --- group offsets and membership ---
    public static final MessageType COMMIT_OFFSETS = def("CommitOffsets", 0x0A, CORR, f("group", STR),
            array("offsets", f("topic", STR), f("partition", U32), f("offset", I64), f("metadata", STR)),
            f("generation", I32), f("member_id", STR));
    public static final MessageType COMMIT_OFFSETS_RESPONSE = def("CommitOffsetsResponse", 0x8A, CORR,
            tuples("partitions", f("topic", STR), f("partition", U32), ERROR));
    public static final MessageType FETCH_OFFSETS = def("FetchOffsets", 0x0B, CORR, f("group", STR),
            tuples("partitions", f("topic", STR), f("partition", U32)));
    public static final MessageType FETCH_OFFSETS_RESPONSE = def("FetchOffsetsResponse", 0x8B, CORR,
            new Field("offsets", ARRAY, Field.Shape.FETCHED_OFFSET, f("topic", STR), f("partition", U32), ERROR,
                    f("offset", I64), f("metadata", STR)));
    public static final MessageType FIND_COORDINATOR = def("FindCoordinator", 0x10, CORR, f("group", STR));
    public static final MessageType FIND_COORDINATOR_RESPONSE = def("FindCoordinatorResponse", 0x90, coordinator());
    public static final MessageType JOIN_GROUP = def("JoinGroup", 0x11, CORR, f("group", STR), f("member_id", STR),
            f("topics", STRS), f("session_timeout_ms", U32), f("rebalance_timeout_ms", U32));
    public static final MessageType JOIN_GROUP_RESPONSE = def("JoinGroupResponse", 0x91, CORR, ERROR,
            f("generation", I32), f("member_id", STR), array("assignment", f("topic", STR), f("partitions", IDS)));
    public static final MessageType HEARTBEAT = def("Heartbeat", 0x12, CORR, f("group", STR), f("member_id", STR),
            f("generation", I32));
    public static final MessageType HEARTBEAT_RESPONSE = def("HeartbeatResponse", 0x92, CORR, ERROR);
    public static final MessageType LEAVE_GROUP = def("LeaveGroup", 0x13, CORR, f("group", STR), f("member_id", STR));
    public static final MessageType LEAVE_GROUP_RESPONSE = def("LeaveGroupResponse", 0x93, CORR, ERROR);

    // --- subscriptions ---
    public static final MessageType SUBSCRIBE = def("Subscribe", 0x0C, CORR, f("subscription", U32),
            f("topic", STR), f("partition", U32), f("start_kind", U8), f("start_value", I64), f("credit", U32));
    public static final MessageType SUBSCRIBE_RESPONSE = def("SubscribeResponse", 0x8C, CORR, ERROR,
            f("subscription", U32), f("offset", I64), f("high_watermark", I64), f("message", STR));
    public static final MessageType PUSH = def("Push", 0x8D, f("subscription", U32), ERROR,
            f("high_watermark", I64), f("log_start_offset", I64), f("next_offset", I64), f("records", BYTES));
    public static final MessageType CREDIT = def("Credit", 0x0E, f("subscription", U32), f("bytes", U32));
    public static final MessageType UNSUBSCRIBE = def("Unsubscribe", 0x0F, CORR, f("subscription", U32));
    public static final MessageType UNSUBSCRIBE_RESPONSE = def("UnsubscribeResponse", 0x8F, CORR, ERROR);

    // --- transactions ---
    public static final MessageType FIND_TXN_COORDINATOR = def("FindTxnCoordinator", 0x15, CORR,
            f("transactional_id", STR));
    public static final MessageType FIND_TXN_COORDINATOR_RESPONSE = def("FindTxnCoordinatorResponse", 0x95,
            coordinator());
    public static final MessageType INIT_TXN = def("InitTxn", 0x16, CORR, f("transactional_id", STR),
            f("timeout_ms", U32));
    public static final MessageType INIT_TXN_RESPONSE = def("InitTxnResponse", 0x96, CORR, ERROR,
            f("producer_id", I64), f("producer_epoch", I16), f("message", STR));
    public static final MessageType ADD_TXN_PARTITIONS = def("AddTxnPartitions", 0x17, CORR, txnProducer(),
            tuples("topics", f("topic", STR), f("partitions", IDS)));
    public static final MessageType ADD_TXN_PARTITIONS_RESPONSE = def("AddTxnPartitionsResponse", 0x97,
            errorMessage());
    public static final MessageType ADD_TXN_OFFSETS = def("AddTxnOffsets", 0x18, CORR, txnProducer(),
            f("group", STR));
    public static final MessageType ADD_TXN_OFFSETS_RESPONSE = def("AddTxnOffsetsResponse", 0x98, errorMessage());
    public static final MessageType TXN_OFFSET_COMMIT = def("TxnOffsetCommit", 0x19, CORR, txnProducer(),
            f("group", STR), f("generation", I32), f("member_id", STR),
            tuples("offsets", f("topic", STR), f("partition", U32), f("offset", I64)));
    public static final MessageType TXN_OFFSET_COMMIT_RESPONSE = def("TxnOffsetCommitResponse", 0x99,
            errorMessage());
    public static final MessageType END_TXN = def("EndTxn", 0x1A, CORR, txnProducer(), f("commit", STRICT_BOOL));
    public static final MessageType END_TXN_RESPONSE = def("EndTxnResponse", 0x9A, errorMessage());
    /** A Produce of transactional batches; the transactional id follows the correlation id. */
    public static final MessageType TXN_PRODUCE = def("TxnProduce", 0x1B,
            concat(new Field[] {CORR, f("transactional_id", STR)}, produceFields()));
    public static final MessageType TXN_PRODUCE_RESPONSE = def("TxnProduceResponse", 0x9B, produced());
    public static final MessageType FETCH_ISOLATED = def("FetchIsolated", 0x1C, concat(new Field[] {CORR,
            f("isolation", ISOLATION), f("max_wait_ms", U32), f("min_bytes", U32), f("max_bytes", U32)},
            fetchTopics()));
    public static final MessageType FETCH_ISOLATED_RESPONSE = def("FetchIsolatedResponse", 0x9C, CORR,
            array("topics", f("name", STR), array("partitions", f("partition", U32), ERROR,
                    f("high_watermark", I64), f("last_stable_offset", I64), f("log_start_offset", I64),
                    array("aborted", f("producer_id", I64), f("first_offset", I64)), f("records", BYTES))));

    /** Isolation levels of FetchIsolated. */
    public static final int READ_UNCOMMITTED = 0;
    public static final int READ_COMMITTED = 1;

    /** ListOffsets specs: a timestamp (ms) or one of these. */
    public static final long SPEC_EARLIEST = -2;
    public static final long SPEC_LATEST = -1;

    public static MessageType byOp(int op) {
        return BY_OP.get(op);
    }

    public static MessageType byName(String name) {
        return BY_NAME.get(name);
    }

    public static Collection<MessageType> all() {
        return Collections.unmodifiableCollection(BY_OP.values());
    }
}
