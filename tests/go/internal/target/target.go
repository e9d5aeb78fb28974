// Package target names the brokers the Go client suites run against and
// holds what the franz-go and sarama suites share: unique names, waiting for
// a condition, running a test once per broker.
//
// scripts/go-tests.sh starts AeroStream on one agent and on three, and Apache
// Kafka as the reference, and names them in the environment variable
// AEROSTREAM_TARGETS, a JSON list of objects:
//
//	[{"name": "kafka", "bootstrap": "127.0.0.1:9092", "brokers": 1,
//	  "authorizer": true, "sasl": "SCRAM-SHA-512:user:password"}]
//
// Without it, BOOTSTRAP (with TARGET, BROKERS, AUTHORIZER and SASL) names a
// single running broker.
package target

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Patience bounds how long a test waits for something the broker should do
// soon: a guard against hanging, not a check of how fast it is.
const Patience = 60 * time.Second

// Target is one running broker or cluster.
type Target struct {
	Name       string `json:"name"`
	Bootstrap  string `json:"bootstrap"`
	Brokers    int    `json:"brokers"`
	Authorizer bool   `json:"authorizer"`
	// SASL is MECHANISM:USER:PASSWORD, to log in over plaintext; empty for none.
	SASL string `json:"sasl"`
}

// Addrs are the addresses clients bootstrap from.
func (t Target) Addrs() []string {
	var out []string
	for _, a := range strings.Split(t.Bootstrap, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// ReplicationFactor is the replicas per partition of the topics tests
// create: every broker, up to three.
func (t Target) ReplicationFactor() int16 {
	return int16(min(3, max(1, t.Brokers)))
}

// Login splits SASL into its mechanism, user and password; ok is false when
// the target takes no login.
func (t Target) Login() (mechanism, user, password string, ok bool) {
	parts := strings.SplitN(t.SASL, ":", 3)
	if len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// IsKafka tells whether the target is the reference broker.
func (t Target) IsKafka() bool {
	return strings.HasPrefix(t.Name, "kafka")
}

// Load reads the targets from the environment.
func Load() ([]Target, error) {
	if raw := os.Getenv("AEROSTREAM_TARGETS"); strings.TrimSpace(raw) != "" {
		var ts []Target
		if err := json.Unmarshal([]byte(raw), &ts); err != nil {
			return nil, fmt.Errorf("AEROSTREAM_TARGETS: %w", err)
		}
		for i := range ts {
			if ts[i].Name == "" || ts[i].Bootstrap == "" {
				return nil, fmt.Errorf("AEROSTREAM_TARGETS: target %d has no name or bootstrap", i)
			}
			if ts[i].Brokers == 0 {
				ts[i].Brokers = 1
			}
		}
		return ts, nil
	}
	bootstrap := os.Getenv("BOOTSTRAP")
	if bootstrap == "" {
		return nil, fmt.Errorf("no broker to test: set AEROSTREAM_TARGETS or BOOTSTRAP=HOST:PORT (scripts/go-tests.sh starts the brokers and does this)")
	}
	t := Target{Name: envOr("TARGET", "default"), Bootstrap: bootstrap, Brokers: 1, SASL: os.Getenv("SASL")}
	if b := os.Getenv("BROKERS"); b != "" {
		n, err := strconv.Atoi(b)
		if err != nil {
			return nil, fmt.Errorf("BROKERS: %w", err)
		}
		t.Brokers = n
	}
	t.Authorizer = os.Getenv("AUTHORIZER") == "true"
	return []Target{t}, nil
}

func envOr(name, otherwise string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return otherwise
}

var all []Target

// Main is the suites' TestMain: it loads the targets, failing the run when
// none is named, and runs the tests.
func Main(m *testing.M) {
	ts, err := Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	all = ts
	os.Exit(m.Run())
}

// Each runs fn once per target, as parallel subtests named after the
// targets; the test itself runs in parallel with the others.
func Each(t *testing.T, fn func(t *testing.T, tg Target)) {
	t.Helper()
	t.Parallel()
	for _, tg := range all {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, tg)
		})
	}
}

// Unique is prefix followed by a random suffix: a name no other test or
// run uses.
func Unique(prefix string) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + "-" + hex.EncodeToString(b)
}

// Eventually calls check until it returns nil, failing the test with its
// last error after Patience.
func Eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(Patience)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
