// Package local is the controller's local mode: it serves the objects in a
// directory of YAML manifests through a fake clientset, so the very same
// informers, store and sync loop run on one machine with no cluster, and
// it keeps the fake clientset in step with edits to the files.
package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	core_v1 "k8s.io/api/core/v1"
	discovery_v1 "k8s.io/api/discovery/v1"
	networking_v1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Supported lists the kinds local mode serves, with their apiVersion.
// Documents of other kinds are ignored with a warning, so a directory can
// hold a whole application's manifests (Deployments, CRDs, ...) next to
// its Ingresses: that is how people keep them, and failing on them would
// make local mode useless on real directories.
var Supported = map[string]string{
	"IngressClass":  "networking.k8s.io/v1",
	"Ingress":       "networking.k8s.io/v1",
	"Service":       "v1",
	"EndpointSlice": "discovery.k8s.io/v1",
	"Secret":        "v1",
	"Node":          "v1",
	"ConfigMap":     "v1",
}

// decoder is client-go's universal deserializer in strict mode: it decodes
// like the plain one and also reports unknown and duplicate fields, which
// local mode turns into warnings (a misspelt field would otherwise vanish
// silently, where an API server would warn).
var decoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// A DocumentError says which document of which file is wrong, and why.
type DocumentError struct {
	File string
	// Document counts the non-empty documents of File from 1; Line is
	// where the document starts.
	Document, Line int
	// Item is the 1-based index within a List document, 0 otherwise.
	Item int
	Err  error
}

func (e *DocumentError) Error() string {
	return e.where() + ": " + e.Err.Error()
}

func (e *DocumentError) Unwrap() error { return e.Err }

func (e *DocumentError) where() string {
	s := fmt.Sprintf("%s: document %d (line %d)", e.File, e.Document, e.Line)
	if e.Item > 0 {
		s += fmt.Sprintf(", item %d", e.Item)
	}
	return s
}

// Load reads every *.yaml and *.yml file in dir (not its subdirectories,
// nor hidden files such as editors' lock files), in name order, each
// holding one or more documents separated by "---" lines; a document may
// be a List. It returns the objects in file then document order, with the
// namespace "default" where a namespaced object has none and the defaults
// an API server would apply to the fields the controller reads. Documents
// of unsupported kinds and unknown fields are warnings; anything else that
// is wrong is an error naming the file and document. When one object is
// defined twice, the first definition wins, with a warning.
func Load(dir string) ([]runtime.Object, []string, error) {
	files, err := manifestFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	var all [][]sourced
	var warnings []string
	for _, f := range files {
		objs, warns, err := loadFile(filepath.Join(dir, f.name))
		if err != nil {
			return nil, nil, err
		}
		all = append(all, objs)
		warnings = append(warnings, warns...)
	}
	merged, warns := merge(all)
	warnings = append(warnings, warns...)
	out := make([]runtime.Object, len(merged))
	for i, s := range merged {
		out[i] = s.obj
	}
	return out, warnings, nil
}

// sourced is an object and where it was defined.
type sourced struct {
	obj   runtime.Object
	key   objectKey
	where string
}

// objectKey identifies an object across files and reloads.
type objectKey struct {
	Kind, Namespace, Name string
}

func (k objectKey) String() string {
	if k.Namespace == "" {
		return k.Kind + " " + k.Name
	}
	return k.Kind + " " + k.Namespace + "/" + k.Name
}

// merge concatenates the objects of several files, keeping the first
// definition of each object.
func merge(files [][]sourced) ([]sourced, []string) {
	var out []sourced
	var warnings []string
	first := map[objectKey]string{}
	for _, objs := range files {
		for _, s := range objs {
			if w, dup := first[s.key]; dup {
				warnings = append(warnings, fmt.Sprintf("%s: %s is also defined at %s; ignored (the first definition wins)", s.where, s.key, w))
				continue
			}
			first[s.key] = s.where
			out = append(out, s)
		}
	}
	return out, warnings
}

// fileSig is what the watcher compares to notice a changed file.
type fileSig struct {
	name  string
	size  int64
	mtime int64 // UnixNano
}

// manifestFiles lists the manifest files of dir, sorted by name, following
// symbolic links (as in a mounted ConfigMap).
func manifestFiles(dir string) ([]fileSig, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("manifests directory: %w", err)
	}
	var out []fileSig
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile, or a dangling link
		}
		if err != nil {
			return nil, fmt.Errorf("manifests directory: %w", err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, fileSig{name: name, size: fi.Size(), mtime: fi.ModTime().UnixNano()})
	}
	slices.SortFunc(out, func(a, b fileSig) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// loadFile reads one manifest file: its objects, or an error for the
// first wrong document.
func loadFile(path string) ([]sourced, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var out []sourced
	var warnings []string
	for i, doc := range splitDocuments(data) {
		de := &DocumentError{File: path, Document: i + 1, Line: doc.line}
		objs, warns, err := decodeDocument(doc, de)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, objs...)
		warnings = append(warnings, warns...)
	}
	return out, warnings, nil
}

type document struct {
	data []byte
	line int // of the first line with content
	// offset is the number of lines before data in the file.
	offset int
}

// splitDocuments splits a YAML stream at "---" lines and drops documents
// with nothing but blank lines and comments.
func splitDocuments(data []byte) []document {
	var docs []document
	var cur []byte
	first, offset := 0, 0
	flush := func() {
		if first > 0 {
			docs = append(docs, document{data: cur, line: first, offset: offset})
		}
		cur, first = nil, 0
	}
	for n, line := range bytes.SplitAfter(data, []byte("\n")) {
		if isSeparator(line) {
			flush()
			offset = n + 1
			continue
		}
		cur = append(cur, line...)
		if t := bytes.TrimSpace(line); first == 0 && len(t) > 0 && t[0] != '#' {
			first = n + 1
		}
	}
	flush()
	return docs
}

// isSeparator reports whether a line starts a new YAML document: "---"
// alone or followed by a comment.
func isSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	rest := bytes.TrimSpace(line[3:])
	return len(rest) == 0 || rest[0] == '#'
}

// decodeDocument decodes one document, a single object or a List; de
// names it in errors.
func decodeDocument(doc document, de *DocumentError) ([]sourced, []string, error) {
	js, err := yaml.YAMLToJSON(doc.data)
	if err != nil {
		return nil, nil, de.with(0, fmt.Errorf("not valid YAML: %s", fileLines(err, doc.offset)))
	}
	js = bytes.TrimSpace(js)
	if string(js) == "null" {
		return nil, nil, nil // only "---" or "~"
	}
	if len(js) == 0 || js[0] != '{' {
		return nil, nil, de.with(0, errors.New("not a Kubernetes object (a mapping with apiVersion and kind)"))
	}
	var head struct {
		meta_v1.TypeMeta
		Items json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, nil, de.with(0, fmt.Errorf("not a Kubernetes object: %w", err))
	}
	isList := head.Kind == "List" || (strings.HasSuffix(head.Kind, "List") && head.Items != nil)
	var items []json.RawMessage
	if isList && head.Items != nil {
		if err := json.Unmarshal(head.Items, &items); err != nil {
			return nil, nil, de.with(0, fmt.Errorf("%s items: %w", head.Kind, err))
		}
	}
	if !isList {
		s, warn, err := decodeObject(js, de.with(0, nil))
		if err != nil || s == nil {
			return nil, warn, err
		}
		return []sourced{*s}, warn, nil
	}

	// A List: v1 List items name their kinds; items of a typed list
	// (ServiceList) may leave theirs out.
	itemKind := strings.TrimSuffix(head.Kind, "List")
	var out []sourced
	var warnings []string
	for i, raw := range items {
		ide := de.with(i+1, nil)
		if itemKind != "" {
			raw, err = withKind(raw, head.APIVersion, itemKind)
			if err != nil {
				return nil, nil, ide.with(i+1, err)
			}
		}
		s, warn, err := decodeObject(raw, ide)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, warn...)
		if s != nil {
			out = append(out, *s)
		}
	}
	return out, warnings, nil
}

// yamlLine finds the line number in YAML parser errors.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// fileLines turns the line number of a YAML error, counted from the
// start of its document, into the file's.
func fileLines(err error, offset int) string {
	msg := err.Error()
	m := yamlLine.FindStringSubmatchIndex(msg)
	if m == nil {
		return msg
	}
	n, _ := strconv.Atoi(msg[m[2]:m[3]])
	return fmt.Sprintf("line %d: %s", n+offset, msg[m[1]:])
}

// with returns a copy of de for one List item (0: the document itself)
// with err.
func (de *DocumentError) with(item int, err error) *DocumentError {
	c := *de
	c.Item, c.Err = item, err
	return &c
}

// withKind fills in apiVersion and kind of a typed List's item.
func withKind(raw json.RawMessage, apiVersion, kind string) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if m["kind"] != nil {
		return raw, nil
	}
	m["apiVersion"], m["kind"] = apiVersion, kind
	return json.Marshal(m)
}

// decodeObject decodes one object's JSON. It returns nil and a warning for
// an object of another kind.
func decodeObject(js []byte, de *DocumentError) (*sourced, []string, error) {
	var tm meta_v1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return nil, nil, de.with(de.Item, fmt.Errorf("not a Kubernetes object: %w", err))
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return nil, nil, de.with(de.Item, errors.New("apiVersion and kind are required"))
	}
	var warnings []string
	obj, _, err := decoder.Decode(js, nil, nil)
	switch {
	case err == nil:
	case runtime.IsStrictDecodingError(err) && obj != nil:
		warnings = append(warnings, fmt.Sprintf("%s: %s: %v", de.where(), tm.Kind, err))
	case runtime.IsNotRegisteredError(err):
		obj = nil
	default:
		return nil, nil, de.with(de.Item, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err))
	}
	switch obj.(type) {
	case *networking_v1.IngressClass, *networking_v1.Ingress, *core_v1.Service,
		*discovery_v1.EndpointSlice, *core_v1.Secret, *core_v1.Node, *core_v1.ConfigMap:
	default:
		if want, ok := Supported[tm.Kind]; ok {
			return nil, nil, de.with(de.Item, fmt.Errorf("%s %s is not supported: use apiVersion %s", tm.APIVersion, tm.Kind, want))
		}
		return nil, append(warnings, fmt.Sprintf("%s: %s %s is not a kind zonal reads; ignored", de.where(), tm.APIVersion, tm.Kind)), nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, de.with(de.Item, err)
	}
	if m.GetName() == "" {
		return nil, nil, de.with(de.Item, fmt.Errorf("%s without metadata.name", tm.Kind))
	}
	warnings = append(warnings, applyDefaults(obj, de.where())...)
	return &sourced{
		obj:   obj,
		key:   objectKey{Kind: tm.Kind, Namespace: m.GetNamespace(), Name: m.GetName()},
		where: de.where(),
	}, warnings, nil
}

// applyDefaults does for obj what an API server would do to the fields the
// controller reads: the namespace, Secret stringData, and the defaults of
// Service and EndpointSlice ports. It returns warnings about objects the
// controller will not be able to use.
func applyDefaults(obj runtime.Object, where string) []string {
	m, _ := meta.Accessor(obj)
	switch obj.(type) {
	case *networking_v1.IngressClass, *core_v1.Node:
		m.SetNamespace("") // cluster-scoped: an API server ignores it too
	default:
		if m.GetNamespace() == "" {
			m.SetNamespace(meta_v1.NamespaceDefault)
		}
	}
	var warnings []string
	switch o := obj.(type) {
	case *core_v1.Secret:
		if o.Type == "" {
			o.Type = core_v1.SecretTypeOpaque
		}
		for k, v := range o.StringData {
			if o.Data == nil {
				o.Data = map[string][]byte{}
			}
			o.Data[k] = []byte(v)
		}
		o.StringData = nil
	case *core_v1.Service:
		if o.Spec.Type == "" {
			o.Spec.Type = core_v1.ServiceTypeClusterIP
		}
		for i := range o.Spec.Ports {
			p := &o.Spec.Ports[i]
			if p.Protocol == "" {
				p.Protocol = core_v1.ProtocolTCP
			}
			if p.TargetPort == (intstr.IntOrString{}) {
				p.TargetPort = intstr.FromInt32(p.Port)
			}
		}
	case *discovery_v1.EndpointSlice:
		for i := range o.Ports {
			if o.Ports[i].Protocol == nil {
				tcp := core_v1.ProtocolTCP
				o.Ports[i].Protocol = &tcp
			}
		}
		if o.Labels[discovery_v1.LabelServiceName] == "" {
			warnings = append(warnings, fmt.Sprintf("%s: EndpointSlice %s/%s has no label %s, so it belongs to no Service and is not used",
				where, o.Namespace, o.Name, discovery_v1.LabelServiceName))
		}
	}
	return warnings
}
