package io.aerostream;

/**
 * An error of the server (a code of docs/native-protocol.md section 6.3,
 * from a response or an error frame), or of the client (code -1: a lost
 * connection, a timeout, a malformed answer).
 */
public class AeroStreamException extends RuntimeException {
    private final int code;

    public AeroStreamException(int code, String what, String message) {
        super(describe(code, what, message));
        this.code = code;
    }

    public AeroStreamException(String message, Throwable cause) {
        super(message, cause);
        this.code = -1;
    }

    public AeroStreamException(String message) {
        super(message);
        this.code = -1;
    }

    private static String describe(int code, String what, String message) {
        ErrorCode c = ErrorCode.of(code);
        StringBuilder sb = new StringBuilder();
        if (what != null && !what.isEmpty()) {
            sb.append(what).append(": ");
        }
        sb.append(c.name()).append(" (").append(code).append("): ").append(c.description());
        if (message != null && !message.isEmpty()) {
            sb.append(": ").append(message);
        }
        return sb.toString();
    }

    /** The server's error code, or -1 for an error of the client or the network. */
    public int code() {
        return code;
    }

    /** Whether the same request may succeed when sent again (a lost connection is). */
    public boolean retriable() {
        if (code < 0) {
            return this instanceof ConnectionLostException || this instanceof RequestTimeoutException;
        }
        return ErrorCode.isRetriable(code);
    }

    /** Throws when code is not NONE. */
    static void check(long code, String message, String what) {
        if (code != ErrorCode.NONE) {
            throw new AeroStreamException((int) code, what, message);
        }
    }

    /** A connection that ended: requests still unanswered on it have an unknown outcome. */
    public static final class ConnectionLostException extends AeroStreamException {
        public ConnectionLostException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** A request that got no answer in time: its outcome is unknown. */
    public static final class RequestTimeoutException extends AeroStreamException {
        public RequestTimeoutException(String message) {
            super(message);
        }
    }
}
