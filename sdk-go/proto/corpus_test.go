package proto

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// corpusDir is sdk/vectors/ of the repository (or $AEROSTREAM_VECTORS).
func corpusDir(t *testing.T) string {
	if d := os.Getenv("AEROSTREAM_VECTORS"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "sdk", "vectors")
}

func readCorpus(t *testing.T, name string, into any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(corpusDir(t), name))
	if err != nil {
		t.Fatalf("cannot read the corpus file %s: %v", name, err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// canonical reparses JSON with exact numbers, so values compare whatever
// the key order and number spelling.
func canonical(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, raw)
	}
	return v
}

type messageVector struct {
	Name    string          `json:"name"`
	Message string          `json:"message"`
	Op      int             `json:"op"`
	Frame   string          `json:"frame"`
	Value   json.RawMessage `json:"value"`
}

const maxBody = 104857600

// checkMessage: the frame decodes to the value, and the value encodes to
// the frame byte for byte.
func checkMessage(t *testing.T, where string, v messageVector) {
	t.Helper()
	frame, err := hex.DecodeString(v.Frame)
	if err != nil {
		t.Fatalf("%s %q: frame is not hex: %v", where, v.Name, err)
	}
	m, err := DecodeFrame(frame, maxBody)
	if err != nil {
		t.Errorf("%s %q: refused: %v", where, v.Name, err)
		return
	}
	if v.Op != 0 && v.Op != int(frame[2]) {
		t.Errorf("%s %q: op %d is not the header's %d", where, v.Name, v.Op, frame[2])
	}
	if got := MessageName(m); got != v.Message {
		t.Errorf("%s %q: decoded as %s, want %s", where, v.Name, got, v.Message)
	}
	got, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("%s %q: %v", where, v.Name, err)
	}
	if !reflect.DeepEqual(canonical(t, got), canonical(t, v.Value)) {
		t.Errorf("%s %q: decodes to\n%s\nwant\n%s", where, v.Name, got, v.Value)
	}
	fresh := NewMessageNamed(v.Message)
	if fresh == nil {
		t.Errorf("%s %q: no message is named %s", where, v.Name, v.Message)
		return
	}
	if err := json.Unmarshal(v.Value, fresh); err != nil {
		t.Errorf("%s %q: the value does not parse: %v", where, v.Name, err)
		return
	}
	if enc := hex.EncodeToString(Encode(fresh)); enc != v.Frame {
		t.Errorf("%s %q: encodes to\n%s\nwant\n%s", where, v.Name, enc, v.Frame)
	}
}

var messageFiles = []string{
	"connection.json", "metadata.json", "produce.json", "fetch.json",
	"groups.json", "subscribe.json", "txn.json", "errors.json",
}

func TestCorpusMessages(t *testing.T) {
	seen := map[string]bool{}
	total := 0
	for _, file := range messageFiles {
		var doc struct {
			Vectors []messageVector `json:"vectors"`
		}
		readCorpus(t, file, &doc)
		if len(doc.Vectors) == 0 {
			t.Errorf("%s has no vector", file)
		}
		for _, v := range doc.Vectors {
			checkMessage(t, file, v)
			seen[v.Message] = true
			total++
		}
	}
	for _, op := range Ops() {
		if name := names[op]; !seen[name] {
			t.Errorf("the corpus has no vector for %s (op %#02x)", name, op)
		}
	}
	if total < 60 {
		t.Errorf("only %d message vectors", total)
	}
}

func TestCorpusMalformed(t *testing.T) {
	var doc struct {
		Vectors []struct {
			Name    string `json:"name"`
			Frame   string `json:"frame"`
			MaxBody uint32 `json:"max_body"`
			Error   string `json:"error"`
		} `json:"vectors"`
	}
	readCorpus(t, "malformed.json", &doc)
	if len(doc.Vectors) < 100 {
		t.Fatalf("only %d malformed vectors", len(doc.Vectors))
	}
	for _, v := range doc.Vectors {
		frame, err := hex.DecodeString(v.Frame)
		if err != nil {
			t.Fatalf("%q: not hex", v.Name)
		}
		m, err := DecodeFrame(frame, v.MaxBody)
		if err == nil {
			t.Errorf("%q: accepted as %s, want refused (%s)", v.Name, MessageName(m), v.Error)
			continue
		}
		de, ok := err.(*DecodeError)
		if !ok {
			t.Errorf("%q: refused with %T, want a *DecodeError", v.Name, err)
			continue
		}
		if de.Class != v.Error {
			t.Errorf("%q: refused as %s (%v), want %s", v.Name, de.Class, de, v.Error)
		}
	}
}

func TestCorpusConversations(t *testing.T) {
	var doc struct {
		Conversations []struct {
			Name  string `json:"name"`
			Steps []struct {
				From string `json:"from"`
				messageVector
			} `json:"steps"`
		} `json:"conversations"`
	}
	readCorpus(t, "conversations.json", &doc)
	if len(doc.Conversations) == 0 {
		t.Fatal("no conversation")
	}
	for _, c := range doc.Conversations {
		asked := map[uint32]bool{}
		for i, s := range c.Steps {
			s.messageVector.Name = c.Name
			checkMessage(t, "conversations.json", s.messageVector)
			frame, _ := hex.DecodeString(s.Frame)
			m, err := DecodeFrame(frame, maxBody)
			if err != nil {
				continue
			}
			corr, has := Correlation(m)
			if !has {
				continue
			}
			switch s.From {
			case "client":
				asked[corr] = true
			case "server":
				if !asked[corr] {
					t.Errorf("%q step %d: answers correlation %d, never asked", c.Name, i, corr)
				}
				delete(asked, corr)
			default:
				t.Errorf("%q step %d: unknown sender %q", c.Name, i, s.From)
			}
		}
	}
}

func TestCorpusErrorCodes(t *testing.T) {
	var doc struct {
		Codes []struct {
			Code        uint16 `json:"code"`
			Name        string `json:"name"`
			Retriable   bool   `json:"retriable"`
			Description string `json:"description"`
		} `json:"error_codes"`
	}
	readCorpus(t, "error_codes.json", &doc)
	if len(doc.Codes) != len(KnownErrorCodes()) {
		t.Errorf("the corpus has %d codes, this client knows %d", len(doc.Codes), len(KnownErrorCodes()))
	}
	for _, c := range doc.Codes {
		code := ErrorCode(c.Code)
		if code.Name() != c.Name || code.Retriable() != c.Retriable || code.Description() != c.Description {
			t.Errorf("code %d: this client says %s retriable=%v %q; the corpus %s retriable=%v %q",
				c.Code, code.Name(), code.Retriable(), code.Description(), c.Name, c.Retriable, c.Description)
		}
	}
	if ErrorCode(9999).Retriable() || ErrorCode(9999).Name() != "UNKNOWN_CODE" {
		t.Error("an unknown code must be UNKNOWN_CODE and not retriable")
	}
}

// No input makes the decoder panic: every prefix and every one-byte
// change of every corpus frame decodes or is refused.
func TestDecoderNeverPanicsOnCorpusMutations(t *testing.T) {
	for _, file := range messageFiles {
		var doc struct {
			Vectors []messageVector `json:"vectors"`
		}
		readCorpus(t, file, &doc)
		for _, v := range doc.Vectors {
			frame, _ := hex.DecodeString(v.Frame)
			for n := 0; n <= len(frame) && n < 200; n++ {
				_, _ = DecodeFrame(frame[:n], maxBody)
			}
			for i := 0; i < len(frame) && i < 120; i++ {
				for _, b := range []byte{0x00, 0xFF, 0x7F, 0x80} {
					mutated := append([]byte(nil), frame...)
					mutated[i] = b
					_, _ = DecodeFrame(mutated, maxBody)
				}
			}
		}
	}
}
