// Package cli holds what the produce and consume commands share: the
// connection flags and the client they make.
package cli

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"time"

	aerostream "github.com/aerostream/aerostream/sdk-go"
)

// Conn is the connection flags.
type Conn struct {
	Bootstrap string
	TLSCA     string
	Insecure  bool
	Mechanism string
	User      string
	Password  string
}

// Register adds the connection flags to fs.
func (c *Conn) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Bootstrap, "bootstrap", "", "bootstrap URL: aero://HOST:PORT (or aero://h1:9091,h2:9091); aero+quic://HOST:PORT for QUIC")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "for aero+quic://: the CA certificate (PEM) that signed the servers' certificates, e.g. the agent's DATA_DIR/native-tls/ca.pem")
	fs.BoolVar(&c.Insecure, "insecure", false, "for aero+quic://: accept any server certificate (trying things out only)")
	fs.StringVar(&c.Mechanism, "sasl-mechanism", "", "log in with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (password from --password or $AEROSTREAM_PASSWORD)")
	fs.StringVar(&c.User, "user", "", "user name of the login")
	fs.StringVar(&c.Password, "password", "", "password of the login (default $AEROSTREAM_PASSWORD)")
}

// Connect checks the flags and connects.
func (c *Conn) Connect(ctx context.Context, clientID string) (*aerostream.Client, error) {
	if c.Bootstrap == "" {
		return nil, errors.New("--bootstrap is required, e.g. --bootstrap aero://127.0.0.1:9091")
	}
	if (c.TLSCA != "" || c.Insecure) && !strings.HasPrefix(c.Bootstrap, "aero+quic://") {
		return nil, errors.New("--tls-ca and --insecure apply to aero+quic:// only: aero:// is plain TCP")
	}
	if strings.HasPrefix(c.Bootstrap, "aero+quic://") && c.TLSCA == "" && !c.Insecure {
		return nil, errors.New("aero+quic:// needs --tls-ca FILE (the agent's DATA_DIR/native-tls/ca.pem) or --insecure")
	}
	password := c.Password
	if password == "" {
		password = os.Getenv("AEROSTREAM_PASSWORD")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return aerostream.Connect(ctx, c.Bootstrap, aerostream.Config{
		ClientID:           clientID,
		SASL:               aerostream.SASL{Mechanism: c.Mechanism, User: c.User, Password: password},
		TLSCAFile:          c.TLSCA,
		InsecureSkipVerify: c.Insecure,
	})
}
