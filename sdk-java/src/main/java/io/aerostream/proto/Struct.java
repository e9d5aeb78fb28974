package io.aerostream.proto;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Field values of a message body or of an array entry, by field name (the
 * snake_case names of the corpus). Integers are {@code Long} (a u64 keeps
 * its 64 bits), strings {@code String}, bytes {@code byte[]}, booleans
 * {@code Boolean}, arrays {@code List}. Setters accept any {@code Number}.
 */
public class Struct {
    final Map<String, Object> values = new LinkedHashMap<>();

    public Struct() {}

    /** A struct of name/value pairs: {@code Struct.of("topic", "t", "partition", 0)}. */
    public static Struct of(Object... pairs) {
        Struct s = new Struct();
        s.putAll(pairs);
        return s;
    }

    void putAll(Object... pairs) {
        if (pairs.length % 2 != 0) {
            throw new IllegalArgumentException("name/value pairs expected");
        }
        for (int i = 0; i < pairs.length; i += 2) {
            values.put((String) pairs[i], pairs[i + 1]);
        }
    }

    public Struct set(String name, Object value) {
        values.put(name, value);
        return this;
    }

    public Object get(String name) {
        return values.get(name);
    }

    public boolean has(String name) {
        return values.containsKey(name);
    }

    public Map<String, Object> values() {
        return values;
    }

    public long getLong(String name) {
        Object v = values.get(name);
        if (v == null) {
            return 0;
        }
        return ((Number) v).longValue();
    }

    public int getInt(String name) {
        return (int) getLong(name);
    }

    public String getString(String name) {
        Object v = values.get(name);
        return v == null ? "" : (String) v;
    }

    public byte[] getBytes(String name) {
        Object v = values.get(name);
        return v == null ? new byte[0] : (byte[]) v;
    }

    public boolean getBool(String name) {
        Object v = values.get(name);
        return v != null && (Boolean) v;
    }

    public Struct getStruct(String name) {
        Object v = values.get(name);
        return v == null ? new Struct() : (Struct) v;
    }

    @SuppressWarnings("unchecked")
    public List<Struct> getList(String name) {
        Object v = values.get(name);
        return v == null ? List.of() : (List<Struct>) v;
    }

    @SuppressWarnings("unchecked")
    public List<Long> getIds(String name) {
        Object v = values.get(name);
        return v == null ? List.of() : (List<Long>) v;
    }

    @SuppressWarnings("unchecked")
    public List<String> getStrings(String name) {
        Object v = values.get(name);
        return v == null ? List.of() : (List<String>) v;
    }

    /** The error code of the field {@code error}. */
    public int error() {
        return getInt("error");
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("{");
        values.forEach((k, v) -> {
            if (sb.length() > 1) {
                sb.append(", ");
            }
            sb.append(k).append('=');
            if (v instanceof byte[]) {
                sb.append(Hex.encode((byte[]) v));
            } else {
                sb.append(v);
            }
        });
        return sb.append('}').toString();
    }
}
