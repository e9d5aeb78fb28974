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
	"strings"
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
	http    string
	exited  chan error
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
	bin := need(t)
	ports := freePorts(t, 3)
	a := launch(t, bin, t.TempDir(), ports, args)
	a.waitReady(t)
	return a
}

// StartCluster starts n agents that form one cluster (every one a
// metastore voter), or skips the test when AEROSTREAM_BIN is unset.
func StartCluster(t *testing.T, n int, args ...string) []*Agent {
	t.Helper()
	bin := need(t)
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	if out, err := exec.Command(bin, "cluster-ca", "--out", certs, "--nodes", strings.Join(ids, ",")).CombinedOutput(); err != nil {
		t.Fatalf("cluster-ca: %v\n%s", err, out)
	}
	ports := freePorts(t, 4*n)
	voters := make([]string, n)
	for i := range voters {
		voters[i] = fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[4*i+3])
	}
	agents := make([]*Agent, n)
	for i := range agents {
		extra := append([]string{
			"--node-id", ids[i], "--rack", "rack-" + ids[i],
			"--cluster-addr", fmt.Sprintf("127.0.0.1:%d", ports[4*i+3]),
			"--voters", strings.Join(voters, ","),
			"--cluster-certs", certs,
		}, args...)
		agents[i] = launch(t, bin, filepath.Join(dir, "node-"+ids[i]), ports[4*i:4*i+3], extra)
	}
	for _, a := range agents {
		a.waitReady(t)
	}
	return agents
}

func need(t *testing.T) string {
	t.Helper()
	bin := Bin()
	if bin == "" {
		t.Skip("AEROSTREAM_BIN is unset: set it to an aerostream binary (cargo build -p agent --bin aerostream) to run the tests against a real agent")
	}
	return bin
}

// launch starts one agent on ports (native, kafka, http), stopped when
// the test ends.
func launch(t *testing.T, bin, dir string, ports []int, args []string) *Agent {
	t.Helper()
	a := &Agent{
		Native:  fmt.Sprintf("127.0.0.1:%d", ports[0]),
		Kafka:   fmt.Sprintf("127.0.0.1:%d", ports[1]),
		DataDir: filepath.Join(dir, "data"),
		log:     &lockedBuffer{},
		http:    fmt.Sprintf("127.0.0.1:%d", ports[2]),
		exited:  make(chan error, 1),
	}
	a.Bootstrap = "aero://" + a.Native
	cmd := exec.Command(bin, append([]string{"serve",
		"--data-dir", a.DataDir,
		"--native-addr", a.Native,
		"--kafka-addr", a.Kafka,
		"--http-addr", a.http,
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
	go func() { a.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-a.exited
		}
		if t.Failed() {
			t.Logf("agent %s log:\n%s", a.Native, tail(a.log.String(), 40))
		}
	})
	return a
}

// waitReady waits until the agent serves.
func (a *Agent) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	client := http.Client{Timeout: time.Second}
	for {
		select {
		case err := <-a.exited:
			a.exited <- err
			t.Fatalf("the agent exited (%v); its log:\n%s", err, tail(a.log.String(), 40))
		default:
		}
		if resp, err := client.Get("http://" + a.http + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(a.log.String(), "aerostream listening") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent does not serve after 90 s; its log:\n%s", tail(a.log.String(), 40))
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
