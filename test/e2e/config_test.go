package e2e

import (
	"strings"
	"testing"

	"github.com/zonal-ingress/zonal/test/harness"
)

// upstreamTemplate is a minimal nginx.conf whose zonal upstream block is
// the test's .Vars.upstream.
const upstreamTemplate = `
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log notice;
events {
    worker_connections 64;
}
http {
    zonal_table {{.TableDir}};
    upstream zonal_balancer {
{{.Vars.upstream}}
    }
    server {
        listen 127.0.0.1:{{.Port}};
        location / {
            set $zonal_backend default-echo-80;
            proxy_pass http://zonal_balancer;
        }
    }
}
`

// nginx -t rejects an upstream block that mixes zonal_upstream with what
// it cannot honour, with the module's own explanation.
func TestConfigRejected(t *testing.T) {
	t.Parallel()
	const (
		serverLines = `takes its peers from the endpoint table, remove the "server" lines`
		mustBeFirst = `"zonal_upstream" must come first in the upstream block`
	)
	tests := map[string]struct {
		upstream string
		want     string // in the output; "" means the configuration is fine
	}{
		"zonal upstream with keepalive": {
			upstream: "zonal_upstream $zonal_backend max_fails=2 fail_timeout=5s;\nkeepalive 16;",
		},
		"server line after zonal_upstream": {
			upstream: "zonal_upstream $zonal_backend;\nserver 127.0.0.2:80;",
			want:     serverLines,
		},
		"server line before zonal_upstream": {
			upstream: "server 127.0.0.2:80;\nzonal_upstream $zonal_backend;",
			want:     serverLines,
		},
		"keepalive before zonal_upstream": {
			upstream: "keepalive 16;\nzonal_upstream $zonal_backend;",
			want:     mustBeFirst,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := harness.CheckConfig(t, harness.Config{
				Template: upstreamTemplate,
				Vars:     map[string]any{"upstream": tc.upstream},
			})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("nginx -t failed: %v\n%s", err, out)
			case tc.want == "" && !strings.Contains(out, "test is successful"):
				t.Fatalf("nginx -t says:\n%s", out)
			case tc.want != "" && err == nil:
				t.Fatalf("nginx -t accepted the upstream block:\n%s\noutput:\n%s", tc.upstream, out)
			case tc.want != "" && !strings.Contains(out, tc.want):
				t.Fatalf("nginx -t failed without the module's message %q:\n%s", tc.want, out)
			}
		})
	}
}
