// Package conf holds the nginx.conf template that controller/nginx renders,
// embedded in the zonal binary, together with the functions the template
// uses to emit strings that come from users (hosts, paths, backend names).
//
// Those strings were validated by the model against a strict grammar before
// they get here. The functions check them again against an even smaller
// character set and quote them: a string that could break out of its
// argument, start a comment, name a variable or end a directive makes the
// template fail instead of producing a configuration NGINX would read
// differently from what the model meant. Quoting is the second line of
// defence, never the first.
package conf

import (
	_ "embed"
	"fmt"
	"strings"
	"text/template"
)

//go:embed nginx.conf.tmpl
var nginxConfText string

var nginxConf = template.Must(template.New("nginx.conf").
	Option("missingkey=error").
	Funcs(Funcs()).
	Parse(nginxConfText))

// NginxConf returns the parsed nginx.conf template. Its data is
// controller/nginx's view of a model; executing it is safe for concurrent
// use.
func NginxConf() *template.Template { return nginxConf }

// Funcs returns the template functions of NginxConf. Each returns an error
// for a string outside its character set, so that execution stops there.
//
//	serverName  "example.com" → "example.com"; "*.example.com" → a regex
//	            that matches exactly one more label
//	path        a location path: '/' then [A-Za-z0-9/-._~%!&()*+,=:@]
//	name        a backend name: [A-Za-z0-9._-]
//	file        an absolute file name: '/' then [A-Za-z0-9/._+,=:@~-]
//	user        the "user" directive's arguments: one or two names
//	comment     the text of a comment: printable ASCII, no line break
func Funcs() template.FuncMap {
	return template.FuncMap{
		"serverName": ServerName,
		"path":       Path,
		"name":       Name,
		"file":       File,
		"user":       User,
		"comment":    Comment,
	}
}

// ServerName returns the quoted server_name argument for host: the name
// itself, or for a wildcard "*.example.com" the regex
// "~^[^.]+\.example\.com$", because an Ingress wildcard matches exactly one
// DNS label while NGINX's own "*.example.com" matches any number.
func ServerName(host string) (string, error) {
	rest, wildcard := strings.CutPrefix(host, "*.")
	if err := checkHostname(rest); err != nil {
		return "", fmt.Errorf("server name %q: %w", host, err)
	}
	if !wildcard {
		return quote(rest), nil
	}
	return quote(`~^[^.]+\.` + strings.ReplaceAll(rest, ".", `\.`) + `$`), nil
}

// checkHostname accepts lowercase RFC 1123 names: dot-separated labels of
// letters, digits and inner hyphens, each at most 63 bytes, 253 in all.
func checkHostname(s string) error {
	if s == "" {
		return fmt.Errorf("empty name")
	}
	if len(s) > 253 {
		return fmt.Errorf("longer than 253 bytes")
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("label %q is empty or longer than 63 bytes", label)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", label)
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !isLower(c) && !isDigit(c) && c != '-' {
				return fmt.Errorf("byte %q is not a lowercase letter, digit or '-'", c)
			}
		}
	}
	return nil
}

// Path returns the quoted location path p.
func Path(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q does not start with '/'", p)
	}
	if err := checkBytes(p, "/-._~%!&()*+,=:@"); err != nil {
		return "", fmt.Errorf("path %q: %w", p, err)
	}
	return quote(p), nil
}

// Name returns the quoted name s, a backend name.
func Name(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty name")
	}
	if err := checkBytes(s, "._-"); err != nil {
		return "", fmt.Errorf("name %q: %w", s, err)
	}
	return quote(s), nil
}

// File returns the quoted absolute file name f.
func File(f string) (string, error) {
	if !strings.HasPrefix(f, "/") {
		return "", fmt.Errorf("file name %q is not absolute", f)
	}
	if err := checkBytes(f, "/._+,=:@~-"); err != nil {
		return "", fmt.Errorf("file name %q: %w", f, err)
	}
	return quote(f), nil
}

// User returns the arguments of the "user" directive: a user name and
// optionally a group name, separated by one space, each quoted.
func User(s string) (string, error) {
	fields := strings.Split(s, " ")
	if len(fields) > 2 {
		return "", fmt.Errorf("user %q: want a user and at most a group", s)
	}
	for i, f := range fields {
		if f == "" {
			return "", fmt.Errorf("user %q: empty name", s)
		}
		if err := checkBytes(f, "._-"); err != nil {
			return "", fmt.Errorf("user %q: %w", s, err)
		}
		fields[i] = quote(f)
	}
	return strings.Join(fields, " "), nil
}

// Comment returns s for the text of a "#" comment, which only a line break
// could end: it refuses bytes outside printable ASCII.
func Comment(s string) (string, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return "", fmt.Errorf("comment %q: byte %q at %d is not printable ASCII", s, c, i)
		}
	}
	return s, nil
}

// checkBytes accepts ASCII letters, digits and the bytes of extra.
func checkBytes(s, extra string) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isLower(c) || isDigit(c) || ('A' <= c && c <= 'Z') || strings.IndexByte(extra, c) >= 0 {
			continue
		}
		return fmt.Errorf("byte %q at %d is not allowed", c, i)
	}
	return nil
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// quote wraps s, already checked to hold neither '"' nor '\\', in double
// quotes: NGINX then reads it as one argument whatever else it holds.
func quote(s string) string { return `"` + s + `"` }
