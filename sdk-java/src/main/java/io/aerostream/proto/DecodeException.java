package io.aerostream.proto;

/**
 * A frame or body the codec refuses. {@link #refusal()} is the class of the
 * refusal as the conformance corpus names it ({@code truncated},
 * {@code count}, {@code not_utf8}, ...), the message says where.
 */
public final class DecodeException extends RuntimeException {
    public static final String SHORT_HEADER = "short_header";
    public static final String BAD_MAGIC = "bad_magic";
    public static final String BAD_VERSION = "bad_version";
    public static final String TOO_LARGE = "too_large";
    public static final String UNKNOWN_OP = "unknown_op";
    public static final String TRUNCATED = "truncated";
    public static final String TRAILING = "trailing";
    public static final String COUNT = "count";
    public static final String NOT_UTF8 = "not_utf8";
    public static final String INVALID = "invalid";

    private final String refusal;

    public DecodeException(String refusal, String detail) {
        super("native protocol: " + detail + " (" + refusal + ")");
        this.refusal = refusal;
    }

    /** The class of the refusal: one of the constants of this class. */
    public String refusal() {
        return refusal;
    }
}
