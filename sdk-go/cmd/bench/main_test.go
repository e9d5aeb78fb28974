package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerostream/aerostream/sdk-go/internal/testagent"
)

// Mistakes are refused before connecting, saying what is wrong.
func TestFlagMistakesAreRefused(t *testing.T) {
	for args, want := range map[string]string{
		"--bootstrap aero://127.0.0.1:1":                 "--topic is required",
		"--bootstrap aero://h:1 --topic t --rate fast":   `--rate "fast" is not a positive number or max`,
		"--bootstrap aero://h:1 --topic t --size 4":      "--size must be at least 8",
		"--bootstrap aero://h:1 --topic t --rate 0":      `--rate "0" is not a positive number or max`,
		"--bootstrap aero://h:1 --topic t --consumers 0": "at least 1",
		"--topic t --rate 10":                            "--bootstrap is required",
	} {
		err := run(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bench %s: %v, want an error saying %q", args, err, want)
		}
	}
}

// A short paced run against a real agent: everything published in the
// window is acknowledged and read back, and the report says so.
func TestAPacedRunReportsEveryRecordReadBack(t *testing.T) {
	a := testagent.Start(t)
	out := filepath.Join(t.TempDir(), "report.json")
	err := run([]string{"--bootstrap", a.Bootstrap, "--topic", "bench", "--rate", "2000",
		"--warmup", "0.5", "--duration", "2", "--json", out})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if r.SDK != "go" || r.Transport != "tcp" || r.Partitions != 8 || r.Size != 1024 {
		t.Errorf("report describes the wrong run: %+v", r)
	}
	// 2 s at 2000 msg/s; pacing may start a few late on a loaded machine
	if r.Publish.Messages < 3000 || r.Publish.Messages > 4100 {
		t.Errorf("published %d records in 2 s at 2000 msg/s", r.Publish.Messages)
	}
	if r.Consume.Messages != r.Publish.Messages {
		t.Errorf("consumed %d of the %d records published in the window", r.Consume.Messages, r.Publish.Messages)
	}
	if r.PublishLat.P50 <= 0 || r.PublishLat.P50 > r.PublishLat.P99 || r.PublishLat.P99 > r.PublishLat.Max {
		t.Errorf("publish percentiles out of order: %+v", r.PublishLat)
	}
}
