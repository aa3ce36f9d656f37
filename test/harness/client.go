package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Response is what a test needs of one answer through NGINX.
type Response struct {
	Status int
	// Peer is the backend that answered (its X-Peer header, "ip:port"),
	// empty when NGINX answered itself.
	Peer string
	// Worker is the NGINX worker that served the request (X-Worker).
	Worker int
	Body   string
}

// Client sends requests to one NGINX.
type Client struct {
	base string
	tr   *http.Transport
	hc   *http.Client
}

// Client returns a client for this NGINX. With keepAlive it reuses one
// connection for sequential requests (so they stay on one worker);
// without, every request opens a new connection, which the listener's
// reuseport spreads over the workers.
func (n *Nginx) Client(keepAlive bool) *Client {
	tr := &http.Transport{
		DisableKeepAlives:   !keepAlive,
		MaxIdleConnsPerHost: 64,
		DisableCompression:  true,
	}
	n.tb.Cleanup(tr.CloseIdleConnections)
	return &Client{
		base: "http://" + n.Addr,
		tr:   tr,
		hc:   &http.Client{Transport: tr, Timeout: 30 * time.Second},
	}
}

// Get requests path and reads the whole answer.
func (c *Client) Get(path string) (Response, error) {
	resp, err := c.hc.Get(c.base + path)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("GET %s: reading body: %w", path, err)
	}
	r := Response{Status: resp.StatusCode, Peer: resp.Header.Get("X-Peer"), Body: string(body)}
	r.Worker, _ = strconv.Atoi(resp.Header.Get("X-Worker"))
	return r, nil
}

// MustGet is Get that fails the test on a transport error.
func (c *Client) MustGet(tb testing.TB, path string) Response {
	tb.Helper()
	r, err := c.Get(path)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// CloseIdle closes the client's idle connections.
func (c *Client) CloseIdle() { c.tr.CloseIdleConnections() }

// Load is a bounded stream of GET requests from concurrent keep-alive
// clients. It ends after Requests requests, after MaxDuration, or when
// Stop is closed, whichever comes first.
type Load struct {
	Path        string
	Requests    int           // required: the most requests to send
	Clients     int           // concurrent clients; 0 means 4
	MaxDuration time.Duration // 0 means 60 s
	Stop        <-chan struct{}
	// Check, if set, judges each 200 answer; an error counts as a failure.
	Check func(Response) error
}

// LoadResult counts what a Load saw.
type LoadResult struct {
	Sent, OK, Failed int
	// Failures are the first few failures, described.
	Failures []string
	ByPeer   map[string]int // 200 answers by peer
	ByWorker map[int]int
	Elapsed  time.Duration
}

// Run sends l to this NGINX and returns what came back.
func (n *Nginx) Run(l Load) LoadResult {
	if l.Requests <= 0 {
		panic("harness: Load.Requests must be positive")
	}
	if l.Clients == 0 {
		l.Clients = 4
	}
	if l.MaxDuration == 0 {
		l.MaxDuration = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.MaxDuration)
	defer cancel()
	if l.Stop != nil {
		go func() {
			select {
			case <-l.Stop:
				cancel()
			case <-ctx.Done():
			}
		}()
	}

	var (
		mu     sync.Mutex
		res    = LoadResult{ByPeer: map[string]int{}, ByWorker: map[int]int{}}
		issued atomic.Int64
		wg     sync.WaitGroup
	)
	fail := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		res.Failed++
		if len(res.Failures) < 10 {
			res.Failures = append(res.Failures, msg)
		}
	}
	start := time.Now()
	for range l.Clients {
		c := n.Client(true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.CloseIdle()
			for ctx.Err() == nil && issued.Add(1) <= int64(l.Requests) {
				r, err := c.Get(l.Path)
				mu.Lock()
				res.Sent++
				mu.Unlock()
				switch {
				case err != nil:
					fail(err.Error())
					continue
				case r.Status != http.StatusOK:
					fail(fmt.Sprintf("status %d from worker %d: %.200s", r.Status, r.Worker, r.Body))
					continue
				}
				if l.Check != nil {
					if err := l.Check(r); err != nil {
						fail(err.Error())
						continue
					}
				}
				mu.Lock()
				res.OK++
				res.ByPeer[r.Peer]++
				res.ByWorker[r.Worker]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}
