package compare

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

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
	stamp := start.UTC().Format(store.TimeLayout)
	dir := filepath.Join(root, name, stamp)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("compare: create directory: %w", err)
	}
	at := filepath.Join(root, name, "latest")
	tmp := at + ".tmp"
	_ = os.Remove(tmp) // a leftover of a crash, if any
	if err := os.Symlink(stamp, tmp); err != nil {
		return "", fmt.Errorf("compare: link %s: %w", at, err)
	}
	if err := os.Rename(tmp, at); err != nil {
		return "", fmt.Errorf("compare: link %s: %w", at, err)
	}
	return dir, nil
}

// Write writes the table's files into dir.
func Write(dir string, t *Table) error {
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
	files := []file{
		{TableMarkdown, t.Markdown()},
		{TableCSV, t.CSV()},
		{TableJSON, js},
		{RunList, runs.Bytes()},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
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
		if err := os.WriteFile(filepath.Join(dir, "plot."+format), b, 0o644); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
	}
	return nil
}
