package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/zonal-ingress/zonal/cgo/table"
)

type tableCmd struct {
	Dump    tableDumpCmd    `cmd:"" help:"Print the live table as NGINX workers read it (decoded by the module's own C reader), as JSON."`
	Publish tablePublishCmd `cmd:"" help:"Publish a table described in JSON as the next generation (for demos, tests and manual repair)."`
}

type tableDumpCmd struct {
	Dir     string `help:"Endpoint table directory (the module's zonal_table directive)." env:"ZONAL_TABLE_DIR" default:"/run/zonal/table" type:"path"`
	Backend string `help:"Print only this backend." placeholder:"NAME"`
}

func (c *tableDumpCmd) Run() error {
	live, err := table.ReadDir(c.Dir)
	if err != nil {
		return err
	}
	if c.Backend == "" {
		return printJSON(os.Stdout, live)
	}
	for _, b := range live.Snapshot.Backends {
		if b.Name == c.Backend {
			return printJSON(os.Stdout, b)
		}
	}
	return fmt.Errorf("backend %q is not in table generation %d of %s", c.Backend, live.Snapshot.Generation, c.Dir)
}

type tablePublishCmd struct {
	Dir  string `help:"Endpoint table directory (the module's zonal_table directive)." env:"ZONAL_TABLE_DIR" default:"/run/zonal/table" type:"path"`
	File string `arg:"" help:"JSON file with {\"zone\":..., \"backends\":[{\"name\":..., \"localShare\":..., \"peers\":[{\"address\":..., \"port\":..., \"zone\":..., \"preferred\":true}]}]}; - for standard input."`
}

func (c *tablePublishCmd) Run() error {
	in := os.Stdin
	if c.File != "-" {
		f, err := os.Open(c.File)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	var t table.Table
	dec := json.NewDecoder(in)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	p, err := table.OpenPublisher(c.Dir)
	if err != nil {
		return err
	}
	defer p.Close()
	res, err := p.Publish(&t)
	if err != nil {
		return err
	}
	fmt.Printf("published generation %d (%d bytes, %d backends) to %s\n", res.Generation, res.Size, len(t.Backends), c.Dir)
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
