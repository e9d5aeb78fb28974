// Package testagent starts an AeroStream agent for tests: the binary
// $AEROSTREAM_BIN on free ports of 127.0.0.1 with a data folder of the
// test's own, stopped when the test ends.
package testagent

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Agent is a running agent.
type Agent struct {
	// Native is the native listener's HOST:PORT; Bootstrap its aero:// URL.
	Native    string
	Bootstrap string
	// Kafka is the Kafka listener's HOST:PORT.
	Kafka   string
	DataDir string
	log     *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Bin is the agent binary, or "" when AEROSTREAM_BIN is unset.
func Bin() string { return os.Getenv("AEROSTREAM_BIN") }

// freePorts gives n ports free for both TCP and UDP (the native listener
// uses both).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	seen := map[int]bool{}
	for tries := 0; len(out) < n && tries < 1000; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(p))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if len(out) < n {
		t.Fatal("no free ports")
	}
	return out
}

// Start starts an agent with extra serve arguments, or skips the test
// when AEROSTREAM_BIN is unset.
func Start(t *testing.T, args ...string) *Agent {
	t.Helper()
	bin := Bin()
	if bin == "" {
		t.Skip("AEROSTREAM_BIN is unset: set it to an aerostream binary (cargo build -p agent --bin aerostream) to run the tests against a real agent")
	}
	ports := freePorts(t, 3)
	dir := t.TempDir()
	a := &Agent{
		Native:  fmt.Sprintf("127.0.0.1:%d", ports[0]),
		Kafka:   fmt.Sprintf("127.0.0.1:%d", ports[1]),
		DataDir: filepath.Join(dir, "data"),
		log:     &lockedBuffer{},
	}
	a.Bootstrap = "aero://" + a.Native
	httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[2])
	cmd := exec.Command(bin, append([]string{"serve",
		"--data-dir", a.DataDir,
		"--native-addr", a.Native,
		"--kafka-addr", a.Kafka,
		"--http-addr", httpAddr,
		"--shards", "2",
		"--group-initial-rebalance-delay-ms", "200",
		// no fixed ports: many agents run at once
		"--schema-registry-addr", "off",
		"--connect-addr", "off",
	}, args...)...)
	cmd.Stdout = a.log
	cmd.Stderr = a.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", tail(a.log.String(), 40))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	client := http.Client{Timeout: time.Second}
	for {
		select {
		case err := <-exited:
			t.Fatalf("the agent exited (%v); its log:\n%s", err, tail(a.log.String(), 40))
		default:
		}
		if resp, err := client.Get("http://" + httpAddr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 && bytes.Contains([]byte(a.log.String()), []byte("aerostream listening")) {
				return a
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent does not serve after 60 s; its log:\n%s", tail(a.log.String(), 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, lines int) string {
	n := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			n++
			if n > lines {
				return s[i+1:]
			}
		}
	}
	return s
}
