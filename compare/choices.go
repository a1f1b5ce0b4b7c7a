package compare

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/client"
)

// Choices are a comparison as `hiatus compare` is asked for one: lists of
// names comma-separated, "" where a flag was not given.
type Choices struct {
	Locks, Pauses string // e.g. "setnx,renew"; "" for the kind's default
	Fencing       string // off, on or both; "" for the kind's default
	Sweep         string // a pause/lease range, as pause/lease=0.25..4; "" for no sweep
	Steps         int    // ratios of a sweep
	StepsGiven    bool
	Lease         time.Duration // the lease of a grid's rows
	LeaseGiven    bool
	Faults        Faults
	Scenario      string // scenarios to run (ScenarioNames), comma-separated; "" for none
	Guards        string // the guards a scenario's rows run under, comma-separated; "" for all
}

// Setups returns the kind of comparison the choices make — a sweep, a grid
// of locks × pauses × fencing, or, when none is asked for, the reference
// grid — and its rows, or what is wrong with the choices, in the words of
// the flags.
func (ch Choices) Setups() (kind string, setups []Setup, err error) {
	if ch.Faults.Every < 1 {
		return "", nil, fmt.Errorf("--inject-every must be at least 1, not %d", ch.Faults.Every)
	}
	if kind, err = ch.kind(); err != nil {
		return "", nil, err
	}
	if kind == "scenario" {
		setups, err := ScenarioSetups(ch.Scenario)
		if err != nil || ch.Guards == "" {
			return kind, setups, err
		}
		all := make([]string, len(client.Guards()))
		for i, g := range client.Guards() {
			all[i] = string(g)
		}
		guards, err := names(ch.Guards, "", all, "--guards")
		if err != nil {
			return "", nil, err
		}
		setups = slices.DeleteFunc(setups, func(s Setup) bool { return s.Side == "" && !slices.Contains(guards, string(s.Guard)) })
		return kind, setups, nil
	}
	locks, err := names(ch.Locks, "setnx", client.LockNames(), "--locks")
	if err != nil {
		return "", nil, err
	}
	pauses, err := names(ch.Pauses, DefaultPauses(kind == "sweep"), PauseChoices(), "--pauses")
	if err != nil {
		return "", nil, err
	}
	fencing, err := fencingOf(ch.Fencing, kind == "sweep")
	if err != nil {
		return "", nil, err
	}
	switch kind {
	case "reference":
		return kind, Reference(ch.Faults), nil
	case "grid":
		return kind, Grid(ch.Faults, locks, pauses, fencing, ch.Lease), nil
	}
	if slices.Contains(pauses, PauseNone) {
		return "", nil, fmt.Errorf("--pauses none: a sweep of the pause/lease ratio needs pauses")
	}
	lo, hi, err := ParseSweep(ch.Sweep)
	if err != nil {
		return "", nil, err
	}
	if ch.Steps < 1 {
		return "", nil, fmt.Errorf("--steps must be at least 1, not %d", ch.Steps)
	}
	return kind, Sweep(ch.Faults, locks, pauses, fencing, Ratios(lo, hi, ch.Steps)), nil
}

// kind is the kind of comparison the choices ask for.
func (ch Choices) kind() (string, error) {
	kind := "reference"
	if ch.Guards != "" && ch.Scenario == "" {
		return "", fmt.Errorf("--guards chooses the guards of --scenario's rows: it needs --scenario")
	}
	if ch.Scenario != "" {
		if ch.Sweep != "" || ch.Locks != "" || ch.Pauses != "" || ch.Fencing != "" || ch.LeaseGiven {
			return "", fmt.Errorf("--scenario fixes its rows' lock, lease, faults and guards: it cannot go with --sweep, --locks, --pauses, --fencing or --lease")
		}
		return "scenario", nil
	}
	switch {
	case ch.Sweep != "":
		kind = "sweep"
	case ch.Locks != "" || ch.Pauses != "":
		kind = "grid"
	case ch.LeaseGiven:
		return "", fmt.Errorf("--lease: the reference grid fixes its rows; give --locks or --pauses for a grid of your own")
	case ch.Fencing != "":
		return "", fmt.Errorf("--fencing: the reference grid fixes its rows; give --locks or --pauses for a grid of your own")
	}
	switch {
	case kind != "sweep" && ch.StepsGiven:
		return "", fmt.Errorf("--steps goes with --sweep")
	case kind == "sweep" && ch.LeaseGiven:
		return "", fmt.Errorf("--lease: a sweep sets the lease of each row to --pause divided by the ratio")
	}
	return kind, nil
}

// names splits a comma-separated list, def when it is "", and checks each
// item is one of valid.
func names(v, def string, valid []string, flag string) ([]string, error) {
	if v == "" {
		v = def
	}
	var out []string
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if !slices.Contains(valid, item) && !(flag == "--locks" && strings.HasPrefix(item, client.ExecPrefix)) {
			return nil, fmt.Errorf("%s %q: want a comma-separated list of %s", flag, item, strings.Join(valid, ", "))
		}
		if !slices.Contains(out, item) {
			out = append(out, item)
		}
	}
	return out, nil
}

func fencingOf(v string, sweep bool) ([]bool, error) {
	if v == "" {
		v = "off"
		if sweep {
			v = "both"
		}
	}
	switch v {
	case "off":
		return []bool{false}, nil
	case "on":
		return []bool{true}, nil
	case "both":
		return []bool{false, true}, nil
	}
	return nil, fmt.Errorf("--fencing %q: want off, on or both", v)
}
