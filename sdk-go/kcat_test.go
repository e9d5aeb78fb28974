package aerostream_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	aerostream "github.com/aerostream/aerostream/sdk-go"
	"github.com/aerostream/aerostream/sdk-go/internal/testagent"
)

// buildCommands builds cmd/produce and cmd/consume into a temporary folder.
func buildCommands(t *testing.T) (produce, consume string) {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", dir, "./cmd/produce", "./cmd/consume").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "produce"), filepath.Join(dir, "consume")
}

func lines(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	g := append([]string(nil), got...)
	w := append([]string(nil), want...)
	sort.Strings(g)
	sort.Strings(w)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("%s: got %d lines, want %d (first got %q)", what, len(got), len(want), first(got))
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func run(t *testing.T, stdin string, name string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	text := strings.TrimSuffix(stdout.String(), "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// The Go commands and Kafka's own tooling (kcat, librdkafka) read each
// other's records: the native and Kafka listeners share one log.
func TestGoCommandsAndKcatShareRecords(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed")
	}
	a := testagent.Start(t)
	produce, consume := buildCommands(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := aerostream.Connect(ctx, a.Bootstrap, aerostream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, topic := range []string{"from-go", "from-kcat"} {
		if err := c.CreateTopic(ctx, topic, 3, -1, nil); err != nil {
			t.Fatal(err)
		}
	}

	// Go produce writes 1,000 lines; kcat reads them from the Kafka port
	sent := lines(1000, "go")
	run(t, strings.Join(sent, "\n")+"\n", produce, "--bootstrap", a.Bootstrap, "--topic", "from-go")
	got := run(t, "", kcat, "-C", "-b", a.Kafka, "-t", "from-go", "-o", "beginning", "-e", "-q", "-f", "%s\n")
	sameLines(t, "kcat reading what Go produced", got, sent)

	// kcat writes 1,000 lines, 200 uncompressed and 200 with each of
	// Kafka's compressions; Go consume reads them from the native port
	plain := lines(200, "kcat")
	run(t, strings.Join(plain, "\n")+"\n", kcat, "-P", "-b", a.Kafka, "-t", "from-kcat")
	var zipped []string
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		some := lines(200, "kcat-"+codec)
		run(t, strings.Join(some, "\n")+"\n", kcat, "-P", "-b", a.Kafka, "-t", "from-kcat", "-z", codec)
		zipped = append(zipped, some...)
	}
	got = run(t, "", consume, "--bootstrap", a.Bootstrap, "--topic", "from-kcat", "--from", "earliest", "--count", "1000")
	sameLines(t, "Go consume reading what kcat produced", got, append(plain, zipped...))

	// the same over QUIC, trusting the agent's own CA
	got = run(t, "", consume, "--bootstrap", "aero+quic://"+a.Native, "--tls-ca", filepath.Join(a.DataDir, "native-tls", "ca.pem"),
		"--topic", "from-kcat", "--from", "earliest", "--count", "1000")
	sameLines(t, "Go consume over QUIC reading what kcat produced", got, append(plain, zipped...))

	// and as a group member, from the offsets it committed
	got = run(t, "", consume, "--bootstrap", a.Bootstrap, "--topic", "from-kcat", "--group", "g", "--count", "600")
	if len(got) != 600 {
		t.Fatalf("the group member read %d lines, want 600", len(got))
	}
	rest := run(t, "", consume, "--bootstrap", a.Bootstrap, "--topic", "from-kcat", "--group", "g", "--count", "400")
	sameLines(t, "two group members in turn", append(got, rest...), append(plain, zipped...))

	// compressed batches of the Go command, read by kcat
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		topic := "go-" + codec
		sent := lines(300, topic)
		run(t, strings.Join(sent, "\n")+"\n", produce, "--bootstrap", a.Bootstrap, "--topic", topic, "--compression", codec)
		got := run(t, "", kcat, "-C", "-b", a.Kafka, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")
		sameLines(t, "kcat reading Go's "+codec+" batches", got, sent)
	}

	// a transaction of the Go command, committed then aborted: kcat in
	// read_committed sees the first only
	run(t, "t1\nt2\n", produce, "--bootstrap", a.Bootstrap, "--topic", "from-go-txn", "--transactional-id", "cmd")
	run(t, "t3\n", produce, "--bootstrap", a.Bootstrap, "--topic", "from-go-txn", "--transactional-id", "cmd", "--abort")
	got = run(t, "", kcat, "-C", "-b", a.Kafka, "-t", "from-go-txn", "-o", "beginning", "-e", "-q", "-f", "%s\n", "-X", "isolation.level=read_committed")
	sameLines(t, "kcat read_committed of Go transactions", got, []string{"t1", "t2"})
	got = run(t, "", consume, "--bootstrap", a.Bootstrap, "--topic", "from-go-txn", "--isolation", "read-uncommitted", "--count", "3")
	sameLines(t, "Go consume read_uncommitted of Go transactions", got, []string{"t1", "t2", "t3"})

	// a key goes to the partition a Kafka client with Kafka's murmur2
	// partitioner picks
	run(t, "user-42:hello\n", produce, "--bootstrap", a.Bootstrap, "--topic", "from-go", "--key-sep", ":")
	part := run(t, "", kcat, "-C", "-b", a.Kafka, "-t", "from-go", "-o", "beginning", "-e", "-q", "-f", "%k %p\n")
	want := fmt.Sprintf("user-42 %d", aerostream.PartitionForKey([]byte("user-42"), 3))
	found := false
	for _, l := range part {
		if l == want {
			found = true
		}
	}
	if !found {
		t.Fatalf("no record %q among what kcat reads", want)
	}
}
