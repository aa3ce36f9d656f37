package table

/*
#include "zonal_table.h"
*/
import "C"

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"
)

// Encoder turns a Table into snapshot bytes. It keeps its buffers between
// calls, so that publishing a large table repeatedly does not allocate; an
// Encoder is not safe for concurrent use.
type Encoder struct {
	buf     []uint64 // the snapshot, 8-byte aligned as the format requires
	zoneIDs map[string]uint32
	zones   []string
	order   []int // scratch: peer indices of one backend in table order
	zoneOf  []uint32
}

// Encode validates t and returns the snapshot for generation gen. The
// returned slice aliases the Encoder's buffer until the next call.
func (e *Encoder) Encode(t *Table, gen uint64) ([]byte, error) {
	if err := e.collectZones(t); err != nil {
		return nil, err
	}

	var npeers, nspills, strSize uint64
	for i := range t.Backends {
		b := &t.Backends[i]
		if err := checkBackend(b); err != nil {
			return nil, err
		}
		npeers += uint64(len(b.Peers))
		nspills += uint64(e.countSpills(b))
		strSize += uint64(len(b.Name))
	}
	for _, z := range e.zones {
		strSize += uint64(len(z))
	}
	if npeers > uint64(C.ZONAL_MAX_PEERS) || uint64(len(t.Backends)) > uint64(C.ZONAL_MAX_BACKENDS) ||
		nspills > uint64(C.ZONAL_MAX_PEERS) || strSize > math.MaxUint32 {
		return nil, fmt.Errorf("endpoint table too large: %d backends, %d peers", len(t.Backends), npeers)
	}

	var h C.zonal_table_header_t
	C.zonal_table_layout(&h, C.uint32_t(len(e.zones)), C.uint32_t(len(t.Backends)),
		C.uint32_t(nspills), C.uint32_t(npeers), C.uint32_t(strSize))
	if h.size == 0 || uint64(h.size) > uint64(C.ZONAL_MAX_SIZE) {
		return nil, fmt.Errorf("endpoint table too large: %d peers", npeers)
	}
	buf := e.buffer(int(h.size))
	base := unsafe.Pointer(&buf[0])
	*(*C.zonal_table_header_t)(base) = h
	hdr := (*C.zonal_table_header_t)(base)
	hdr.generation = C.uint64_t(gen)
	hdr.local_zone = C.ZONAL_NO_ZONE
	if t.Zone != "" {
		hdr.local_zone = C.uint32_t(e.zoneIDs[t.Zone])
	}

	strs := buf[h.strings_off : uint64(h.strings_off)+uint64(h.strings_size)]
	strOff := 0
	putString := func(s string) (C.uint32_t, C.uint32_t) {
		off := strOff
		strOff += copy(strs[off:], s)
		return C.uint32_t(off), C.uint32_t(len(s))
	}

	zones := section[C.zonal_zone_t](base, h.zones_off, h.nzones)
	for i, z := range e.zones {
		zones[i].name_off, zones[i].name_len = putString(z)
	}

	backends := section[C.zonal_backend_t](base, h.backends_off, h.nbackends)
	spills := section[C.zonal_spill_t](base, h.spills_off, h.nspills)
	peers := section[C.zonal_peer_t](base, h.peers_off, h.npeers)

	var nextPeer, nextSpill uint32
	for i := range t.Backends {
		b := &t.Backends[i]
		cb := &backends[i]
		cb.name_off, cb.name_len = putString(b.Name)
		cb.peer_start = C.uint32_t(nextPeer)
		cb.npeers = C.uint32_t(len(b.Peers))
		cb.spill_start = C.uint32_t(nextSpill)
		cb.local_share = C.uint32_t(min(b.LocalShare, ShareOne))
		cb.algorithm = C.ZONAL_ALG_ROUND_ROBIN

		order := e.peerOrder(b)
		bp := peers[nextPeer : nextPeer+uint32(len(b.Peers))]
		var npreferred int
		for npreferred < len(order) && b.Peers[order[npreferred]].Preferred {
			npreferred++
		}
		cb.npreferred = C.uint32_t(npreferred)
		fillPeers(bp[:npreferred], b, order[:npreferred], e.zoneOf)

		// The rest, one spill group per zone, in zone order.
		var weights [2]uint64 // total non-preferred weight, and of the group
		for _, j := range order[npreferred:] {
			weights[0] += uint64(max(b.Peers[j].Weight, 1))
		}
		for first := npreferred; first < len(order); {
			zone := e.zoneOf[order[first]]
			end := first
			weights[1] = 0
			for end < len(order) && e.zoneOf[order[end]] == zone {
				weights[1] += uint64(max(b.Peers[order[end]].Weight, 1))
				end++
			}
			fillPeers(bp[first:end], b, order[first:end], e.zoneOf)
			s := &spills[nextSpill]
			s.zone = C.uint32_t(zone)
			s.first = C.uint32_t(first)
			s.npeers = C.uint32_t(end - first)
			s.share = C.uint32_t(spillShare(b, e.zoneName(zone), weights[1], weights[0]))
			nextSpill++
			cb.nspills++
			first = end
		}
		nextPeer += uint32(len(b.Peers))
	}

	out := unsafe.Slice((*byte)(base), int(h.size))
	if rc := C.zonal_table_seal(base, C.size_t(h.size)); rc != C.ZONAL_OK {
		return nil, e.explain(t, Error(rc))
	}
	return out, nil
}

// section is the array of n elements at byte offset off of a snapshot. An
// empty section may sit at the very end, where even forming a pointer would
// leave the allocation, so it gets no pointer at all.
func section[T any](base unsafe.Pointer, off, n C.uint32_t) []T {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Add(base, off)), n)
}

func (e *Encoder) buffer(size int) []byte {
	words := (size + 7) / 8
	if cap(e.buf) < words {
		e.buf = make([]uint64, words)
	}
	e.buf = e.buf[:words]
	clear(e.buf)
	return unsafe.Slice((*byte)(unsafe.Pointer(&e.buf[0])), size)
}

// collectZones gives every zone a dense id, in name order.
func (e *Encoder) collectZones(t *Table) error {
	if e.zoneIDs == nil {
		e.zoneIDs = make(map[string]uint32)
	}
	clear(e.zoneIDs)
	e.zones = e.zones[:0]
	add := func(z string) error {
		if z == "" {
			return nil
		}
		if _, ok := e.zoneIDs[z]; ok {
			return nil
		}
		if len(z) > MaxNameLen {
			return fmt.Errorf("zone %.40q...: name longer than %d bytes", z, MaxNameLen)
		}
		e.zoneIDs[z] = 0
		e.zones = append(e.zones, z)
		return nil
	}
	if err := add(t.Zone); err != nil {
		return err
	}
	last := ""
	for i := range t.Backends {
		for j := range t.Backends[i].Peers {
			// Peers of one backend mostly share a handful of zones.
			if z := t.Backends[i].Peers[j].Zone; z != last {
				if err := add(z); err != nil {
					return err
				}
				last = z
			}
		}
	}
	if len(e.zones) > int(C.ZONAL_MAX_ZONES) {
		return fmt.Errorf("endpoint table: %d zones, at most %d are supported", len(e.zones), C.ZONAL_MAX_ZONES)
	}
	slices.Sort(e.zones)
	for i, z := range e.zones {
		e.zoneIDs[z] = uint32(i)
	}
	return nil
}

func (e *Encoder) zoneID(z string) uint32 {
	if z == "" {
		return C.ZONAL_NO_ZONE
	}
	return e.zoneIDs[z]
}

func (e *Encoder) zoneName(id uint32) string {
	if id == C.ZONAL_NO_ZONE {
		return ""
	}
	return e.zones[id]
}

// peerOrder returns b's peer indices in table order: preferred peers first
// as given, then the others grouped by zone id (peers without a zone last).
func (e *Encoder) peerOrder(b *Backend) []int {
	e.order = e.order[:0]
	e.zoneOf = e.zoneOf[:0]
	last, lastID := "", uint32(C.ZONAL_NO_ZONE)
	for j := range b.Peers {
		if z := b.Peers[j].Zone; z != last {
			last, lastID = z, e.zoneID(z)
		}
		e.zoneOf = append(e.zoneOf, lastID)
		e.order = append(e.order, j)
	}
	zoneOf := e.zoneOf
	slices.SortStableFunc(e.order, func(x, y int) int {
		px, py := b.Peers[x].Preferred, b.Peers[y].Preferred
		switch {
		case px && py:
			return 0
		case px:
			return -1
		case py:
			return 1
		}
		return cmp.Compare(zoneOf[x], zoneOf[y])
	})
	return e.order
}

func (e *Encoder) countSpills(b *Backend) int {
	n := 0
	seen := e.zoneOf[:0]
	for j := range b.Peers {
		p := &b.Peers[j]
		if p.Preferred {
			continue
		}
		id := e.zoneID(p.Zone)
		if !slices.Contains(seen, id) {
			seen = append(seen, id)
			n++
		}
	}
	e.zoneOf = seen[:0]
	return n
}

func fillPeers(dst []C.zonal_peer_t, b *Backend, order []int, zoneOf []uint32) {
	var cum uint32
	for k, j := range order {
		p := &b.Peers[j]
		cp := &dst[k]
		w := max(p.Weight, 1)
		cp.port = C.uint16_t(p.Port)
		cp.zone = C.uint32_t(zoneOf[j])
		cp.weight = C.uint32_t(w)
		cp.cum_weight = C.uint32_t(cum)
		cum += w
		var flags C.uint8_t
		if p.Ready {
			flags |= C.ZONAL_PEER_READY
		}
		if p.Serving {
			flags |= C.ZONAL_PEER_SERVING
		}
		if p.Terminating {
			flags |= C.ZONAL_PEER_TERMINATING
		}
		cp.flags = flags
		addr := p.Addr.Unmap()
		if addr.Is4() {
			cp.family = C.ZONAL_FAMILY_INET
			a := addr.As4()
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&cp.addr[0])), 4), a[:])
		} else {
			cp.family = C.ZONAL_FAMILY_INET6
			a := addr.As16()
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&cp.addr[0])), 16), a[:])
		}
	}
}

// spillShare is the residual share of one zone's group: as the backend
// says, else in proportion to the group's weight, never 0 so that every
// group stays reachable.
func spillShare(b *Backend, zone string, groupWeight, totalWeight uint64) uint32 {
	if b.Spill != nil {
		return min(b.Spill[zone], ShareOne)
	}
	return uint32(max(1, groupWeight*uint64(ShareOne)/max(totalWeight, 1)))
}

func checkBackend(b *Backend) error {
	if b.Name == "" || len(b.Name) > MaxNameLen {
		return fmt.Errorf("backend %q: name must be 1 to %d bytes", b.Name, MaxNameLen)
	}
	var sum uint64
	for j := range b.Peers {
		p := &b.Peers[j]
		if !p.Addr.IsValid() {
			return fmt.Errorf("backend %s: peer %d: no address", b.Name, j)
		}
		if p.Addr.Zone() != "" {
			return fmt.Errorf("backend %s: peer %s: scoped IPv6 addresses are not supported", b.Name, p.Addr)
		}
		if p.Port == 0 {
			return fmt.Errorf("backend %s: peer %s: port 0", b.Name, p.Addr)
		}
		if p.Weight > MaxWeight {
			return fmt.Errorf("backend %s: peer %s: weight %d above %d", b.Name, p.Addr, p.Weight, MaxWeight)
		}
		sum += uint64(max(p.Weight, 1))
	}
	if sum > math.MaxUint32 {
		return fmt.Errorf("backend %s: total peer weight %d too large", b.Name, sum)
	}
	return nil
}

// explain turns a refusal of the sealed table into an error naming the
// object at fault; it runs only when encoding failed.
func (e *Encoder) explain(t *Table, err Error) error {
	seen := make(map[string]bool, len(t.Backends))
	for i := range t.Backends {
		name := t.Backends[i].Name
		if seen[name] {
			return fmt.Errorf("backend %q appears twice: %w", name, err)
		}
		seen[name] = true
	}
	names := make([]string, 0, 3)
	for i := 0; i < len(t.Backends) && i < 3; i++ {
		names = append(names, t.Backends[i].Name)
	}
	return fmt.Errorf("encoding table of %d backends (%s...): %w", len(t.Backends), strings.Join(names, ", "), err)
}
