#!/usr/bin/env bash
# make run: the zonal data plane on one machine, no cluster needed.
#
# Six backends in three zones (one NGINX serving 127.0.0.11-16), an NGINX with
# the zonal module in front of them on 127.0.0.1:${ZONAL_DEMO_PORT:-8080},
# and an endpoint table published with `bin/zonal table publish`. The proxy
# pretends to run in zone-a. Edit a table file and publish it again to watch
# traffic move with no reload.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
port=${ZONAL_DEMO_PORT:-8080}
backend_port=${ZONAL_DEMO_BACKEND_PORT:-18080}
nginx=$top/bin/nginx
zonal=$top/bin/zonal
run=$(mktemp -d /tmp/zonal-demo.XXXXXX)
# NGINX workers run as an unprivileged user when the master is root.
chmod 755 "$run"

cleanup() {
	for pidfile in "$run"/backends/nginx.pid "$run"/proxy/nginx.pid; do
		[[ -f $pidfile ]] && kill -QUIT "$(cat "$pidfile")" 2>/dev/null || true
	done
	sleep 0.3
	rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

mkdir -p "$run/backends/logs" "$run/proxy/logs" "$run/table"

# The backends: each answers with its zone and address.
{
	echo "worker_processes 1; pid nginx.pid; error_log logs/error.log;"
	echo "events { worker_connections 256; }"
	echo "http { access_log off;"
	n=0
	for zone in zone-a zone-b zone-c; do
		for _ in 1 2; do
			ip=127.0.0.$((11 + n))
			echo "  server { listen $ip:$backend_port; return 200 \"$zone $ip\\n\"; }"
			n=$((n + 1))
		done
	done
	echo "}"
} >"$run/backends/nginx.conf"

cat >"$run/proxy/nginx.conf" <<CONF
worker_processes 2;
pid nginx.pid;
error_log logs/error.log notice;
events { worker_connections 1024; }
http {
    log_format zonal '\$remote_addr "\$request" \$status backend=\$zonal_backend upstream=\$upstream_addr';
    access_log logs/access.log zonal;

    zonal_table $run/table;

    upstream zonal_balancer {
        zonal_upstream \$zonal_backend;
        keepalive 16;
    }

    server {
        listen 127.0.0.1:$port;

        location / {
            set \$zonal_backend demo-echo-80;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://zonal_balancer;
        }

        location /spill {
            set \$zonal_backend demo-spill-80;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://zonal_balancer;
        }
    }
}
CONF

peer() { # address zone preferred
	printf '{"address": "%s", "port": %d, "zone": "%s", "preferred": %s, "ready": true}' "$1" "$backend_port" "$2" "$3"
}
peers() {
	printf '%s,\n' "$(peer 127.0.0.11 zone-a true)" "$(peer 127.0.0.12 zone-a true)" \
		"$(peer 127.0.0.13 zone-b false)" "$(peer 127.0.0.14 zone-b false)" \
		"$(peer 127.0.0.15 zone-c false)"
	peer 127.0.0.16 zone-c false
}
cat >"$run/table.json" <<JSON
{
  "zone": "zone-a",
  "backends": [
    {"name": "demo-echo-80", "localShare": 10000, "peers": [
$(peers)
    ]},
    {"name": "demo-spill-80", "localShare": 6000, "spill": {"zone-b": 5000, "zone-c": 5000}, "peers": [
$(peers)
    ]}
  ]
}
JSON

"$nginx" -p "$run/backends" -c nginx.conf
"$zonal" table publish --dir "$run/table" "$run/table.json"
"$nginx" -p "$run/proxy" -c nginx.conf

cat <<TXT

zonal demo is running (the proxy thinks it is in zone-a). Try:

  curl http://127.0.0.1:$port/          # always zone-a: local share 100 %
  for i in \$(seq 20); do curl -s http://127.0.0.1:$port/spill; done | sort | uniq -c
                                        # 60 % zone-a, the rest split b/c

  $zonal table dump --dir $run/table --backend demo-echo-80

Change the table and publish it; the next request follows, with no reload:

  \$EDITOR $run/table.json
  $zonal table publish --dir $run/table $run/table.json

Access log: $run/proxy/logs/access.log. Ctrl-C stops everything.
TXT

while kill -0 "$(cat "$run/proxy/nginx.pid")" 2>/dev/null; do sleep 1; done
echo "the proxy NGINX stopped; see $run/proxy/logs/error.log" >&2
