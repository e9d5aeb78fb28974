"""ConsumerGroupHeartbeat (KIP-848) frames written by hand, to pin down which
request shapes the agent takes as a (re)join and which it refuses as
malformed (INVALID_REQUEST, which a client treats as fatal).

librdkafka 2.12, unsubscribed while its application's rebalance callback
was due, leaves the group from its steady state; the leave's answer sets
its member epoch back to 0 but not its state, so when it is subscribed
again it sends the new topics in an incremental heartbeat: epoch 0, no
rebalance timeout (-1), no owned partitions (null), an empty pattern beside
the names. librdkafka's own 0045_subscribe_many_updates met this now and
then and failed with a fatal "Invalid request"; here it is every time.
"""

import socket
import struct
import uuid

INVALID_REQUEST = 42


def _uvarint(n):
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([low])
        out += bytes([low | 0x80])


def _string(s):
    """A compact nullable string."""
    if s is None:
        return _uvarint(0)
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _array(items, encode):
    """A compact nullable array."""
    if items is None:
        return _uvarint(0)
    return _uvarint(len(items) + 1) + b"".join(encode(i) for i in items)


def _read_string(b, off):
    """A compact nullable string at `off`: (it, the offset after it)."""
    n, shift = 0, 0
    while True:
        byte = b[off]
        off += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    if n == 0:
        return None, off
    return b[off:off + n - 1].decode(), off + n - 1


def _recv_exact(sock, n):
    b = b""
    while len(b) < n:
        chunk = sock.recv(n - len(b))
        if not chunk:
            raise EOFError("the agent closed the connection")
        b += chunk
    return b


class Heartbeats:
    """One connection sending ConsumerGroupHeartbeat v1 (the version
    librdkafka sends). Each call answers (error code, message, member
    epoch, whether an assignment came)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation = 0

    def close(self):
        self.sock.close()

    def __call__(self, group, member, epoch, *, instance=None, rack=None, timeout=-1,
                 names=None, regex=None, assignor=None, owned=None):
        self.correlation += 1
        body = (_string(group) + _string(member) + struct.pack(">i", epoch)
                + _string(instance) + _string(rack) + struct.pack(">i", timeout)
                + _array(names, _string) + _string(regex) + _string(assignor)
                + _array(owned, lambda tp: tp[0].bytes
                         + _array(tp[1], lambda p: struct.pack(">i", p)) + _uvarint(0))
                + _uvarint(0))
        client = b"heartbeat-shapes"
        header = struct.pack(">hhih", 68, 1, self.correlation, len(client)) + client + _uvarint(0)
        frame = header + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        answer = _recv_exact(self.sock, struct.unpack(">i", _recv_exact(self.sock, 4))[0])
        correlation, tags = struct.unpack(">iB", answer[:5])
        assert (correlation, tags) == (self.correlation, 0)
        _throttle, error = struct.unpack(">ih", answer[5:11])
        message, off = _read_string(answer, 11)
        _member_id, off = _read_string(answer, off)
        epoch, _interval, assignment = struct.unpack(">iib", answer[off:off + 9])
        return error, message, epoch, assignment == 1


def test_librdkafka_resubscribing_at_epoch_zero_after_leaving_rejoins(broker):
    hb = Heartbeats(broker.port)
    group = f"hb-{uuid.uuid4().hex[:10]}"
    member = uuid.uuid4().hex
    topics = [f"t-{uuid.uuid4().hex[:10]}"]
    try:
        error, message, joined, _ = hb(group, member, 0, timeout=300_000, names=topics,
                                       regex="", owned=[])
        assert (error, message) == (0, None) and joined > 0
        error, message, _, _ = hb(group, member, -1)
        assert (error, message) == (0, None)
        # librdkafka's resubscription: the incremental shape, at epoch 0
        error, message, epoch, assignment = hb(group, member, 0, names=topics, regex="")
        assert (error, message) == (0, None)
        assert epoch > joined
        assert assignment, "a join is answered with its whole assignment"
        # and the member heartbeats on at the epoch it was given
        error, message, again, _ = hb(group, member, epoch)
        assert (error, message, again) == (0, None, epoch)
        assert hb(group, member, -1)[0] == 0
    finally:
        hb.close()


def test_joins_claiming_partitions_or_with_nothing_to_join_with_are_refused(broker):
    hb = Heartbeats(broker.port)
    group = f"hb-{uuid.uuid4().hex[:10]}"
    topics = [f"t-{uuid.uuid4().hex[:10]}"]
    try:
        # epoch 0 with neither topic names nor a pattern
        error, message, _, _ = hb(group, uuid.uuid4().hex, 0)
        assert error == INVALID_REQUEST, message
        # partitions claimed at epoch 0, with or without a rebalance timeout
        for timeout in (300_000, -1):
            error, message, _, _ = hb(group, uuid.uuid4().hex, 0, timeout=timeout,
                                      names=topics, owned=[(uuid.uuid4(), [0])])
            assert error == INVALID_REQUEST, message
        # an epoch no member can have, and a member id missing past epoch 0
        assert hb(group, uuid.uuid4().hex, -3)[0] == INVALID_REQUEST
        assert hb(group, "", 5)[0] == INVALID_REQUEST
    finally:
        hb.close()
