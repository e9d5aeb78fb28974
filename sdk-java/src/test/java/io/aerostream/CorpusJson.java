package io.aerostream;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.BigIntegerNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.aerostream.proto.Field;
import io.aerostream.proto.Hex;
import io.aerostream.proto.Message;
import io.aerostream.proto.MessageType;
import io.aerostream.proto.Struct;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/** Reads the conformance corpus and maps its JSON values to and from messages. */
final class CorpusJson {
    static final ObjectMapper MAPPER = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private CorpusJson() {}

    static Path dir() {
        String env = System.getenv("AEROSTREAM_VECTORS");
        return env != null && !env.isEmpty() ? Path.of(env) : Path.of("..", "sdk", "vectors");
    }

    static JsonNode read(String file) throws IOException {
        return MAPPER.readTree(Files.readString(dir().resolve(file)));
    }

    // --- JSON -> message ---

    static Message toMessage(MessageType type, JsonNode value) {
        JsonNode v = value;
        if (type.name.equals("TxnProduce")) {
            ObjectNode flat = ((ObjectNode) value.get("produce")).deepCopy();
            flat.set("transactional_id", value.get("transactional_id"));
            v = flat;
        }
        Message m = new Message(type);
        fill(m, type.fields, v, type.name);
        return m;
    }

    private static void fill(Struct s, Field[] fields, JsonNode obj, String where) {
        for (Field f : fields) {
            JsonNode v = obj.get(f.name);
            if (v == null) {
                throw new AssertionError(where + ": the value has no field " + f.name);
            }
            s.set(f.name, fromJson(f, v, where + "." + f.name));
        }
        int known = fields.length;
        if (obj.size() != known) {
            throw new AssertionError(where + ": the value has " + obj.size() + " fields, the layout " + known);
        }
    }

    private static Object fromJson(Field f, JsonNode v, String where) {
        switch (f.kind) {
            case STR:
                return v.textValue();
            case BYTES:
                return Hex.decode(v.textValue());
            case BOOL:
            case STRICT_BOOL:
                return v.booleanValue();
            case ISOLATION:
                return switch (v.textValue()) {
                    case "read_uncommitted" -> 0L;
                    case "read_committed" -> 1L;
                    default -> throw new AssertionError(where + ": isolation " + v);
                };
            case IDS: {
                List<Long> ids = new ArrayList<>();
                v.forEach(n -> ids.add(n.bigIntegerValue().longValue()));
                return ids;
            }
            case STRS: {
                List<String> strs = new ArrayList<>();
                v.forEach(n -> strs.add(n.textValue()));
                return strs;
            }
            case STRUCT: {
                Struct s = new Struct();
                fill(s, f.children, v, where);
                return s;
            }
            case ARRAY: {
                List<Struct> entries = new ArrayList<>();
                for (JsonNode e : v) {
                    Struct s = new Struct();
                    switch (f.shape) {
                        case OBJECT -> fill(s, f.children, e, where);
                        case TUPLE -> {
                            if (e.size() != f.children.length) {
                                throw new AssertionError(where + ": tuple of " + e.size() + " entries");
                            }
                            for (int i = 0; i < f.children.length; i++) {
                                s.set(f.children[i].name, fromJson(f.children[i], e.get(i), where));
                            }
                        }
                        case FETCHED_OFFSET -> {
                            JsonNode o = e.get(0);
                            for (Field c : f.children) {
                                JsonNode x = c.name.equals("error") ? e.get(1) : o.get(c.name);
                                s.set(c.name, fromJson(c, x, where));
                            }
                        }
                    }
                    entries.add(s);
                }
                return entries;
            }
            default:
                if (!v.isIntegralNumber()) {
                    throw new AssertionError(where + ": not an integer: " + v);
                }
                return v.bigIntegerValue().longValue();
        }
    }

    // --- message -> JSON ---

    static JsonNode toJson(Message m) {
        ObjectNode o = object(m, m.type().fields);
        if (m.type().name.equals("TxnProduce")) {
            ObjectNode out = NODES.objectNode();
            out.set("transactional_id", o.remove("transactional_id"));
            out.set("produce", o);
            return out;
        }
        return o;
    }

    private static ObjectNode object(Struct s, Field[] fields) {
        ObjectNode o = NODES.objectNode();
        for (Field f : fields) {
            o.set(f.name, json(f, s.get(f.name)));
        }
        return o;
    }

    @SuppressWarnings("unchecked")
    private static JsonNode json(Field f, Object v) {
        switch (f.kind) {
            case STR:
                return NODES.textNode((String) v);
            case BYTES:
                return NODES.textNode(Hex.encode((byte[]) v));
            case BOOL:
            case STRICT_BOOL:
                return NODES.booleanNode((Boolean) v);
            case ISOLATION:
                return NODES.textNode(((Long) v) == 1 ? "read_committed" : "read_uncommitted");
            case U64:
                return BigIntegerNode.valueOf(new BigInteger(Long.toUnsignedString((Long) v)));
            case IDS: {
                ArrayNode a = NODES.arrayNode();
                ((List<Long>) v).forEach(a::add);
                return a;
            }
            case STRS: {
                ArrayNode a = NODES.arrayNode();
                ((List<String>) v).forEach(a::add);
                return a;
            }
            case STRUCT:
                return object((Struct) v, f.children);
            case ARRAY: {
                ArrayNode a = NODES.arrayNode();
                for (Struct e : (List<Struct>) v) {
                    switch (f.shape) {
                        case OBJECT -> a.add(object(e, f.children));
                        case TUPLE -> {
                            ArrayNode t = NODES.arrayNode();
                            for (Field c : f.children) {
                                t.add(json(c, e.get(c.name)));
                            }
                            a.add(t);
                        }
                        case FETCHED_OFFSET -> {
                            ObjectNode o = NODES.objectNode();
                            JsonNode err = null;
                            for (Field c : f.children) {
                                if (c.name.equals("error")) {
                                    err = json(c, e.get(c.name));
                                } else {
                                    o.set(c.name, json(c, e.get(c.name)));
                                }
                            }
                            ArrayNode t = NODES.arrayNode();
                            t.add(o);
                            t.add(err);
                            a.add(t);
                        }
                    }
                }
                return a;
            }
            default:
                return NODES.numberNode((Long) v);
        }
    }

    /** JSON equality with numbers compared by value, whatever node class holds them. */
    static boolean same(JsonNode a, JsonNode b) {
        Comparator<JsonNode> numeric = (x, y) -> {
            if (x.isNumber() && y.isNumber()) {
                return x.bigIntegerValue().compareTo(y.bigIntegerValue());
            }
            return x.equals(y) ? 0 : 1;
        };
        return a.equals(numeric, b);
    }

    static Iterable<Map.Entry<String, JsonNode>> fields(JsonNode n) {
        return () -> {
            Iterator<Map.Entry<String, JsonNode>> it = n.fields();
            return it;
        };
    }
}
