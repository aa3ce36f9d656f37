package table

/*
#include <stdlib.h>
#include "zonal_table.h"
*/
import "C"

import (
	"fmt"
	"net/netip"
	"os"
	"unsafe"
)

// Snapshot is a published table as the C reader sees it.
type Snapshot struct {
	Generation uint64 `json:"generation"`
	Size       int    `json:"size"`
	Table
}

// Decode validates b with the C reader and returns its contents. Peers come
// in table order: the preferred set first, then the others by zone.
func Decode(b []byte) (*Snapshot, error) {
	if len(b) == 0 {
		return nil, ErrShort
	}
	// The reader requires 8-byte alignment, as a mapping has.
	words := make([]uint64, (len(b)+7)/8)
	aligned := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(b))
	copy(aligned, b)
	var t C.zonal_table_t
	if err := errorFrom(C.zonal_table_parse(&t, unsafe.Pointer(&words[0]), C.size_t(len(b)))); err != nil {
		return nil, err
	}
	return decodeParsed(&t), nil
}

// ReadFile decodes the snapshot file at path.
func ReadFile(path string) (*Snapshot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("endpoint table: %w", err)
	}
	s, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Live is a table directory read the way an NGINX worker reads it.
type Live struct {
	// Control is the generation in the control file.
	Control uint64 `json:"controlGeneration"`
	// Snapshot is the table file, mapped and validated by the C reader.
	Snapshot *Snapshot `json:"snapshot"`
}

// ReadDir maps the control file and the table of dir through the C reader,
// exactly as a worker does, and decodes them.
func ReadDir(dir string) (*Live, error) {
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))

	var rd C.zonal_reader_t
	if err := errorFrom(C.zonal_reader_open(&rd, cdir)); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	defer C.zonal_reader_close(&rd)
	live := &Live{Control: uint64(C.zonal_reader_generation(&rd))}

	var t C.zonal_table_t
	if err := errorFrom(C.zonal_table_open(&t, cdir)); err != nil {
		return live, fmt.Errorf("%s: %w", dir, err)
	}
	defer C.zonal_table_close(&t)
	live.Snapshot = decodeParsed(&t)
	return live, nil
}

// decodeParsed copies a validated table into Go values.
func decodeParsed(t *C.zonal_table_t) *Snapshot {
	h := t.hdr
	str := func(off, n C.uint32_t) string {
		return string(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(t.strings), off)), n))
	}
	zones := unsafe.Slice(t.zones, h.nzones)
	names := make([]string, len(zones))
	for i := range zones {
		names[i] = str(zones[i].name_off, zones[i].name_len)
	}
	zoneName := func(id C.uint32_t) string {
		if id == C.ZONAL_NO_ZONE {
			return ""
		}
		return names[id]
	}

	s := &Snapshot{Generation: uint64(h.generation), Size: int(t.size)}
	s.Zone = zoneName(h.local_zone)
	backends := unsafe.Slice(t.backends, h.nbackends)
	spills := unsafe.Slice(t.spills, h.nspills)
	peers := unsafe.Slice(t.peers, h.npeers)
	s.Backends = make([]Backend, len(backends))
	for i := range backends {
		cb := &backends[i]
		b := &s.Backends[i]
		b.Name = str(cb.name_off, cb.name_len)
		b.LocalShare = uint32(cb.local_share)
		b.Peers = make([]Peer, cb.npeers)
		for j := range b.Peers {
			cp := &peers[uint32(cb.peer_start)+uint32(j)]
			b.Peers[j] = Peer{
				Port:        uint16(cp.port),
				Weight:      uint32(cp.weight),
				Zone:        zoneName(cp.zone),
				Preferred:   j < int(cb.npreferred),
				Ready:       cp.flags&C.ZONAL_PEER_READY != 0,
				Serving:     cp.flags&C.ZONAL_PEER_SERVING != 0,
				Terminating: cp.flags&C.ZONAL_PEER_TERMINATING != 0,
			}
			raw := unsafe.Slice((*byte)(unsafe.Pointer(&cp.addr[0])), 16)
			if cp.family == C.ZONAL_FAMILY_INET {
				b.Peers[j].Addr = netip.AddrFrom4([4]byte(raw[:4]))
			} else {
				b.Peers[j].Addr = netip.AddrFrom16([16]byte(raw))
			}
		}
		if cb.nspills > 0 {
			b.Spill = make(map[string]uint32, cb.nspills)
			for _, sp := range spills[cb.spill_start : cb.spill_start+cb.nspills] {
				b.Spill[zoneName(sp.zone)] = uint32(sp.share)
			}
		}
	}
	return s
}

// resealChecksum recomputes the checksum of a snapshot in place, so that
// tests can damage a field and reach the checks behind the checksum.
func resealChecksum(b []byte) {
	if len(b) <= int(C.ZONAL_CHECKSUM_START) {
		return
	}
	sum := C.zonal_checksum(unsafe.Pointer(&b[C.ZONAL_CHECKSUM_START]), C.size_t(len(b)-int(C.ZONAL_CHECKSUM_START)))
	*(*C.uint64_t)(unsafe.Pointer(&b[unsafe.Offsetof(C.zonal_table_header_t{}.checksum)])) = sum
}
