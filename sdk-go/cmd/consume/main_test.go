package main

import (
	"bytes"
	"strings"
	"testing"

	aerostream "github.com/aerostream/aerostream/sdk-go"
)

func TestFromParses(t *testing.T) {
	for in, want := range map[string]aerostream.StartAt{
		"earliest": aerostream.Earliest,
		"latest":   aerostream.Latest,
		"42":       aerostream.AtOffset(42),
		"0":        aerostream.AtOffset(0),
	} {
		got, err := parseFrom(in)
		if err != nil || got != want {
			t.Errorf("--from %s: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "first", ""} {
		if _, err := parseFrom(bad); err == nil {
			t.Errorf("--from %q was taken", bad)
		}
	}
}

// Mistakes are refused before connecting, saying what is wrong.
func TestFlagMistakesAreRefused(t *testing.T) {
	for args, want := range map[string]string{
		"--topic t":                      "--bootstrap is required",
		"--bootstrap aero://127.0.0.1:1": "--topic is required",
		"--bootstrap aero://h:1 --topic t --from nowhere":     "is not earliest, latest or an offset",
		"--bootstrap aero://h:1 --topic t --isolation some":   "is not read-committed or read-uncommitted",
		"--bootstrap aero://h:1 --topic t --tls-ca ca.pem":    "apply to aero+quic:// only",
		"--bootstrap aero+quic://h:1 --topic t":               "needs --tls-ca",
		"--bootstrap http://h:1 --topic t":                    "is not an aero://HOST:PORT",
		"--bootstrap aero://h:1 --topic t --group g --from 5": "use earliest or latest",
	} {
		err := run(strings.Fields(args), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("consume %s: %v, want an error saying %q", args, err, want)
		}
	}
}
