package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// dbgCmd talks to a running controller's debug endpoint. It has no Run of
// its own: kong runs the subcommand's, handing it this parent.
type dbgCmd struct {
	Address string        `help:"The controller's debug endpoint, as HOST:PORT or a URL (its --debug-address)." env:"ZONAL_DEBUG_ADDRESS" default:"127.0.0.1:10246"`
	Query   string        `help:"Print only what this gjson path selects (https://github.com/tidwall/gjson/blob/master/SYNTAX.md), e.g. 'peers.#(zone==\"zone-a\")#.address': strings without quotes, arrays and objects as JSON." placeholder:"PATH" short:"q"`
	Timeout time.Duration `help:"How long to wait for the controller's answer." env:"ZONAL_DEBUG_TIMEOUT" default:"10s"`

	Backends dbgBackendsCmd `cmd:"" help:"The backends (Service ports) and their zone decisions."`
	Table    dbgTableCmd    `cmd:"" help:"The live endpoint table as NGINX workers read it (decoded by the module's own C reader)."`
	Conf     dbgConfCmd     `cmd:"" help:"The nginx.conf NGINX runs."`
	Model    dbgModelCmd    `cmd:"" help:"The model of the last sync pass: servers, locations, backends with endpoints, problems (certificates by Secret name only)."`
	Health   dbgHealthCmd   `cmd:"" help:"Liveness and readiness with what they rest on; exits 1 when the controller is unhealthy."`
}

type dbgBackendsCmd struct {
	List dbgBackendsListCmd `cmd:"" default:"1" help:"Every backend: Service, port, zone mode in effect, fallback reason, peers per zone, preferred peers, local share."`
	Get  dbgBackendsGetCmd  `cmd:"" help:"One backend: every peer (zone, readiness, preferred), the decision, the Ingresses and locations that use it."`
	All  dbgBackendsAllCmd  `cmd:"" help:"Every backend in detail, as get shows one, from one consistent sync pass."`
}

type dbgBackendsListCmd struct{}

func (dbgBackendsListCmd) Run(d *dbgCmd) error { return d.show("/debug/backends") }

type dbgBackendsGetCmd struct {
	Name string `arg:"" help:"The backend, <namespace>-<service>-<port> (see backends list)."`
}

func (c *dbgBackendsGetCmd) Run(d *dbgCmd) error {
	return d.show("/debug/backends/" + url.PathEscape(c.Name))
}

type dbgBackendsAllCmd struct{}

func (dbgBackendsAllCmd) Run(d *dbgCmd) error { return d.show("/debug/backends?peers=true") }

type dbgTableCmd struct{}

func (dbgTableCmd) Run(d *dbgCmd) error { return d.show("/debug/table") }

type dbgConfCmd struct{}

func (dbgConfCmd) Run(d *dbgCmd) error {
	if d.Query != "" {
		return errors.New("--query selects from JSON; the configuration is text (pipe it to grep instead)")
	}
	body, err := d.get("/debug/config")
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(body)
	return err
}

type dbgModelCmd struct{}

func (dbgModelCmd) Run(d *dbgCmd) error { return d.show("/debug/model") }

type dbgHealthCmd struct{}

// Run prints /healthz whatever its status, then fails if it was not 200.
func (dbgHealthCmd) Run(d *dbgCmd) error {
	status, body, err := d.fetch("/healthz")
	if err != nil {
		return err
	}
	if !json.Valid(body) {
		return d.notJSON("/healthz", status, body)
	}
	if err := d.print(body); err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("unhealthy: %s", serverError(body))
	}
	return nil
}

// show fetches path and prints its JSON answer, or the part --query
// selects.
func (d *dbgCmd) show(path string) error {
	body, err := d.get(path)
	if err != nil {
		return err
	}
	if !json.Valid(body) {
		return d.notJSON(path, http.StatusOK, body)
	}
	return d.print(body)
}

func (d *dbgCmd) print(body []byte) error {
	out := body
	if d.Query != "" {
		r := gjson.GetBytes(body, d.Query)
		if !r.Exists() {
			return fmt.Errorf("--query %q selects nothing in the answer (run without --query to see its fields)", d.Query)
		}
		if r.Type == gjson.String {
			_, err := fmt.Println(r.Str)
			return err
		}
		out = []byte(r.Raw)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, bytes.TrimSpace(out), "", "  "); err != nil {
		return fmt.Errorf("the debug endpoint's answer: %w", err)
	}
	pretty.WriteByte('\n')
	_, err := pretty.WriteTo(os.Stdout)
	return err
}

// get fetches path and turns an answer other than 200 into an error that
// carries the endpoint's own message.
func (d *dbgCmd) get(path string) ([]byte, error) {
	status, body, err := d.fetch(path)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		if msg := serverError(body); msg != "" {
			return nil, errors.New(msg)
		}
		return nil, d.notJSON(path, status, body)
	}
	return body, nil
}

// fetch GETs path from the debug endpoint.
func (d *dbgCmd) fetch(path string) (int, []byte, error) {
	base := d.base()
	client := &http.Client{Timeout: d.Timeout}
	resp, err := client.Get(base + path)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return 0, nil, fmt.Errorf("cannot reach the zonal debug endpoint at %s: %v; is the controller running, and is --address its --debug-address?", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer of the zonal debug endpoint at %s: %w", base, err)
	}
	return resp.StatusCode, body, nil
}

// base is the endpoint's URL without a trailing slash.
func (d *dbgCmd) base() string {
	addr := strings.TrimRight(d.Address, "/")
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return addr
}

// notJSON reports an answer that did not come from a zonal debug endpoint.
func (d *dbgCmd) notJSON(path string, status int, body []byte) error {
	const max = 200
	text := strings.TrimSpace(string(body))
	if len(text) > max {
		text = text[:max] + "..."
	}
	return fmt.Errorf("%s%s answered %d with %q, not the zonal debug endpoint's JSON; is --address the controller's --debug-address?",
		d.base(), path, status, text)
}

// serverError is the message of the endpoint's {"error": ...} answer, ""
// if body is not one.
func serverError(body []byte) string {
	return gjson.GetBytes(body, "error").String()
}
