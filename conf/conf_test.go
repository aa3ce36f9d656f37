package conf

import (
	"strings"
	"testing"
)

func TestFuncs(t *testing.T) {
	type call struct {
		fn   func(string) (string, error)
		in   string
		want string // "" for an error
	}
	cases := map[string]call{
		"host":                  {ServerName, "example.com", `"example.com"`},
		"host with digits":      {ServerName, "a-1.example.com", `"a-1.example.com"`},
		"wildcard: one label":   {ServerName, "*.example.com", `"~^[^.]+\.example\.com$"`},
		"bare wildcard":         {ServerName, "*", ""},
		"wildcard inside":       {ServerName, "a.*.example.com", ""},
		"trailing wildcard":     {ServerName, "example.*", ""},
		"regex":                 {ServerName, "~^.*$", ""},
		"upper case":            {ServerName, "Example.com", ""},
		"leading hyphen":        {ServerName, "-a.com", ""},
		"trailing dot":          {ServerName, "a.com.", ""},
		"label of 64":           {ServerName, strings.Repeat("a", 64) + ".com", ""},
		"semicolon in host":     {ServerName, "a.com;", ""},
		"path":                  {Path, "/api/v1/items", `"/api/v1/items"`},
		"path with sub-delims":  {Path, "/a-b_c.d~e%20f!g&h(i)j*k+l,m=n:o@p", `"/a-b_c.d~e%20f!g&h(i)j*k+l,m=n:o@p"`},
		"path not absolute":     {Path, "api", ""},
		"path with a quote":     {Path, `/a"`, ""},
		"path with a variable":  {Path, "/$uri", ""},
		"path with a space":     {Path, "/a b", ""},
		"path with a brace":     {Path, "/}", ""},
		"path with a hash":      {Path, "/#", ""},
		"path with a query":     {Path, "/a?b", ""},
		"path with a tab":       {Path, "/a\tb", ""},
		"path not ASCII":        {Path, "/é", ""},
		"name":                  {Name, "default-web-80", `"default-web-80"`},
		"name with a dot":       {Name, "ns-svc.x-http", `"ns-svc.x-http"`},
		"empty name":            {Name, "", ""},
		"name with a slash":     {Name, "a/b", ""},
		"file":                  {File, "/run/zonal/certs/a_b_0123.pem", `"/run/zonal/certs/a_b_0123.pem"`},
		"relative file":         {File, "certs/a.pem", ""},
		"file with a space":     {File, "/run/a b", ""},
		"user":                  {User, "nginx", `"nginx"`},
		"user and group":        {User, "nobody nogroup", `"nobody" "nogroup"`},
		"user, group and more":  {User, "a b c", ""},
		"user with a semicolon": {User, "root;", ""},
		"empty user":            {User, "", ""},
		"comment":               {Comment, "ingress default/web, Prefix", "ingress default/web, Prefix"},
		"comment with a break":  {Comment, "a\nuser root;", ""},
		"comment with a CR":     {Comment, "a\rb", ""},
	}
	for name, c := range cases {
		got, err := c.fn(c.in)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%s: %q gave %q, want an error", name, c.in, got)
		case c.want != "" && err != nil:
			t.Errorf("%s: %q: %v", name, c.in, err)
		case got != c.want:
			t.Errorf("%s: %q gave %q, want %q", name, c.in, got, c.want)
		}
	}
}

func TestTemplateUsesOnlyCheckedFuncs(t *testing.T) {
	if NginxConf().Lookup("nginx.conf") == nil {
		t.Fatal("the template has no nginx.conf")
	}
	// Every value the template prints from its data goes through one of
	// Funcs, except numbers and the listen arguments, which the renderer
	// builds itself.
	for _, l := range strings.Split(nginxConfText, "\n") {
		for _, action := range strings.SplitAfter(l, "}}")[:max(0, strings.Count(l, "}}"))] {
			i := strings.Index(action, "{{")
			a := strings.Trim(action[i+2:len(action)-2], "- ")
			switch {
			case strings.HasPrefix(a, "if "), strings.HasPrefix(a, "else"), a == "end",
				strings.HasPrefix(a, "range "), strings.HasPrefix(a, "with "):
			case a == ".WorkerProcesses", a == ".ServerNamesHashMaxSize", a == ".ServerNamesHashBucketSize",
				a == ".RedirectPort",
				a == ".": // inside range .Listen
			default:
				fn, _, _ := strings.Cut(a, " ")
				if _, ok := Funcs()[fn]; !ok {
					t.Errorf("template prints %q unchecked", a)
				}
			}
		}
	}
}
