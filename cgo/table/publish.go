package table

/*
#include "zonal_table.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Publisher publishes snapshots into a table directory: it writes each one
// to a new file, renames it over the table file and only then advances the
// generation in the control file. Readers never wait for it.
//
// The control file is created once and afterwards only updated in place, so
// NGINX workers that mapped it at start see every later generation, across
// controller restarts too: a new Publisher continues from the generation it
// finds. One Publisher at a time may own a directory (an advisory lock on
// the control file, taken by writers only, enforces it).
type Publisher struct {
	dir  string
	ctl  *os.File
	mem  []byte // the control file, mapped shared and writable
	gen  *uint64
	enc  Encoder
	last uint64
}

// OpenPublisher opens dir, creating it and its control file if needed.
func OpenPublisher(dir string) (*Publisher, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("endpoint table directory: %w", err)
	}
	f, err := openControl(dir)
	if err != nil {
		return nil, err
	}
	if err := lockControl(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("endpoint table %s: another zonal controller publishes here (%w)", dir, err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, C.ZONAL_CONTROL_SIZE, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("endpoint table %s: mapping control file: %w", dir, err)
	}
	p := &Publisher{dir: dir, ctl: f, mem: mem}
	p.gen = (*uint64)(unsafe.Pointer(&mem[unsafe.Offsetof(C.zonal_control_t{}.generation)]))
	p.last = atomic.LoadUint64(p.gen)
	// A table newer than the control file (a controller that stopped
	// between rename and store) must not be published over with its own
	// generation number.
	if s, err := ReadFile(filepath.Join(dir, TableFile)); err == nil && s.Generation > p.last {
		p.last = s.Generation
	}
	return p, nil
}

// lockWait is how long OpenPublisher waits for the writers' lock: a
// controller that is stopping, or a process forked while the previous
// Publisher held the file (the lock lives until the child's exec), holds it
// for a moment.
const lockWait = 2 * time.Second

// lockControl takes the writers' lock on the control file, waiting at most
// lockWait.
func lockControl(f *os.File) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openControl opens the control file, creating it atomically (a complete
// file renamed into place) if it does not exist, and checks its header.
func openControl(dir string) (*os.File, error) {
	path := filepath.Join(dir, ControlFile)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		var hdr C.zonal_control_t
		hdr.magic = C.ZONAL_CONTROL_MAGIC
		hdr.version = C.ZONAL_TABLE_VERSION
		hdr.size = C.ZONAL_CONTROL_SIZE
		page := make([]byte, C.ZONAL_CONTROL_SIZE)
		copy(page, unsafe.Slice((*byte)(unsafe.Pointer(&hdr)), unsafe.Sizeof(hdr)))
		tmp := path + ".new." + strconv.Itoa(os.Getpid())
		if err := os.WriteFile(tmp, page, 0o644); err != nil {
			return nil, fmt.Errorf("endpoint table: creating control file: %w", err)
		}
		// Link, not rename: a control file that appeared meanwhile wins,
		// since workers may already have mapped it.
		err = os.Link(tmp, path)
		os.Remove(tmp)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("endpoint table: creating control file: %w", err)
		}
		f, err = os.OpenFile(path, os.O_RDWR, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("endpoint table: opening control file: %w", err)
	}
	var hdr C.zonal_control_t
	n, _ := f.ReadAt(unsafe.Slice((*byte)(unsafe.Pointer(&hdr)), unsafe.Sizeof(hdr)), 0)
	st, statErr := f.Stat()
	if n != int(unsafe.Sizeof(hdr)) || statErr != nil || st.Size() != C.ZONAL_CONTROL_SIZE ||
		hdr.magic != C.ZONAL_CONTROL_MAGIC || hdr.version != C.ZONAL_TABLE_VERSION || hdr.size != C.ZONAL_CONTROL_SIZE {
		f.Close()
		return nil, fmt.Errorf("endpoint table: %s is not a zonal control file of version %d; "+
			"stop NGINX and remove the directory's contents to start afresh", path, C.ZONAL_TABLE_VERSION)
	}
	return f, nil
}

// Generation is the generation of the last snapshot published (or found).
func (p *Publisher) Generation() uint64 { return p.last }

// Dir is the table directory.
func (p *Publisher) Dir() string { return p.dir }

// Publish encodes t as the next generation and makes it the live table. On
// error the live table is unchanged.
func (p *Publisher) Publish(t *Table) (Published, error) {
	if p.mem == nil {
		return Published{}, fmt.Errorf("endpoint table %s: publisher is closed", p.dir)
	}
	gen := p.last + 1
	b, err := p.enc.Encode(t, gen)
	if err != nil {
		return Published{}, err
	}
	if err := p.install(b); err != nil {
		return Published{}, err
	}
	atomic.StoreUint64(p.gen, gen)
	p.last = gen
	return Published{Generation: gen, Size: len(b)}, nil
}

// Published describes one published snapshot.
type Published struct {
	Generation uint64
	Size       int
}

// install writes b to a fresh file and renames it over the table file. A
// worker that still maps the old file keeps it: an unlinked mapping stays.
func (p *Publisher) install(b []byte) error {
	final := filepath.Join(p.dir, TableFile)
	tmp := final + ".new"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("endpoint table: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("endpoint table: writing %s: %w", final, err)
	}
	return nil
}

// Close releases the control file; the published table stays in service.
func (p *Publisher) Close() error {
	if p.mem == nil {
		return nil
	}
	err := syscall.Munmap(p.mem)
	p.mem, p.gen = nil, nil
	if cerr := p.ctl.Close(); err == nil {
		err = cerr
	}
	return err
}
