package compare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/internal/printable"
)

// The most a grid made in cells may hold, and what Collect reads of one.
// A grid's directory is a volume shared by the pods of a cluster: a record
// there may come from anyone, and the bounds are what keep one from
// making Collect allocate, or draw, without end. They are well above any
// real grid: the reference grid has 6 rows, the Redlock scenarios and
// findings 38, ten locks under every pause kind, fenced and not, 100, and
// a sweep of them in 12 ratios 960 (TestRealGridsCollectable); a
// grid's plot of MaxRows rows takes seconds and hundreds of megabytes to
// draw (one of 20,000, two minutes and 3.6 GB). A cell is a run of seconds
// to minutes on a machine of its own: MaxCells of them are days of a
// cluster of a hundred.
const (
	MaxRows  = 2000    // rows (setups) of a grid
	MaxRuns  = 1000    // runs of each row
	MaxCells = 100_000 // cells, rows × runs

	// maxCellFile bounds a cell.json: a record of MaxRows rows takes
	// a megabyte.
	maxCellFile = 2 << 20
	// maxResultsFile bounds the results.edn a record's figures are
	// checked against: the checks cap their evidence at 10 items, and a
	// run writes a few kilobytes. Its nesting is bounded too (maxNesting):
	// the EDN decoder recurses into each level.
	maxResultsFile = 1 << 20
	maxNesting     = 100
	// maxText bounds the texts Collect keeps of each record, its servers'
	// versions and its run's path (cell-N/NAME/START-TIME).
	maxText = 1024
	// maxVersions bounds the distinct versions a table lists.
	maxVersions = 16
)

// kinds are the kinds of grid a Plan makes (Choices.Setups).
var kinds = []string{"reference", "grid", "sweep", "scenario"}

// A RecordError says what is wrong with a field of a cell's record.
type RecordError struct {
	Field string // as the record spells it: grid.runs, figures.lost-min
	Err   error
}

func (e *RecordError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *RecordError) Unwrap() error { return e.Err }

func fieldErr(field, format string, args ...any) error {
	return &RecordError{Field: field, Err: fmt.Errorf(format, args...)}
}

// rawRecord is a Record as read, its grid's rows kept as JSON until they
// are counted.
type rawRecord struct {
	Grid struct {
		Header
		Setups json.RawMessage `json:"setups"`
	} `json:"grid"`
	Started  time.Time `json:"started"`
	Versions string    `json:"versions"`
	Result
}

// ParseRecord reads a cell's record, b, and checks it: a grid of at most
// MaxRows rows, MaxRuns runs and MaxCells cells, the record's cell one of
// them, and figures a run can have. What it keeps of a record is bounded
// (maxText); Figures.Dir, which names the run where the cell was made, is
// dropped: Collect finds runs by their Path.
func ParseRecord(b []byte) (Record, error) {
	var raw rawRecord
	if err := json.Unmarshal(b, &raw); err != nil {
		return Record{}, err
	}
	setups, err := decodeSetups(raw.Grid.Setups)
	if err != nil {
		return Record{}, err
	}
	r := Record{Grid: raw.Grid.Header, Started: raw.Started, Versions: raw.Versions, Result: raw.Result}
	r.Grid.Setups, r.Figures.Dir = setups, ""
	if err := r.Grid.check(); err != nil {
		return Record{}, err
	}
	if err := r.check(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// decodeSetups decodes a grid's rows one at a time, refusing more than
// MaxRows before they are decoded: a record of a million empty rows is a
// few megabytes of JSON, and a million Setups hundreds.
func decodeSetups(raw json.RawMessage) ([]Setup, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('[') {
		return nil, fieldErr("grid.setups", "not a list")
	}
	var out []Setup
	for d.More() {
		if len(out) == MaxRows {
			return nil, fieldErr("grid.setups", "more than %d rows, more than hiatus collects", MaxRows)
		}
		var s Setup
		if err := d.Decode(&s); err != nil {
			return nil, fieldErr(fmt.Sprintf("grid.setups[%d]", len(out)), "%w", err)
		}
		out = append(out, s)
	}
	if _, err := d.Token(); err != nil {
		return nil, fieldErr("grid.setups", "%w", err)
	}
	return out, nil
}

// check refuses a grid hiatus cannot have made, or too large to collect.
func (h Header) check() error {
	switch {
	case !slices.Contains(kinds, h.Kind):
		return fieldErr("grid.kind", "%q: want one of %s", h.Kind, strings.Join(kinds, ", "))
	case len(h.Setups) == 0:
		return fieldErr("grid.setups", "none: the record names no grid")
	case h.Runs < 1 || h.Runs > MaxRuns:
		return fieldErr("grid.runs", "%d: want 1 to %d runs a row", h.Runs, MaxRuns)
	case h.Runs > MaxCells/len(h.Setups): // rows × runs, without overflowing
		return fieldErr("grid.runs", "%d runs of %d rows: more than %d cells, more than hiatus collects", h.Runs, len(h.Setups), MaxCells)
	case h.Workers < 1:
		return fieldErr("grid.workers", "%d: want at least 1", h.Workers)
	case h.Limit < 0:
		return fieldErr("grid.time_limit", "%v: negative", h.Limit)
	case h.Work < 0:
		return fieldErr("grid.work", "%v: negative", h.Work)
	case len(h.Command) > maxText || printable.Escape(h.Command) != h.Command:
		return fieldErr("grid.command", "%.60q…: want a printable command line of at most %d bytes", h.Command, maxText)
	}
	for i, s := range h.Setups {
		if err := s.check(fmt.Sprintf("grid.setups[%d].", i), h.Kind == "sweep"); err != nil {
			return err
		}
	}
	return nil
}

// check refuses a row no grid has: a negative duration or count, a pause
// kind hiatus does not know, a sweep's row without its ratio.
func (s Setup) check(field string, sweep bool) error {
	for _, c := range []struct {
		field string
		bad   bool
	}{
		{"Lease", s.Lease < 0}, {"PauseLen", s.PauseLen < 0}, {"Interval", s.Interval < 0}, {"Work", s.Work < 0},
		{"Limit", s.Limit < 0}, {"Every", s.Every < 0}, {"Workers", s.Workers < 0},
		{"Delay", s.Delay < 0}, {"Retry", s.Retry < 0}, {"Nodes", s.Nodes < 0},
		{"Pause", s.Pause != "" && !slices.Contains(PauseChoices(), s.Pause)},
		{"Ratio", s.Ratio < 0 || sweep && s.Ratio == 0},
	} {
		if c.bad {
			return fieldErr(field+c.field, "%v: no grid has such a row", reflect.ValueOf(s).FieldByName(c.field))
		}
	}
	return nil
}

// check refuses a record whose cell is not of its grid, or whose figures
// no run has.
func (r Record) check() error {
	h, f := r.Grid, r.Figures
	cells := len(h.Setups) * h.Runs // checked: at most MaxCells
	switch {
	case r.Cell.Index < 0 || r.Cell.Index >= cells || r.Cell != cellAt(r.Cell.Index, h.Runs):
		return fieldErr("cell", "%+v is not a cell of its %d-cell grid", r.Cell, cells)
	case len(r.Versions) > maxText:
		return fieldErr("versions", "%d bytes, more than %d", len(r.Versions), maxText)
	case f.Path == "" || len(f.Path) > maxText:
		return fieldErr("figures.path", "%d bytes: want the run's directory, at most %d", len(f.Path), maxText)
	case f.Seed != h.Seed+int64(r.Cell.Run): // as Plan.Config draws it, wrapping alike
		return fieldErr("figures.seed", "%d: run %d of the grid's rows has seed %d", f.Seed, r.Cell.Run+1, h.Seed+int64(r.Cell.Run))
	case !slices.Contains(verdicts, f.Valid):
		return fieldErr("figures.valid", "%q: want %s", f.Valid, strings.Join(verdicts, ", "))
	case len(f.Failed) > maxFailed:
		return fieldErr("figures.failed", "%d checks: a run has at most %d", len(f.Failed), maxFailed)
	}
	for _, name := range f.Failed {
		if name == "" || len(name) > 64 || printable.Escape(name) != name {
			return fieldErr("figures.failed", "%.60q: want a check's name", name)
		}
	}
	return checkFigures(f.LockFigures)
}

// maxFailed bounds the checks a record may name as failed: a run has a
// dozen.
const maxFailed = 64

// verdicts are the verdicts a run's figures may have (Validity.String).
var verdicts = []string{checker.Valid.String(), checker.Invalid.String(), checker.Unknown.String()}

// checkFigures refuses figures no check gives: a count below zero, more
// updates proven lost than allowed, more leased sections than sections,
// figures of a final read the history does not have.
func checkFigures(f checker.LockFigures) error {
	v, t := reflect.ValueOf(f), reflect.TypeFor[checker.LockFigures]()
	for i := range t.NumField() {
		name := figureName(t.Field(i))
		if x := v.Field(i); x.Kind() == reflect.Int64 && name != "final" && x.Int() < 0 {
			return fieldErr("figures."+name, "%d: a count cannot be negative", x.Int())
		}
	}
	switch {
	case f.LostMin > f.LostMax:
		return fieldErr("figures.lost-min", "%d, more than lost-max %d", f.LostMin, f.LostMax)
	case f.LeasedSections > f.Sections:
		return fieldErr("figures.leased-sections", "%d, more than sections %d", f.LeasedSections, f.Sections)
	case !f.Counted && (f.Final != 0 || f.LostMin != 0 || f.LostMax != 0):
		return fieldErr("figures.counted", "false, yet final %d, lost-min %d, lost-max %d", f.Final, f.LostMin, f.LostMax)
	}
	return nil
}

// figureName is a figure's name, as results.edn and a record spell it.
func figureName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// CheckResults checks a run's figures, as its record gives them, against
// the run's results.edn, b: the verdict, and each figure of the
// lock-counter check (none, when the run had none), as FiguresOf read them
// when the run ended.
func CheckResults(f Figures, b []byte) error {
	if len(b) > maxResultsFile {
		return fmt.Errorf("%d bytes, %w (more than %d)", len(b), files.ErrTooLarge, maxResultsFile)
	}
	if err := history.CheckNesting(b, maxNesting); err != nil {
		return err
	}
	v, err := history.ParseValue(string(b))
	m, ok := v.(map[history.Keyword]any)
	if err != nil || !ok {
		return fmt.Errorf("not a map of results: %v", err)
	}
	if got := verdictOf(m["valid?"]); got != f.Valid {
		return fieldErr("figures.valid", "%s, but results.edn says %s", f.Valid, got)
	}
	for _, name := range f.Failed {
		c, _ := m[history.Keyword(name)].(map[history.Keyword]any)
		if c == nil || c["valid?"] != false {
			return fieldErr("figures.failed", "%s, but results.edn has no such failed check", name)
		}
	}
	var lc checker.LockFigures
	for k, v := range m {
		if c, ok := v.(map[history.Keyword]any); ok && checker.HasLockFigures(string(k)) {
			lc, _ = checker.ReadLockFigures(c)
		}
	}
	want, got, t := reflect.ValueOf(lc), reflect.ValueOf(f.LockFigures), reflect.TypeFor[checker.LockFigures]()
	for i := range t.NumField() {
		if !want.Field(i).Equal(got.Field(i)) {
			return fieldErr("figures."+figureName(t.Field(i)), "%v, but results.edn says %v", got.Field(i), want.Field(i))
		}
	}
	return nil
}

// verdictOf is results.edn's :valid? as a run's figures write it.
func verdictOf(v any) string {
	switch v {
	case true:
		return checker.Valid.String()
	case false:
		return checker.Invalid.String()
	case history.Keyword("unknown"):
		return checker.Unknown.String()
	}
	return fmt.Sprintf("%v, no verdict", v)
}
