package aerostream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/quic-go/quic-go"
)

// alpn is the native protocol's ALPN over QUIC.
const alpn = "aerostream/1"

// quicStream is the first bidirectional stream of a QUIC connection: it
// carries the hello and then requests exactly as a TCP connection does.
// Closing it closes the whole connection.
type quicStream struct {
	quic.Stream
	conn quic.Connection
}

func (q *quicStream) Close() error {
	q.Stream.CancelRead(0)
	_ = q.Stream.Close()
	return q.conn.CloseWithError(0, "client closing")
}

func tlsConfig(cfg *Config, addr string) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{alpn},
		ServerName: host,
	}
	if cfg.InsecureSkipVerify {
		tc.InsecureSkipVerify = true
		return tc, nil
	}
	pem, err := os.ReadFile(cfg.TLSCAFile)
	if err != nil {
		return nil, fmt.Errorf("reading the TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", cfg.TLSCAFile)
	}
	tc.RootCAs = pool
	return tc, nil
}

// dialQUIC opens a QUIC connection to addr (its UDP port) and its first
// stream, with keep-alives every 10 seconds as the protocol advises.
func dialQUIC(ctx context.Context, addr string, cfg *Config) (transport, error) {
	tc, err := tlsConfig(cfg, addr)
	if err != nil {
		return nil, err
	}
	qc, err := quic.DialAddr(ctx, addr, tc, &quic.Config{
		KeepAlivePeriod:      10 * time.Second,
		MaxIdleTimeout:       60 * time.Second,
		HandshakeIdleTimeout: cfg.DialTimeout,
	})
	if err != nil {
		var te *quic.TransportError
		if errors.As(err, &te) && te.ErrorCode == quic.ConnectionRefused {
			return nil, fmt.Errorf("the server refused the connection (too many connections): %w", err)
		}
		return nil, err
	}
	s, err := qc.OpenStreamSync(ctx)
	if err != nil {
		_ = qc.CloseWithError(0, "")
		return nil, err
	}
	return &quicStream{Stream: s, conn: qc}, nil
}
