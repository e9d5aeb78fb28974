package io.aerostream;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;

/** A byte stream to a server: a TCP connection, or the first stream of a QUIC connection. */
interface Transport {
    InputStream in();

    /** Writes go out whole; write(byte[]) is the only form used. */
    OutputStream out();

    void close();

    /** A TCP connection. */
    final class Tcp implements Transport {
        private final Socket socket;
        private final InputStream in;
        private final OutputStream out;

        private Tcp(Socket socket) throws IOException {
            this.socket = socket;
            this.in = socket.getInputStream();
            this.out = socket.getOutputStream();
        }

        static Tcp dial(String host, int port, int timeoutMs) throws IOException {
            Socket s = new Socket();
            try {
                s.setTcpNoDelay(true);
                s.setKeepAlive(true);
                s.connect(new InetSocketAddress(host, port), timeoutMs);
                return new Tcp(s);
            } catch (IOException e) {
                s.close();
                throw e;
            }
        }

        @Override
        public InputStream in() {
            return in;
        }

        @Override
        public OutputStream out() {
            return out;
        }

        @Override
        public void close() {
            try {
                socket.close();
            } catch (IOException ignored) {
                // closing anyway
            }
        }
    }
}
