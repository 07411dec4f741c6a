// gonsq-check runs the client conformance checks against one nsqd with go-nsq v1.1.0.
//
//	gonsq-check -nsqd 127.0.0.1:4150 [-check all|NAME[,NAME...]] [-list]
//
// Each check prints one line to stdout:
//
//	RESULT PASS|FAIL <check> <seconds> <detail>
//
// and go-nsq's warnings go to stderr. The exit status is 0 when every check passed, 1 when
// one failed and 2 for a usage error. Every wait is bounded: a check that overruns its
// limit is reported as failed and the program moves on.
//
// The same checks (same names, same pass criteria) are implemented for nsqjs and pynsq
// next to this folder; see conformance/clients/README.md.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nsqio/go-nsq"
)

const clientName = "gonsq"

var (
	nsqdAddr string
	runID    = time.Now().UnixNano() % 1000000000
	logger   = log.New(os.Stderr, "gonsq ", log.Ltime|log.Lmicroseconds)
)

// maxLag bounds how late a timer-driven event (message timeout, REQ delay, DPUB delay) may
// be seen. nsqd v1.3.0 scans in-flight and deferred queues every 100ms, but only over the
// channel list it refreshes every 5s (--queue-scan-refresh-interval is not a flag), so on a
// channel created less than 5s ago such an event can come up to ~5s late.
const maxLag = 5500 * time.Millisecond

type check struct {
	name  string
	limit time.Duration
	run   func(topic string) (ok bool, detail string)
}

var checks = []check{
	{"publish_consume", 40 * time.Second, checkPublishConsume},
	{"requeue", 20 * time.Second, checkRequeue},
	{"timeout", 20 * time.Second, checkTimeout},
	{"touch", 15 * time.Second, checkTouch},
	{"backoff", 15 * time.Second, checkBackoff},
	{"fanout", 30 * time.Second, checkFanout},
	{"split", 30 * time.Second, checkSplit},
	{"deferred", 20 * time.Second, checkDeferred},
}

func main() {
	flag.StringVar(&nsqdAddr, "nsqd", "127.0.0.1:4150", "nsqd TCP address (host:port)")
	which := flag.String("check", "all", "check(s) to run: all, or comma-separated names")
	list := flag.Bool("list", false, "print the check names and exit")
	flag.Parse()

	if *list {
		for _, c := range checks {
			fmt.Println(c.name)
		}
		return
	}
	selected, err := selectChecks(*which)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	failed := 0
	for _, c := range selected {
		if !runCheck(c) {
			failed++
		}
	}
	fmt.Printf("%s: %d passed, %d failed\n", clientName, len(selected)-failed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

func selectChecks(which string) ([]check, error) {
	if which == "" || which == "all" {
		return checks, nil
	}
	byName := map[string]check{}
	for _, c := range checks {
		byName[c.name] = c
	}
	var out []check
	for _, name := range strings.Split(which, ",") {
		c, ok := byName[strings.TrimSpace(name)]
		if !ok {
			return nil, fmt.Errorf("unknown check %q", name)
		}
		out = append(out, c)
	}
	return out, nil
}

// runCheck runs one check with its time limit and prints its RESULT line.
func runCheck(c check) bool {
	type outcome struct {
		ok     bool
		detail string
	}
	topic := fmt.Sprintf("%s_%s_%d", clientName, c.name, runID)
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- outcome{false, fmt.Sprintf("panic: %v", r)}
			}
		}()
		ok, detail := c.run(topic)
		done <- outcome{ok, detail}
	}()
	var res outcome
	select {
	case res = <-done:
	case <-time.After(c.limit):
		res = outcome{false, fmt.Sprintf("check did not finish within %s", c.limit)}
	}
	verdict := "PASS"
	if !res.ok {
		verdict = "FAIL"
	}
	detail := strings.ReplaceAll(res.detail, "\n", " ")
	fmt.Printf("RESULT %s %s %.3f %s\n", verdict, c.name, time.Since(start).Seconds(), detail)
	return res.ok
}

// ---------------------------------------------------------------------------------------------
// helpers

func newConfig(maxInFlight int) *nsq.Config {
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = maxInFlight
	return cfg
}

func newProducer() (*nsq.Producer, error) {
	p, err := nsq.NewProducer(nsqdAddr, nsq.NewConfig())
	if err != nil {
		return nil, err
	}
	p.SetLogger(logger, nsq.LogLevelWarning)
	return p, nil
}

func newConsumer(topic, channel string, cfg *nsq.Config, h nsq.HandlerFunc) (*nsq.Consumer, error) {
	c, err := nsq.NewConsumer(topic, channel, cfg)
	if err != nil {
		return nil, err
	}
	c.SetLogger(logger, nsq.LogLevelWarning)
	c.AddHandler(h)
	if err := c.ConnectToNSQD(nsqdAddr); err != nil {
		return nil, fmt.Errorf("connect consumer %s/%s: %w", topic, channel, err)
	}
	return c, nil
}

// stopConsumer stops c and waits (bounded) for it to finish.
func stopConsumer(c *nsq.Consumer) {
	if c == nil {
		return
	}
	c.Stop()
	select {
	case <-c.StopChan:
	case <-time.After(3 * time.Second):
		logger.Printf("consumer did not stop within 3s")
	}
}

func bodies(prefix string, from, to int) [][]byte {
	out := make([][]byte, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, []byte(fmt.Sprintf("%s%d", prefix, i)))
	}
	return out
}

// waitFor polls cond every 10ms until it holds or the timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tally records which bodies a consumer received.
type tally struct {
	mu       sync.Mutex
	seen     map[string]int
	probes   int
	dupes    int
	badAtt   int
	expected map[string]bool
}

func newTally(expected [][]byte) *tally {
	t := &tally{seen: map[string]int{}, expected: map[string]bool{}}
	for _, b := range expected {
		t.expected[string(b)] = true
	}
	return t
}

func (t *tally) handler(m *nsq.Message) error {
	body := string(m.Body)
	t.mu.Lock()
	defer t.mu.Unlock()
	if strings.HasPrefix(body, "probe-") {
		t.probes++
		return nil
	}
	t.seen[body]++
	if t.seen[body] > 1 {
		t.dupes++
	}
	if m.Attempts != 1 {
		t.badAtt++
	}
	return nil
}

func (t *tally) gotProbe() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.probes > 0
}

func (t *tally) unique() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen)
}

// summary returns (all expected seen exactly once, description).
func (t *tally) summary() (bool, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	missing, unexpected := 0, 0
	for b := range t.expected {
		if t.seen[b] == 0 {
			missing++
		}
	}
	for b := range t.seen {
		if !t.expected[b] {
			unexpected++
		}
	}
	ok := missing == 0 && unexpected == 0 && t.dupes == 0 && t.badAtt == 0
	return ok, fmt.Sprintf("received=%d missing=%d unexpected=%d duplicates=%d attempts!=1:%d",
		len(t.seen), missing, unexpected, t.dupes, t.badAtt)
}

// publishProbesUntil publishes probe messages every 50ms until ready() holds (bounded).
func publishProbesUntil(p *nsq.Producer, topic string, ready func() bool) error {
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; !ready(); i++ {
		if time.Now().After(deadline) {
			return fmt.Errorf("consumers not all subscribed after 5s of probes")
		}
		if err := p.Publish(topic, []byte(fmt.Sprintf("probe-%d", i))); err != nil {
			return fmt.Errorf("publish probe: %w", err)
		}
		waitFor(50*time.Millisecond, ready)
	}
	return nil
}

// delivery is one delivery of a message as seen by a handler.
type delivery struct {
	id       nsq.MessageID
	attempts uint16
	at       time.Time
	body     string
}

func (d delivery) String() string {
	return fmt.Sprintf("attempts=%d", d.attempts)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

// collect waits for n deliveries on ch (bounded by timeout).
func collect(ch <-chan delivery, n int, timeout time.Duration) []delivery {
	var out []delivery
	deadline := time.After(timeout)
	for len(out) < n {
		select {
		case d := <-ch:
			out = append(out, d)
		case <-deadline:
			return out
		}
	}
	return out
}

// quiet reports any delivery arriving on ch within d (nil when none did).
func quiet(ch <-chan delivery, d time.Duration) *delivery {
	select {
	case x := <-ch:
		return &x
	case <-time.After(d):
		return nil
	}
}

func sameMessage(ds []delivery) bool {
	for _, d := range ds[1:] {
		if d.id != ds[0].id || d.body != ds[0].body {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------------------------
// checks

// publish_consume: 1,000 PUB + 1,000 in MPUB batches of 100, then one consumer with
// MaxInFlight 64 receives every message exactly once, each with attempts=1.
func checkPublishConsume(topic string) (bool, string) {
	const n = 2000
	p, err := newProducer()
	if err != nil {
		return false, err.Error()
	}
	defer p.Stop()
	all := bodies("m-", 0, n)
	for _, b := range all[:n/2] {
		if err := p.Publish(topic, b); err != nil {
			return false, "Publish: " + err.Error()
		}
	}
	for i := n / 2; i < n; i += 100 {
		if err := p.MultiPublish(topic, all[i:i+100]); err != nil {
			return false, "MultiPublish: " + err.Error()
		}
	}
	t := newTally(all)
	c, err := newConsumer(topic, "c", newConfig(64), t.handler)
	if err != nil {
		return false, err.Error()
	}
	defer stopConsumer(c)
	waitFor(25*time.Second, func() bool { return t.unique() >= n })
	time.Sleep(200 * time.Millisecond) // let any duplicate show up
	return t.summary()
}

// requeue: REQ 0 redelivers at once with attempts+1; REQ 700ms redelivers after the delay
// with attempts+1; FIN ends it (no 4th delivery).
func checkRequeue(topic string) (bool, string) {
	p, err := newProducer()
	if err != nil {
		return false, err.Error()
	}
	defer p.Stop()
	ch := make(chan delivery, 16)
	c, err := newConsumer(topic, "c", newConfig(2), func(m *nsq.Message) error {
		ch <- delivery{m.ID, m.Attempts, time.Now(), string(m.Body)}
		switch m.Attempts {
		case 1:
			m.RequeueWithoutBackoff(0)
		case 2:
			m.RequeueWithoutBackoff(700 * time.Millisecond)
		}
		return nil // attempts >= 3: FIN
	})
	if err != nil {
		return false, err.Error()
	}
	defer stopConsumer(c)
	if err := p.Publish(topic, []byte("requeue-me")); err != nil {
		return false, "Publish: " + err.Error()
	}
	ds := collect(ch, 3, maxLag+3*time.Second)
	if len(ds) < 3 {
		return false, fmt.Sprintf("got %d deliveries %v, want 3", len(ds), ds)
	}
	extra := quiet(ch, 500*time.Millisecond)
	g1, g2 := ds[1].at.Sub(ds[0].at), ds[2].at.Sub(ds[1].at)
	detail := fmt.Sprintf("attempts %d,%d,%d; REQ 0 -> %s; REQ 700ms -> %s",
		ds[0].attempts, ds[1].attempts, ds[2].attempts, secs(g1), secs(g2))
	switch {
	case !sameMessage(ds):
		return false, detail + "; redelivered a different message id/body"
	case ds[0].attempts != 1 || ds[1].attempts != 2 || ds[2].attempts != 3:
		return false, detail + "; attempts should be 1,2,3"
	case g1 > 600*time.Millisecond:
		return false, detail + "; REQ 0 redelivery took too long (>0.6s)"
	case g2 < 650*time.Millisecond || g2 > maxLag+700*time.Millisecond:
		return false, detail + fmt.Sprintf("; REQ 700ms redelivery outside [0.65s, %s]",
			secs(maxLag+700*time.Millisecond))
	case extra != nil:
		return false, detail + fmt.Sprintf("; delivered again after FIN (%s)", extra)
	}
	return true, detail
}

// timeout: with msg_timeout 1s, an unanswered message is redelivered after ~1s with
// attempts=2.
func checkTimeout(topic string) (bool, string) {
	p, err := newProducer()
	if err != nil {
		return false, err.Error()
	}
	defer p.Stop()
	ch := make(chan delivery, 16)
	cfg := newConfig(1) // RDY 1: nsqd flushes each message at once (no output-buffer delay)
	cfg.MsgTimeout = time.Second
	c, err := newConsumer(topic, "c", cfg, func(m *nsq.Message) error {
		ch <- delivery{m.ID, m.Attempts, time.Now(), string(m.Body)}
		if m.Attempts == 1 {
			m.DisableAutoResponse() // never answer: let it time out
		}
		return nil
	})
	if err != nil {
		return false, err.Error()
	}
	// go-nsq still counts attempt 1 as outstanding, so a graceful Stop would wait 30s for it:
	// send CLS and move on.
	defer c.Stop()
	if err := p.Publish(topic, []byte("let-me-time-out")); err != nil {
		return false, "Publish: " + err.Error()
	}
	ds := collect(ch, 2, maxLag+3*time.Second)
	if len(ds) < 2 {
		return false, fmt.Sprintf("got %d deliveries %v, want 2 (no redelivery after timeout)",
			len(ds), ds)
	}
	gap := ds[1].at.Sub(ds[0].at)
	detail := fmt.Sprintf("attempts %d,%d; redelivered after %s (msg_timeout 1s)",
		ds[0].attempts, ds[1].attempts, secs(gap))
	switch {
	case !sameMessage(ds):
		return false, detail + "; redelivered a different message id/body"
	case ds[0].attempts != 1 || ds[1].attempts != 2:
		return false, detail + "; attempts should be 1,2"
	case gap < 900*time.Millisecond || gap > maxLag+time.Second:
		return false, detail + fmt.Sprintf("; redelivery outside [0.9s, %s]",
			secs(maxLag+time.Second))
	}
	return true, detail
}

// touch: with msg_timeout 1s, touching every 400ms for 2.4s keeps the message; after FIN it
// is never redelivered.
func checkTouch(topic string) (bool, string) {
	p, err := newProducer()
	if err != nil {
		return false, err.Error()
	}
	defer p.Stop()
	ch := make(chan delivery, 16)
	finished := make(chan time.Time, 1)
	cfg := newConfig(1)
	cfg.MsgTimeout = time.Second
	c, err := newConsumer(topic, "c", cfg, func(m *nsq.Message) error {
		ch <- delivery{m.ID, m.Attempts, time.Now(), string(m.Body)}
		if m.Attempts != 1 {
			return nil
		}
		m.DisableAutoResponse()
		go func() {
			for i := 0; i < 6; i++ {
				time.Sleep(400 * time.Millisecond)
				m.Touch()
			}
			m.Finish()
			finished <- time.Now()
		}()
		return nil
	})
	if err != nil {
		return false, err.Error()
	}
	defer stopConsumer(c)
	if err := p.Publish(topic, []byte("keep-me-alive")); err != nil {
		return false, "Publish: " + err.Error()
	}
	first := collect(ch, 1, 5*time.Second)
	if len(first) == 0 {
		return false, "message never delivered"
	}
	var finAt time.Time
	select {
	case finAt = <-finished:
	case d := <-ch:
		return false, fmt.Sprintf("redelivered after %s despite TOUCH every 400ms (%s)",
			secs(d.at.Sub(first[0].at)), d)
	case <-time.After(5 * time.Second):
		return false, "touch loop did not finish"
	}
	held := finAt.Sub(first[0].at)
	if extra := quiet(ch, 1300*time.Millisecond); extra != nil {
		return false, fmt.Sprintf("redelivered %s after first delivery (held %s with 6 TOUCH)",
			secs(extra.at.Sub(first[0].at)), secs(held))
	}
	return true, fmt.Sprintf("held %s with 6 TOUCH (msg_timeout 1s), FIN, no redelivery",
		secs(held))
}

// backoff: RequeueWithoutBackoff(0) redelivers at once; Requeue(0) makes the consumer send
// RDY 0 for its backoff (1s) and the message only comes back after RDY 1.
func checkBackoff(topic string) (bool, string) {
	p, err := newProducer()
	if err != nil {
		return false, err.Error()
	}
	defer p.Stop()
	ch := make(chan delivery, 16)
	cfg := newConfig(1)
	cfg.BackoffMultiplier = 500 * time.Millisecond // first backoff: 500ms * 2^1 = 1s
	c, err := newConsumer(topic, "c", cfg, func(m *nsq.Message) error {
		ch <- delivery{m.ID, m.Attempts, time.Now(), string(m.Body)}
		switch m.Attempts {
		case 1:
			m.RequeueWithoutBackoff(0)
		case 2:
			m.Requeue(0)
		}
		return nil
	})
	if err != nil {
		return false, err.Error()
	}
	defer stopConsumer(c)
	if err := p.Publish(topic, []byte("back-off")); err != nil {
		return false, "Publish: " + err.Error()
	}
	ds := collect(ch, 3, 8*time.Second)
	if len(ds) < 3 {
		return false, fmt.Sprintf("got %d deliveries %v, want 3", len(ds), ds)
	}
	g1, g2 := ds[1].at.Sub(ds[0].at), ds[2].at.Sub(ds[1].at)
	detail := fmt.Sprintf("no-backoff REQ -> %s; backoff REQ (1s) -> %s", secs(g1), secs(g2))
	switch {
	case !sameMessage(ds):
		return false, detail + "; redelivered a different message id/body"
	case ds[0].attempts != 1 || ds[1].attempts != 2 || ds[2].attempts != 3:
		return false, detail + fmt.Sprintf("; attempts %d,%d,%d should be 1,2,3",
			ds[0].attempts, ds[1].attempts, ds[2].attempts)
	case g1 > 600*time.Millisecond:
		return false, detail + "; RequeueWithoutBackoff redelivery took >0.6s"
	case g2 < 800*time.Millisecond:
		return false, detail + "; delivered during backoff (RDY 0 not honoured?)"
	case g2 > 4*time.Second:
		return false, detail + "; not delivered after backoff ended (RDY 1 not honoured?)"
	}
	return true, detail
}

// fanout: two channels on one topic each receive all 1,000 messages.
func checkFanout(topic string) (bool, string) {
	const n = 1000
	p, err := newProducer()
	if err != nil {
		return false, err.Error()
	}
	defer p.Stop()
	all := bodies("m-", 0, n)
	ta, tb := newTally(all), newTally(all)
	ca, err := newConsumer(topic, "a", newConfig(32), ta.handler)
	if err != nil {
		return false, err.Error()
	}
	defer stopConsumer(ca)
	cb, err := newConsumer(topic, "b", newConfig(32), tb.handler)
	if err != nil {
		return false, err.Error()
	}
	defer stopConsumer(cb)
	if err := publishProbesUntil(p, topic, func() bool { return ta.gotProbe() && tb.gotProbe() }); err != nil {
		return false, err.Error()
	}
	for i := 0; i < n; i += 100 {
		if err := p.MultiPublish(topic, all[i:i+100]); err != nil {
			return false, "MultiPublish: " + err.Error()
		}
	}
	waitFor(20*time.Second, func() bool { return ta.unique() >= n && tb.unique() >= n })
	time.Sleep(200 * time.Millisecond)
	okA, sa := ta.summary()
	okB, sb := tb.summary()
	return okA && okB, fmt.Sprintf("channel a: %s; channel b: %s", sa, sb)
}

// split: two consumers on one channel share 1,000 messages: each message goes to exactly one
// of them, and each gets at least 10%.
func checkSplit(topic string) (bool, string) {
	const n = 1000
	p, err := newProducer()
	if err != nil {
		return false, err.Error()
	}
	defer p.Stop()
	all := bodies("m-", 0, n)
	t1, t2 := newTally(all), newTally(all)
	c1, err := newConsumer(topic, "c", newConfig(16), t1.handler)
	if err != nil {
		return false, err.Error()
	}
	defer stopConsumer(c1)
	c2, err := newConsumer(topic, "c", newConfig(16), t2.handler)
	if err != nil {
		return false, err.Error()
	}
	defer stopConsumer(c2)
	if err := publishProbesUntil(p, topic, func() bool { return t1.gotProbe() && t2.gotProbe() }); err != nil {
		return false, err.Error()
	}
	for i := 0; i < n; i += 100 {
		if err := p.MultiPublish(topic, all[i:i+100]); err != nil {
			return false, "MultiPublish: " + err.Error()
		}
	}
	union := func() (int, int, int) {
		t1.mu.Lock()
		defer t1.mu.Unlock()
		t2.mu.Lock()
		defer t2.mu.Unlock()
		both := 0
		u := map[string]bool{}
		for b := range t1.seen {
			u[b] = true
		}
		for b := range t2.seen {
			if u[b] {
				both++
			}
			u[b] = true
		}
		return len(u), both, t1.dupes + t2.dupes
	}
	waitFor(20*time.Second, func() bool { u, _, _ := union(); return u >= n })
	time.Sleep(200 * time.Millisecond)
	u, both, dupes := union()
	n1, n2 := t1.unique(), t2.unique()
	detail := fmt.Sprintf("union=%d/%d consumer1=%d consumer2=%d on-both=%d duplicates=%d",
		u, n, n1, n2, both, dupes)
	switch {
	case u != n:
		return false, detail + "; messages missing"
	case both != 0 || dupes != 0:
		return false, detail + "; a message was delivered more than once"
	case n1 < n/10 || n2 < n/10:
		return false, detail + "; one consumer got under 10%"
	}
	return true, detail
}

// deferred: DeferredPublish(1.5s) arrives no earlier than 1.5s after it was sent, while a
// plain Publish sent right after it arrives first.
func checkDeferred(topic string) (bool, string) {
	const delay = 1500 * time.Millisecond
	p, err := newProducer()
	if err != nil {
		return false, err.Error()
	}
	defer p.Stop()
	ch := make(chan delivery, 16)
	c, err := newConsumer(topic, "c", newConfig(4), func(m *nsq.Message) error {
		ch <- delivery{m.ID, m.Attempts, time.Now(), string(m.Body)}
		return nil
	})
	if err != nil {
		return false, err.Error()
	}
	defer stopConsumer(c)
	t0 := time.Now()
	if err := p.DeferredPublish(topic, delay, []byte("later")); err != nil {
		return false, "DeferredPublish: " + err.Error()
	}
	if err := p.Publish(topic, []byte("now")); err != nil {
		return false, "Publish: " + err.Error()
	}
	ds := collect(ch, 2, maxLag+4*time.Second)
	got := map[string]time.Duration{}
	var order []string
	for _, d := range ds {
		got[d.body] = d.at.Sub(t0)
		order = append(order, d.body)
	}
	detail := fmt.Sprintf("order %v; now after %s, later after %s (delay %s)",
		order, secs(got["now"]), secs(got["later"]), secs(delay))
	_, haveNow := got["now"]
	_, haveLater := got["later"]
	switch {
	case !haveNow || !haveLater:
		return false, detail + "; message missing"
	case got["now"] > time.Second:
		return false, detail + "; plain publish took >1s"
	case got["later"] < delay-50*time.Millisecond:
		return false, detail + "; deferred message arrived early"
	case got["later"] > delay+maxLag:
		return false, detail + fmt.Sprintf("; deferred message arrived over %s late", secs(maxLag))
	}
	if extra := quiet(ch, 200*time.Millisecond); extra != nil {
		return false, detail + "; unexpected extra delivery " + extra.body
	}
	return true, detail
}
