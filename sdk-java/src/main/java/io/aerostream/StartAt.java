package io.aerostream;

/** Where a consumer starts reading a partition: earliest, latest or an offset. */
public record StartAt(int kind, long offset) {
    public static final StartAt EARLIEST = new StartAt(1, 0);
    public static final StartAt LATEST = new StartAt(2, 0);

    public static StartAt offset(long offset) {
        if (offset < 0) {
            throw new IllegalArgumentException("an offset is at least 0");
        }
        return new StartAt(0, offset);
    }

    /** Parses earliest, latest or an offset. */
    public static StartAt parse(String s) {
        switch (s) {
            case "earliest":
                return EARLIEST;
            case "latest":
                return LATEST;
            default:
                try {
                    return offset(Long.parseLong(s));
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException("\"" + s + "\" is not earliest, latest or an offset");
                }
        }
    }

    @Override
    public String toString() {
        return kind == 1 ? "earliest" : kind == 2 ? "latest" : Long.toString(offset);
    }
}
