package compare

import (
	"bytes"
	"fmt"
	"time"

	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/store"
)

// Files a comparison leaves in its directory.
const (
	TableMarkdown = store.CompareTable
	TableCSV      = "table.csv"
	TableJSON     = store.CompareTableJSON
	PlotPNG       = "plot.png"
	PlotSVG       = "plot.svg"
	RunList       = store.CompareRuns // row, run, setup and run directory, one run a line
)

// CreateDir makes root/name/<start>/ for a comparison, named as runs are, and
// points root/name/latest at it. Unlike a run, it does not move root/latest:
// that names the newest run, which `hiatus check` reads by default.
func CreateDir(root, name string, start time.Time) (string, error) {
	d, err := createDir(root, name, start)
	if err != nil {
		return "", err
	}
	d.Close()
	return d.Path(), nil
}

// createDir is CreateDir, the comparison's directory held open. root is
// the user's (its links followed); name and the start's directory inside
// it are made or opened without following a link.
func createDir(root, name string, start time.Time) (*files.Dir, error) {
	stamp := start.UTC().Format(store.TimeLayout)
	top, err := files.MakeDir(root)
	if err != nil {
		return nil, fmt.Errorf("compare: create directory: %w", err)
	}
	defer top.Close()
	named, err := top.MakeSub(name)
	if err != nil {
		return nil, fmt.Errorf("compare: create directory: %w", err)
	}
	defer named.Close()
	d, err := named.MakeSub(stamp)
	if err != nil {
		return nil, fmt.Errorf("compare: create directory: %w", err)
	}
	if err := named.Link(stamp, "latest"); err != nil {
		d.Close()
		return nil, fmt.Errorf("compare: link %s: %w", named.Join("latest"), err)
	}
	return d, nil
}

// Write writes the table's files into dir.
func Write(dir string, t *Table) error {
	d, err := files.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	defer d.Close()
	return writeTable(d, t)
}

// writeTable writes the table's files into d, each by a temporary file
// renamed into place: whatever was at its name (an older table, a link
// planted in a shared grid directory) is replaced, never written through.
func writeTable(d *files.Dir, t *Table) error {
	js, err := t.JSON()
	if err != nil {
		return err
	}
	var runs bytes.Buffer
	for i, r := range t.Rows {
		for j, f := range r.Runs {
			fmt.Fprintf(&runs, "%d\t%d\t%s\t%s\n", i+1, j+1, r.Short(), f.Dir)
		}
	}
	type file struct {
		name string
		data []byte
	}
	tables := []file{
		{TableMarkdown, t.Markdown()},
		{TableCSV, t.CSV()},
		{TableJSON, js},
		{RunList, runs.Bytes()},
	}
	for _, f := range tables {
		if err := d.WriteFile(f.name, f.data); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
	}
	// The tables are written first: a plot that cannot be drawn does not
	// cost them.
	for _, format := range []string{"png", "svg"} {
		b, err := Plot(t, format)
		if err != nil {
			return err
		}
		if err := d.WriteFile("plot."+format, b); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
	}
	return nil
}
