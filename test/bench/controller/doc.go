// Package controllerbench measures the zonal controller as a whole: the
// model and nginx.conf for a big cluster, the controller's memory at that
// size, and the time from an EndpointSlice change to the first request the
// new endpoint serves, through a (fake) API server and through local mode's
// files. It holds only benchmarks, which print figures and never fail on
// speed:
//
//	go test -run '^$' -bench . -benchtime 1x ./test/bench/controller/
//
// The benchmarks that run NGINX need bin/nginx (make build).
package controllerbench
