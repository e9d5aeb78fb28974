package proto

import (
	"encoding/hex"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/aerostream/aerostream/sdk-go/internal/testagent"
)

// expectErrorFrame reads frames until an error frame, and checks the
// connection is closed after it.
func expectErrorFrame(t *testing.T, c net.Conn, what string) *ErrorFrame {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var head [HeaderLen]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			t.Errorf("%s: no error frame before the connection ended: %v", what, err)
			return nil
		}
		h, err := DecodeHeader(head[:], 1<<20)
		if err != nil {
			t.Errorf("%s: the server sent a bad header: %v", what, err)
			return nil
		}
		body := make([]byte, h.Len)
		if _, err := io.ReadFull(c, body); err != nil {
			t.Errorf("%s: %v", what, err)
			return nil
		}
		m, err := DecodeBody(h.Op, body)
		if err != nil {
			t.Errorf("%s: the server sent a frame this codec refuses: %v", what, err)
			return nil
		}
		if ef, ok := m.(*ErrorFrame); ok {
			var one [1]byte
			if _, err := c.Read(one[:]); !errors.Is(err, io.EOF) {
				t.Errorf("%s: the connection stays open after the error frame (%v)", what, err)
			}
			return ef
		}
	}
}

func hello(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := c.Write(Encode(&Hello{MinVersion: 1, MaxVersion: 1, ClientID: "conformance"})); err != nil {
		t.Fatal(err)
	}
}

// The agent refuses every malformed request of the corpus with the error
// frame docs/native-protocol.md section 6.1 names, and closes the
// connection: INVALID_REQUEST for a body that does not decode,
// UNKNOWN_OPERATION for an operation it does not serve, BAD_FRAME for a
// wrong header.
func TestAgentRefusesTheCorpusMalformedFrames(t *testing.T) {
	a := testagent.Start(t)
	var doc struct {
		Vectors []struct {
			Name  string `json:"name"`
			Frame string `json:"frame"`
			Error string `json:"error"`
		} `json:"vectors"`
	}
	readCorpus(t, "malformed.json", &doc)
	tried := 0
	for _, v := range doc.Vectors {
		frame, _ := hex.DecodeString(v.Frame)
		var want ErrorCode
		sendHello := true
		switch v.Error {
		case ClassBadMagic, ClassBadVersion:
			want = ErrBadFrame
		case ClassUnknownOp:
			want = ErrUnknownOperation
		case ClassTruncated, ClassTrailing, ClassCount, ClassNotUTF8, ClassInvalid:
			h, err := DecodeHeader(frame, maxBody)
			if err != nil || uint64(len(frame)-HeaderLen) != uint64(h.Len) {
				continue // a frame cut inside a stream: the server waits for the rest
			}
			switch {
			case h.Op == OpHello:
				want, sendHello = ErrInvalidRequest, false
			case h.Op&Response != 0 || h.Op == OpError:
				// responses are not requests: the server serves no such operation
				want = ErrUnknownOperation
			default:
				want = ErrInvalidRequest
			}
		default:
			continue // short or over-long headers: nothing to send on a stream
		}
		c, err := net.Dial("tcp", a.Native)
		if err != nil {
			t.Fatal(err)
		}
		if sendHello {
			hello(t, c)
		}
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		ef := expectErrorFrame(t, c, v.Name)
		c.Close()
		tried++
		if ef == nil {
			continue
		}
		if ef.Error != want {
			t.Errorf("%q: the agent answered %s (%s), want %s", v.Name, ef.Error, ef.Message, want)
		}
		if corr, ok := CorrelationOf(frame[HeaderLen:]); ok && want != ErrBadFrame && ef.Correlation != corr {
			t.Errorf("%q: error frame for correlation %d, the request's is %d", v.Name, ef.Correlation, corr)
		}
	}
	if tried < 100 {
		t.Errorf("only %d malformed frames sent", tried)
	}
}

// The corpus's conversation "a request before the hello", against the agent.
func TestAgentWantsAHelloFirst(t *testing.T) {
	a := testagent.Start(t)
	c, err := net.Dial("tcp", a.Native)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(Encode(&Ping{Correlation: 5, Nonce: 1})); err != nil {
		t.Fatal(err)
	}
	ef := expectErrorFrame(t, c, "ping before hello")
	if ef != nil && (ef.Error != ErrHelloRequired || ef.Correlation != 5) {
		t.Errorf("got %s for correlation %d, want HELLO_REQUIRED for 5", ef.Error, ef.Correlation)
	}
}

// Pipelined requests are answered by correlation id, the hello's answer
// first.
func TestAgentAnswersPipelinedRequests(t *testing.T) {
	a := testagent.Start(t)
	c, err := net.Dial("tcp", a.Native)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []byte
	out = AppendFrame(out, &Hello{Correlation: 0, MinVersion: 1, MaxVersion: 1, ClientID: "pipeline"})
	for i := uint32(1); i <= 20; i++ {
		out = AppendFrame(out, &Ping{Correlation: i, Nonce: uint64(i) * 1000})
	}
	out = AppendFrame(out, &Metadata{Correlation: 21, Topics: []string{}})
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	seen := map[uint32]bool{}
	for i := 0; i < 22; i++ {
		var head [HeaderLen]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			t.Fatalf("after %d answers: %v", i, err)
		}
		h, err := DecodeHeader(head[:], 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, h.Len)
		if _, err := io.ReadFull(c, body); err != nil {
			t.Fatal(err)
		}
		m, err := DecodeBody(h.Op, body)
		if err != nil {
			t.Fatalf("the agent sent a frame this codec refuses: %v", err)
		}
		if i == 0 {
			hr, ok := m.(*HelloResponse)
			if !ok || hr.Error != ErrNone || hr.Version != 1 || hr.MaxFrameBytes == 0 {
				t.Fatalf("first answer %#v, want a HelloResponse", m)
			}
			continue
		}
		corr, _ := Correlation(m)
		if seen[corr] {
			t.Fatalf("correlation %d answered twice", corr)
		}
		seen[corr] = true
		switch r := m.(type) {
		case *Pong:
			if r.Nonce != uint64(r.Correlation)*1000 {
				t.Errorf("pong %d carries nonce %d", r.Correlation, r.Nonce)
			}
		case *MetadataResponse:
			if r.Correlation != 21 || len(r.Nodes) == 0 {
				t.Errorf("metadata answer %#v", r)
			}
		default:
			t.Errorf("unexpected answer %s", MessageName(m))
		}
	}
}
