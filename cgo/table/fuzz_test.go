package table

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// fuzzSeedTables are valid snapshots for the seed corpus.
func fuzzSeedTables(tb testing.TB) [][]byte {
	var out [][]byte
	add := func(t *Table, gen uint64) {
		out = append(out, mustEncode(tb, t, gen))
	}
	add(smallTable(), 1)
	add(&Table{}, 2)
	add(&Table{Zone: "z", Backends: []Backend{{Name: "only-empty"}}}, 3)
	for seed := uint64(1); seed <= 4; seed++ {
		r := rand.New(rand.NewPCG(seed, 0xf022))
		add(randomTable(r, genOpts{backends: 1 + int(seed)*2, maxPeers: 4, zones: int(seed), noZone: seed%2 == 0, v6: true}), seed<<32)
	}
	return out
}

// checkReencodes is the fuzz property for a snapshot the reader accepted:
// its decoded table encodes again, and decoding that gives the same table
// in normal form.
func checkReencodes(t *testing.T, in []byte, s *Snapshot) {
	t.Helper()
	if s == nil || s.Size != len(in) {
		t.Fatalf("accepted snapshot of %d bytes reports %+v", len(in), s)
	}
	var e Encoder
	b, err := e.Encode(&s.Table, s.Generation)
	if err != nil {
		for _, be := range s.Backends {
			var sum uint64
			for _, p := range be.Peers {
				sum += uint64(p.Weight)
			}
			if sum > math.MaxUint32 {
				return // the reader limits each set's weight, the encoder the backend's
			}
		}
		t.Fatalf("the reader accepted a table the encoder refuses: %v", err)
	}
	s2, err := Decode(b)
	if err != nil {
		t.Fatalf("decoding the re-encoded table: %v", err)
	}
	if s2.Generation != s.Generation {
		t.Fatalf("generation %d became %d", s.Generation, s2.Generation)
	}
	if d := diffTables(normalize(&s.Table), &s2.Table); d != "" {
		t.Fatalf("re-encoded table differs: %s", d)
	}
}

// FuzzDecode: Decode never panics and refuses with an Error, and what it
// accepts survives a re-encoding. With reseal set the input's checksum is
// recomputed first, so that mutations reach the checks behind it. (The Go
// fuzzer does not instrument the C reader; cgo/ctest/run.sh fuzz runs it
// under libFuzzer with ASan and UBSan.)
func FuzzDecode(f *testing.F) {
	for _, b := range fuzzSeedTables(f) {
		f.Add(b, false)
		f.Add(b, true)
		damaged := bytes.Clone(b)
		damaged[len(damaged)/2] ^= 0x10
		f.Add(damaged, false)
		f.Add(damaged, true)
		f.Add(b[:len(b)-8], true)
		f.Add(append(bytes.Clone(b), 0, 0, 0, 0, 0, 0, 0, 0), true)
		if len(b) > headerSize+8 {
			bad := bytes.Clone(b)
			bad[headerSize+4] = 0xff // a zone's name length
			f.Add(bad, true)
		}
	}
	f.Add([]byte{}, false)
	f.Add(make([]byte, headerSize), true)
	f.Fuzz(func(t *testing.T, data []byte, reseal bool) {
		in := data
		if reseal {
			in = bytes.Clone(data)
			resealChecksum(in)
		}
		s, err := Decode(in)
		if err != nil {
			if s != nil {
				t.Fatalf("Decode returned a snapshot with error %v", err)
			}
			if _, ok := err.(Error); !ok {
				t.Fatalf("Decode error %T %v is not an Error", err, err)
			}
			return
		}
		checkReencodes(t, in, s)
	})
}

// FuzzEncodeRoundTrip: every table the generator builds from the fuzzer's
// parameters encodes, decodes to its normal form, and is found by name.
func FuzzEncodeRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint8(0), uint8(0), uint8(0))
	f.Add(uint64(2), uint8(3), uint8(5), uint8(2), uint8(3))
	f.Add(uint64(3), uint8(40), uint8(12), uint8(9), uint8(7))
	f.Add(uint64(4), uint8(7), uint8(30), uint8(0), uint8(1))
	f.Add(uint64(5), uint8(1), uint8(2), uint8(11), uint8(6))
	f.Fuzz(func(t *testing.T, seed uint64, backends, maxPeers, zones, flags uint8) {
		r := rand.New(rand.NewPCG(seed, uint64(flags)))
		tab := randomTable(r, genOpts{
			backends:  int(backends % 64),
			maxPeers:  int(maxPeers % 32),
			zones:     int(zones % 16),
			noZone:    flags&1 != 0,
			v6:        flags&2 != 0,
			bigWeight: flags&4 != 0,
		})
		var e Encoder
		b, err := e.Encode(tab, seed)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		s, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if s.Generation != seed {
			t.Fatalf("generation %d, want %d", s.Generation, seed)
		}
		if d := diffTables(normalize(tab), &s.Table); d != "" {
			t.Fatal(d)
		}
		checkIndex(t, b, tab)
	})
}
