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
	txn := fs.String("transactional-id", "", "send all of stdin in one transaction of this transactional id, committed at the end of stdin (fences earlier producers of the id)")
	compression := fs.String("compression", "none", "compression of the batches: none, gzip, snappy, lz4 or zstd")
	abort := fs.Bool("abort", false, "with --transactional-id: abort the transaction instead of committing it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *topic == "" {
		return errors.New("--topic is required")
	}
	codec, err := aerostream.ParseCompression(*compression)
	if err != nil {
		return err
	}
	if *abort && *txn == "" {
		return errors.New("--abort goes with --transactional-id")
	}
	ctx := context.Background()
	client, err := conn.Connect(ctx, "aerostream-go-produce")
	if err != nil {
		return err
	}
	defer client.Close()
	producer, err := client.NewProducer(ctx, aerostream.ProducerConfig{TransactionalID: *txn, Compression: codec})
	if err != nil {
		return err
	}
	if *txn != "" {
		if err := producer.BeginTransaction(); err != nil {
			return err
		}
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
	if *txn != "" {
		var err error
		if *abort || failed.Load() > 0 {
			err = producer.AbortTransaction(ctx)
		} else {
			err = producer.CommitTransaction(ctx)
		}
		if err != nil {
			return err
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
