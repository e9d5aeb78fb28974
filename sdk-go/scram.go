package aerostream

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/aerostream/aerostream/sdk-go/proto"
)

// scram logs in with SCRAM-SHA-256 or -512 (RFC 5802) over two
// Authenticate messages, and checks the server's signature.
func (c *conn) scram(ctx context.Context, mech, user, password string) error {
	h := sha256.New
	if mech == "SCRAM-SHA-512" {
		h = sha512.New
	}
	var raw [18]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	nonce := base64.RawStdEncoding.EncodeToString(raw[:])
	name := strings.NewReplacer("=", "=3D", ",", "=2C").Replace(user)
	clientFirstBare := "n=" + name + ",r=" + nonce
	reply, err := c.exchange(ctx, &proto.Authenticate{Correlation: 1, Mechanism: mech, AuthBytes: []byte("n,," + clientFirstBare)})
	if err != nil {
		return err
	}
	first, ok := reply.(*proto.AuthenticateResponse)
	if !ok {
		return fmt.Errorf("answered an Authenticate with %s", proto.MessageName(reply))
	}
	if err := serverError(first.Error, "", "SCRAM login"); err != nil {
		return err
	}
	serverFirst := string(first.AuthBytes)
	attrs := scramAttrs(serverFirst)
	serverNonce, salt64, iters := attrs["r"], attrs["s"], attrs["i"]
	if !strings.HasPrefix(serverNonce, nonce) || len(serverNonce) == len(nonce) {
		return errors.New("SCRAM: the server's nonce does not extend the client's")
	}
	salt, err := base64.StdEncoding.DecodeString(salt64)
	if err != nil {
		return fmt.Errorf("SCRAM: the server's salt is not base64: %w", err)
	}
	n, err := strconv.Atoi(iters)
	if err != nil || n < 1 || n > 10_000_000 {
		return fmt.Errorf("SCRAM: iteration count %q refused", iters)
	}
	salted := pbkdf2(h, []byte(password), salt, n)
	clientKey := hmacOf(h, salted, []byte("Client Key"))
	storedKey := hashOf(h, clientKey)
	finalNoProof := "c=biws,r=" + serverNonce
	authMessage := clientFirstBare + "," + serverFirst + "," + finalNoProof
	signature := hmacOf(h, storedKey, []byte(authMessage))
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ signature[i]
	}
	final := finalNoProof + ",p=" + base64.StdEncoding.EncodeToString(proof)
	reply, err = c.exchange(ctx, &proto.Authenticate{Correlation: 2, Mechanism: mech, AuthBytes: []byte(final)})
	if err != nil {
		return err
	}
	last, ok := reply.(*proto.AuthenticateResponse)
	if !ok {
		return fmt.Errorf("answered an Authenticate with %s", proto.MessageName(reply))
	}
	if err := serverError(last.Error, "", "SCRAM login"); err != nil {
		return err
	}
	serverKey := hmacOf(h, salted, []byte("Server Key"))
	want := base64.StdEncoding.EncodeToString(hmacOf(h, serverKey, []byte(authMessage)))
	if got := scramAttrs(string(last.AuthBytes))["v"]; !hmac.Equal([]byte(got), []byte(want)) {
		return errors.New("SCRAM: the server's signature is wrong: it does not know the password")
	}
	if !last.Complete {
		return errors.New("SCRAM: the server did not complete the login")
	}
	return nil
}

func scramAttrs(s string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(part, "="); ok && len(k) == 1 {
			out[k] = v
		}
	}
	return out
}

func hmacOf(h func() hash.Hash, key, data []byte) []byte {
	m := hmac.New(h, key)
	m.Write(data)
	return m.Sum(nil)
}

func hashOf(h func() hash.Hash, data []byte) []byte {
	x := h()
	x.Write(data)
	return x.Sum(nil)
}

// pbkdf2 is RFC 8018's PBKDF2 with HMAC-h, one block (SCRAM's Hi()).
func pbkdf2(h func() hash.Hash, password, salt []byte, iterations int) []byte {
	prf := hmac.New(h, password)
	prf.Write(salt)
	prf.Write(binary.BigEndian.AppendUint32(nil, 1))
	u := prf.Sum(nil)
	out := append([]byte(nil), u...)
	for i := 1; i < iterations; i++ {
		prf.Reset()
		prf.Write(u)
		u = prf.Sum(u[:0])
		for j := range out {
			out[j] ^= u[j]
		}
	}
	return out
}
