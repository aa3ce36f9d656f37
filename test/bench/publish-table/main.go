// Command publish-table publishes a one-backend endpoint table for the
// benchmarks:
//
//	publish-table [-zone Z] DIR BACKEND PEERS SHARE
//
// PEERS is "addr:port@zone,..." (IPv6 as "[addr]:port@zone"). Peers in the
// local zone form the preferred set; the local zone is -zone, else the zone
// of the first peer. SHARE is the local share in percent (100, 70, 99.5).
// Peers are ready and serving, weight 1. It prints the generation and size.
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/zonal-ingress/zonal/cgo/table"
)

func main() {
	zone := flag.String("zone", "", "local zone (default: the first peer's zone)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: publish-table [-zone Z] DIR BACKEND addr:port@zone,... SHARE%")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 4 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), flag.Arg(2), flag.Arg(3), *zone); err != nil {
		fmt.Fprintln(os.Stderr, "publish-table:", err)
		os.Exit(1)
	}
}

func run(dir, name, peerList, shareArg, zone string) error {
	pct, err := strconv.ParseFloat(strings.TrimSuffix(shareArg, "%"), 64)
	if err != nil || pct < 0 || pct > 100 {
		return fmt.Errorf("local share %q: want a percentage from 0 to 100", shareArg)
	}
	b := table.Backend{Name: name, LocalShare: uint32(pct/100*float64(table.ShareOne) + 0.5)}
	for _, item := range strings.Split(peerList, ",") {
		addrPort, z, ok := strings.Cut(strings.TrimSpace(item), "@")
		if !ok || z == "" {
			return fmt.Errorf("peer %q: want addr:port@zone", item)
		}
		ap, err := netip.ParseAddrPort(addrPort)
		if err != nil {
			return fmt.Errorf("peer %q: %w", item, err)
		}
		if zone == "" {
			zone = z
		}
		b.Peers = append(b.Peers, table.Peer{
			Addr: ap.Addr(), Port: ap.Port(), Weight: 1, Zone: z,
			Preferred: z == zone, Ready: true, Serving: true,
		})
	}
	p, err := table.OpenPublisher(dir)
	if err != nil {
		return err
	}
	defer p.Close()
	pub, err := p.Publish(&table.Table{Zone: zone, Backends: []table.Backend{b}})
	if err != nil {
		return err
	}
	fmt.Printf("published %s: generation %d, %d bytes, %d peers, local zone %s, local share %d bp\n",
		dir, pub.Generation, pub.Size, len(b.Peers), zone, b.LocalShare)
	return nil
}
