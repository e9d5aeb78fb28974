// Command consume prints the values of a topic's records, one per line.
//
//	consume --bootstrap aero://127.0.0.1:9091 --topic t --from earliest --count 10
//	consume --bootstrap aero://127.0.0.1:9091 --topic t --group readers
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	aerostream "github.com/aerostream/aerostream/sdk-go"
	"github.com/aerostream/aerostream/sdk-go/internal/cli"
	"github.com/aerostream/aerostream/sdk-go/proto"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "consume:", err)
		os.Exit(1)
	}
}

func parseFrom(s string) (aerostream.StartAt, error) {
	switch s {
	case "earliest":
		return aerostream.Earliest, nil
	case "latest":
		return aerostream.Latest, nil
	}
	o, err := strconv.ParseInt(s, 10, 64)
	if err != nil || o < 0 {
		return aerostream.StartAt{}, fmt.Errorf("--from %q is not earliest, latest or an offset", s)
	}
	return aerostream.AtOffset(o), nil
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	var conn cli.Conn
	conn.Register(fs)
	topic := fs.String("topic", "", "topic to read")
	fromFlag := fs.String("from", "earliest", "earliest, latest or an offset (with --group: where partitions without a committed offset start)")
	count := fs.Int64("count", -1, "stop after this many records (default: run until interrupted)")
	group := fs.String("group", "", "read as a member of this consumer group, committing what was read")
	isolation := fs.String("isolation", "read-uncommitted", "read-uncommitted, or read-committed: transactional records once committed, never aborted ones")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *topic == "" {
		return errors.New("--topic is required")
	}
	var iso proto.Isolation
	switch *isolation {
	case "read-uncommitted", "read_uncommitted":
		iso = proto.ReadUncommitted
	case "read-committed", "read_committed":
		iso = proto.ReadCommitted
	default:
		return fmt.Errorf("--isolation %q is not read-committed or read-uncommitted", *isolation)
	}
	from, err := parseFrom(*fromFlag)
	if err != nil {
		return err
	}
	if *group != "" && from != aerostream.Earliest && from != aerostream.Latest {
		return errors.New("--from with --group: use earliest or latest")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client, err := conn.Connect(ctx, "aerostream-go-consume")
	if err != nil {
		return err
	}
	defer client.Close()
	cfg := aerostream.ConsumerConfig{Group: *group, Isolation: iso}
	if *group != "" {
		cfg.Reset = from
	}
	consumer := client.NewConsumer(cfg)
	if *group != "" {
		err = consumer.Subscribe(*topic)
	} else {
		err = consumer.Assign(ctx, *topic, nil, from)
	}
	if err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	var readErr error
	for seen := int64(0); *count < 0 || seen < *count; seen++ {
		rec, err := consumer.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				readErr = err
			}
			break
		}
		out.Write(rec.Value)
		out.WriteByte('\n')
		if err := out.Flush(); err != nil {
			break // the reader went away
		}
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := consumer.Close(closeCtx); err != nil && readErr == nil {
		readErr = fmt.Errorf("committing the positions reached: %w", err)
	}
	return readErr
}
