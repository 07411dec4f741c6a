// policy-consumer: a go-nsq v1.1.0 consumer that never finishes, for the queue-policy tests.
//
//	policy-consumer -nsqd 127.0.0.1:4150 -topic T -channel C -mode req|timeout -for 5s
//
// mode req: every message is REQ'd at once (no requeue delay, no backoff);
// mode timeout: every message is left to time out (no FIN, no REQ; IDENTIFY sends no
// msg_timeout, so the channel's own applies).
// Prints "<body> <attempts>" per delivery and exits 0 after -for.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"github.com/nsqio/go-nsq"
)

func main() {
	addr := flag.String("nsqd", "", "nsqd TCP address")
	topic := flag.String("topic", "", "topic")
	channel := flag.String("channel", "", "channel")
	mode := flag.String("mode", "req", "req or timeout")
	run := flag.Duration("for", 5*time.Second, "run this long")
	flag.Parse()

	cfg := nsq.NewConfig()
	cfg.DefaultRequeueDelay = 0
	cfg.MaxBackoffDuration = 0
	cfg.MaxAttempts = 0 // go-nsq itself never gives up: the daemon's max_attempts decides
	cfg.MaxInFlight = 100
	consumer, err := nsq.NewConsumer(*topic, *channel, cfg)
	if err != nil {
		log.Fatal(err)
	}
	consumer.SetLogger(log.New(io.Discard, "", 0), nsq.LogLevelError)
	var mu sync.Mutex
	consumer.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		mu.Lock()
		fmt.Printf("%s %d\n", m.Body, m.Attempts)
		mu.Unlock()
		if *mode == "timeout" {
			m.DisableAutoResponse()
			return nil
		}
		return errors.New("requeue")
	}))
	if err := consumer.ConnectToNSQD(*addr); err != nil {
		log.Fatal(err)
	}
	time.Sleep(*run)
	consumer.Stop()
	// mode timeout leaves messages unanswered, and go-nsq's Stop waits 30 s for them
	select {
	case <-consumer.StopChan:
	case <-time.After(time.Second):
	}
	os.Exit(0)
}
