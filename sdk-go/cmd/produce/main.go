// Command produce writes each line of stdin as one record of a topic
// (acks all, idempotent), and exits non-zero when any record failed.
//
//	produce --bootstrap aero://127.0.0.1:9091 --topic t < lines.txt
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	aerostream "github.com/aerostream/aerostream/sdk-go"
	"github.com/aerostream/aerostream/sdk-go/internal/cli"
)

func main() {
	if err := run(os.Args[1:], os.Stdin); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "produce:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	var conn cli.Conn
	conn.Register(fs)
	topic := fs.String("topic", "", "topic to produce to")
	keySep := fs.String("key-sep", "", "split each line at the first occurrence of this separator into key and value")
	txn := fs.String("transactional-id", "", "not offered by the Go client yet")
	fs.Bool("abort", false, "not offered by the Go client yet")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *topic == "" {
		return errors.New("--topic is required")
	}
	if *txn != "" {
		return errors.New("--transactional-id: the Go client does not offer transactions yet")
	}
	ctx := context.Background()
	client, err := conn.Connect(ctx, "aerostream-go-produce")
	if err != nil {
		return err
	}
	defer client.Close()
	producer, err := client.NewProducer(ctx, aerostream.ProducerConfig{})
	if err != nil {
		return err
	}
	var failed atomic.Int64
	in := bufio.NewReaderSize(stdin, 1<<16)
	for {
		line, rerr := in.ReadBytes('\n')
		if len(line) > 0 || rerr == nil {
			line = bytes.TrimSuffix(line, []byte("\n"))
			line = bytes.TrimSuffix(line, []byte("\r"))
			rec := aerostream.Record{Topic: *topic, Value: line}
			if *keySep != "" {
				if k, v, ok := bytes.Cut(line, []byte(*keySep)); ok {
					rec.Key, rec.Value = k, v
				}
			}
			d, err := producer.Send(ctx, rec)
			if err != nil {
				return err
			}
			go func() {
				<-d.Done()
				if d.Err != nil {
					if failed.Add(1) <= 10 {
						fmt.Fprintln(os.Stderr, "produce failed:", d.Err)
					}
				}
			}()
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("reading stdin: %w", rerr)
		}
	}
	if err := producer.Close(ctx); err != nil {
		return err
	}
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d records failed", n)
	}
	return nil
}
