package table

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// Scale targets from the design: 100,000 peers in 10,000 backends, snapshot
// at most 8 MB, built and published within 20 ms.
const (
	scaleBackends   = 10_000
	scalePeers      = 100_000
	scaleMaxBytes   = 8 << 20
	scaleZoneLocal  = "eu-west-1a"
	scaleIPv6Share  = 10 // percent of peers with IPv6 addresses
	scaleSpillShare = 20 // percent of backends with an explicit Spill map
)

// scaleTable is a realistic large table: 10,000 backends of 10 peers in
// three zones; peers of the own zone (about a third) are preferred, the
// local share varies per backend, a fifth of the backends carry explicit
// spill shares and a few peers are not ready or terminating.
func scaleTable() *Table {
	r := rand.New(rand.NewPCG(100_000, 10_000))
	zones := []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}
	t := &Table{Zone: scaleZoneLocal, Backends: make([]Backend, scaleBackends)}
	perBackend := scalePeers / scaleBackends
	for i := range t.Backends {
		b := &t.Backends[i]
		b.Name = fmt.Sprintf("team-%03d-service-%05d-%d", i%317, i, 80+i%7*1000)
		b.LocalShare = []uint32{ShareOne, ShareOne, 8000, 6667, 5000, 0}[i%6]
		if r.IntN(100) < scaleSpillShare {
			b.Spill = map[string]uint32{"eu-west-1b": 7000, "eu-west-1c": 3000}
		}
		b.Peers = make([]Peer, perBackend)
		for j := range b.Peers {
			p := &b.Peers[j]
			if r.IntN(100) < scaleIPv6Share {
				p.Addr = netip.AddrFrom16([16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i >> 8), byte(i), 0, 0, byte(j >> 8), byte(j)})
			} else {
				p.Addr = netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), byte(j + 1)})
			}
			p.Port = 8080
			p.Weight = 1
			p.Zone = zones[(i+j)%len(zones)]
			p.Preferred = p.Zone == scaleZoneLocal
			p.Ready = r.IntN(50) != 0
			p.Serving = p.Ready
			p.Terminating = r.IntN(100) == 0
		}
	}
	return t
}

func TestScaleTableMeetsSizeTarget(t *testing.T) {
	tab := scaleTable()
	b := mustEncode(t, tab, 1)
	t.Logf("%d backends, %d peers: snapshot %d bytes", scaleBackends, scalePeers, len(b))
	if len(b) > scaleMaxBytes {
		t.Fatalf("snapshot of %d bytes exceeds the %d-byte target", len(b), scaleMaxBytes)
	}
	s, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTables(normalize(tab), &s.Table); d != "" {
		t.Fatal(d)
	}
	if testing.Short() {
		return
	}
	checkIndex(t, b, tab)
}

func BenchmarkEncode100k(b *testing.B) {
	tab := scaleTable()
	var e Encoder
	out, err := e.Encode(tab, 1)
	if err != nil {
		b.Fatal(err)
	}
	size := len(out)
	b.ReportAllocs()
	var gen uint64
	for b.Loop() {
		gen++
		if _, err := e.Encode(tab, gen); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size), "snapshot-bytes")
}

func BenchmarkPublish100k(b *testing.B) {
	tab := scaleTable()
	p, err := OpenPublisher(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	pub, err := p.Publish(tab) // warm the encoder's buffers
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if pub, err = p.Publish(tab); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(pub.Size), "snapshot-bytes")
}

func BenchmarkDecodeSmall(b *testing.B) {
	buf := mustEncode(b, smallTable(), 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "snapshot-bytes")
}

// BenchmarkDecode100k is validation by the C reader (what every worker
// does once per new generation) plus the copy into Go values.
func BenchmarkDecode100k(b *testing.B) {
	buf := mustEncode(b, scaleTable(), 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "snapshot-bytes")
}
