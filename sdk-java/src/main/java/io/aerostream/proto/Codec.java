package io.aerostream.proto;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Frames and bodies of the native protocol (docs/native-protocol.md
 * sections 2 and 3). Decoding is strict and never trusts a length or a
 * count: each is checked against the bytes left before anything is
 * allocated, so a hostile frame costs at most its own size.
 */
public final class Codec {
    public static final int MAGIC = 0xAE;
    public static final int FRAMING_VERSION = 1;
    public static final int HEADER_LEN = 7;
    public static final int RESPONSE = 0x80;
    public static final int MIN_VERSION = 1;
    public static final int MAX_VERSION = 1;

    private Codec() {}

    /** A frame header: the op and the body length. */
    public record Header(int op, long length) {}

    /** Reads the header at the start of buf, refusing a body longer than maxBody. */
    public static Header decodeHeader(byte[] buf, long maxBody) {
        if (buf.length < HEADER_LEN) {
            throw new DecodeException(DecodeException.SHORT_HEADER,
                    "frame header needs " + HEADER_LEN + " bytes, got " + buf.length);
        }
        if ((buf[0] & 0xFF) != MAGIC) {
            throw new DecodeException(DecodeException.BAD_MAGIC,
                    String.format("frame starts with byte 0x%02x, not the AeroStream magic 0xae", buf[0] & 0xFF));
        }
        if (buf[1] != FRAMING_VERSION) {
            throw new DecodeException(DecodeException.BAD_VERSION,
                    "frame uses framing version " + (buf[1] & 0xFF) + ", this client speaks " + FRAMING_VERSION);
        }
        long n = ByteBuffer.wrap(buf, 3, 4).getInt() & 0xFFFFFFFFL;
        if (n > maxBody) {
            throw new DecodeException(DecodeException.TOO_LARGE,
                    "frame body of " + n + " bytes exceeds the limit of " + maxBody + " bytes");
        }
        return new Header(buf[2] & 0xFF, n);
    }

    /** The whole frame (header and body) of m. */
    public static byte[] encode(Message m) {
        Writer w = new Writer();
        w.out.write(MAGIC);
        w.out.write(FRAMING_VERSION);
        w.out.write(m.op());
        w.u32(0);
        writeFields(w, m.type().fields, m);
        byte[] frame = w.out.toByteArray();
        int len = frame.length - HEADER_LEN;
        frame[3] = (byte) (len >>> 24);
        frame[4] = (byte) (len >>> 16);
        frame[5] = (byte) (len >>> 8);
        frame[6] = (byte) len;
        return frame;
    }

    /** Decodes a body of the given op; every byte must belong to the message. */
    public static Message decodeBody(int op, byte[] body) {
        MessageType type = Messages.byOp(op);
        if (type == null) {
            throw new DecodeException(DecodeException.UNKNOWN_OP,
                    String.format("operation 0x%02x is not one this client knows", op));
        }
        Reader r = new Reader(body);
        Message m = new Message(type);
        readFields(r, type.fields, m);
        if (r.left() != 0) {
            throw new DecodeException(DecodeException.TRAILING, r.left() + " bytes follow the end of the body");
        }
        return m;
    }

    /** Decodes buf as exactly one frame: header (body at most maxBody), body, message. */
    public static Message decodeFrame(byte[] buf, long maxBody) {
        Header h = decodeHeader(buf, maxBody);
        long have = buf.length - HEADER_LEN;
        if (have < h.length()) {
            throw new DecodeException(DecodeException.TRUNCATED,
                    "the input ended " + have + " bytes into a body of " + h.length());
        }
        if (have > h.length()) {
            throw new DecodeException(DecodeException.TRAILING, (have - h.length()) + " bytes follow the frame");
        }
        byte[] body = new byte[(int) h.length()];
        System.arraycopy(buf, HEADER_LEN, body, 0, body.length);
        return decodeBody(h.op(), body);
    }

    // --- writing ---

    static final class Writer {
        final ByteArrayOutputStream out = new ByteArrayOutputStream(64);

        void u8(long v) {
            out.write((int) v);
        }

        void u16(long v) {
            out.write((int) (v >>> 8));
            out.write((int) v);
        }

        void u32(long v) {
            out.write((int) (v >>> 24));
            out.write((int) (v >>> 16));
            out.write((int) (v >>> 8));
            out.write((int) v);
        }

        void u64(long v) {
            u32(v >>> 32);
            u32(v);
        }

        void str(String s) {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            int end = b.length;
            if (end > 0xFFFF) {
                end = 0xFFFF;
                while (end > 0 && (b[end] & 0xC0) == 0x80) {
                    end--;
                }
            }
            u16(end);
            out.write(b, 0, end);
        }

        void blob(byte[] b) {
            u32(b.length);
            out.write(b, 0, b.length);
        }
    }

    private static long num(Struct s, Field f) {
        Object v = s.get(f.name);
        if (v == null) {
            return 0;
        }
        if (v instanceof Boolean) {
            return ((Boolean) v) ? 1 : 0;
        }
        return ((Number) v).longValue();
    }

    @SuppressWarnings("unchecked")
    static void writeFields(Writer w, Field[] fields, Struct s) {
        for (Field f : fields) {
            Object v = s.get(f.name);
            switch (f.kind) {
                case U8, I8, BOOL, STRICT_BOOL, ISOLATION -> w.u8(num(s, f));
                case U16, I16 -> w.u16(num(s, f));
                case U32, I32 -> w.u32(num(s, f));
                case U64, I64 -> w.u64(num(s, f));
                case STR -> w.str(v == null ? "" : (String) v);
                case BYTES -> w.blob(v == null ? new byte[0] : (byte[]) v);
                case IDS -> {
                    List<? extends Number> ids = v == null ? List.of() : (List<? extends Number>) v;
                    w.u32(ids.size());
                    for (Number id : ids) {
                        w.u32(id.longValue());
                    }
                }
                case STRS -> {
                    List<String> strs = v == null ? List.of() : (List<String>) v;
                    w.u32(strs.size());
                    for (String x : strs) {
                        w.str(x);
                    }
                }
                case ARRAY -> {
                    List<Struct> entries = v == null ? List.of() : (List<Struct>) v;
                    w.u32(entries.size());
                    for (Struct e : entries) {
                        writeFields(w, f.children, e);
                    }
                }
                case STRUCT -> writeFields(w, f.children, v == null ? new Struct() : (Struct) v);
            }
        }
    }

    // --- reading ---

    static final class Reader {
        private final byte[] b;
        private int pos;

        Reader(byte[] b) {
            this.b = b;
        }

        int left() {
            return b.length - pos;
        }

        private void need(int n, String what) {
            if (left() < n) {
                throw new DecodeException(DecodeException.TRUNCATED, "the body ended inside " + what);
            }
        }

        long u8(String what) {
            need(1, what);
            return b[pos++] & 0xFF;
        }

        long u16(String what) {
            need(2, what);
            long v = ((b[pos] & 0xFF) << 8) | (b[pos + 1] & 0xFF);
            pos += 2;
            return v;
        }

        long u32(String what) {
            need(4, what);
            long v = ((long) (b[pos] & 0xFF) << 24) | ((b[pos + 1] & 0xFF) << 16)
                    | ((b[pos + 2] & 0xFF) << 8) | (b[pos + 3] & 0xFF);
            pos += 4;
            return v;
        }

        long u64(String what) {
            long hi = u32(what);
            long lo = u32(what);
            return hi << 32 | lo;
        }

        String str(String what) {
            int n = (int) u16(what);
            need(n, what);
            CharsetDecoder dec = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT);
            try {
                CharBuffer cb = dec.decode(ByteBuffer.wrap(b, pos, n));
                pos += n;
                return cb.toString();
            } catch (CharacterCodingException e) {
                throw new DecodeException(DecodeException.NOT_UTF8, what + " is not valid UTF-8");
            }
        }

        byte[] blob(String what) {
            long n = u32(what);
            if (n > left()) {
                throw new DecodeException(DecodeException.TRUNCATED, "the body ended inside " + what);
            }
            byte[] out = new byte[(int) n];
            System.arraycopy(b, pos, out, 0, (int) n);
            pos += (int) n;
            return out;
        }

        int count(String what, int minEntry) {
            long n = u32(what);
            if (minEntry < 1) {
                minEntry = 1;
            }
            if (n * minEntry > left()) {
                throw new DecodeException(DecodeException.COUNT,
                        what + ": " + n + " entries cannot fit in the " + left() + " bytes left");
            }
            return (int) n;
        }
    }

    static void readFields(Reader r, Field[] fields, Struct s) {
        for (Field f : fields) {
            String what = f.name.replace('_', ' ');
            switch (f.kind) {
                case U8 -> s.values.put(f.name, r.u8(what));
                case I8 -> s.values.put(f.name, (long) (byte) r.u8(what));
                case U16 -> s.values.put(f.name, r.u16(what));
                case I16 -> s.values.put(f.name, (long) (short) r.u16(what));
                case U32 -> s.values.put(f.name, r.u32(what));
                case I32 -> s.values.put(f.name, (long) (int) r.u32(what));
                case U64, I64 -> s.values.put(f.name, r.u64(what));
                case STR -> s.values.put(f.name, r.str(what));
                case BYTES -> s.values.put(f.name, r.blob(what));
                case BOOL -> s.values.put(f.name, r.u8(what) != 0);
                case STRICT_BOOL -> {
                    long v = r.u8(what);
                    if (v > 1) {
                        throw new DecodeException(DecodeException.INVALID, "invalid " + what + " flag (0 or 1): " + v);
                    }
                    s.values.put(f.name, v == 1);
                }
                case ISOLATION -> {
                    long v = r.u8(what);
                    if (v > 1) {
                        throw new DecodeException(DecodeException.INVALID, "invalid isolation level (0 or 1): " + v);
                    }
                    s.values.put(f.name, v);
                }
                case IDS -> {
                    int n = r.count(what, 4);
                    List<Long> ids = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        ids.add(r.u32(what));
                    }
                    s.values.put(f.name, ids);
                }
                case STRS -> {
                    int n = r.count(what, 2);
                    List<String> strs = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        strs.add(r.str(what));
                    }
                    s.values.put(f.name, strs);
                }
                case ARRAY -> {
                    int n = r.count(what, Field.entrySize(f.children));
                    List<Struct> entries = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        Struct e = new Struct();
                        readFields(r, f.children, e);
                        entries.add(e);
                    }
                    s.values.put(f.name, entries);
                }
                case STRUCT -> {
                    Struct e = new Struct();
                    readFields(r, f.children, e);
                    s.values.put(f.name, e);
                }
            }
        }
    }
}
