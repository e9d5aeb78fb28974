package io.aerostream;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.zip.CRC32C;

/**
 * Kafka RecordBatch v2 (magic 2), the record format of the native protocol:
 * what a producer writes and a consumer reads, byte for byte as the log
 * stores it.
 */
public final class RecordBatch {
    static final int HEADER_LEN = 61;
    static final int ATTR_COMPRESSION = 0x07;
    static final int ATTR_LOG_APPEND_TIME = 0x08;
    static final int ATTR_TRANSACTIONAL = 0x10;
    static final int ATTR_CONTROL = 0x20;

    private RecordBatch() {}

    /** Who writes a batch: producer id, epoch and the batch's first sequence (-1s for none). */
    public record Identity(long producerId, short epoch, int baseSequence) {
        public static final Identity NONE = new Identity(-1, (short) -1, -1);
    }

    /** An aborted transaction of a read_committed fetch. */
    public record Aborted(long producerId, long firstOffset) {}

    /** Records read from a fetch, and the offset after the last whole batch (-1: none). */
    public record Decoded(List<ConsumerRecord> records, long next) {}

    private static void varint(ByteArrayOutputStream out, long v) {
        long z = (v << 1) ^ (v >> 63);
        while ((z & ~0x7FL) != 0) {
            out.write((int) ((z & 0x7F) | 0x80));
            z >>>= 7;
        }
        out.write((int) z);
    }

    private static void varBytes(ByteArrayOutputStream out, byte[] b) {
        if (b == null) {
            varint(out, -1);
            return;
        }
        varint(out, b.length);
        out.write(b, 0, b.length);
    }

    /** Encodes records with their timestamps (ms) as one batch of base offset 0. */
    public static byte[] encode(List<ProducerRecord> records, long[] timestamps, Identity who,
            boolean transactional, Compression codec) {
        if (records.isEmpty()) {
            throw new IllegalArgumentException("a batch needs at least one record");
        }
        if (timestamps.length != records.size()) {
            throw new IllegalArgumentException("one timestamp per record");
        }
        long base = timestamps[0];
        long max = timestamps[0];
        for (long t : timestamps) {
            base = Math.min(base, t);
            max = Math.max(max, t);
        }
        ByteArrayOutputStream body = new ByteArrayOutputStream(HEADER_LEN + 64 * records.size());
        body.write(new byte[HEADER_LEN], 0, HEADER_LEN);
        ByteArrayOutputStream rec = new ByteArrayOutputStream(128);
        for (int i = 0; i < records.size(); i++) {
            ProducerRecord r = records.get(i);
            rec.reset();
            rec.write(0); // attributes
            varint(rec, timestamps[i] - base);
            varint(rec, i);
            varBytes(rec, r.key());
            varBytes(rec, r.value());
            varint(rec, r.headers().size());
            Set<String> seen = new HashSet<>();
            for (Header h : r.headers()) {
                if (!seen.add(h.key())) {
                    throw new IllegalArgumentException("header \"" + h.key() + "\" appears more than once in a record");
                }
                varBytes(rec, h.key().getBytes(StandardCharsets.UTF_8));
                varBytes(rec, h.value());
            }
            varint(body, rec.size());
            body.write(rec.toByteArray(), 0, rec.size());
        }
        byte[] b = body.toByteArray();
        if (codec != Compression.NONE) {
            byte[] packed;
            try {
                packed = codec.compress(b, HEADER_LEN, b.length - HEADER_LEN);
            } catch (IOException e) {
                throw new AeroStreamException("compressing a batch with " + codec + ": " + e.getMessage(), e);
            }
            byte[] nb = new byte[HEADER_LEN + packed.length];
            System.arraycopy(packed, 0, nb, HEADER_LEN, packed.length);
            b = nb;
        }
        ByteBuffer bb = ByteBuffer.wrap(b);
        bb.putLong(0, 0); // base offset
        bb.putInt(8, b.length - 12); // batch length
        bb.putInt(12, -1); // partition leader epoch
        bb.put(16, (byte) 2); // magic
        int attrs = codec.id() & ATTR_COMPRESSION;
        if (transactional) {
            attrs |= ATTR_TRANSACTIONAL;
        }
        bb.putShort(21, (short) attrs);
        bb.putInt(23, records.size() - 1); // last offset delta
        bb.putLong(27, base);
        bb.putLong(35, max);
        bb.putLong(43, who.producerId());
        bb.putShort(51, who.epoch());
        bb.putInt(53, who.baseSequence());
        bb.putInt(57, records.size());
        CRC32C crc = new CRC32C();
        crc.update(b, 21, b.length - 21);
        bb.putInt(17, (int) crc.getValue());
        return b;
    }

    /** Reads the records at or after {@code from} of whole batches; a partial batch at the end is left. */
    public static Decoded decode(String topic, int partition, byte[] data, long from) {
        return decode(topic, partition, data, from, List.of());
    }

    /**
     * As {@link #decode(String, int, byte[], long)}, leaving out the records of
     * the aborted transactions (read_committed) and control batches.
     */
    public static Decoded decode(String topic, int partition, byte[] data, long from, List<Aborted> aborted) {
        List<ConsumerRecord> out = new ArrayList<>();
        long next = -1;
        List<Aborted> pending = new ArrayList<>(aborted);
        pending.sort(Comparator.comparingLong(Aborted::firstOffset));
        Set<Long> aborting = new HashSet<>();
        ByteBuffer bb = ByteBuffer.wrap(data);
        int pos = 0;
        String where = topic + "-" + partition;
        while (data.length - pos >= 12) {
            long baseOffset = bb.getLong(pos);
            long length = bb.getInt(pos + 8);
            if (length < HEADER_LEN - 12) {
                throw new AeroStreamException(where + ": record batch at offset " + baseOffset + " announces "
                        + length + " bytes");
            }
            if (data.length - pos - 12 < length) {
                break; // a partial batch at the end
            }
            int start = pos;
            int end = (int) (pos + 12 + length);
            pos = end;
            int magic = data[start + 16];
            if (magic != 2) {
                throw new AeroStreamException(where + ": record batch of magic " + magic
                        + ": only magic 2 is supported");
            }
            CRC32C crc = new CRC32C();
            crc.update(data, start + 21, end - start - 21);
            if (bb.getInt(start + 17) != (int) crc.getValue()) {
                throw new AeroStreamException(where + ": record batch at offset " + baseOffset + " fails its CRC");
            }
            int attrs = bb.getShort(start + 21) & 0xFFFF;
            long lastDelta = bb.getInt(start + 23);
            long baseTimestamp = bb.getLong(start + 27);
            long maxTimestamp = bb.getLong(start + 35);
            long producerId = bb.getLong(start + 43);
            long count = bb.getInt(start + 57);
            next = baseOffset + lastDelta + 1;
            while (!pending.isEmpty() && pending.get(0).firstOffset() < next) {
                aborting.add(pending.remove(0).producerId());
            }
            if ((attrs & ATTR_CONTROL) != 0) {
                aborting.remove(producerId); // the marker ends its transaction
                continue;
            }
            if (next <= from || ((attrs & ATTR_TRANSACTIONAL) != 0 && aborting.contains(producerId))) {
                continue;
            }
            byte[] body;
            try {
                body = Compression.of(attrs & ATTR_COMPRESSION).decompress(data, start + HEADER_LEN,
                        end - start - HEADER_LEN);
            } catch (IOException | IllegalArgumentException e) {
                throw new AeroStreamException(where + ": record batch at offset " + baseOffset + ": "
                        + e.getMessage(), e);
            }
            if (count < 0 || count > body.length) {
                throw new AeroStreamException(where + ": record batch claims " + count + " records in "
                        + body.length + " bytes");
            }
            boolean logAppend = (attrs & ATTR_LOG_APPEND_TIME) != 0;
            VarReader r = new VarReader(body, 0, body.length);
            for (long i = 0; i < count; i++) {
                long size = r.varint();
                if (!r.ok || size < 0 || size > r.left()) {
                    throw malformed(where, baseOffset);
                }
                VarReader rr = new VarReader(body, r.pos, (int) (r.pos + size));
                r.pos += (int) size;
                rr.byte1();
                long tsDelta = rr.varint();
                long offDelta = rr.varint();
                byte[] key = rr.bytes();
                byte[] value = rr.bytes();
                long nh = rr.varint();
                if (!rr.ok || nh < 0 || nh > rr.left()) {
                    throw malformed(where, baseOffset);
                }
                List<Header> headers = new ArrayList<>((int) nh);
                for (long h = 0; h < nh; h++) {
                    byte[] k = rr.bytes();
                    byte[] v = rr.bytes();
                    if (!rr.ok || k == null) {
                        throw malformed(where, baseOffset);
                    }
                    headers.add(new Header(new String(k, StandardCharsets.UTF_8), v));
                }
                if (!rr.ok) {
                    throw malformed(where, baseOffset);
                }
                long offset = baseOffset + offDelta;
                if (offset < from) {
                    continue;
                }
                long ts = logAppend ? maxTimestamp : baseTimestamp + tsDelta;
                out.add(new ConsumerRecord(topic, partition, offset, ts, key, value, headers));
            }
        }
        return new Decoded(out, next);
    }

    private static AeroStreamException malformed(String where, long baseOffset) {
        return new AeroStreamException(where + ": malformed record in the batch at offset " + baseOffset);
    }

    private static final class VarReader {
        final byte[] b;
        int pos;
        final int end;
        boolean ok = true;

        VarReader(byte[] b, int pos, int end) {
            this.b = b;
            this.pos = pos;
            this.end = end;
        }

        int left() {
            return end - pos;
        }

        void byte1() {
            if (pos >= end) {
                ok = false;
                return;
            }
            pos++;
        }

        long varint() {
            if (!ok) {
                return 0;
            }
            long z = 0;
            for (int shift = 0; shift < 64; shift += 7) {
                if (pos >= end) {
                    ok = false;
                    return 0;
                }
                int c = b[pos++] & 0xFF;
                z |= (long) (c & 0x7F) << shift;
                if ((c & 0x80) == 0) {
                    return (z >>> 1) ^ -(z & 1);
                }
            }
            ok = false;
            return 0;
        }

        byte[] bytes() {
            long n = varint();
            if (!ok || n < 0) {
                return null;
            }
            if (n > left()) {
                ok = false;
                return null;
            }
            byte[] out = new byte[(int) n];
            System.arraycopy(b, pos, out, 0, (int) n);
            pos += (int) n;
            return out;
        }
    }
}
