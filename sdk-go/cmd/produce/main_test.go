package main

import (
	"strings"
	"testing"
)

// Mistakes are refused before connecting, saying what is wrong.
func TestFlagMistakesAreRefused(t *testing.T) {
	for args, want := range map[string]string{
		"--bootstrap aero://127.0.0.1:1":                        "--topic is required",
		"--bootstrap aero://h:1 --topic t --compression brotli": "is not none, gzip, snappy, lz4 or zstd",
		"--bootstrap aero://h:1 --topic t --abort":              "--abort goes with --transactional-id",
		"--topic t": "--bootstrap is required",
	} {
		err := run(strings.Fields(args), strings.NewReader(""))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("produce %s: %v, want an error saying %q", args, err, want)
		}
	}
}
