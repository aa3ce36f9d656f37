// Package table owns the endpoint table: the memory-mapped snapshot that the
// controller publishes and that every NGINX worker reads.
//
// The format has exactly one definition, zonal_table.h, and one reader,
// zonal_table.c, both compiled into this package by cgo and into NGINX by
// nginxmod/config. The encoder writes through the C struct types, and
// decoding goes through the C reader, so Go and C cannot disagree about the
// layout.
package table

/*
#cgo CFLAGS: -O2 -Wall
#include "zonal_table.h"
*/
import "C"

import (
	"maps"
	"net/netip"
	"slices"
)

// ShareOne is a local share of 100 %, in basis points.
const ShareOne = uint32(C.ZONAL_SHARE_ONE)

// MaxWeight is the largest weight a peer may carry.
const MaxWeight = uint32(C.ZONAL_MAX_WEIGHT)

// MaxNameLen is the longest backend or zone name the table accepts.
const MaxNameLen = int(C.ZONAL_MAX_NAME)

// File names inside a table directory.
const (
	ControlFile = C.ZONAL_CONTROL_FILE
	TableFile   = C.ZONAL_TABLE_FILE
)

// Table is what the controller publishes: every backend with its peers,
// computed for one zone.
type Table struct {
	// Zone is the zone the preferred sets were computed for; empty if the
	// controller does not know its zone.
	Zone     string    `json:"zone,omitempty"`
	Backends []Backend `json:"backends"`
}

// Backend is one upstream, named <namespace>-<service>-<port>.
type Backend struct {
	Name  string `json:"name"`
	Peers []Peer `json:"peers"`
	// LocalShare is the fraction of picks, in basis points (ShareOne is
	// 100 %), taken from the preferred peers; the rest spills to the other
	// peers.
	LocalShare uint32 `json:"localShare"`
	// Spill weighs the zones of the non-preferred peers against each other
	// (basis points, keyed by zone name; "" for peers without a zone). Nil
	// spreads the residual in proportion to the zones' peer weights.
	Spill map[string]uint32 `json:"spill,omitempty"`
}

// Peer is one endpoint address of a backend.
type Peer struct {
	Addr   netip.Addr `json:"address"`
	Port   uint16     `json:"port"`
	Weight uint32     `json:"weight,omitempty"` // 0 counts as 1
	Zone   string     `json:"zone,omitempty"`
	// Preferred puts the peer in the backend's preferred set (zone-local or
	// hinted for this zone).
	Preferred   bool `json:"preferred,omitempty"`
	Ready       bool `json:"ready,omitempty"`
	Serving     bool `json:"serving,omitempty"`
	Terminating bool `json:"terminating,omitempty"`
}

// Error is a reason the C reader refuses a snapshot or control file.
type Error int

// Errors reported by the reader, one per kind of damage.
const (
	ErrOpen     = Error(C.ZONAL_ERR_OPEN)
	ErrShort    = Error(C.ZONAL_ERR_SHORT)
	ErrMagic    = Error(C.ZONAL_ERR_MAGIC)
	ErrVersion  = Error(C.ZONAL_ERR_VERSION)
	ErrSize     = Error(C.ZONAL_ERR_SIZE)
	ErrChecksum = Error(C.ZONAL_ERR_CHECKSUM)
	ErrLayout   = Error(C.ZONAL_ERR_LAYOUT)
	ErrZone     = Error(C.ZONAL_ERR_ZONE)
	ErrBackend  = Error(C.ZONAL_ERR_BACKEND)
	ErrSpill    = Error(C.ZONAL_ERR_SPILL)
	ErrPeer     = Error(C.ZONAL_ERR_PEER)
	ErrIndex    = Error(C.ZONAL_ERR_INDEX)
	ErrControl  = Error(C.ZONAL_ERR_CONTROL)
)

func (e Error) Error() string {
	return "endpoint table: " + C.GoString(C.zonal_strerror(C.int(e)))
}

func errorFrom(rc C.int) error {
	if rc == C.ZONAL_OK {
		return nil
	}
	return Error(rc)
}

// Equal tells whether t and u describe the same table, so that a caller
// can skip publishing an unchanged one. Cheaper than reflect.DeepEqual by
// an order of magnitude on 100,000 peers.
func (t *Table) Equal(u *Table) bool {
	if t == nil || u == nil {
		return t == u
	}
	if t.Zone != u.Zone || len(t.Backends) != len(u.Backends) {
		return false
	}
	for i := range t.Backends {
		a, b := &t.Backends[i], &u.Backends[i]
		if a.Name != b.Name || a.LocalShare != b.LocalShare ||
			!maps.Equal(a.Spill, b.Spill) || (a.Spill == nil) != (b.Spill == nil) ||
			!slices.Equal(a.Peers, b.Peers) {
			return false
		}
	}
	return true
}
