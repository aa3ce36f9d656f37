package nginx

import (
	"bufio"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// recentLines is how many of NGINX's last error log lines are kept to
// explain a failed start or an exit.
const recentLines = 20

// outputs are NGINX's standard output and error for all the masters of
// one Process: one pipe each, created once, so that the workers of a
// master that died keep a place to write to, and drained without pause,
// since NGINX blocks when a pipe is full.
type outputs struct {
	stdout *os.File // handed to NGINX; nil for /dev/null
	stderr *os.File

	writeEnds []*os.File // ours, closed by close
	readEnds  []*os.File
	readers   sync.WaitGroup

	errLog io.Writer

	mu       sync.Mutex
	recent   []logLine // the last recentLines lines
	seq      uint64    // lines read so far
	markSeq  uint64
	watchers map[chan string]struct{}
}

type logLine struct {
	at   time.Time
	text string
}

func newOutputs(stdout, stderr io.Writer) (*outputs, error) {
	o := &outputs{errLog: stderr, watchers: map[chan string]struct{}{}}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	o.stderr = w
	o.writeEnds = append(o.writeEnds, w)
	o.readEnds = append(o.readEnds, r)
	o.readers.Add(1)
	go o.readErrors(r)

	if f, ok := stdout.(*os.File); ok && !isSocket(f) {
		// NGINX opens /dev/stdout for the access log, which fails
		// (ENXIO) on a socket; a pipe, a terminal or a file is fine.
		o.stdout = f
	} else if stdout != nil {
		r, w, err := os.Pipe()
		if err != nil {
			o.close()
			return nil, err
		}
		o.stdout = w
		o.writeEnds = append(o.writeEnds, w)
		o.readEnds = append(o.readEnds, r)
		o.readers.Add(1)
		go o.copy(stdout, r)
	}
	return o, nil
}

func isSocket(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeSocket != 0
}

// copy drains r into w, going on when w fails.
func (o *outputs) copy(w io.Writer, r *os.File) {
	defer o.readers.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (o *outputs) readErrors(r *os.File) {
	defer o.readers.Done()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			o.line(line)
		}
		if err != nil {
			return
		}
	}
}

func (o *outputs) line(line string) {
	if o.errLog != nil {
		if !strings.HasSuffix(line, "\n") {
			line += "\n"
		}
		o.errLog.Write([]byte(line))
	}
	line = strings.TrimRight(line, "\r\n")
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	if len(o.recent) == recentLines {
		copy(o.recent, o.recent[1:])
		o.recent = o.recent[:recentLines-1]
	}
	o.recent = append(o.recent, logLine{time.Now(), line})
	if isErrorLine(line) && len(o.watchers) > 0 {
		line = logPrefix.ReplaceAllString(line, "$1")
		for c := range o.watchers {
			select {
			case c <- line:
			default:
			}
		}
	}
}

// isErrorLine tells a line that stops NGINX from loading a configuration
// from one about a request ("[error]").
func isErrorLine(l string) bool {
	return strings.Contains(l, "[emerg]") || strings.Contains(l, "[alert]") || strings.Contains(l, "[crit]")
}

// watch returns a channel that receives the error lines logged from now on
// until unwatch.
func (o *outputs) watch() chan string {
	c := make(chan string, 64)
	o.mu.Lock()
	o.watchers[c] = struct{}{}
	o.mu.Unlock()
	return c
}

func (o *outputs) unwatch(c chan string) {
	o.mu.Lock()
	delete(o.watchers, c)
	o.mu.Unlock()
}

// mark remembers the current position for sinceMark.
func (o *outputs) mark() {
	o.mu.Lock()
	o.markSeq = o.seq
	o.mu.Unlock()
}

// sinceMark returns the recent lines logged since mark, each on a line of
// its own, for an error message. A process that just exited may have
// written lines that are not read yet: it waits until none came for a
// moment (at most half a second).
func (o *outputs) sinceMark() string {
	last := o.count()
	for i := 0; i < 25; i++ {
		time.Sleep(20 * time.Millisecond)
		n := o.count()
		if n == last {
			break
		}
		last = n
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	n := min(int(o.seq-o.markSeq), len(o.recent))
	if n == 0 {
		return ""
	}
	var lines []string
	for _, l := range o.recent[len(o.recent)-n:] {
		lines = append(lines, l.text)
	}
	return ":\n" + strings.Join(lines, "\n")
}

// recentErrors returns the error lines (see isErrorLine) of the last
// seconds, for explaining why a master exited.
func (o *outputs) recentErrors() string {
	o.sinceMark() // lets the reader catch up
	since := time.Now().Add(-3 * time.Second)
	o.mu.Lock()
	defer o.mu.Unlock()
	var errs []string
	for _, l := range o.recent {
		if l.at.After(since) && isErrorLine(l.text) {
			errs = append(errs, l.text)
		}
	}
	if len(errs) == 0 {
		return ""
	}
	return ":\n" + strings.Join(errs[max(0, len(errs)-5):], "\n")
}

func (o *outputs) count() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seq
}

// close closes the write ends and waits for the readers to drain what is
// left; workers of a master that died may still hold the pipes open, so
// after a second the read ends are closed too.
func (o *outputs) close() {
	for _, f := range o.writeEnds {
		f.Close()
	}
	done := make(chan struct{})
	go func() {
		o.readers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	for _, f := range o.readEnds {
		f.Close() // ends a read still waiting
	}
	<-done
}
