package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// DefaultInterval is how often Watch looks at the files by default.
const DefaultInterval = 500 * time.Millisecond

// StartTime is the creationTimestamp of the first object loaded at start
// that has none; each later one is a second younger. A fixed start makes
// "the oldest Ingress wins" the same on every run: file name order, then
// document order.
var StartTime = time.Date(2020, time.January, 1, 0, 0, 0, 0, time.UTC)

// resources maps the supported kinds to their API resources.
var resources = map[string]schema.GroupVersionResource{
	"IngressClass":  {Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"},
	"Ingress":       {Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
	"Service":       {Version: "v1", Resource: "services"},
	"EndpointSlice": {Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
	"Secret":        {Version: "v1", Resource: "secrets"},
	"Node":          {Version: "v1", Resource: "nodes"},
	"ConfigMap":     {Version: "v1", Resource: "configmaps"},
}

// Warning is a problem Watch reports that changes nothing: a document that
// is ignored, or an unknown field.
type Warning string

func (w Warning) Error() string { return string(w) }

// Cluster is a fake API server holding the objects of a manifests
// directory. Like an API server it gives every object a uid, a
// creationTimestamp and a new resourceVersion on every write, whoever
// writes (the files, or the controller writing status through Client).
type Cluster struct {
	dir     string
	client  *fake.Clientset
	tracker *tracker

	mu sync.Mutex // one pass at a time
	// files is the last good content of every file seen, by name.
	files map[string]*fileState
	// applied is what the files last said of each object, as written
	// (with uid and creationTimestamp, without resourceVersion).
	applied map[objectKey]runtime.Object
	// lastCreated is the latest creationTimestamp given out.
	lastCreated time.Time
	// mergeReported is what was last reported about objects defined in
	// several files.
	mergeReported string
	// dirReported is the last error reading the directory.
	dirReported string
}

type fileState struct {
	sig  fileSig
	objs []sourced
	// recheck is set while the file's modification time is recent: a
	// write within the file system's timestamp granularity (a few ms on
	// ext4) with the same size would not change the signature, so such a
	// file is read again on the next passes.
	recheck bool
	// reported is what was last reported for the file, so that reading
	// it again does not repeat it.
	reported string
	// missingSince is when the file was first found missing.
	missingSince time.Time
}

// settleTime is how long a file must stay unmodified before it is read.
const settleTime = 100 * time.Millisecond

// recheckWindow is how long after its modification a file is read on
// every pass.
const recheckWindow = 2 * time.Second

// NewCluster loads dir (see Load) into a fake clientset. It fails if any
// file cannot be loaded, so mistakes show at once; it returns warnings
// for what it ignored.
func NewCluster(dir string) (*Cluster, []string, error) {
	c := &Cluster{
		dir:     dir,
		files:   map[string]*fileState{},
		applied: map[objectKey]runtime.Object{},
	}
	sigs, err := manifestFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	var all [][]sourced
	var warnings []string
	for _, sig := range sigs {
		objs, warns, err := loadFile(filepath.Join(dir, sig.name))
		if err != nil {
			return nil, nil, err
		}
		c.files[sig.name] = &fileState{
			sig:      sig,
			objs:     objs,
			recheck:  time.Since(time.Unix(0, sig.mtime)) < recheckWindow,
			reported: fmt.Sprint(warningErrors(warns)),
		}
		all = append(all, objs)
		warnings = append(warnings, warns...)
	}
	desired, warns := merge(all)
	warnings = append(warnings, warns...)
	c.mergeReported = fmt.Sprint(warningErrors(warns))

	c.client, c.tracker = newClientset()
	c.lastCreated = StartTime.Add(-time.Second)
	for i, s := range desired {
		m, _ := meta.Accessor(s.obj)
		c.lastCreated = StartTime.Add(time.Duration(i) * time.Second)
		if m.GetCreationTimestamp().Time.IsZero() {
			m.SetCreationTimestamp(meta_v1.NewTime(c.lastCreated))
		}
		if m.GetUID() == "" {
			m.SetUID(c.tracker.newUID())
		}
		c.applied[s.key] = s.obj
		if err := c.tracker.add(s.obj); err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %w", s.where, s.key, err)
		}
	}
	return c, warnings, nil
}

// Client returns the fake clientset, for informers and for writers.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Watch keeps the clientset in step with the files until ctx is done,
// looking at them every interval (DefaultInterval if 0 or less). When a
// file's name, size or modification time changes, it reads the file again
// and applies what changed as creates, updates and deletes, so informers
// see ordinary watch events: a change shows within about interval plus
// 100 ms. A file is read once it has been left alone for 100 ms, and its
// objects are deleted once it has been gone that long, so that saving a
// file never deletes and recreates its objects (which would make them
// young again). A file that cannot be loaded keeps its previous objects
// and the error goes to report, once per change of the file, as do
// Warnings; report may be nil.
func (c *Cluster) Watch(ctx context.Context, interval time.Duration, report func(error)) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if report == nil {
		report = func(error) {}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, err := range c.sync(ctx) {
				report(err)
			}
		}
	}
}

// sync reads the files that changed since the last pass and applies the
// difference. It returns the problems found.
func (c *Cluster) sync(ctx context.Context) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	sigs, err := manifestFiles(c.dir)
	if err != nil {
		// The directory itself is gone or unreadable: keep everything
		// rather than delete the world.
		if err.Error() == c.dirReported {
			return nil
		}
		c.dirReported = err.Error()
		return []error{fmt.Errorf("%w; keeping every object", err)}
	}
	c.dirReported = ""
	var problems []error
	changed := false
	seen := map[string]bool{}
	now := time.Now()
	for _, sig := range sigs {
		seen[sig.name] = true
		st, ok := c.files[sig.name]
		if ok && st.sig == sig && !st.recheck {
			continue
		}
		if age := now.Sub(time.Unix(0, sig.mtime)); age >= 0 && age < settleTime {
			// Possibly still being written (truncated, half full): an
			// empty file would delete its objects, and bring them back
			// with new ages a moment later. Read it on a later pass.
			continue
		}
		changed = true
		if !ok {
			st = &fileState{}
			c.files[sig.name] = st
		}
		// Remember the new signature even if the file is broken, so the
		// error is reported once, not on every pass.
		st.sig = sig
		st.recheck = now.Sub(time.Unix(0, sig.mtime)) < recheckWindow
		var report []error
		objs, warns, err := loadFile(filepath.Join(c.dir, sig.name))
		if err != nil {
			report = append(report, fmt.Errorf("%w; keeping the objects it defined before", err))
		} else {
			st.objs = objs
			report = append(report, warningErrors(warns)...)
		}
		if text := fmt.Sprint(report); text != st.reported {
			st.reported = text
			problems = append(problems, report...)
		}
	}
	for name, st := range c.files {
		switch {
		case seen[name]:
			st.missingSince = time.Time{}
		case st.missingSince.IsZero():
			// Some editors save by deleting and creating the file: wait
			// a little before deleting its objects.
			st.missingSince = now
		case now.Sub(st.missingSince) >= settleTime:
			delete(c.files, name)
			changed = true
		}
	}
	if !changed {
		return problems
	}

	names := slices.Sorted(maps.Keys(c.files))
	all := make([][]sourced, len(names))
	for i, name := range names {
		all[i] = c.files[name].objs
	}
	desired, warns := merge(all)
	if text := fmt.Sprint(warningErrors(warns)); text != c.mergeReported {
		c.mergeReported = text
		problems = append(problems, warningErrors(warns)...)
	}
	return append(problems, c.apply(ctx, desired)...)
}

// apply writes the difference between what the files say and what they
// said before.
func (c *Cluster) apply(ctx context.Context, desired []sourced) []error {
	var problems []error
	want := make(map[objectKey]bool, len(desired))
	for _, s := range desired {
		want[s.key] = true
		prev, existed := c.applied[s.key]
		obj := s.obj.DeepCopyObject()
		m, _ := meta.Accessor(obj)
		if existed {
			// Keep what the API server gave the object when it was
			// created, unless the file says otherwise.
			pm, _ := meta.Accessor(prev)
			if m.GetUID() == "" {
				m.SetUID(pm.GetUID())
			}
			if m.GetCreationTimestamp().Time.IsZero() {
				m.SetCreationTimestamp(pm.GetCreationTimestamp())
			}
			if equality.Semantic.DeepEqual(prev, obj) {
				continue
			}
		} else {
			if m.GetUID() == "" {
				m.SetUID(c.tracker.newUID())
			}
			if m.GetCreationTimestamp().Time.IsZero() {
				m.SetCreationTimestamp(meta_v1.NewTime(c.nextCreated()))
			}
		}
		if err := c.tracker.pace(ctx); err != nil {
			return append(problems, err)
		}
		if err := c.tracker.put(resources[s.key.Kind], obj, existed); err != nil {
			problems = append(problems, fmt.Errorf("%s: %s: %w", s.where, s.key, err))
			continue
		}
		c.applied[s.key] = obj
	}
	for key := range c.applied {
		if want[key] {
			continue
		}
		if err := c.tracker.pace(ctx); err != nil {
			return append(problems, err)
		}
		err := c.tracker.Delete(resources[key.Kind], key.Namespace, key.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			problems = append(problems, fmt.Errorf("deleting %s: %w", key, err))
			continue
		}
		delete(c.applied, key)
	}
	return problems
}

// nextCreated is the creationTimestamp of an object that appears now:
// the time, to the second as an API server keeps it, but always after
// every earlier object, so ages never tie.
func (c *Cluster) nextCreated() time.Time {
	t := time.Now().UTC().Truncate(time.Second)
	if !t.After(c.lastCreated) {
		t = c.lastCreated.Add(time.Second)
	}
	c.lastCreated = t
	return t
}

func warningErrors(warnings []string) []error {
	out := make([]error, len(warnings))
	for i, w := range warnings {
		out[i] = Warning(w)
	}
	return out
}

// errStopped is returned when ctx ends while writes wait for watchers.
var errStopped = errors.New("local cluster: stopped while waiting for watchers to catch up")
