//! Operation codes. A response uses its request's code with [`RESPONSE`] set.

pub const HELLO: u8 = 0x01;
pub const PING: u8 = 0x02;
pub const METADATA: u8 = 0x03;
pub const CREATE_TOPIC: u8 = 0x04;
pub const DELETE_TOPIC: u8 = 0x05;
pub const INIT_PRODUCER: u8 = 0x06;
pub const PRODUCE: u8 = 0x07;
pub const FETCH: u8 = 0x08;
pub const LIST_OFFSETS: u8 = 0x09;
pub const COMMIT_OFFSETS: u8 = 0x0A;
pub const FETCH_OFFSETS: u8 = 0x0B;
/// Opens a subscription: the server pushes a partition's new batches.
pub const SUBSCRIBE: u8 = 0x0C;
/// A subscription's records, sent by the server unasked (always with
/// [`RESPONSE`] set: `0x8D`).
pub const PUSH: u8 = 0x0D;
/// Grants a subscription more bytes; never answered.
pub const CREDIT: u8 = 0x0E;
/// Ends a subscription.
pub const UNSUBSCRIBE: u8 = 0x0F;
pub const FIND_COORDINATOR: u8 = 0x10;
pub const JOIN_GROUP: u8 = 0x11;
pub const HEARTBEAT: u8 = 0x12;
pub const LEAVE_GROUP: u8 = 0x13;
/// One message of a SASL exchange (SCRAM, PLAIN, OAUTHBEARER), after
/// the hello, on a server that requires authentication.
pub const AUTHENTICATE: u8 = 0x14;
/// Finds the server coordinating a transactional id.
pub const FIND_TXN_COORDINATOR: u8 = 0x15;
/// A transactional producer's id and epoch (fencing older epochs).
pub const INIT_TXN: u8 = 0x16;
/// Adds partitions to a transaction.
pub const ADD_TXN_PARTITIONS: u8 = 0x17;
/// Adds a group's offsets to a transaction (to the transaction's
/// coordinator).
pub const ADD_TXN_OFFSETS: u8 = 0x18;
/// Commits a group's offsets within a transaction (to the group's
/// coordinator).
pub const TXN_OFFSET_COMMIT: u8 = 0x19;
/// Commits or aborts a transaction.
pub const END_TXN: u8 = 0x1A;
/// A produce of transactional batches.
pub const TXN_PRODUCE: u8 = 0x1B;
/// A fetch with an isolation level (read_committed).
pub const FETCH_ISOLATED: u8 = 0x1C;
/// Sent by the server, unasked, right before it closes a connection it
/// cannot go on serving (bad frame, failed hello).
pub const ERROR: u8 = 0x7F;
/// Set on a response's operation code.
pub const RESPONSE: u8 = 0x80;
