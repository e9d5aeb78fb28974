package io.aerostream;

import com.github.luben.zstd.Zstd;
import com.github.luben.zstd.ZstdInputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.Locale;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;
import net.jpountz.lz4.LZ4FrameInputStream;
import net.jpountz.lz4.LZ4FrameOutputStream;
import org.xerial.snappy.SnappyInputStream;
import org.xerial.snappy.SnappyOutputStream;

/** Compression codecs of Kafka record batches (the attribute's low 3 bits). */
public enum Compression {
    NONE, GZIP, SNAPPY, LZ4, ZSTD;

    /** The most bytes a batch may decompress to: more is refused, not allocated. */
    public static final int MAX_BATCH_BYTES = 256 << 20;

    public int id() {
        return ordinal();
    }

    public static Compression parse(String s) {
        for (Compression c : values()) {
            if (c.name().toLowerCase(Locale.ROOT).equals(s)) {
                return c;
            }
        }
        throw new IllegalArgumentException("compression \"" + s + "\" is not none, gzip, snappy, lz4 or zstd");
    }

    static Compression of(int id) {
        if (id < 0 || id >= values().length) {
            throw new IllegalArgumentException("unknown compression codec " + id);
        }
        return values()[id];
    }

    byte[] compress(byte[] data, int off, int len) throws IOException {
        if (this == ZSTD) {
            byte[] in = new byte[len];
            System.arraycopy(data, off, in, 0, len);
            return Zstd.compress(in, 3);
        }
        ByteArrayOutputStream buf = new ByteArrayOutputStream(len / 2 + 64);
        OutputStream out = switch (this) {
            case GZIP -> new GZIPOutputStream(buf);
            case SNAPPY -> new SnappyOutputStream(buf);
            case LZ4 -> new LZ4FrameOutputStream(buf, LZ4FrameOutputStream.BLOCKSIZE.SIZE_64KB);
            default -> buf;
        };
        out.write(data, off, len);
        out.close();
        return buf.toByteArray();
    }

    byte[] decompress(byte[] data, int off, int len) throws IOException {
        if (this == NONE) {
            byte[] out = new byte[len];
            System.arraycopy(data, off, out, 0, len);
            return out;
        }
        ByteArrayInputStream src = new ByteArrayInputStream(data, off, len);
        try (InputStream in = switch (this) {
            case GZIP -> new GZIPInputStream(src);
            case SNAPPY -> new SnappyInputStream(src);
            case LZ4 -> new LZ4FrameInputStream(src);
            case ZSTD -> new ZstdInputStream(src);
            default -> src;
        }) {
            ByteArrayOutputStream out = new ByteArrayOutputStream(Math.max(64, len * 2));
            byte[] chunk = new byte[16384];
            long total = 0;
            int n;
            while ((n = in.read(chunk)) > 0) {
                total += n;
                if (total > MAX_BATCH_BYTES) {
                    throw new IOException(name().toLowerCase(Locale.ROOT) + ": more than " + MAX_BATCH_BYTES
                            + " bytes decompressed");
                }
                out.write(chunk, 0, n);
            }
            return out.toByteArray();
        }
    }
}
