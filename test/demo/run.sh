#!/usr/bin/env bash
# make run: zonal on one machine, no cluster needed.
#
# Six backends in three zones (one NGINX serving 127.0.0.11-16), and the
# zonal controller in local mode: it reads Kubernetes objects from a copy of
# test/demo/manifests, publishes the endpoint table and runs NGINX with the
# zonal module on 127.0.0.1:${ZONAL_DEMO_PORT:-8080}. Edit the copied
# manifests and save: endpoint changes apply without a reload, Ingress
# changes with one.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
port=${ZONAL_DEMO_PORT:-8080}
tls_port=${ZONAL_DEMO_TLS_PORT:-8443}
backend_port=18080 # the demo manifests' EndpointSlices name this port
nginx=$top/bin/nginx
zonal=$top/bin/zonal
run=$(mktemp -d /tmp/zonal-demo.XXXXXX)
# NGINX workers run as an unprivileged user when the master is root.
chmod 755 "$run"

cleanup() {
	[[ -f $run/backends/nginx.pid ]] && kill -QUIT "$(cat "$run/backends/nginx.pid")" 2>/dev/null || true
	rm -rf "$run"
}
trap cleanup EXIT

mkdir -p "$run/backends/logs" "$run/manifests"
cp "$top"/test/demo/manifests/*.yaml "$run/manifests/"

# The backends: each answers with its zone, address and the request URI.
{
	echo "worker_processes 1; pid nginx.pid; error_log logs/error.log;"
	echo "events { worker_connections 256; }"
	echo "http { access_log off;"
	n=0
	for zone in zone-a zone-b zone-c; do
		for _ in 1 2; do
			ip=127.0.0.$((11 + n))
			echo "  server { listen $ip:$backend_port; return 200 \"$zone $ip \$request_uri\\n\"; }"
			n=$((n + 1))
		done
	done
	echo "}"
} >"$run/backends/nginx.conf"
"$nginx" -p "$run/backends" -c nginx.conf

cat <<TXT
zonal demo: the controller runs in local mode on $run/manifests, in
zone-a, with --zone-mode local: requests stay in zone-a while it has ready
endpoints. Try, in another terminal:

  curl -H 'Host: shop.example' http://127.0.0.1:$port/          # Service web
  curl -H 'Host: shop.example' http://127.0.0.1:$port/api/items # Service api
  curl http://127.0.0.1:$port/healthz                           # no host: Exact path
  bin/zonal table dump --dir $run/runtime/table                 # what the workers read
  bin/zonal dbg backends list --query 'backends.#.name'         # the controller's view
  curl -s http://127.0.0.1:10254/metrics | grep zonal_upstream  # picks by locality

Then edit $run/manifests/services.yaml (say, remove the zone-a
endpoint of web) and save: within a second requests spill to the other
zones, with no reload; put it back and they return.
Ctrl-C stops everything.

TXT

"$zonal" controller \
	--manifests "$run/manifests" \
	--runtime-dir "$run/runtime" \
	--bind-address 127.0.0.1 \
	--http-port "$port" \
	--https-port "$tls_port" \
	--zone zone-a \
	--zone-mode local \
	--metrics-address 127.0.0.1:10254 \
	--nginx-binary "$nginx"
