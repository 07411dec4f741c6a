// lookupd-consumer: a go-nsq v1.1.0 consumer that only knows nsqlookupd's HTTP address.
//
//	lookupd-consumer -lookupd 127.0.0.1:4161 -topic T -channel C -n 3 [-timeout 30s]
//
// It discovers the nsqd producing T through nsqlookupd (/lookup), consumes, prints each
// message body on its own line to stdout, and exits 0 once it has n messages, 1 on timeout.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/nsqio/go-nsq"
)

func main() {
	lookupd := flag.String("lookupd", "", "nsqlookupd HTTP address")
	topic := flag.String("topic", "", "topic")
	channel := flag.String("channel", "", "channel")
	n := flag.Int("n", 1, "messages to consume")
	timeout := flag.Duration("timeout", 30*time.Second, "give up after this long")
	flag.Parse()
	if *lookupd == "" || *topic == "" || *channel == "" {
		flag.Usage()
		os.Exit(2)
	}

	cfg := nsq.NewConfig()
	cfg.LookupdPollInterval = 500 * time.Millisecond
	cfg.LookupdPollJitter = 0.01
	cfg.MaxInFlight = 10
	consumer, err := nsq.NewConsumer(*topic, *channel, cfg)
	if err != nil {
		log.Fatalf("NewConsumer: %s", err)
	}
	consumer.SetLogger(log.New(os.Stderr, "go-nsq ", log.Ltime|log.Lmicroseconds), nsq.LogLevelInfo)

	var mu sync.Mutex
	got := 0
	done := make(chan struct{})
	consumer.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		mu.Lock()
		defer mu.Unlock()
		fmt.Println(string(m.Body))
		got++
		if got == *n {
			close(done)
		}
		return nil
	}))
	if err := consumer.ConnectToNSQLookupd(*lookupd); err != nil {
		log.Fatalf("ConnectToNSQLookupd: %s", err)
	}
	select {
	case <-done:
		consumer.Stop()
		select {
		case <-consumer.StopChan:
		case <-time.After(5 * time.Second):
		}
		os.Exit(0)
	case <-time.After(*timeout):
		mu.Lock()
		log.Printf("timed out with %d of %d messages", got, *n)
		mu.Unlock()
		os.Exit(1)
	}
}
