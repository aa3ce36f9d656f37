package model

import (
	"fmt"
	"strings"

	networking_v1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Path grammar and location blocks. A path reaches nginx.conf as a location,
// so it is checked against a strict grammar rather than escaped. NGINX
// matches the decoded, normalized URI, so a path with percent-escapes, "."
// or ".." elements or "//" could never match, and quotes, ';', '{', '}',
// '$', '#', '\' or whitespace could change the meaning of the configuration.

const maxPathLen = 1024

// pathChars are the bytes a path may hold: RFC 3986 unreserved characters,
// the sub-delimiters that are harmless in nginx.conf, ':', '@' and '/'.
var pathChars = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "._~!&()*+,=:@/-" {
		t[c] = true
	}
	return t
}()

// pathError says what is wrong with a path, "" if it is valid. It allocates
// only for an invalid path.
func pathError(p string) string {
	switch {
	case p == "" || p[0] != '/':
		return "does not start with '/'"
	case len(p) > maxPathLen:
		return "is longer than 1024 characters"
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; !pathChars[c] {
			return fmt.Sprintf("contains %q, which is not allowed (allowed: letters, digits and ._~!&()*+,=:@/-)", c)
		}
	}
	// Elements between slashes; the element after a trailing slash is empty
	// and allowed.
	for start := 1; start <= len(p); {
		end := strings.IndexByte(p[start:], '/')
		if end < 0 {
			end = len(p)
		} else {
			end += start
		}
		switch p[start:end] {
		case "":
			if end != len(p) {
				return "has an empty element (\"//\")"
			}
		case ".", "..":
			return "has a \".\" or \"..\" element"
		}
		start = end + 1
	}
	return ""
}

// block identifies a location block within a server.
type block struct {
	exact bool
	path  string
}

// claim is a location block with the rule that asked for it.
type claim struct {
	loc     Location
	backend *backend
	// fromPrefix marks the exact block of a Prefix path, which yields to an
	// Exact path whatever their ages.
	fromPrefix bool
}

// pathRef locates an Ingress path for problems.
type pathRef struct {
	ing  *networking_v1.Ingress
	rule int
	path int
}

func (r pathRef) field(suffix string) string {
	return fmt.Sprintf("spec.rules[%d].http.paths[%d]%s", r.rule, r.path, suffix)
}

// addPath turns one Ingress path into location blocks of srv. Ingresses
// arrive oldest first, so a block already taken belongs to an older Ingress
// (or an earlier path of the same one) and keeps it.
func (b *builder) addPath(srv *server, ref pathRef, p *networking_v1.HTTPIngressPath) {
	pathType := networking_v1.PathTypeImplementationSpecific
	if p.PathType != nil {
		pathType = *p.PathType
	}
	switch pathType {
	case networking_v1.PathTypeExact, networking_v1.PathTypePrefix, networking_v1.PathTypeImplementationSpecific:
	default:
		b.ingressProblem(ref.ing, ref.field(".pathType"),
			"pathType %q is not one of Exact, Prefix, ImplementationSpecific; the path is left out", pathType)
		return
	}
	path := p.Path
	if path == "" && pathType != networking_v1.PathTypeExact {
		path = "/"
	}
	if reason := pathError(path); reason != "" {
		b.ingressProblem(ref.ing, ref.field(".path"),
			"path %q %s; the path is left out: fix the path", path, reason)
		return
	}
	be := b.resolve(ref.ing, &p.Backend, "the path", func(suffix string) string { return ref.field(".backend" + suffix) })
	if be == nil {
		return
	}
	loc := Location{
		Backend:  be.name,
		Ingress:  types.NamespacedName{Namespace: ref.ing.Namespace, Name: ref.ing.Name},
		PathType: string(pathType),
	}
	var lost *claim
	switch pathType {
	case networking_v1.PathTypeExact:
		loc.Exact, loc.Path = true, path
		lost = srv.claim(claim{loc: loc, backend: be})
	case networking_v1.PathTypePrefix:
		// Whole path elements: /foo is "= /foo" plus "/foo/", so that
		// /foobar never matches. A trailing slash changes nothing.
		trimmed := strings.TrimRight(path, "/")
		if trimmed == "" {
			loc.Path = "/"
			lost = srv.claim(claim{loc: loc, backend: be})
			break
		}
		loc.Exact, loc.Path = true, trimmed
		lost = srv.claim(claim{loc: loc, backend: be, fromPrefix: true})
		loc.Exact = false
		if len(path) > len(trimmed) {
			loc.Path = path // already trimmed + "/", as "//" is invalid
		} else {
			loc.Path = trimmed + "/"
		}
		if l := srv.claim(claim{loc: loc, backend: be}); lost == nil {
			lost = l
		}
	default: // ImplementationSpecific: NGINX's own prefix match.
		loc.Path = path
		lost = srv.claim(claim{loc: loc, backend: be})
	}
	if lost != nil {
		by := "an earlier path of this Ingress"
		if lost.loc.Ingress != loc.Ingress {
			by = "Ingress " + lost.loc.Ingress.String() + ", which is older"
		}
		b.ingressProblem(ref.ing, ref.field(".path"),
			"path %q (%s) on %s is already routed to %s by %s; the path is left out: use another path or host, or remove one of the two",
			p.Path, pathType, hostPhrase(srv.host), lost.loc.Backend, by)
	}
}

// claim takes a location block for c unless an older rule holds it, and
// returns the holder that c lost to, nil if c was placed or lost to nothing
// a user would call a conflict: an Exact path beats the exact block of a
// Prefix path whatever their ages, and a duplicate that routes to the same
// backend changes nothing.
func (srv *server) claim(c claim) *claim {
	k := block{exact: c.loc.Exact, path: c.loc.Path}
	i, taken := srv.blocks[k]
	if !taken {
		srv.blocks[k] = len(srv.claims)
		srv.claims = append(srv.claims, c)
		return nil
	}
	held := &srv.claims[i]
	switch {
	case held.fromPrefix && !c.fromPrefix && c.loc.PathType == string(networking_v1.PathTypeExact):
		*held = c
		return nil
	case c.fromPrefix && !held.fromPrefix && held.loc.PathType == string(networking_v1.PathTypeExact):
		return nil
	case held.backend == c.backend:
		return nil
	}
	return held
}

func hostPhrase(host string) string {
	if host == "" {
		return "rules without a host"
	}
	return "host " + host
}
