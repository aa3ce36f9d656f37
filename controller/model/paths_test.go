package model

import (
	"strings"
	"testing"
)

func TestPathError(t *testing.T) {
	cases := map[string]struct {
		path  string
		valid bool
	}{
		"root":                   {"/", true},
		"elements":               {"/api/v1/users", true},
		"trailing slash":         {"/api/", true},
		"unreserved":             {"/a-b_c.d~e", true},
		"sub-delimiters":         {"/!&()*+,=:@", true},
		"dot inside an element":  {"/file.tar.gz", true},
		"dots inside an element": {"/...", true},
		"1024 characters":        {"/" + strings.Repeat("a", 1023), true},
		"1025 characters":        {"/" + strings.Repeat("a", 1024), false},
		"relative":               {"api", false},
		"empty":                  {"", false},
		"empty element":          {"/api//v1", false},
		"double slash at end":    {"/api//", false},
		"dot element":            {"/api/./v1", false},
		"dot-dot element":        {"/api/../admin", false},
		"trailing dot":           {"/api/.", false},
		"trailing dot-dot":       {"/api/..", false},
		"semicolon":              {"/api;", false},
		"double quote":           {`/api"`, false},
		"single quote":           {"/api'", false},
		"dollar":                 {"/api$", false},
		"open brace":             {"/api{", false},
		"close brace":            {"/api}", false},
		"hash":                   {"/api#top", false},
		"backslash":              {`/api\x`, false},
		"percent":                {"/api%20x", false},
		"question mark":          {"/api?x=1", false},
		"space":                  {"/api x", false},
		"tab":                    {"/api\tx", false},
		"newline":                {"/api\nx", false},
		"control character":      {"/api\x01", false},
		"DEL":                    {"/api\x7f", false},
		"regex":                  {"/api/(.*)$", false},
		"non-ASCII":              {"/bücher", false},
		"angle bracket":          {"/<script>", false},
		"caret and pipe":         {"/a^b|c", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reason := pathError(tc.path)
			if (reason == "") != tc.valid {
				t.Errorf("pathError(%q) = %q, want valid=%t", tc.path, reason, tc.valid)
			}
		})
	}
}

// pathIngress is an Ingress for shop.example.com with one path per entry,
// each "pathType path service": pathType "-" for none, path as a YAML
// scalar (quoted where YAML needs it).
func pathIngress(name, created string, paths ...string) string {
	var sb strings.Builder
	sb.WriteString(`
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ` + name + `
  creationTimestamp: "` + created + `"
spec:
  ingressClassName: zonal
  rules:
  - host: shop.example.com
    http:
      paths:`)
	for _, p := range paths {
		f := strings.Fields(p)
		sb.WriteString("\n      - path: " + f[1])
		if f[0] != "-" {
			sb.WriteString("\n        pathType: " + f[0])
		}
		sb.WriteString(`
        backend:
          service:
            name: ` + f[2] + `
            port:
              number: 80`)
	}
	return sb.String() + "\n"
}

func TestPaths(t *testing.T) {
	runCases(t, map[string]buildCase{
		"Exact is one exact block": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "Exact /cart web"),
			want: `
				server shop.example.com
				  = /cart -> default-web-80 (default/shop Exact)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"Exact keeps a trailing slash": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "Exact /cart/ web"),
			want: `
				server shop.example.com
				  = /cart/ -> default-web-80 (default/shop Exact)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"Prefix matches whole elements: an exact and a prefix block": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "Prefix /cart web"),
			want: `
				server shop.example.com
				  = /cart -> default-web-80 (default/shop Prefix)
				   /cart/ -> default-web-80 (default/shop Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"Prefix ignores a trailing slash": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "Prefix /cart/ web"),
			want: `
				server shop.example.com
				  = /cart -> default-web-80 (default/shop Prefix)
				   /cart/ -> default-web-80 (default/shop Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"Prefix / is the prefix block /": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "Prefix / web"),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"ImplementationSpecific is NGINX's prefix block": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "ImplementationSpecific /cart web"),
			want: `
				server shop.example.com
				   /cart -> default-web-80 (default/shop ImplementationSpecific)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"no pathType is ImplementationSpecific": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "- /cart web"),
			want: `
				server shop.example.com
				   /cart -> default-web-80 (default/shop ImplementationSpecific)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"empty Prefix path is /": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", `Prefix "" web`),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"empty ImplementationSpecific path is /": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", `ImplementationSpecific "" api`),
			want: `
				server shop.example.com
				   / -> default-api-80 (default/shop ImplementationSpecific)
				backend default-api-80 default/api:80
				  10.0.2.1:9090 zone=zone-b node=node-b ready
			`,
		},
		"Exact with an empty path is a problem": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", `Exact "" web`, "Prefix / web"),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/shop spec.rules[0].http.paths[0].path
			`,
			says: []string{`path "" does not start with '/'`},
		},
		"Exact beats the exact block of Prefix on the same path, in one Ingress": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "Prefix /cart web", "Exact /cart api"),
			want: `
				server shop.example.com
				  = /cart -> default-api-80 (default/shop Exact)
				   /cart/ -> default-web-80 (default/shop Prefix)
				backend default-api-80 default/api:80
				  10.0.2.1:9090 zone=zone-b node=node-b ready
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"Exact in a newer Ingress beats the exact block of an older Prefix": {
			objs: pathIngress("old", "2025-01-01T00:00:00Z", "Prefix /cart web") + "---" +
				pathIngress("new", "2025-02-01T00:00:00Z", "Exact /cart api"),
			want: `
				server shop.example.com
				  = /cart -> default-api-80 (default/new Exact)
				   /cart/ -> default-web-80 (default/old Prefix)
				backend default-api-80 default/api:80
				  10.0.2.1:9090 zone=zone-b node=node-b ready
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"an older Exact keeps its block against a newer Prefix": {
			objs: pathIngress("old", "2025-01-01T00:00:00Z", "Exact /cart api") + "---" +
				pathIngress("new", "2025-02-01T00:00:00Z", "Prefix /cart web"),
			want: `
				server shop.example.com
				  = /cart -> default-api-80 (default/old Exact)
				   /cart/ -> default-web-80 (default/new Prefix)
				backend default-api-80 default/api:80
				  10.0.2.1:9090 zone=zone-b node=node-b ready
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"same host and path in two Ingresses: the oldest wins, the newer is a problem": {
			objs: pathIngress("new", "2025-02-01T00:00:00Z", "Prefix /cart api") + "---" +
				pathIngress("old", "2025-01-01T00:00:00Z", "Prefix /cart/ web"),
			want: `
				server shop.example.com
				  = /cart -> default-web-80 (default/old Prefix)
				   /cart/ -> default-web-80 (default/old Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/new spec.rules[0].http.paths[0].path
			`,
			says: []string{`path "/cart" (Prefix) on host shop.example.com is already routed to default-web-80 by Ingress default/old, which is older`},
		},
		"same creationTimestamp: namespace/name decides": {
			objs: pathIngress("b", "2025-01-01T00:00:00Z", "Exact /cart api") + "---" +
				pathIngress("a", "2025-01-01T00:00:00Z", "Exact /cart web"),
			want: `
				server shop.example.com
				  = /cart -> default-web-80 (default/a Exact)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/b spec.rules[0].http.paths[0].path
			`,
		},
		"a conflict on rules without a host": {
			objs: `
				apiVersion: networking.k8s.io/v1
				kind: Ingress
				metadata:
				  name: catch-all
				spec:
				  ingressClassName: zonal
				  rules:
				  - http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: web
				            port:
				              number: 80
				  - http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: api
				            port:
				              number: 80
			`,
			want: `
				server ""
				   / -> default-web-80 (default/catch-all Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/catch-all spec.rules[1].http.paths[0].path
			`,
			says: []string{`path "/" (Prefix) on rules without a host is already routed to default-web-80 by an earlier path of this Ingress`},
		},
		"a repeated path within one Ingress: the first wins": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "ImplementationSpecific /cart web", "- /cart api"),
			want: `
				server shop.example.com
				   /cart -> default-web-80 (default/shop ImplementationSpecific)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/shop spec.rules[0].http.paths[1].path
			`,
			says: []string{"by an earlier path of this Ingress"},
		},
		"the same route twice is no conflict": {
			objs: pathIngress("old", "2025-01-01T00:00:00Z", "Prefix /cart web") + "---" +
				pathIngress("new", "2025-02-01T00:00:00Z", "Prefix /cart web"),
			want: `
				server shop.example.com
				  = /cart -> default-web-80 (default/old Prefix)
				   /cart/ -> default-web-80 (default/old Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"paths of several Ingresses for one host are merged": {
			objs: pathIngress("cart", "2025-01-01T00:00:00Z", "Prefix /cart web") + "---" +
				pathIngress("api", "2025-02-01T00:00:00Z", "Prefix /api api", "ImplementationSpecific /cart/ api"),
			want: `
				server shop.example.com
				  = /api -> default-api-80 (default/api Prefix)
				   /api/ -> default-api-80 (default/api Prefix)
				  = /cart -> default-web-80 (default/cart Prefix)
				   /cart/ -> default-web-80 (default/cart Prefix)
				backend default-api-80 default/api:80
				  10.0.2.1:9090 zone=zone-b node=node-b ready
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/api spec.rules[0].http.paths[1].path
			`,
		},
		"bad paths are left out, the rest of the Ingress is served": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z",
				"Prefix /ok web",
				`Prefix "/a;b" web`,
				`Exact "/a'b" web`,
				`Prefix "/a\"b" web`,
				`Prefix "/a$b" web`,
				`Prefix "/a{b" web`,
				`Prefix "/a}b" web`,
				`Prefix "/a#b" web`,
				`Prefix "/a\\b" web`,
				`Prefix "/a%2Fb" web`,
				`Prefix "/a//b" web`,
				`Prefix "/a/../b" web`,
				`Prefix "/a/./b" web`,
				`Prefix "relative" web`,
				`Prefix "/a\tb" web`,
				`Prefix "/a\x01b" web`,
				`Prefix "/(.*)$" web`,
			),
			want: `
				server shop.example.com
				  = /ok -> default-web-80 (default/shop Prefix)
				   /ok/ -> default-web-80 (default/shop Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/shop spec.rules[0].http.paths[10].path
				problem Ingress default/shop spec.rules[0].http.paths[11].path
				problem Ingress default/shop spec.rules[0].http.paths[12].path
				problem Ingress default/shop spec.rules[0].http.paths[13].path
				problem Ingress default/shop spec.rules[0].http.paths[14].path
				problem Ingress default/shop spec.rules[0].http.paths[15].path
				problem Ingress default/shop spec.rules[0].http.paths[16].path
				problem Ingress default/shop spec.rules[0].http.paths[1].path
				problem Ingress default/shop spec.rules[0].http.paths[2].path
				problem Ingress default/shop spec.rules[0].http.paths[3].path
				problem Ingress default/shop spec.rules[0].http.paths[4].path
				problem Ingress default/shop spec.rules[0].http.paths[5].path
				problem Ingress default/shop spec.rules[0].http.paths[6].path
				problem Ingress default/shop spec.rules[0].http.paths[7].path
				problem Ingress default/shop spec.rules[0].http.paths[8].path
				problem Ingress default/shop spec.rules[0].http.paths[9].path
			`,
			says: []string{
				`path "/a;b" contains ';'`,
				`path "/a'b" contains '\''`,
				`path "/a\"b" contains '"'`,
				`path "/a$b" contains '$'`,
				`path "/a{b" contains '{'`,
				`path "/a}b" contains '}'`,
				`path "/a#b" contains '#'`,
				`path "/a\\b" contains '\\'`,
				`path "/a%2Fb" contains '%'`,
				`path "/a//b" has an empty element`,
				`path "/a/../b" has a "." or ".." element`,
				`path "/a/./b" has a "." or ".." element`,
				`path "relative" does not start with '/'`,
				`path "/a\tb" contains '\t'`,
				`path "/a\x01b" contains '\x01'`,
				`path "/(.*)$" contains '$'`,
			},
		},
		"an unknown pathType is a problem": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "Regex /cart web", "Exact /ok web"),
			want: `
				server shop.example.com
				  = /ok -> default-web-80 (default/shop Exact)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/shop spec.rules[0].http.paths[0].pathType
			`,
			says: []string{`pathType "Regex" is not one of Exact, Prefix, ImplementationSpecific`},
		},
	})
}
