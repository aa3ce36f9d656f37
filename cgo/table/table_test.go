package table

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The layout documented in zonal_table.h. Test files cannot use cgo, so the
// tests locate fields from these offsets; TestLayoutOffsetsMatchEncoder
// checks them against what the encoder writes.
const (
	hdrMagic       = 0
	hdrVersion     = 8
	hdrHeaderSize  = 12
	hdrSize        = 16
	hdrChecksum    = 24
	hdrGeneration  = 32
	hdrLocalZone   = 40
	hdrNZones      = 44
	hdrZonesOff    = 48
	hdrNBackends   = 52
	hdrBackendsOff = 56
	hdrNSpills     = 60
	hdrSpillsOff   = 64
	hdrNPeers      = 68
	hdrPeersOff    = 72
	hdrNBuckets    = 76
	hdrBucketsOff  = 80
	hdrStringsSize = 84
	hdrStringsOff  = 88
	hdrReserved    = 92
	headerSize     = 96

	zoneSize    = 8
	zoneNameOff = 0
	zoneNameLen = 4

	backendSize       = 48
	backendNameOff    = 0
	backendNameLen    = 4
	backendNameHash   = 8
	backendPeerStart  = 12
	backendNPeers     = 16
	backendNPreferred = 20
	backendLocalShare = 24
	backendSpillStart = 28
	backendNSpills    = 32
	backendAlgorithm  = 36 // uint16

	spillSize     = 16
	spillZone     = 0
	spillShareOff = 4
	spillFirst    = 8
	spillNPeers   = 12

	peerSize      = 32
	peerFamily    = 0 // uint8
	peerFlags     = 1 // uint8
	peerPort      = 2 // uint16
	peerZone      = 4
	peerWeight    = 8
	peerCumWeight = 12
	peerAddr      = 16

	noZone       = 0xffffffff
	tableMagic   = 0x3142544c414e4f5a
	controlMagic = 0x4c54434c414e4f5a
	controlSize  = 4096
	maxZones     = 4096
)

// le is the table's byte order: the host's.
var le = binary.NativeEndian

// raw locates the fields of a snapshot from its header.
type raw []byte

func (r raw) u16(off int) uint16       { return le.Uint16(r[off:]) }
func (r raw) u32(off int) uint32       { return le.Uint32(r[off:]) }
func (r raw) u64(off int) uint64       { return le.Uint64(r[off:]) }
func (r raw) put16(off int, v uint16)  { le.PutUint16(r[off:], v) }
func (r raw) put32(off int, v uint32)  { le.PutUint32(r[off:], v) }
func (r raw) put64(off int, v uint64)  { le.PutUint64(r[off:], v) }
func (r raw) hdr(field int) uint32     { return r.u32(field) }
func (r raw) zone(i, field int) int    { return int(r.hdr(hdrZonesOff)) + i*zoneSize + field }
func (r raw) backend(i, field int) int { return int(r.hdr(hdrBackendsOff)) + i*backendSize + field }
func (r raw) spill(i, field int) int   { return int(r.hdr(hdrSpillsOff)) + i*spillSize + field }
func (r raw) peer(i, field int) int    { return int(r.hdr(hdrPeersOff)) + i*peerSize + field }
func (r raw) bucket(i int) int         { return int(r.hdr(hdrBucketsOff)) + i*4 }
func (r raw) str(off uint32, n uint32) string {
	s := int(r.hdr(hdrStringsOff)) + int(off)
	return string(r[s : s+int(n)])
}

func (r raw) backendName(i int) string {
	return r.str(r.u32(r.backend(i, backendNameOff)), r.u32(r.backend(i, backendNameLen)))
}

// fnv1a is zonal_hash() as zonal_table.c defines it.
func fnv1a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// lookup searches the hash index the way zonal_table_lookup() does
// (linear probing from hash & mask) and returns the backend index, or -1.
func (r raw) lookup(name string) int {
	n := r.hdr(hdrNBuckets)
	mask := n - 1
	h := fnv1a(name)
	for i, probes := h&mask, uint32(0); probes < n; i, probes = (i+1)&mask, probes+1 {
		e := r.u32(r.bucket(int(i)))
		if e == 0 {
			return -1
		}
		if r.u32(r.backend(int(e-1), backendNameHash)) == h && r.backendName(int(e-1)) == name {
			return int(e - 1)
		}
	}
	return -1
}

func align8(n int) int { return (n + 7) &^ 7 }

// mustEncode encodes t with a fresh Encoder and returns a private copy.
func mustEncode(tb testing.TB, t *Table, gen uint64) []byte {
	tb.Helper()
	var e Encoder
	b, err := e.Encode(t, gen)
	if err != nil {
		tb.Fatalf("Encode: %v", err)
	}
	return bytes.Clone(b)
}

// ---------------------------------------------------------------------------
// Random tables and their expected normal form.

var zonePool = []string{
	"eu-west-1a", "eu-west-1b", "eu-west-1c", "us-east-1a", "us-east-1b",
	"z", "Zone-Upper", "ap-south-1a", strings.Repeat("long-zone-", 25) + "abc", // 253 bytes
}

type genOpts struct {
	backends  int // number of backends
	maxPeers  int // peers per backend: 0 .. maxPeers
	zones     int // how many zones of zonePool (or generated) the peers use
	noZone    bool
	v6        bool
	bigWeight bool
}

func randomAddr(r *rand.Rand, v6 bool) netip.Addr {
	if v6 && r.IntN(2) == 0 {
		var a [16]byte
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		if r.IntN(20) == 0 {
			// an IPv4-mapped IPv6 address: the table stores it as IPv4
			a = netip.AddrFrom4([4]byte{10, byte(r.Uint32()), byte(r.Uint32()), 1}).As16()
		}
		return netip.AddrFrom16(a)
	}
	return netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
}

func randomTable(r *rand.Rand, o genOpts) *Table {
	var zones []string
	for i := 0; i < o.zones; i++ {
		if i < len(zonePool) {
			zones = append(zones, zonePool[i])
		} else {
			zones = append(zones, fmt.Sprintf("gen-zone-%03d", i))
		}
	}
	r.Shuffle(len(zones), func(i, j int) { zones[i], zones[j] = zones[j], zones[i] })
	pickZone := func() string {
		if len(zones) == 0 || (o.noZone && r.IntN(5) == 0) {
			return ""
		}
		return zones[r.IntN(len(zones))]
	}

	t := &Table{}
	switch r.IntN(4) {
	case 0:
		t.Zone = ""
	case 1:
		t.Zone = "zone-with-no-peers"
	default:
		t.Zone = pickZone()
	}
	for i := 0; i < o.backends; i++ {
		b := Backend{Name: fmt.Sprintf("ns%d-svc%d-%d", r.IntN(50), i, 1+r.IntN(65535))}
		if r.IntN(40) == 0 {
			b.Name = fmt.Sprintf("%08d", i) + strings.Repeat("x", MaxNameLen-8)
		}
		switch r.IntN(6) {
		case 0:
			b.LocalShare = 0
		case 1:
			b.LocalShare = ShareOne
		case 2:
			b.LocalShare = ShareOne + 1 + r.Uint32N(1<<20) // clamped to ShareOne
		default:
			b.LocalShare = r.Uint32N(ShareOne + 1)
		}
		if r.IntN(2) == 0 {
			b.Spill = map[string]uint32{}
			for _, z := range append(slices.Clone(zones), "", "zone-with-no-peers") {
				switch r.IntN(4) {
				case 0: // absent: share 0
				case 1:
					b.Spill[z] = ShareOne + r.Uint32N(100000) // clamped
				default:
					b.Spill[z] = r.Uint32N(ShareOne + 1)
				}
			}
		}
		n := 0
		if o.maxPeers > 0 {
			n = r.IntN(o.maxPeers + 1)
		}
		preferRate := r.IntN(4) // 0: none preferred, 3: mostly preferred
		for j := 0; j < n; j++ {
			p := Peer{
				Addr:        randomAddr(r, o.v6),
				Port:        uint16(1 + r.IntN(65535)),
				Zone:        pickZone(),
				Preferred:   r.IntN(4) < preferRate,
				Ready:       r.IntN(2) == 0,
				Serving:     r.IntN(2) == 0,
				Terminating: r.IntN(5) == 0,
			}
			switch r.IntN(5) {
			case 0:
				p.Weight = 0
			case 1:
				p.Weight = 1
			case 2:
				if o.bigWeight {
					p.Weight = MaxWeight - r.Uint32N(2)
				} else {
					p.Weight = 1 + r.Uint32N(100)
				}
			default:
				p.Weight = 1 + r.Uint32N(1000)
			}
			b.Peers = append(b.Peers, p)
		}
		t.Backends = append(t.Backends, b)
	}
	return t
}

// zoneKey orders zones as the table does: by name, with "" (no zone) last.
func zoneKey(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	return strings.Compare(a, b)
}

// normalize is what Decode(Encode(t)) must return, computed from the
// documented rules rather than from the encoder: preferred peers first in
// the given order, then the others grouped by zone (zones by name, no zone
// last), stable within a group; weight 0 becomes 1; IPv4-mapped addresses
// become IPv4; LocalShare and Spill values are clamped to ShareOne; Spill
// holds one entry per zone of the non-preferred peers, proportional to their
// weights when nil; nil when every peer is preferred.
func normalize(t *Table) *Table {
	out := &Table{Zone: t.Zone, Backends: make([]Backend, len(t.Backends))}
	for i := range t.Backends {
		b := &t.Backends[i]
		nb := Backend{Name: b.Name, LocalShare: min(b.LocalShare, ShareOne), Peers: []Peer{}}
		var rest []Peer
		for _, p := range b.Peers {
			p.Weight = max(p.Weight, 1)
			p.Addr = p.Addr.Unmap()
			if p.Preferred {
				nb.Peers = append(nb.Peers, p)
			} else {
				rest = append(rest, p)
			}
		}
		slices.SortStableFunc(rest, func(x, y Peer) int { return zoneKey(x.Zone, y.Zone) })
		nb.Peers = append(nb.Peers, rest...)
		if len(rest) > 0 {
			var total uint64
			group := map[string]uint64{}
			for _, p := range rest {
				total += uint64(p.Weight)
				group[p.Zone] += uint64(p.Weight)
			}
			nb.Spill = map[string]uint32{}
			for z, w := range group {
				if b.Spill != nil {
					nb.Spill[z] = min(b.Spill[z], ShareOne)
				} else {
					nb.Spill[z] = uint32(max(1, w*uint64(ShareOne)/total))
				}
			}
		}
		out.Backends[i] = nb
	}
	return out
}

// canon maps nil peer slices to empty ones so that tables compare by content.
func canon(t *Table) *Table {
	c := *t
	c.Backends = slices.Clone(t.Backends)
	for i := range c.Backends {
		if c.Backends[i].Peers == nil {
			c.Backends[i].Peers = []Peer{}
		}
	}
	if c.Backends == nil {
		c.Backends = []Backend{}
	}
	return &c
}

// diffTables describes the first difference between two tables, or "".
func diffTables(want, got *Table) string {
	w, g := canon(want), canon(got)
	if reflect.DeepEqual(w, g) {
		return ""
	}
	if w.Zone != g.Zone {
		return fmt.Sprintf("zone: want %q, got %q", w.Zone, g.Zone)
	}
	if len(w.Backends) != len(g.Backends) {
		return fmt.Sprintf("want %d backends, got %d", len(w.Backends), len(g.Backends))
	}
	for i := range w.Backends {
		wb, gb := &w.Backends[i], &g.Backends[i]
		if reflect.DeepEqual(wb, gb) {
			continue
		}
		if wb.Name != gb.Name || wb.LocalShare != gb.LocalShare {
			return fmt.Sprintf("backend %d: want %q share %d, got %q share %d", i, wb.Name, wb.LocalShare, gb.Name, gb.LocalShare)
		}
		if !reflect.DeepEqual(wb.Spill, gb.Spill) {
			return fmt.Sprintf("backend %q: spill: want %v, got %v", wb.Name, wb.Spill, gb.Spill)
		}
		if len(wb.Peers) != len(gb.Peers) {
			return fmt.Sprintf("backend %q: want %d peers, got %d", wb.Name, len(wb.Peers), len(gb.Peers))
		}
		for j := range wb.Peers {
			if wb.Peers[j] != gb.Peers[j] {
				return fmt.Sprintf("backend %q: peer %d: want %+v, got %+v", wb.Name, j, wb.Peers[j], gb.Peers[j])
			}
		}
		return fmt.Sprintf("backend %d differs: want %+v, got %+v", i, wb, gb)
	}
	return "tables differ"
}

// checkIndex checks that every backend is found by its name in the hash
// index and that other names are not.
func checkIndex(t *testing.T, b []byte, tab *Table) {
	t.Helper()
	r := raw(b)
	for i := range tab.Backends {
		if got := r.lookup(tab.Backends[i].Name); got != i {
			t.Fatalf("lookup %q = %d, want %d", tab.Backends[i].Name, got, i)
		}
	}
	for _, name := range []string{"", "unknown", "ns0-svc0", "ns0-svc0-", strings.Repeat("y", MaxNameLen)} {
		if slices.ContainsFunc(tab.Backends, func(b Backend) bool { return b.Name == name }) {
			continue
		}
		if got := r.lookup(name); got != -1 {
			t.Fatalf("lookup of unknown name %q = %d, want -1", name, got)
		}
	}
	for i := range tab.Backends {
		// a longer name than an existing one (the names end in a digit or x)
		if name := tab.Backends[i].Name + "#"; r.lookup(name) != -1 {
			t.Fatalf("lookup of unknown name %q found a backend", name)
		}
	}
}

// ---------------------------------------------------------------------------
// Round trips.

var roundTripCases = []struct {
	name string
	seed uint64
	opts genOpts
}{
	{"empty table", 1, genOpts{}},
	{"only empty backends", 2, genOpts{backends: 20}},
	{"ipv4 one zone", 3, genOpts{backends: 30, maxPeers: 8, zones: 1}},
	{"ipv4 and ipv6 three zones", 4, genOpts{backends: 40, maxPeers: 12, zones: 3, v6: true}},
	{"no-zone peers mixed in", 5, genOpts{backends: 40, maxPeers: 12, zones: 3, noZone: true, v6: true}},
	{"only no-zone peers", 6, genOpts{backends: 20, maxPeers: 10, zones: 0}},
	{"many zones", 7, genOpts{backends: 50, maxPeers: 40, zones: 300, noZone: true, v6: true}},
	{"large weights", 8, genOpts{backends: 30, maxPeers: 60, zones: 4, bigWeight: true, noZone: true}},
	{"many backends", 9, genOpts{backends: 3000, maxPeers: 4, zones: 3, noZone: true, v6: true}},
	{"many peers per backend", 10, genOpts{backends: 5, maxPeers: 3000, zones: 9, noZone: true, v6: true}},
	{"seed 11", 11, genOpts{backends: 100, maxPeers: 20, zones: 5, noZone: true, v6: true}},
	{"seed 12", 12, genOpts{backends: 100, maxPeers: 20, zones: 5, noZone: true, v6: true, bigWeight: true}},
	{"seed 13", 13, genOpts{backends: 100, maxPeers: 20, zones: 2, noZone: true}},
}

func TestEncodeDecodeRoundTripsRandomTables(t *testing.T) {
	var reused Encoder // one Encoder for all cases: buffers must not leak between tables
	for _, tc := range roundTripCases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(tc.seed, 0x5eed))
			tab := randomTable(r, tc.opts)
			gen := r.Uint64()

			b := mustEncode(t, tab, gen)
			if len(b)%8 != 0 {
				t.Fatalf("snapshot size %d not a multiple of 8", len(b))
			}
			s, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if s.Generation != gen || s.Size != len(b) {
				t.Fatalf("generation %d size %d, want %d %d", s.Generation, s.Size, gen, len(b))
			}
			if d := diffTables(normalize(tab), &s.Table); d != "" {
				t.Fatal(d)
			}
			checkIndex(t, b, tab)

			// Deterministic, and independent of what the Encoder held before.
			again, err := reused.Encode(tab, gen)
			if err != nil {
				t.Fatalf("reused Encode: %v", err)
			}
			if !bytes.Equal(again, b) {
				t.Fatal("a reused Encoder wrote different bytes than a fresh one")
			}
			// Decoding is a fixed point: the decoded table encodes to the same bytes.
			if b2 := mustEncode(t, &s.Table, gen); !bytes.Equal(b2, b) {
				t.Fatal("re-encoding the decoded table changed the bytes")
			}
		})
	}
}

func TestPublishThenReadDirRoundTripsRandomTables(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPublisher(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tc := range roundTripCases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(tc.seed, 0xd1))
			tab := randomTable(r, tc.opts)
			pub, err := p.Publish(tab)
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			live, err := ReadDir(dir)
			if err != nil {
				t.Fatalf("ReadDir: %v", err)
			}
			if live.Control != pub.Generation || live.Snapshot.Generation != pub.Generation || live.Snapshot.Size != pub.Size {
				t.Fatalf("control %d snapshot %d size %d, published %+v", live.Control, live.Snapshot.Generation, live.Snapshot.Size, pub)
			}
			if d := diffTables(normalize(tab), &live.Snapshot.Table); d != "" {
				t.Fatal(d)
			}
			b, err := os.ReadFile(filepath.Join(dir, TableFile))
			if err != nil {
				t.Fatal(err)
			}
			checkIndex(t, b, tab)
			fs, err := ReadFile(filepath.Join(dir, TableFile))
			if err != nil || !reflect.DeepEqual(fs, live.Snapshot) {
				t.Fatalf("ReadFile disagrees with ReadDir: %v", err)
			}
		})
	}
}

func TestEncodeNormalizesPeersSpillAndShares(t *testing.T) {
	v4 := netip.MustParseAddr("10.0.0.1")
	mapped := netip.MustParseAddr("::ffff:10.0.0.2")
	v6 := netip.MustParseAddr("fd00::3")
	tab := &Table{Zone: "b", Backends: []Backend{{
		Name:       "ns-svc-80",
		LocalShare: 99999,
		Peers: []Peer{
			{Addr: v4, Port: 1, Zone: "", Weight: 0},
			{Addr: mapped, Port: 2, Zone: "c", Weight: 3},
			{Addr: v6, Port: 3, Zone: "b", Preferred: true, Weight: 7},
			{Addr: v4, Port: 4, Zone: "a", Weight: MaxWeight},
			{Addr: v6, Port: 5, Zone: "c", Weight: 1},
			{Addr: v4, Port: 6, Zone: "b", Preferred: true},
		},
	}}}
	s, err := Decode(mustEncode(t, tab, 1))
	if err != nil {
		t.Fatal(err)
	}
	var ports []uint16
	for _, p := range s.Backends[0].Peers {
		ports = append(ports, p.Port)
	}
	if want := []uint16{3, 6, 4, 2, 5, 1}; !slices.Equal(ports, want) {
		t.Errorf("peer order by port = %v, want %v (preferred as given, then zones a, c, none)", ports, want)
	}
	if got := s.Backends[0].Peers[3].Addr; got != netip.MustParseAddr("10.0.0.2") {
		t.Errorf("IPv4-mapped address decoded as %v, want 10.0.0.2", got)
	}
	if got := s.Backends[0].Peers[5].Weight; got != 1 {
		t.Errorf("weight 0 decoded as %d, want 1", got)
	}
	if got := s.Backends[0].LocalShare; got != ShareOne {
		t.Errorf("LocalShare 99999 decoded as %d, want %d", got, ShareOne)
	}
	// Non-preferred weights: a 2^20, c 3+1, none 1.
	total := uint64(MaxWeight) + 5
	want := map[string]uint32{
		"a": uint32(uint64(MaxWeight) * 10000 / total),
		"c": 1, // 4*10000/total rounds to 0; never 0
		"":  1,
	}
	if !reflect.DeepEqual(s.Backends[0].Spill, want) {
		t.Errorf("proportional spill = %v, want %v", s.Backends[0].Spill, want)
	}
}

func TestEncodeAcceptsLimits(t *testing.T) {
	many := &Table{}
	for i := 0; i < maxZones; i++ {
		many.Backends = append(many.Backends, Backend{Name: fmt.Sprintf("b%d", i), Peers: []Peer{{
			Addr: netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), Port: 80, Zone: fmt.Sprintf("z%04d", i),
		}}})
	}
	heavy := &Table{Backends: []Backend{{Name: strings.Repeat("n", MaxNameLen)}}}
	for i := 0; i < 4095; i++ { // 4095 * 2^20 < 2^32
		heavy.Backends[0].Peers = append(heavy.Backends[0].Peers, Peer{
			Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Port: 80, Weight: MaxWeight, Preferred: i%2 == 0,
		})
	}
	for name, tab := range map[string]*Table{"4096 zones": many, "max weights and name length": heavy} {
		t.Run(name, func(t *testing.T) {
			s, err := Decode(mustEncode(t, tab, 3))
			if err != nil {
				t.Fatal(err)
			}
			if d := diffTables(normalize(tab), &s.Table); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Encoder errors.

func TestEncodeRefusesInvalidTablesWithClearErrors(t *testing.T) {
	addr := netip.MustParseAddr("10.1.2.3")
	peer := func(mod func(*Peer)) []Peer {
		p := Peer{Addr: addr, Port: 8080, Zone: "a"}
		mod(&p)
		return []Peer{p}
	}
	manyZones := &Table{}
	for i := 0; i <= maxZones; i++ {
		manyZones.Backends = append(manyZones.Backends, Backend{Name: fmt.Sprintf("b%d", i), Peers: []Peer{{Addr: addr, Port: 1, Zone: fmt.Sprintf("z%d", i)}}})
	}
	heavy := &Table{Backends: []Backend{{Name: "heavy"}}}
	for i := 0; i < 4097; i++ { // 4097 * 2^20 > 2^32
		heavy.Backends[0].Peers = append(heavy.Backends[0].Peers, Peer{Addr: addr, Port: 80, Weight: MaxWeight})
	}
	tests := []struct {
		name    string
		table   *Table
		want    []string // substrings of the message
		wantErr error    // errors.Is, if set
	}{
		{"duplicate backend name", &Table{Backends: []Backend{{Name: "ns-a-80"}, {Name: "ns-dup-80"}, {Name: "ns-dup-80"}}},
			[]string{`"ns-dup-80"`, "twice"}, ErrIndex},
		{"duplicate backend name with peers", &Table{Backends: []Backend{{Name: "x", Peers: peer(func(*Peer) {})}, {Name: "x"}}},
			[]string{`"x"`, "twice"}, ErrIndex},
		{"empty backend name", &Table{Backends: []Backend{{Name: ""}}}, []string{`backend ""`, "name must be 1 to 253 bytes"}, nil},
		{"backend name too long", &Table{Backends: []Backend{{Name: strings.Repeat("a", MaxNameLen+1)}}}, []string{"name must be 1 to 253 bytes"}, nil},
		{"port 0", &Table{Backends: []Backend{{Name: "ns-web-80", Peers: peer(func(p *Peer) { p.Port = 0 })}}},
			[]string{"ns-web-80", "10.1.2.3", "port 0"}, nil},
		{"invalid addr", &Table{Backends: []Backend{{Name: "ns-web-80", Peers: peer(func(p *Peer) { p.Addr = netip.Addr{} })}}},
			[]string{"ns-web-80", "peer 0", "no address"}, nil},
		{"scoped ipv6 addr", &Table{Backends: []Backend{{Name: "ns-web-80", Peers: peer(func(p *Peer) { p.Addr = netip.MustParseAddr("fe80::1%eth0") })}}},
			[]string{"ns-web-80", "scoped"}, nil},
		{"weight too large", &Table{Backends: []Backend{{Name: "ns-web-80", Peers: peer(func(p *Peer) { p.Weight = MaxWeight + 1 })}}},
			[]string{"ns-web-80", "weight 1048577 above 1048576"}, nil},
		{"total weight too large", heavy, []string{"heavy", "total peer weight"}, nil},
		{"zone name too long", &Table{Backends: []Backend{{Name: "b", Peers: peer(func(p *Peer) { p.Zone = strings.Repeat("z", MaxNameLen+1) })}}},
			[]string{"zone", "longer than 253"}, nil},
		{"own zone name too long", &Table{Zone: strings.Repeat("z", MaxNameLen+1)}, []string{"zone", "longer than 253"}, nil},
		{"too many zones", manyZones, []string{"4097 zones", "4096"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e Encoder
			b, err := e.Encode(tc.table, 1)
			if err == nil {
				t.Fatalf("Encode accepted the table (%d bytes)", len(b))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v is not %v", err, tc.wantErr)
			}
			// The Encoder stays usable after a refusal.
			if _, err := e.Encode(&Table{Backends: []Backend{{Name: "ok", Peers: peer(func(*Peer) {})}}}, 2); err != nil {
				t.Errorf("Encode after a refusal: %v", err)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Damage.

// smallTable has every kind of section: zones a, b, c (ids 0-2; own zone a);
//
//	backend 0 "default-alpha-80": peers 0-5, preferred 0-1, spills 0-2
//	  (zone b: peers 2-3, zone c: peer 4, no zone: peer 5)
//	backend 1 "default-empty-80": no peers
//	backend 2 "kube-system-dns-53": peers 6-7 (zone b), spill 3
func smallTable() *Table {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	return &Table{Zone: "zone-a", Backends: []Backend{
		{Name: "default-alpha-80", LocalShare: 7000, Peers: []Peer{
			{Addr: a("10.0.0.1"), Port: 80, Weight: 3, Zone: "zone-a", Preferred: true, Ready: true, Serving: true},
			{Addr: a("10.0.1.1"), Port: 80, Weight: 1, Zone: "zone-b", Ready: true},
			{Addr: a("fd00::1"), Port: 8080, Weight: 0, Zone: "zone-a", Preferred: true, Ready: true},
			{Addr: a("10.0.2.1"), Port: 80, Weight: 2, Zone: "zone-c", Terminating: true},
			{Addr: a("10.0.3.1"), Port: 80, Weight: 1, Zone: ""},
			{Addr: a("10.0.1.2"), Port: 80, Weight: 5, Zone: "zone-b", Ready: true, Serving: true},
		}},
		{Name: "default-empty-80"},
		{Name: "kube-system-dns-53", LocalShare: 0, Spill: map[string]uint32{"zone-b": ShareOne}, Peers: []Peer{
			{Addr: a("10.9.0.1"), Port: 53, Zone: "zone-b", Ready: true},
			{Addr: a("fd00::9"), Port: 53, Zone: "zone-b", Weight: 4},
		}},
	}}
}

func TestLayoutOffsetsMatchEncoder(t *testing.T) {
	b := mustEncode(t, smallTable(), 42)
	r := raw(b)
	if r.u64(hdrMagic) != tableMagic || r.u32(hdrVersion) != 1 || r.u32(hdrHeaderSize) != headerSize ||
		r.u64(hdrSize) != uint64(len(b)) || r.u64(hdrGeneration) != 42 {
		t.Fatalf("header: magic %#x version %d header %d size %d gen %d", r.u64(hdrMagic), r.u32(hdrVersion),
			r.u32(hdrHeaderSize), r.u64(hdrSize), r.u64(hdrGeneration))
	}
	counts := []uint32{r.hdr(hdrNZones), r.hdr(hdrNBackends), r.hdr(hdrNSpills), r.hdr(hdrNPeers), r.hdr(hdrNBuckets)}
	if !slices.Equal(counts, []uint32{3, 3, 4, 8, 8}) {
		t.Fatalf("counts zones, backends, spills, peers, buckets = %v", counts)
	}
	off := headerSize
	for _, s := range []struct{ field, n, size int }{
		{hdrZonesOff, 3, zoneSize}, {hdrBackendsOff, 3, backendSize}, {hdrSpillsOff, 4, spillSize},
		{hdrPeersOff, 8, peerSize}, {hdrBucketsOff, 8, 4}, {hdrStringsOff, int(r.hdr(hdrStringsSize)), 1},
	} {
		if int(r.hdr(s.field)) != off {
			t.Fatalf("section at header offset %d starts at %d, want %d", s.field, r.hdr(s.field), off)
		}
		off += align8(s.n * s.size)
	}
	if off != len(b) {
		t.Fatalf("sections end at %d, snapshot is %d bytes", off, len(b))
	}
	if got := r.str(r.u32(r.zone(1, zoneNameOff)), r.u32(r.zone(1, zoneNameLen))); got != "zone-b" {
		t.Fatalf("zone 1 = %q", got)
	}
	if r.hdr(hdrLocalZone) != 0 {
		t.Fatalf("local zone %d", r.hdr(hdrLocalZone))
	}
	for i, name := range []string{"default-alpha-80", "default-empty-80", "kube-system-dns-53"} {
		if r.backendName(i) != name || r.u32(r.backend(i, backendNameHash)) != fnv1a(name) {
			t.Fatalf("backend %d: %q hash %#x", i, r.backendName(i), r.u32(r.backend(i, backendNameHash)))
		}
	}
	be := func(i, f int) uint32 { return r.u32(r.backend(i, f)) }
	if be(0, backendNPeers) != 6 || be(0, backendNPreferred) != 2 || be(0, backendLocalShare) != 7000 ||
		be(0, backendNSpills) != 3 || be(2, backendPeerStart) != 6 || be(2, backendSpillStart) != 3 {
		t.Fatal("backend fields not where zonal_table.h puts them")
	}
	sp := func(i, f int) uint32 { return r.u32(r.spill(i, f)) }
	if sp(0, spillZone) != 1 || sp(0, spillFirst) != 2 || sp(0, spillNPeers) != 2 || sp(2, spillZone) != noZone ||
		sp(3, spillShareOff) != ShareOne {
		t.Fatal("spill fields not where zonal_table.h puts them")
	}
	if b[r.peer(1, peerFamily)] != 6 || b[r.peer(0, peerFamily)] != 4 || r.u16(r.peer(0, peerPort)) != 80 ||
		r.u32(r.peer(1, peerCumWeight)) != 3 || r.u32(r.peer(3, peerWeight)) != 5 || b[r.peer(0, peerFlags)] != 3 ||
		r.u32(r.peer(5, peerZone)) != noZone || !bytes.Equal(b[r.peer(0, peerAddr):r.peer(0, peerAddr)+4], []byte{10, 0, 0, 1}) {
		t.Fatal("peer fields not where zonal_table.h puts them")
	}
	checkIndex(t, b, smallTable())
}

func TestDecodeRefusesBadMagicVersionAndSize(t *testing.T) {
	good := mustEncode(t, smallTable(), 1)
	tests := []struct {
		name   string
		damage func(r raw) raw
		want   error
	}{
		{"bad magic", func(r raw) raw { r.put64(hdrMagic, 0x1122334455667788); return r }, ErrMagic},
		{"byte-swapped magic", func(r raw) raw { r.put64(hdrMagic, binary.BigEndian.Uint64(r[:8])); return r }, ErrMagic},
		{"control magic", func(r raw) raw { r.put64(hdrMagic, controlMagic); return r }, ErrMagic},
		{"wrong version", func(r raw) raw { r.put32(hdrVersion, 2); return r }, ErrVersion},
		{"version 0", func(r raw) raw { r.put32(hdrVersion, 0); return r }, ErrVersion},
		{"wrong header size", func(r raw) raw { r.put32(hdrHeaderSize, 104); return r }, ErrVersion},
		{"size field larger than data", func(r raw) raw { r.put64(hdrSize, uint64(len(r))+8); return r }, ErrShort},
		{"size field huge", func(r raw) raw { r.put64(hdrSize, math.MaxUint64); return r }, ErrShort},
		{"size field smaller than data", func(r raw) raw { r.put64(hdrSize, uint64(len(r))-8); return r }, ErrSize},
		{"size field zero", func(r raw) raw { r.put64(hdrSize, 0); return r }, ErrSize},
		{"one extra trailing byte", func(r raw) raw { return append(r, 0) }, ErrSize},
		{"eight extra trailing bytes", func(r raw) raw { return append(r, make([]byte, 8)...) }, ErrSize},
		{"extra bytes and size field to match", func(r raw) raw {
			r = append(r, make([]byte, 8)...)
			r.put64(hdrSize, uint64(len(r)))
			resealChecksum(r)
			return r
		}, ErrLayout},
		{"only a header", func(r raw) raw { r = r[:headerSize]; r.put64(hdrSize, headerSize); resealChecksum(r); return r }, ErrLayout},
		{"bad checksum", func(r raw) raw { r.put64(hdrChecksum, r.u64(hdrChecksum)^1); return r }, ErrChecksum},
		{"changed generation without reseal", func(r raw) raw { r.put64(hdrGeneration, 7); return r }, ErrChecksum},
		{"zeroed", func(r raw) raw { clear(r); return r }, ErrMagic},
		{"empty", func(r raw) raw { return r[:0] }, ErrShort},
		{"nil", func(r raw) raw { return nil }, ErrShort},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.damage(raw(bytes.Clone(good)))
			s, err := Decode(b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode = %v, %v; want %v", s, err, tc.want)
			}
			if s != nil {
				t.Fatal("Decode returned a snapshot with its error")
			}
		})
	}
}

func TestDecodeRefusesEveryTruncation(t *testing.T) {
	for _, tab := range []*Table{smallTable(), randomTable(rand.New(rand.NewPCG(77, 1)), genOpts{backends: 20, maxPeers: 6, zones: 3, noZone: true, v6: true})} {
		b := mustEncode(t, tab, 9)
		for n := 0; n < len(b); n++ {
			s, err := Decode(b[:n])
			if !errors.Is(err, ErrShort) || s != nil {
				t.Fatalf("Decode of the first %d of %d bytes = %v, want ErrShort", n, len(b), err)
			}
		}
	}
}

func TestDecodeRefusesEveryBitFlip(t *testing.T) {
	good := mustEncode(t, smallTable(), 5)
	sizeBits := func(n uint64) error { // flipping a bit of the size field
		if n > uint64(len(good)) {
			return ErrShort
		}
		return ErrSize
	}
	for i := range good {
		for bit := 0; bit < 8; bit++ {
			b := bytes.Clone(good)
			b[i] ^= 1 << bit
			s, err := Decode(b)
			var want []error
			switch {
			case i < hdrVersion:
				want = []error{ErrMagic}
			case i < hdrSize:
				want = []error{ErrVersion}
			case i < hdrChecksum:
				want = []error{sizeBits(raw(b).u64(hdrSize))}
			case i >= hdrNZones && i < hdrReserved:
				// a count or offset: the layout no longer adds up, or (a
				// strings_size inside its padding) the checksum catches it
				want = []error{ErrLayout, ErrChecksum}
			default:
				want = []error{ErrChecksum}
			}
			if s != nil || !slices.ContainsFunc(want, func(w error) bool { return errors.Is(err, w) }) {
				t.Fatalf("bit %d of byte %d flipped: Decode = %v, want one of %v", bit, i, err, want)
			}
		}
	}
}

// TestDecodeRefusesDamageBehindTheChecksum damages one field, recomputes the
// checksum so that the damage reaches the structural checks, and expects
// the specific error.
func TestDecodeRefusesDamageBehindTheChecksum(t *testing.T) {
	good := mustEncode(t, smallTable(), 3)
	g := raw(good)
	nbuckets := int(g.hdr(hdrNBuckets))
	usedBuckets, emptyBuckets := []int{}, []int{}
	for i := 0; i < nbuckets; i++ {
		if g.u32(g.bucket(i)) != 0 {
			usedBuckets = append(usedBuckets, i)
		} else {
			emptyBuckets = append(emptyBuckets, i)
		}
	}
	// breaksLookup finds a bucket rearrangement after which some backend is
	// no longer found by its name.
	breaksLookup := func(r raw, swap func(r raw, i, j int), from, to []int) bool {
		for _, i := range from {
			for _, j := range to {
				if i == j {
					continue
				}
				c := raw(bytes.Clone(r))
				swap(c, i, j)
				for k := 0; k < 3; k++ {
					if c.lookup(c.backendName(k)) != k {
						swap(r, i, j)
						return true
					}
				}
			}
		}
		return false
	}
	swapBuckets := func(r raw, i, j int) {
		a, b := r.u32(r.bucket(i)), r.u32(r.bucket(j))
		r.put32(r.bucket(i), b)
		r.put32(r.bucket(j), a)
	}

	type dmg func(r raw)
	set32 := func(off func(r raw) int, v uint32) dmg { return func(r raw) { r.put32(off(r), v) } }
	add32 := func(off func(r raw) int, d int32) dmg {
		return func(r raw) { r.put32(off(r), uint32(int32(r.u32(off(r)))+d)) }
	}
	hdr := func(f int) func(r raw) int { return func(raw) int { return f } }
	be := func(i, f int) func(r raw) int { return func(r raw) int { return r.backend(i, f) } }
	sp := func(i, f int) func(r raw) int { return func(r raw) int { return r.spill(i, f) } }
	pe := func(i, f int) func(r raw) int { return func(r raw) int { return r.peer(i, f) } }
	zo := func(i, f int) func(r raw) int { return func(r raw) int { return r.zone(i, f) } }

	tests := []struct {
		name   string
		damage dmg
		want   error // nil: the change is harmless and must be accepted
	}{
		// header counts and offsets
		{"nzones above the maximum", set32(hdr(hdrNZones), maxZones+1), ErrLayout},
		{"nzones plus one", add32(hdr(hdrNZones), 1), ErrLayout},
		{"nbackends plus one", add32(hdr(hdrNBackends), 1), ErrLayout},
		{"nbackends huge", set32(hdr(hdrNBackends), math.MaxUint32), ErrLayout},
		{"nspills plus one", add32(hdr(hdrNSpills), 1), ErrLayout},
		{"npeers minus one", add32(hdr(hdrNPeers), -1), ErrLayout},
		{"npeers huge", set32(hdr(hdrNPeers), math.MaxUint32), ErrLayout},
		{"nbuckets doubled", func(r raw) { r.put32(hdrNBuckets, r.hdr(hdrNBuckets)*2) }, ErrLayout},
		{"nbuckets not a power of two", add32(hdr(hdrNBuckets), -1), ErrLayout},
		{"zones_off moved", add32(hdr(hdrZonesOff), 8), ErrLayout},
		{"backends_off moved", add32(hdr(hdrBackendsOff), -8), ErrLayout},
		{"spills_off misaligned", add32(hdr(hdrSpillsOff), 4), ErrLayout},
		{"peers_off past the end", set32(hdr(hdrPeersOff), math.MaxUint32), ErrLayout},
		{"buckets_off moved", add32(hdr(hdrBucketsOff), 8), ErrLayout},
		{"strings_off moved", add32(hdr(hdrStringsOff), 8), ErrLayout},
		{"strings_size past the end", add32(hdr(hdrStringsSize), 8), ErrLayout},
		{"strings_size huge", set32(hdr(hdrStringsSize), math.MaxUint32), ErrLayout},
		{"local zone out of range", set32(hdr(hdrLocalZone), 3), ErrZone},
		{"local zone huge", set32(hdr(hdrLocalZone), noZone-1), ErrZone},
		{"local zone none is fine", set32(hdr(hdrLocalZone), noZone), nil},
		{"other generation is fine", func(r raw) { r.put64(hdrGeneration, 1<<60) }, nil},

		// zones
		{"zone name empty", set32(zo(1, zoneNameLen), 0), ErrZone},
		{"zone name too long", set32(zo(1, zoneNameLen), uint32(MaxNameLen)+1), ErrZone},
		{"zone name past strings", func(r raw) { r.put32(r.zone(2, zoneNameOff), r.hdr(hdrStringsSize)) }, ErrZone},
		{"zone name ends past strings", func(r raw) { r.put32(r.zone(2, zoneNameOff), r.hdr(hdrStringsSize)-3) }, ErrZone},
		{"zone name offset wraps", set32(zo(0, zoneNameOff), math.MaxUint32), ErrZone},

		// backends
		{"backend npeers too big", add32(be(2, backendNPeers), 1), ErrBackend},
		{"backend npeers huge", set32(be(0, backendNPeers), math.MaxUint32), ErrBackend},
		{"backend peer_start off", add32(be(2, backendPeerStart), -1), ErrBackend},
		{"backend peer_start past peers", set32(be(1, backendPeerStart), 9), ErrBackend},
		{"backend npreferred above npeers", set32(be(0, backendNPreferred), 7), ErrBackend},
		{"empty backend with npreferred", set32(be(1, backendNPreferred), 1), ErrBackend},
		{"backend local share above 10000", set32(be(0, backendLocalShare), ShareOne+1), ErrBackend},
		{"backend local share huge", set32(be(0, backendLocalShare), math.MaxUint32), ErrBackend},
		{"backend spill_start off", add32(be(2, backendSpillStart), 1), ErrBackend},
		{"backend nspills too big", add32(be(2, backendNSpills), 1), ErrBackend},
		{"backend algorithm unknown", func(r raw) { r.put16(r.backend(0, backendAlgorithm), 1) }, ErrBackend},
		{"backend name_off past strings", func(r raw) { r.put32(r.backend(1, backendNameOff), r.hdr(hdrStringsSize)) }, ErrBackend},
		{"backend name_off wraps", set32(be(1, backendNameOff), math.MaxUint32-2), ErrBackend},
		{"backend name empty", set32(be(1, backendNameLen), 0), ErrBackend},
		{"backend name too long", set32(be(1, backendNameLen), uint32(MaxNameLen)+1), ErrBackend},
		{"backend name hash wrong", add32(be(0, backendNameHash), 1), ErrBackend},
		{"backend name bytes changed", func(r raw) { r[int(r.hdr(hdrStringsOff))+int(r.u32(r.backend(0, backendNameOff)))] ^= 0x20 }, ErrBackend},
		{"fewer spill groups than peers", add32(be(0, backendNSpills), -1), ErrSpill},
		{"backend npeers one short", add32(be(0, backendNPeers), -1), ErrSpill},
		{"npreferred takes a spill peer", add32(be(0, backendNPreferred), 1), ErrPeer}, // its cum_weight restarts at 0
		{"npreferred drops a preferred peer", add32(be(0, backendNPreferred), -1), ErrSpill},
		{"peers left over after the last backend", func(r raw) {
			r.put32(r.backend(2, backendNPeers), 1)
			r.put32(r.spill(3, spillNPeers), 1)
		}, ErrLayout},
		{"spills left over after the last backend", func(r raw) {
			r.put32(r.backend(2, backendNSpills), 0)
			r.put32(r.backend(2, backendNPreferred), 2)
		}, ErrLayout},
		{"duplicate backend name", func(r raw) {
			for _, f := range []int{backendNameOff, backendNameLen, backendNameHash} {
				r.put32(r.backend(2, f), r.u32(r.backend(0, f)))
			}
		}, ErrIndex},

		// spills
		{"spill first wrong", add32(sp(1, spillFirst), 1), ErrSpill},
		{"spill first of a backend's first group wrong", set32(sp(0, spillFirst), 0), ErrSpill},
		{"spill npeers zero", set32(sp(1, spillNPeers), 0), ErrSpill},
		{"spill npeers too big", add32(sp(2, spillNPeers), 1), ErrSpill},
		{"spill npeers huge", set32(sp(3, spillNPeers), math.MaxUint32), ErrSpill},
		{"spill share above 10000", set32(sp(0, spillShareOff), ShareOne+1), ErrSpill},
		{"spill zone out of range", set32(sp(0, spillZone), 3), ErrSpill},
		{"spill zone huge", set32(sp(0, spillZone), noZone-1), ErrSpill},
		{"spill zone differs from its peers", set32(sp(0, spillZone), 0), ErrPeer},
		{"spill zone none for zoned peers", set32(sp(3, spillZone), noZone), ErrPeer},
		{"spill share zero is fine", set32(sp(0, spillShareOff), 0), nil},

		// peers
		{"peer family 5", func(r raw) { r[r.peer(0, peerFamily)] = 5 }, ErrPeer},
		{"peer family 0", func(r raw) { r[r.peer(7, peerFamily)] = 0 }, ErrPeer},
		{"peer family ipv4 with ipv6 bytes", func(r raw) { r[r.peer(0, peerFamily)] = 4; r[r.peer(1, peerFamily)] = 4 }, ErrPeer},
		{"peer family ipv6 for ipv4 bytes is fine", func(r raw) { r[r.peer(0, peerFamily)] = 6 }, nil},
		{"ipv4 peer with a stray byte", func(r raw) { r[r.peer(3, peerAddr+15)] = 1 }, ErrPeer},
		{"peer weight 0", set32(pe(0, peerWeight), 0), ErrPeer},
		{"peer weight above the maximum", set32(pe(6, peerWeight), MaxWeight+1), ErrPeer},
		{"peer weight changed without cum_weight", add32(pe(2, peerWeight), 1), ErrPeer},
		{"peer cum_weight wrong", add32(pe(1, peerCumWeight), 1), ErrPeer},
		{"first peer of a group cum_weight not 0", set32(pe(4, peerCumWeight), 1), ErrPeer},
		{"last peer weight changed is fine", set32(pe(1, peerWeight), 9), nil},
		{"peer port 0", func(r raw) { r.put16(r.peer(5, peerPort), 0) }, ErrPeer},
		{"peer unknown flag", func(r raw) { r[r.peer(2, peerFlags)] |= 0x08 }, ErrPeer},
		{"peer flags 0xff", func(r raw) { r[r.peer(0, peerFlags)] = 0xff }, ErrPeer},
		{"preferred peer zone out of range", set32(pe(0, peerZone), 3), ErrPeer},
		{"spill peer zone out of range", set32(pe(4, peerZone), 3), ErrPeer},
		{"spill peer zone of another group", set32(pe(3, peerZone), 2), ErrPeer},
		{"preferred peer of another zone is fine", set32(pe(1, peerZone), noZone), nil},

		// buckets
		{"bucket pointing past nbackends", func(r raw) { r.put32(r.bucket(usedBuckets[0]), 4) }, ErrIndex},
		{"bucket huge", func(r raw) { r.put32(r.bucket(usedBuckets[1]), math.MaxUint32) }, ErrIndex},
		{"bucket cleared", func(r raw) { r.put32(r.bucket(usedBuckets[2]), 0) }, ErrIndex},
		{"bucket duplicated", func(r raw) { r.put32(r.bucket(emptyBuckets[0]), r.u32(r.bucket(usedBuckets[0]))) }, ErrIndex},
		{"bucket replaced by another backend", func(r raw) {
			r.put32(r.bucket(usedBuckets[0]), r.u32(r.bucket(usedBuckets[1])))
		}, ErrIndex},
		{"bucket moved to an empty slot", func(r raw) {
			if !breaksLookup(r, swapBuckets, usedBuckets, emptyBuckets) {
				panic("no bucket move breaks the lookup")
			}
		}, ErrIndex},
		{"bucket swap", func(r raw) {
			if !breaksLookup(r, swapBuckets, usedBuckets, usedBuckets) {
				panic("no bucket swap breaks the lookup")
			}
		}, ErrIndex},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := raw(bytes.Clone(good))
			tc.damage(b)
			if bytes.Equal(b, good) {
				t.Fatal("the damage changed nothing")
			}
			// Without a new checksum, damage past the header's layout
			// fields is caught by the checksum.
			s, err := Decode(b)
			if err == nil || s != nil {
				t.Fatalf("damage without a new checksum accepted")
			}
			if !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrLayout) {
				t.Fatalf("damage without a new checksum: %v, want checksum or layout error", err)
			}

			resealChecksum(b)
			s, err = Decode(b)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("harmless change refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || s != nil {
				t.Fatalf("Decode = %v, want %v", err, tc.want)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Publisher.

func newPublisher(t *testing.T, dir string) *Publisher {
	t.Helper()
	p, err := OpenPublisher(dir)
	if err != nil {
		t.Fatalf("OpenPublisher: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestPublisherIncrementsGeneration(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "created", "by", "publisher")
	p := newPublisher(t, dir)
	if p.Generation() != 0 || p.Dir() != dir {
		t.Fatalf("new publisher: generation %d dir %q", p.Generation(), p.Dir())
	}
	ctl, err := os.Stat(filepath.Join(dir, ControlFile))
	if err != nil || ctl.Size() != controlSize {
		t.Fatalf("control file: %v, %v", ctl, err)
	}
	for want := uint64(1); want <= 5; want++ {
		pub, err := p.Publish(smallTable())
		if err != nil {
			t.Fatal(err)
		}
		if pub.Generation != want || p.Generation() != want {
			t.Fatalf("published %+v, Generation() %d, want %d", pub, p.Generation(), want)
		}
		live, err := ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if live.Control != want || live.Snapshot.Generation != want || live.Snapshot.Size != pub.Size {
			t.Fatalf("ReadDir: control %d, snapshot %d size %d; published %+v", live.Control, live.Snapshot.Generation, live.Snapshot.Size, pub)
		}
		if d := diffTables(normalize(smallTable()), &live.Snapshot.Table); d != "" {
			t.Fatal(d)
		}
		// The control file is updated in place, never replaced: workers
		// that mapped it at start must see every generation.
		if now, err := os.Stat(filepath.Join(dir, ControlFile)); err != nil || !os.SameFile(ctl, now) {
			t.Fatalf("control file replaced (%v)", err)
		}
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{ControlFile, TableFile}) {
		t.Fatalf("directory holds %v, want only control and table", names)
	}
}

func TestPublisherSecondOpenFailsWhileFirstIsOpen(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPublisher(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(smallTable()); err != nil {
		t.Fatal(err)
	}
	q, err := OpenPublisher(dir)
	if err == nil {
		q.Close()
		t.Fatal("a second Publisher opened the directory")
	}
	if !strings.Contains(err.Error(), "another zonal controller publishes here") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("unclear error: %v", err)
	}
	// The refused second publisher left the live table alone.
	if live, err := ReadDir(dir); err != nil || live.Control != 1 {
		t.Fatalf("after the refused open: %+v, %v", live, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	q = newPublisher(t, dir)
	if q.Generation() != 1 {
		t.Fatalf("after the first closed, the next starts at %d, want 1", q.Generation())
	}
}

func TestPublisherRestartContinuesGeneration(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPublisher(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := p.Publish(smallTable()); err != nil {
			t.Fatal(err)
		}
	}
	ctl, _ := os.Stat(filepath.Join(dir, ControlFile))
	p.Close()

	// NGINX keeps serving while the controller is down.
	if live, err := ReadDir(dir); err != nil || live.Control != 3 || live.Snapshot.Generation != 3 {
		t.Fatalf("while no publisher is open: %+v, %v", live, err)
	}

	q := newPublisher(t, dir)
	if q.Generation() != 3 {
		t.Fatalf("restarted publisher at generation %d, want 3", q.Generation())
	}
	pub, err := q.Publish(&Table{Backends: []Backend{{Name: "after-restart"}}})
	if err != nil || pub.Generation != 4 {
		t.Fatalf("publish after restart: %+v, %v", pub, err)
	}
	live, err := ReadDir(dir)
	if err != nil || live.Control != 4 || live.Snapshot.Backends[0].Name != "after-restart" {
		t.Fatalf("ReadDir after restart: %+v, %v", live, err)
	}
	if now, _ := os.Stat(filepath.Join(dir, ControlFile)); !os.SameFile(ctl, now) {
		t.Fatal("restart replaced the control file")
	}
}

func TestPublisherContinuesAfterTableNewerThanControl(t *testing.T) {
	// A controller that stopped between rename and generation store left a
	// table newer than the control file.
	dir := t.TempDir()
	p, err := OpenPublisher(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(smallTable()); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := os.WriteFile(filepath.Join(dir, TableFile), mustEncode(t, smallTable(), 7), 0o644); err != nil {
		t.Fatal(err)
	}
	q := newPublisher(t, dir)
	if q.Generation() != 7 {
		t.Fatalf("publisher starts at %d, want 7 (the table's)", q.Generation())
	}
	if pub, err := q.Publish(smallTable()); err != nil || pub.Generation != 8 {
		t.Fatalf("publish: %+v, %v", pub, err)
	}
	if live, err := ReadDir(dir); err != nil || live.Control != 8 || live.Snapshot.Generation != 8 {
		t.Fatalf("ReadDir: %+v, %v", live, err)
	}
}

func TestPublisherRefusedTableKeepsLiveTable(t *testing.T) {
	dir := t.TempDir()
	p := newPublisher(t, dir)
	if _, err := p.Publish(smallTable()); err != nil {
		t.Fatal(err)
	}
	_, err := p.Publish(&Table{Backends: []Backend{{Name: "dup"}, {Name: "dup"}}})
	if err == nil || !strings.Contains(err.Error(), `"dup"`) {
		t.Fatalf("publishing a duplicate name: %v", err)
	}
	if p.Generation() != 1 {
		t.Fatalf("generation advanced to %d by a refused table", p.Generation())
	}
	live, err := ReadDir(dir)
	if err != nil || live.Control != 1 || live.Snapshot.Generation != 1 || len(live.Snapshot.Backends) != 3 {
		t.Fatalf("live table after a refused publish: %+v, %v", live, err)
	}
	if pub, err := p.Publish(smallTable()); err != nil || pub.Generation != 2 {
		t.Fatalf("next publish: %+v, %v", pub, err)
	}
}

func TestPublisherAndReadDirRefuseDamagedControlFile(t *testing.T) {
	valid := func() []byte {
		b := make([]byte, controlSize)
		le.PutUint64(b[0:], controlMagic)
		le.PutUint32(b[8:], 1)
		le.PutUint32(b[12:], controlSize)
		le.PutUint64(b[16:], 5)
		return b
	}
	tests := []struct {
		name    string
		control func() []byte
	}{
		{"empty", func() []byte { return nil }},
		{"short", func() []byte { return valid()[:100] }},
		{"only the header", func() []byte { return valid()[:24] }},
		{"too long", func() []byte { return append(valid(), make([]byte, controlSize)...) }},
		{"bad magic", func() []byte { b := valid(); b[0] ^= 1; return b }},
		{"table magic", func() []byte { b := valid(); le.PutUint64(b, tableMagic); return b }},
		{"wrong version", func() []byte { b := valid(); le.PutUint32(b[8:], 2); return b }},
		{"wrong size field", func() []byte { b := valid(); le.PutUint32(b[12:], 8192); return b }},
		{"zeroed", func() []byte { return make([]byte, controlSize) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ControlFile), tc.control(), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, TableFile), mustEncode(t, smallTable(), 5), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := OpenPublisher(dir)
			if err == nil {
				p.Close()
				t.Fatal("OpenPublisher accepted a damaged control file")
			}
			if !strings.Contains(err.Error(), "is not a zonal control file") || !strings.Contains(err.Error(), dir) {
				t.Fatalf("unclear error: %v", err)
			}
			live, err := ReadDir(dir)
			if !errors.Is(err, ErrControl) || live != nil {
				t.Fatalf("ReadDir = %+v, %v; want ErrControl", live, err)
			}
			// The damaged file is left for an operator to look at.
			if b, _ := os.ReadFile(filepath.Join(dir, ControlFile)); !bytes.Equal(b, tc.control()) {
				t.Fatal("the damaged control file was modified")
			}
		})
	}
	t.Run("valid control file is accepted", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ControlFile), valid(), 0o644)
		p := newPublisher(t, dir)
		if p.Generation() != 5 {
			t.Fatalf("generation %d, want 5", p.Generation())
		}
	})
}

func TestReadDirErrors(t *testing.T) {
	t.Run("missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nope")
		live, err := ReadDir(dir)
		if !errors.Is(err, ErrOpen) || live != nil || !strings.Contains(err.Error(), dir) {
			t.Fatalf("ReadDir = %+v, %v; want ErrOpen naming the directory", live, err)
		}
	})
	t.Run("empty directory", func(t *testing.T) {
		if _, err := ReadDir(t.TempDir()); !errors.Is(err, ErrOpen) {
			t.Fatalf("ReadDir = %v, want ErrOpen", err)
		}
	})
	t.Run("path too long", func(t *testing.T) {
		if _, err := ReadDir("/" + strings.Repeat("d", 5000)); !errors.Is(err, ErrOpen) {
			t.Fatalf("ReadDir = %v, want ErrOpen", err)
		}
	})
	t.Run("before the first publish", func(t *testing.T) {
		dir := t.TempDir()
		newPublisher(t, dir)
		live, err := ReadDir(dir)
		if !errors.Is(err, ErrOpen) || live == nil || live.Control != 0 || live.Snapshot != nil {
			t.Fatalf("ReadDir = %+v, %v; want control 0 and ErrOpen for the table", live, err)
		}
	})
	damagedTable := func(t *testing.T, b []byte, want error) {
		dir := t.TempDir()
		p := newPublisher(t, dir)
		if _, err := p.Publish(smallTable()); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, TableFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		live, err := ReadDir(dir)
		if !errors.Is(err, want) || live == nil || live.Control != 1 || live.Snapshot != nil {
			t.Fatalf("ReadDir = %+v, %v; want control 1 and %v", live, err, want)
		}
		if _, err := ReadFile(filepath.Join(dir, TableFile)); !errors.Is(err, want) {
			t.Fatalf("ReadFile = %v, want %v", err, want)
		}
		// A damaged table does not stop the next publish.
		p.Close()
		q := newPublisher(t, dir)
		if pub, err := q.Publish(smallTable()); err != nil || pub.Generation != 2 {
			t.Fatalf("publish over a damaged table: %+v, %v", pub, err)
		}
	}
	t.Run("empty table file", func(t *testing.T) { damagedTable(t, nil, ErrShort) })
	t.Run("truncated table file", func(t *testing.T) { damagedTable(t, mustEncode(t, smallTable(), 1)[:200], ErrShort) })
	t.Run("damaged table file", func(t *testing.T) {
		b := mustEncode(t, smallTable(), 1)
		b[len(b)-1] ^= 0x40
		damagedTable(t, b, ErrChecksum)
	})
	t.Run("table file is a directory", func(t *testing.T) {
		dir := t.TempDir()
		os.Mkdir(filepath.Join(dir, TableFile), 0o755)
		newPublisher(t, dir)
		if _, err := ReadDir(dir); err == nil {
			t.Fatal("ReadDir accepted a directory as table")
		}
	})
	t.Run("ReadFile of a missing file", func(t *testing.T) {
		if _, err := ReadFile(filepath.Join(t.TempDir(), "table")); err == nil || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("ReadFile = %v", err)
		}
	})
}

func TestReadersNeverSeeATornPublish(t *testing.T) {
	dir := t.TempDir()
	p := newPublisher(t, dir)
	r := rand.New(rand.NewPCG(3, 3))
	tables := []*Table{smallTable(), randomTable(r, genOpts{backends: 200, maxPeers: 10, zones: 3, v6: true})}
	if _, err := p.Publish(tables[0]); err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				live, err := ReadDir(dir)
				if err != nil {
					errs <- err
					return
				}
				// The generation is stored only after the rename.
				if live.Snapshot.Generation < live.Control {
					errs <- fmt.Errorf("control %d ahead of the table %d", live.Control, live.Snapshot.Generation)
					return
				}
			}
		}()
	}
	for i := 0; i < 200; i++ {
		if _, err := p.Publish(tables[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestErrorMessagesAreDistinct(t *testing.T) {
	seen := map[string]Error{}
	for _, e := range []Error{ErrOpen, ErrShort, ErrMagic, ErrVersion, ErrSize, ErrChecksum, ErrLayout,
		ErrZone, ErrBackend, ErrSpill, ErrPeer, ErrIndex, ErrControl} {
		msg := e.Error()
		if !strings.HasPrefix(msg, "endpoint table: ") || strings.Contains(msg, "unknown") {
			t.Errorf("%d: %q", int(e), msg)
		}
		if prev, ok := seen[msg]; ok {
			t.Errorf("%d and %d share the message %q", int(prev), int(e), msg)
		}
		seen[msg] = e
	}
}

// Regression tests for defects found by the tests above and the fuzzers.

// Publish after Close returns an error and leaves the live table alone.
func TestPublishAfterCloseReturnsError(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPublisher(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(smallTable()); err != nil {
		t.Fatal(err)
	}
	p.Close()
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Publish after Close panicked: %v", r)
			}
		}()
		if _, err := p.Publish(&Table{Backends: []Backend{{Name: "after-close"}}}); err == nil {
			t.Error("Publish after Close succeeded")
		}
	}()
	if s, err := ReadFile(filepath.Join(dir, TableFile)); err != nil || s.Generation != 1 {
		t.Errorf("live table after Publish on a closed Publisher: %+v, %v; want generation 1 unchanged", s, err)
	}
}

// Encoding tables whose empty sections sit at the very end of the snapshot
// forms no pointer past the buffer (under -race, checkptr would abort).
func TestEncodeEmptySectionsAtTheEnd(t *testing.T) {
	for _, tab := range []*Table{{}, {Zone: "zone-a"}, {Backends: []Backend{{Name: "a"}}}} {
		var e Encoder
		if _, err := e.Encode(tab, 1); err != nil {
			t.Fatal(err)
		}
	}
}

// resealChecksum accepts any length, the header's 32 bytes included (found
// by FuzzDecode).
func TestResealChecksumOfShortInputs(t *testing.T) {
	for n := 0; n <= headerSize; n++ {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("resealChecksum of %d bytes panicked: %v", n, r)
				}
			}()
			resealChecksum(make([]byte, n))
		}()
	}
}

// The reader refuses two spill groups of one zone in a backend: the format
// has one group per zone, and the debug view keys shares by zone name.
func TestReaderRefusesTwoSpillGroupsOfOneZone(t *testing.T) {
	b := raw(mustEncode(t, smallTable(), 1))
	// backend 0: groups zone-b (peers 2-3), zone-c (peer 4), none (peer 5);
	// make the zone-c group a second zone-b group.
	b.put32(b.spill(1, spillZone), 1)
	b.put32(b.peer(4, peerZone), 1)
	resealChecksum(b)
	if s, err := Decode(b); !errors.Is(err, ErrSpill) {
		t.Fatalf("Decode = %v (spill %v); want ErrSpill", err, s.Backends[0].Spill)
	}
}
