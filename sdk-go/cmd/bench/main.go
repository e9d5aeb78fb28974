// Command bench runs the load generator's "small" workload shape with the
// Go SDK against a running agent and writes one JSON report: producers
// paced to a total rate (or as fast as their buffers accept), consumers
// reading every partition, publish and end-to-end latency percentiles.
// Every SDK of the repository has a bench with these flags and this
// report, so scripts/bench/sdks.sh compares them in one table.
//
//	bench --bootstrap aero://127.0.0.1:9091 --topic bench --rate 20000 --json out.json
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	aerostream "github.com/aerostream/aerostream/sdk-go"
	"github.com/aerostream/aerostream/sdk-go/internal/cli"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type settings struct {
	topic      string
	partitions int
	size       int
	producers  int
	consumers  int
	rate       int // 0: as fast as the producers accept
	warmup     time.Duration
	duration   time.Duration
	jsonOut    string
}

// latencies collects microseconds; percentiles come from the sorted slice.
type latencies struct {
	mu sync.Mutex
	us []int64
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.us = append(l.us, d.Microseconds())
	l.mu.Unlock()
}

type percentiles struct {
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

func (l *latencies) percentiles() percentiles {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.us) == 0 {
		return percentiles{}
	}
	sort.Slice(l.us, func(i, j int) bool { return l.us[i] < l.us[j] })
	at := func(q float64) float64 {
		i := int(q * float64(len(l.us)-1))
		return float64(l.us[i]) / 1000
	}
	return percentiles{P50: at(0.50), P99: at(0.99), P999: at(0.999), Max: float64(l.us[len(l.us)-1]) / 1000}
}

type counts struct {
	Messages int64   `json:"messages"`
	MsgsPerS float64 `json:"msgs_per_sec"`
	Failed   *int64  `json:"failed,omitempty"`
}

// pending is a sent record whose acknowledgement is awaited.
type pending struct {
	d       *aerostream.Delivery
	sent    time.Time
	counted bool
}

type report struct {
	SDK          string      `json:"sdk"`
	Transport    string      `json:"transport"`
	Rate         any         `json:"rate"`
	Size         int         `json:"size"`
	Partitions   int         `json:"partitions"`
	Producers    int         `json:"producers"`
	Consumers    int         `json:"consumers"`
	MeasuredSecs float64     `json:"measured_secs"`
	Publish      counts      `json:"publish"`
	Consume      counts      `json:"consume"`
	PublishLat   percentiles `json:"publish_latency"`
	EndToEndLat  percentiles `json:"end_to_end_latency"`
	CPUPercent   float64     `json:"cpu_percent"`
	RSSMaxMiB    float64     `json:"rss_max_mib"`
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func maxRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // KiB on Linux
}

func run(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var conn cli.Conn
	conn.Register(fs)
	var s settings
	fs.StringVar(&s.topic, "topic", "", "topic to write and read (created when missing)")
	fs.IntVar(&s.partitions, "partitions", 8, "partitions of the topic when it is created")
	fs.IntVar(&s.size, "size", 1024, "bytes per value (at least 8: the send time is in the first 8)")
	fs.IntVar(&s.producers, "producers", 2, "producers, each its own connection")
	fs.IntVar(&s.consumers, "consumers", 2, "consumers, sharing the partitions")
	rate := fs.String("rate", "20000", "messages per second in total, or max")
	warmup := fs.Float64("warmup", 5, "seconds run before measuring")
	duration := fs.Float64("duration", 30, "seconds measured")
	fs.StringVar(&s.jsonOut, "json", "", "write the report to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.topic == "" {
		return errors.New("--topic is required")
	}
	if s.size < 8 || s.producers < 1 || s.consumers < 1 || s.partitions < 1 {
		return errors.New("--size must be at least 8, and --producers, --consumers and --partitions at least 1")
	}
	if *rate != "max" {
		r, err := strconv.Atoi(*rate)
		if err != nil || r <= 0 {
			return fmt.Errorf("--rate %q is not a positive number or max", *rate)
		}
		s.rate = r
	}
	s.warmup = time.Duration(*warmup * float64(time.Second))
	s.duration = time.Duration(*duration * float64(time.Second))

	ctx := context.Background()
	admin, err := conn.Connect(ctx, "aerostream-go-bench")
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.CreateTopic(ctx, s.topic, int32(s.partitions), -1, nil); err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		return fmt.Errorf("creating %s: %w", s.topic, err)
	}
	n, err := waitForTopic(ctx, admin, s.topic)
	if err != nil {
		return err
	}
	s.partitions = n
	return bench(ctx, &conn, s, *rate)
}

func waitForTopic(ctx context.Context, c *aerostream.Client, topic string) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := c.Partitions(ctx, topic)
		if err == nil && n > 0 {
			return n, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("topic %s is not usable after 30 s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func bench(ctx context.Context, conn *cli.Conn, s settings, rateFlag string) error {
	// Consumers first, each from the partitions' current ends.
	var consumed, consumedInWindow atomic.Int64
	e2e := &latencies{}
	var windowStart, windowEnd atomic.Int64 // ns since the epoch; 0: not yet known
	windowStart.Store(1<<62 - 1)
	windowEnd.Store(1<<62 - 1)
	cctx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var consumersDone sync.WaitGroup
	consumeErr := make(chan error, s.consumers)
	for i := 0; i < s.consumers; i++ {
		var mine []uint32
		for p := i; p < s.partitions; p += s.consumers {
			mine = append(mine, uint32(p))
		}
		if len(mine) == 0 {
			continue
		}
		client, err := conn.Connect(ctx, fmt.Sprintf("aerostream-go-bench-consumer-%d", i))
		if err != nil {
			return err
		}
		defer client.Close()
		cs := client.NewConsumer(aerostream.ConsumerConfig{})
		if err := cs.Assign(ctx, s.topic, mine, aerostream.Latest); err != nil {
			return err
		}
		consumersDone.Add(1)
		go func() {
			defer consumersDone.Done()
			defer cs.Close(context.Background())
			for {
				rec, err := cs.Next(cctx)
				if err != nil {
					if cctx.Err() == nil {
						consumeErr <- err
					}
					return
				}
				now := time.Now().UnixNano()
				consumed.Add(1)
				if len(rec.Value) < 8 {
					continue
				}
				sent := int64(binary.BigEndian.Uint64(rec.Value))
				if sent >= windowStart.Load() && sent < windowEnd.Load() {
					consumedInWindow.Add(1)
					e2e.add(time.Duration(now - sent))
				}
			}
		}()
	}

	// Producers, each its own connection, paced to its share of the rate.
	publish := &latencies{}
	var sentInWindow, ackedInWindow, failed atomic.Int64
	start := time.Now()
	wStart := start.Add(s.warmup)
	wEnd := wStart.Add(s.duration)
	windowStart.Store(wStart.UnixNano())
	windowEnd.Store(wEnd.UnixNano())
	var cpuStart, cpuEnd atomic.Int64
	go func() {
		time.Sleep(time.Until(wStart))
		cpuStart.Store(int64(cpuTime()))
	}()
	var producersDone, acks sync.WaitGroup
	for i := 0; i < s.producers; i++ {
		client, err := conn.Connect(ctx, fmt.Sprintf("aerostream-go-bench-producer-%d", i))
		if err != nil {
			return err
		}
		defer client.Close()
		p, err := client.NewProducer(ctx, aerostream.ProducerConfig{
			Linger:     time.Millisecond,
			BatchBytes: 128 << 10,
		})
		if err != nil {
			return err
		}
		// A partition's records are acknowledged in the order they were
		// sent (one batch in flight per partition), so one goroutine per
		// partition waits for them in that order.
		waiters := make([]chan pending, s.partitions)
		for w := range waiters {
			waiters[w] = make(chan pending, 1<<14)
			acks.Add(1)
			go func() {
				defer acks.Done()
				for pd := range waiters[w] {
					<-pd.d.Done()
					if pd.d.Err != nil {
						if failed.Add(1) <= 5 {
							fmt.Fprintln(os.Stderr, "bench: a send failed:", pd.d.Err)
						}
						continue
					}
					if pd.counted {
						publish.add(time.Since(pd.sent))
						ackedInWindow.Add(1)
					}
				}
			}()
		}
		producersDone.Add(1)
		go func() {
			defer producersDone.Done()
			defer func() {
				for _, w := range waiters {
					close(w)
				}
			}()
			var interval time.Duration
			if s.rate > 0 {
				interval = time.Duration(float64(time.Second) * float64(s.producers) / float64(s.rate))
			}
			for n := int64(0); ; n++ {
				if interval > 0 {
					due := start.Add(time.Duration(n) * interval)
					if wait := time.Until(due); wait > 200*time.Microsecond {
						time.Sleep(wait)
					}
				}
				t := time.Now()
				if !t.Before(wEnd) {
					break
				}
				value := make([]byte, s.size)
				binary.BigEndian.PutUint64(value, uint64(t.UnixNano()))
				counted := !t.Before(wStart)
				d, err := p.Send(ctx, aerostream.Record{Topic: s.topic, Value: value})
				if err != nil {
					failed.Add(1)
					continue
				}
				if counted {
					sentInWindow.Add(1)
				}
				waiters[d.Partition%uint32(len(waiters))] <- pending{d, t, counted}
			}
			if err := p.Close(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "bench: closing a producer:", err)
				failed.Add(1)
			}
		}()
	}
	producersDone.Wait()
	cpuEnd.Store(int64(cpuTime()))
	acks.Wait()

	// Drain: every acknowledged record of the window read back.
	drained := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if consumedInWindow.Load() >= ackedInWindow.Load() {
			drained = true
			break
		}
		select {
		case err := <-consumeErr:
			return fmt.Errorf("a consumer failed: %w", err)
		default:
		}
	}
	stopConsumers()
	consumersDone.Wait()

	secs := s.duration.Seconds()
	f := failed.Load()
	transport := "tcp"
	if strings.HasPrefix(conn.Bootstrap, "aero+quic://") {
		transport = "quic"
	}
	var rateOut any = "max"
	if s.rate > 0 {
		rateOut = s.rate
	}
	r := report{
		SDK: "go", Transport: transport, Rate: rateOut, Size: s.size, Partitions: s.partitions,
		Producers: s.producers, Consumers: s.consumers, MeasuredSecs: secs,
		Publish:     counts{Messages: ackedInWindow.Load(), MsgsPerS: float64(ackedInWindow.Load()) / secs, Failed: &f},
		Consume:     counts{Messages: consumedInWindow.Load(), MsgsPerS: float64(consumedInWindow.Load()) / secs},
		PublishLat:  publish.percentiles(),
		EndToEndLat: e2e.percentiles(),
		CPUPercent:  100 * float64(cpuEnd.Load()-cpuStart.Load()) / float64(s.duration),
		RSSMaxMiB:   maxRSSMiB(),
	}
	if s.jsonOut != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(s.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("go over %s, rate %s: published %.0f msg/s (%d failed), consumed %.0f msg/s; publish p50 %.3f ms p99 %.3f ms p99.9 %.3f ms; end-to-end p50 %.3f ms p99 %.3f ms; CPU %.0f%%, RSS %.0f MiB\n",
		transport, rateFlag, r.Publish.MsgsPerS, f, r.Consume.MsgsPerS,
		r.PublishLat.P50, r.PublishLat.P99, r.PublishLat.P999, r.EndToEndLat.P50, r.EndToEndLat.P99, r.CPUPercent, r.RSSMaxMiB)
	if f > 0 {
		return fmt.Errorf("%d sends failed", f)
	}
	if !drained {
		return fmt.Errorf("the consumers read %d of the %d records acknowledged in the window within 30 s", consumedInWindow.Load(), ackedInWindow.Load())
	}
	if sentInWindow.Load() != ackedInWindow.Load() {
		return fmt.Errorf("%d records sent in the window, %d acknowledged", sentInWindow.Load(), ackedInWindow.Load())
	}
	return nil
}
