package io.aerostream.proto;

/** A message layout: its name in the corpus, its operation code, its fields. */
public final class MessageType {
    public final String name;
    public final int op;
    public final Field[] fields;

    MessageType(String name, int op, Field... fields) {
        this.name = name;
        this.op = op;
        this.fields = fields;
    }

    /** A new message of this type with the given name/value pairs. */
    public Message with(Object... pairs) {
        Message m = new Message(this);
        m.putAll(pairs);
        return m;
    }

    @Override
    public String toString() {
        return name;
    }
}
