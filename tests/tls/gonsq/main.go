// gonsq-tls exchanges messages with one nsqd through go-nsq v1.1.0 over each requested
// stream mode (TLS with verification against a test CA, snappy, deflate, and TLS combined with
// either), or measures MPUB throughput over them.
//
//	gonsq-tls -nsqd 127.0.0.1:4150 -ca ca.pem [-cert c.pem -key c.key] -modes tls,snappy,... [-n 1000]
//	gonsq-tls -nsqd 127.0.0.1:4150 -ca ca.pem -bench -modes plain,tls,snappy,deflate
//
// Each mode prints one line: RESULT PASS|FAIL <mode> <seconds> <detail>, or in bench mode
// BENCH <mode> <messages> <seconds> <msgs/s>. Exit status 0 when every mode passed. Every
// wait is bounded.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nsqio/go-nsq"
)

var (
	nsqdAddr = flag.String("nsqd", "127.0.0.1:4150", "nsqd TCP address")
	caFile   = flag.String("ca", "", "CA certificate to verify nsqd with")
	certFile = flag.String("cert", "", "client certificate (optional)")
	keyFile  = flag.String("key", "", "client key (optional)")
	modes    = flag.String("modes", "tls,snappy,deflate,tls+snappy,tls+deflate", "comma-separated modes")
	count    = flag.Int("n", 1000, "messages per mode")
	prefix   = flag.String("topic", fmt.Sprintf("gonsq_tls_%d", time.Now().UnixNano()%1000000000), "topic prefix")
	bench    = flag.Bool("bench", false, "measure MPUB throughput instead")
	benchN   = flag.Int("bench-msgs", 200000, "bench: messages")
	benchSz  = flag.Int("bench-size", 200, "bench: message size")
	benchB   = flag.Int("bench-batch", 200, "bench: messages per MPUB")
)

// logBuffer collects go-nsq's log lines so a run can prove which upgrades happened.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Output(calldepth int, s string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.WriteString(s)
	l.buf.WriteByte('\n')
	return nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func config(mode string) (*nsq.Config, error) {
	cfg := nsq.NewConfig()
	for _, part := range strings.Split(mode, "+") {
		switch part {
		case "plain":
		case "tls":
			tc := &tls.Config{}
			if *caFile != "" {
				pem, err := os.ReadFile(*caFile)
				if err != nil {
					return nil, err
				}
				pool := x509.NewCertPool()
				if !pool.AppendCertsFromPEM(pem) {
					return nil, fmt.Errorf("no certificate in %s", *caFile)
				}
				tc.RootCAs = pool
			}
			if *certFile != "" {
				cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
				if err != nil {
					return nil, err
				}
				tc.Certificates = []tls.Certificate{cert}
			}
			cfg.TlsV1 = true
			cfg.TlsConfig = tc
		case "snappy":
			cfg.Snappy = true
		case "deflate":
			cfg.Deflate = true
			cfg.DeflateLevel = 6
		default:
			return nil, fmt.Errorf("unknown mode part %q", part)
		}
	}
	return cfg, nil
}

// expectedLogs are go-nsq's own messages for each upgrade it performed.
func expectedLogs(mode string) []string {
	var out []string
	for _, part := range strings.Split(mode, "+") {
		switch part {
		case "tls":
			out = append(out, "upgrading to TLS")
		case "snappy":
			out = append(out, "upgrading to Snappy")
		case "deflate":
			out = append(out, "upgrading to Deflate")
		}
	}
	return out
}

func exchange(mode string) (bool, string) {
	cfg, err := config(mode)
	if err != nil {
		return false, err.Error()
	}
	logs := &logBuffer{}
	topic := fmt.Sprintf("%s_%s", *prefix, strings.ReplaceAll(mode, "+", "_"))
	producer, err := nsq.NewProducer(*nsqdAddr, cfg)
	if err != nil {
		return false, err.Error()
	}
	producer.SetLogger(logs, nsq.LogLevelInfo)
	defer producer.Stop()
	// half by PUB, half by MPUB (batches of 50)
	half := *count / 2
	for i := 0; i < half; i++ {
		if err := producer.Publish(topic, []byte(fmt.Sprintf("%s-%d", mode, i))); err != nil {
			return false, fmt.Sprintf("PUB %d: %v", i, err)
		}
	}
	for i := half; i < *count; i += 50 {
		var batch [][]byte
		for j := i; j < i+50 && j < *count; j++ {
			batch = append(batch, []byte(fmt.Sprintf("%s-%d", mode, j)))
		}
		if err := producer.MultiPublish(topic, batch); err != nil {
			return false, fmt.Sprintf("MPUB %d: %v", i, err)
		}
	}

	cfg.MaxInFlight = 100
	consumer, err := nsq.NewConsumer(topic, "ch", cfg)
	if err != nil {
		return false, err.Error()
	}
	consumer.SetLogger(logs, nsq.LogLevelInfo)
	var mu sync.Mutex
	seen := map[string]int{}
	done := make(chan struct{})
	consumer.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		mu.Lock()
		defer mu.Unlock()
		seen[string(m.Body)]++
		if len(seen) == *count {
			select {
			case <-done:
			default:
				close(done)
			}
		}
		return nil
	}))
	if err := consumer.ConnectToNSQD(*nsqdAddr); err != nil {
		return false, fmt.Sprintf("consumer connect: %v", err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
	}
	// a little while for duplicates to show up
	time.Sleep(100 * time.Millisecond)
	consumer.Stop()
	select {
	case <-consumer.StopChan:
	case <-time.After(5 * time.Second):
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < *count; i++ {
		body := fmt.Sprintf("%s-%d", mode, i)
		if seen[body] != 1 {
			return false, fmt.Sprintf("%q received %d times (%d distinct of %d)", body, seen[body], len(seen), *count)
		}
	}
	if len(seen) != *count {
		return false, fmt.Sprintf("%d distinct bodies, want %d", len(seen), *count)
	}
	text := logs.String()
	for _, want := range expectedLogs(mode) {
		// producer and consumer connections each upgrade
		if n := strings.Count(text, want); n < 2 {
			return false, fmt.Sprintf("go-nsq logged %q %d times, want 2 (producer and consumer)", want, n)
		}
	}
	return true, fmt.Sprintf("%d messages, upgrades %v", *count, expectedLogs(mode))
}

func runBench(mode string) (float64, error) {
	cfg, err := config(mode)
	if err != nil {
		return 0, err
	}
	producer, err := nsq.NewProducer(*nsqdAddr, cfg)
	if err != nil {
		return 0, err
	}
	producer.SetLogger(log.New(os.Stderr, "", 0), nsq.LogLevelWarning)
	defer producer.Stop()
	topic := fmt.Sprintf("%s_bench_%s", *prefix, strings.ReplaceAll(mode, "+", "_"))
	body := bytes.Repeat([]byte("a"), *benchSz)
	batch := make([][]byte, *benchB)
	for i := range batch {
		batch[i] = body
	}
	if err := producer.Ping(); err != nil {
		return 0, err
	}
	start := time.Now()
	for sent := 0; sent < *benchN; sent += *benchB {
		if err := producer.MultiPublish(topic, batch); err != nil {
			return 0, err
		}
	}
	return time.Since(start).Seconds(), nil
}

func main() {
	flag.Parse()
	failed := 0
	for _, mode := range strings.Split(*modes, ",") {
		start := time.Now()
		if *bench {
			secs, err := runBench(mode)
			if err != nil {
				fmt.Printf("BENCH %s error %v\n", mode, err)
				failed++
				continue
			}
			fmt.Printf("BENCH %s %d %.3f %.0f\n", mode, *benchN, secs, float64(*benchN)/secs)
			continue
		}
		ok, detail := exchange(mode)
		status := "PASS"
		if !ok {
			status = "FAIL"
			failed++
		}
		fmt.Printf("RESULT %s %s %.2f %s\n", status, mode, time.Since(start).Seconds(), detail)
	}
	if failed > 0 {
		os.Exit(1)
	}
}
