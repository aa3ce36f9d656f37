package harness

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"github.com/zonal-ingress/zonal/cgo/table"
)

// controlGenerationOffset is where the control file keeps the generation
// (zonal_control_t.generation in zonal_table.h).
const controlGenerationOffset = 16

// Tables publishes endpoint tables into one directory with the
// controller's writer, table.Publisher, and can also put damaged snapshots
// in place the way a broken writer would.
type Tables struct {
	tb  testing.TB
	Dir string
	pub *table.Publisher
}

// OpenTables opens a publisher on dir (creating it) until the test ends.
func OpenTables(tb testing.TB, dir string) *Tables {
	tb.Helper()
	ts := &Tables{tb: tb, Dir: dir}
	ts.open()
	tb.Cleanup(func() {
		if ts.pub != nil {
			ts.pub.Close()
		}
	})
	return ts
}

func (ts *Tables) open() {
	ts.tb.Helper()
	p, err := table.OpenPublisher(ts.Dir)
	if err != nil {
		ts.tb.Fatalf("opening the endpoint table publisher: %v", err)
	}
	ts.pub = p
}

// Publisher is the underlying publisher, for timing Publish itself.
func (ts *Tables) Publisher() *table.Publisher { return ts.pub }

// Publish makes t the live table and returns its generation.
func (ts *Tables) Publish(t *table.Table) uint64 {
	ts.tb.Helper()
	p, err := ts.pub.Publish(t)
	if err != nil {
		ts.tb.Fatalf("publishing endpoint table: %v", err)
	}
	return p.Generation
}

// Generation is the generation last published.
func (ts *Tables) Generation() uint64 { return ts.pub.Generation() }

// Encode returns the snapshot bytes of t for generation gen, as Publish
// would write them: a good snapshot to damage.
func Encode(tb testing.TB, t *table.Table, gen uint64) []byte {
	tb.Helper()
	var e table.Encoder
	b, err := e.Encode(t, gen)
	if err != nil {
		tb.Fatalf("encoding endpoint table: %v", err)
	}
	return append([]byte(nil), b...)
}

// InstallRaw does what Publish does with arbitrary bytes: it writes b to
// <dir>/table.new, renames it over <dir>/table and advances the generation
// in the control file. With b nil it removes the table file instead. It
// returns the new generation; the next Publish comes after it.
func (ts *Tables) InstallRaw(b []byte) uint64 {
	ts.tb.Helper()
	// The publisher keeps its own count and holds the control file's
	// lock: step aside and let a new one pick up the advanced generation.
	if err := ts.pub.Close(); err != nil {
		ts.tb.Fatal(err)
	}
	ts.pub = nil
	final := filepath.Join(ts.Dir, table.TableFile)
	if b == nil {
		if err := os.Remove(final); err != nil && !os.IsNotExist(err) {
			ts.tb.Fatal(err)
		}
	} else {
		tmp := final + ".new"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			ts.tb.Fatal(err)
		}
		if err := os.Rename(tmp, final); err != nil {
			ts.tb.Fatal(err)
		}
	}
	gen := ts.bumpControl()
	ts.open()
	return gen
}

// bumpControl advances the control file's generation by one with an
// atomic store through a shared mapping, as the writer does.
func (ts *Tables) bumpControl() uint64 {
	ts.tb.Helper()
	f, err := os.OpenFile(filepath.Join(ts.Dir, table.ControlFile), os.O_RDWR, 0)
	if err != nil {
		ts.tb.Fatal(err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, os.Getpagesize(), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		ts.tb.Fatalf("mapping the control file: %v", err)
	}
	defer syscall.Munmap(mem)
	gen := (*uint64)(unsafe.Pointer(&mem[controlGenerationOffset]))
	next := atomic.LoadUint64(gen) + 1
	atomic.StoreUint64(gen, next)
	if got := binary.LittleEndian.Uint64(mem[controlGenerationOffset:]); got != next {
		ts.tb.Fatalf("control file generation reads %d after storing %d", got, next)
	}
	return next
}
