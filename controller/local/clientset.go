package local

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8s_testing "k8s.io/client-go/testing"
)

// paceLimit is how many events may wait in a watcher before writes wait.
// client-go's fake watchers hold 100 events and panic when one more
// comes, so a file that changes hundreds of objects at once must not
// outrun the informers reading them.
const paceLimit = 50

// newClientset returns a fake clientset whose reads and writes all go
// through a tracker that versions objects as an API server does.
//
// client-go's fake object tracker keeps objects exactly as written: no
// uid, no creationTimestamp, and the resourceVersion the writer sent. The
// Store skips updates whose resourceVersion did not change (resyncs), so
// a status write by the controller would be invisible to it. Wrapping the
// tracker fixes that for every writer.
//
// It is the plain tracker of NewSimpleClientset, not the field-managing
// one of NewClientset: local mode needs no managedFields, and computing
// them made every write much slower. Server-side apply falls back to the
// plain tracker's strategic merge, which is enough for status writes.
func newClientset() (*fake.Clientset, *tracker) {
	cs := fake.NewSimpleClientset()
	t := &tracker{ObjectTracker: cs.Tracker()}
	cs.ReactionChain = nil
	cs.AddReactor("*", "*", k8s_testing.ObjectReaction(t))
	cs.WatchReactionChain = nil
	cs.AddWatchReactor("*", func(action k8s_testing.Action) (bool, watch.Interface, error) {
		var opts meta_v1.ListOptions
		if wa, ok := action.(k8s_testing.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := t.Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		if rw, ok := w.(*watch.RaceFreeFakeWatcher); ok {
			t.mu.Lock()
			t.watchers = append(t.watchers, rw)
			t.mu.Unlock()
		}
		return true, w, nil
	})
	return cs, t
}

// tracker is an object tracker that stamps a new resourceVersion on every
// write, and a uid and creationTimestamp on every create that lacks them.
type tracker struct {
	k8s_testing.ObjectTracker
	version atomic.Int64
	uids    atomic.Int64

	mu       sync.Mutex
	watchers []*watch.RaceFreeFakeWatcher
}

// newUID returns a unique, UUID-shaped uid.
func (t *tracker) newUID() types.UID {
	return types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", t.uids.Add(1)))
}

// stamp gives obj (a copy the tracker owns) a new resourceVersion and,
// when live is nil (a create), what a create gives; on an update it keeps
// the live object's uid and creationTimestamp.
func (t *tracker) stamp(obj runtime.Object, live meta_v1.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	m.SetResourceVersion(strconv.FormatInt(t.version.Add(1), 10))
	if live != nil {
		m.SetUID(live.GetUID())
		m.SetCreationTimestamp(live.GetCreationTimestamp())
		return nil
	}
	if m.GetUID() == "" {
		m.SetUID(t.newUID())
	}
	if m.GetCreationTimestamp().Time.IsZero() {
		m.SetCreationTimestamp(meta_v1.NewTime(time.Now().UTC().Truncate(time.Second)))
	}
	return nil
}

// live returns the stored object's metadata, nil if there is none.
func (t *tracker) live(gvr schema.GroupVersionResource, ns, name string) meta_v1.Object {
	obj, err := t.ObjectTracker.Get(gvr, ns, name)
	if err != nil {
		return nil
	}
	m, _ := meta.Accessor(obj)
	return m
}

// add stores an object at start, before anyone watches.
func (t *tracker) add(obj runtime.Object) error {
	obj = obj.DeepCopyObject()
	if err := t.stamp(obj, nil); err != nil {
		return err
	}
	return t.ObjectTracker.Add(obj)
}

// put creates or updates an object for the files.
func (t *tracker) put(gvr schema.GroupVersionResource, obj runtime.Object, exists bool) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	ns := m.GetNamespace()
	if exists {
		err = t.Update(gvr, obj, ns)
		if apierrors.IsNotFound(err) { // deleted through the client
			err = t.Create(gvr, obj, ns)
		}
		return err
	}
	err = t.Create(gvr, obj, ns)
	if apierrors.IsAlreadyExists(err) { // created through the client
		err = t.Update(gvr, obj, ns)
	}
	return err
}

func (t *tracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...meta_v1.CreateOptions) error {
	obj = obj.DeepCopyObject() // the caller's object is not ours to change
	if err := t.stamp(obj, nil); err != nil {
		return err
	}
	return t.ObjectTracker.Create(gvr, obj, ns, opts...)
}

func (t *tracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...meta_v1.UpdateOptions) error {
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	live := t.live(gvr, ns, m.GetName())
	if live == nil {
		return apierrors.NewNotFound(gvr.GroupResource(), m.GetName())
	}
	if err := t.stamp(obj, live); err != nil {
		return err
	}
	return t.ObjectTracker.Update(gvr, obj, ns, opts...)
}

func (t *tracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...meta_v1.PatchOptions) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	// obj is the patched copy of the live object, made by the reactor.
	if err := t.stamp(obj, t.live(gvr, ns, m.GetName())); err != nil {
		return err
	}
	return t.ObjectTracker.Patch(gvr, obj, ns, opts...)
}

// Apply lets the wrapped tracker merge the apply configuration, then
// stores the result again with a new version: the first event carries the
// old resourceVersion (and is skipped by the Store), the second the new.
func (t *tracker) Apply(gvr schema.GroupVersionResource, cfg runtime.Object, ns string, opts ...meta_v1.PatchOptions) error {
	if err := t.ObjectTracker.Apply(gvr, cfg, ns, opts...); err != nil {
		return err
	}
	m, err := meta.Accessor(cfg)
	if err != nil {
		return err
	}
	obj, err := t.ObjectTracker.Get(gvr, ns, m.GetName())
	if err != nil {
		return err
	}
	return t.Update(gvr, obj, ns)
}

// pace waits until every open watcher has room for more events.
func (t *tracker) pace(ctx context.Context) error {
	t.mu.Lock()
	t.watchers = slices.DeleteFunc(t.watchers, (*watch.RaceFreeFakeWatcher).IsStopped)
	ws := slices.Clone(t.watchers)
	t.mu.Unlock()
	for _, w := range ws {
		for len(w.ResultChan()) >= paceLimit && !w.IsStopped() {
			select {
			case <-ctx.Done():
				return errStopped
			case <-time.After(time.Millisecond):
			}
		}
	}
	return nil
}
