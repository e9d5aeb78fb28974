package io.aerostream.proto;

/** A message body of a given type, its fields by name. */
public final class Message extends Struct {
    private final MessageType type;

    public Message(MessageType type) {
        this.type = type;
    }

    public MessageType type() {
        return type;
    }

    public int op() {
        return type.op;
    }

    public String name() {
        return type.name;
    }

    /** The correlation id; pushes and credits have none (-1). */
    public long correlation() {
        if (type == Messages.PUSH || type == Messages.CREDIT) {
            return -1;
        }
        return getLong("correlation");
    }

    @Override
    public String toString() {
        return type.name + super.toString();
    }
}
