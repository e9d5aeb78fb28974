package io.aerostream.proto;

import java.util.Arrays;

/** One field of a message layout (docs/native-protocol.md section 7). */
public final class Field {
    /** The wire types of section 3, and the composite fields built of them. */
    public enum Kind {
        U8(1), I8(1), U16(2), I16(2), U32(4), I32(4), U64(8), I64(8),
        STR(2), BYTES(4),
        /** a u8 read as a boolean (non-zero is true) */
        BOOL(1),
        /** a u8 that must be 0 or 1 (EndTxn's commit flag) */
        STRICT_BOOL(1),
        /** FetchIsolated's isolation level: a u8 of 0 or 1 */
        ISOLATION(1),
        /** [u32] */
        IDS(4),
        /** [string] */
        STRS(4),
        /** [entry], the entry's fields in {@link #children} */
        ARRAY(4),
        /** fields inlined in the body, kept as one nested value */
        STRUCT(0);

        final int size;

        Kind(int size) {
            this.size = size;
        }
    }

    /** How an array's entries look in the corpus' JSON. */
    public enum Shape { OBJECT, TUPLE, FETCHED_OFFSET }

    public final String name;
    public final Kind kind;
    public final Field[] children;
    public final Shape shape;

    Field(String name, Kind kind, Shape shape, Field... children) {
        this.name = name;
        this.kind = kind;
        this.shape = shape;
        this.children = children;
    }

    /** Smallest number of bytes this field takes on the wire. */
    public int minSize() {
        if (kind == Kind.STRUCT) {
            return entrySize(children);
        }
        return kind.size;
    }

    static int entrySize(Field[] fields) {
        return Arrays.stream(fields).mapToInt(Field::minSize).sum();
    }

    @Override
    public String toString() {
        return name + ":" + kind;
    }
}
