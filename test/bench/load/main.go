// Command load sends exactly N sequential GET requests to a URL over one
// keep-alive connection and exits non-zero on any error or non-200 answer:
//
//	load -n N URL
//
// It is the deterministic client of test/bench/picker.sh (wrk cannot send a
// fixed number of requests). It speaks HTTP/1.1 on a raw TCP connection so
// that every request is byte-for-byte the same and no request is retried.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

func main() {
	n := flag.Int("n", 1000, "number of requests")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline for each request")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: load -n N http://host:port/path")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *n, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run(rawURL string, n int, timeout time.Duration) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" || u.Port() == "" {
		return fmt.Errorf("url %q: want http://host:port/path", rawURL)
	}
	conn, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	req := []byte("GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\n\r\n")
	br := bufio.NewReader(conn)
	for i := 0; i < n; i++ {
		conn.SetDeadline(time.Now().Add(timeout))
		if _, err := conn.Write(req); err != nil {
			return fmt.Errorf("request %d: %w", i+1, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return fmt.Errorf("request %d: %w", i+1, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("request %d: reading body: %w", i+1, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("request %d: status %s", i+1, resp.Status)
		}
		if resp.Close {
			return fmt.Errorf("request %d: server closed the connection (keep-alive expected)", i+1)
		}
	}
	return nil
}
