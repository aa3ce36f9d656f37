package harness

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/cgo/table"
)

// Backend is a small HTTP server on a loopback address that answers every
// request with its identity: the body "<ip:port> <zone>\n" and the header
// X-Peer: <ip:port>. It counts requests and new connections.
type Backend struct {
	Addr netip.AddrPort
	Zone string

	srv      *http.Server
	requests atomic.Int64
	conns    atomic.Int64
}

// StartBackend listens on ip (port chosen by the kernel) and serves until
// the test ends.
func StartBackend(tb testing.TB, ip, zone string) *Backend {
	tb.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		tb.Fatalf("backend on %s: %v", ip, err)
	}
	ap := l.Addr().(*net.TCPAddr).AddrPort()
	b := &Backend{Addr: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), Zone: zone}
	body := []byte(b.Addr.String() + " " + zone + "\n")
	peer := b.Addr.String()
	b.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b.requests.Add(1)
			w.Header().Set("X-Peer", peer)
			w.Header().Set("Content-Type", "text/plain")
			w.Write(body)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				b.conns.Add(1)
			}
		},
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() {
		if err := b.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("backend %s: %v", b.Addr, err)
		}
	}()
	tb.Cleanup(func() { b.srv.Close() })
	return b
}

// StartBackends starts one backend in zone on each of ips.
func StartBackends(tb testing.TB, zone string, ips ...string) []*Backend {
	tb.Helper()
	bs := make([]*Backend, len(ips))
	for i, ip := range ips {
		bs[i] = StartBackend(tb, ip, zone)
	}
	return bs
}

// String is the backend's ip:port, as X-Peer and $upstream_addr name it.
func (b *Backend) String() string { return b.Addr.String() }

// Body is what the backend answers.
func (b *Backend) Body() string { return fmt.Sprintf("%s %s\n", b.Addr, b.Zone) }

// Requests is the number of requests the backend has answered.
func (b *Backend) Requests() int64 { return b.requests.Load() }

// Conns is the number of connections the backend has accepted.
func (b *Backend) Conns() int64 { return b.conns.Load() }

// Peer is the backend as a ready, serving table peer of weight 1.
func (b *Backend) Peer(preferred bool) table.Peer {
	return b.WeightedPeer(1, preferred)
}

// WeightedPeer is the backend as a ready, serving table peer.
func (b *Backend) WeightedPeer(weight uint32, preferred bool) table.Peer {
	return table.Peer{
		Addr: b.Addr.Addr(), Port: b.Addr.Port(), Weight: weight, Zone: b.Zone,
		Preferred: preferred, Ready: true, Serving: true,
	}
}

// RefusingPeer returns a table peer at ip on a port where nothing listens:
// the port was free a moment ago and the socket is closed again, so a
// connection to it is refused. Use an address no backend of the test
// binds, so that the port stays unused.
func RefusingPeer(tb testing.TB, ip, zone string, preferred bool) table.Peer {
	tb.Helper()
	port, err := FreePort(ip)
	if err != nil {
		tb.Fatal(err)
	}
	return table.Peer{
		Addr: netip.MustParseAddr(ip), Port: uint16(port), Weight: 1, Zone: zone,
		Preferred: preferred, Ready: true, Serving: true,
	}
}

// PeerName is a table peer's ip:port, as $upstream_addr names it.
func PeerName(p table.Peer) string {
	return netip.AddrPortFrom(p.Addr, p.Port).String()
}
