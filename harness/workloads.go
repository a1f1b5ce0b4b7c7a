package harness

import (
	"fmt"
	"strings"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/guard"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The workloads a run's sections can do, by the names --workload takes.
const (
	WorkloadCounter    = "counter"     // a read-modify-write of one counter
	WorkloadListAppend = "list-append" // Elle's list-append: each section appends one element to a list
)

// A workloadKind is a workload declared once: the name --workload takes,
// the model its histories are checked against and that model's initial
// state (test.edn's :initial), and its resource on PostgreSQL row id
// under guard g.
type workloadKind struct {
	name, model string
	initial     any
	usage       string
	resource    func(db *pgxpool.Pool, id int64, g guard.Guard) client.Resource
}

func workloadKinds() []workloadKind {
	return []workloadKind{
		{name: WorkloadCounter, model: checker.ModelLockCounter, initial: int64(0), usage: "a read-modify-write of one counter",
			resource: func(db *pgxpool.Pool, id int64, g guard.Guard) client.Resource {
				return &client.Counter{DB: db, ID: id, Guard: g.Kind, Lock: g.Lock, Metrics: g.Metrics}
			}},
		{name: WorkloadListAppend, model: checker.ModelListAppend,
			usage: "Elle's list-append: each section reads a list and writes it back with one element appended, which tells which update was lost to whom, and duplicates",
			resource: func(db *pgxpool.Pool, id int64, g guard.Guard) client.Resource {
				return &client.ListAppend{DB: db, ID: id, Guard: g.Kind, Lock: g.Lock, Metrics: g.Metrics}
			}},
	}
}

// Workloads lists the names --workload takes.
func Workloads() []string {
	var out []string
	for _, k := range workloadKinds() {
		out = append(out, k.name)
	}
	return out
}

// workloadOf returns the workload called name ("" is the counter).
func workloadOf(name string) (workloadKind, error) {
	if name == "" {
		name = WorkloadCounter
	}
	for _, k := range workloadKinds() {
		if k.name == name {
			return k, nil
		}
	}
	return workloadKind{}, fmt.Errorf("--workload %q: want one of %s", name, strings.Join(Workloads(), ", "))
}

// workload is c's workload; c is valid.
func (c Config) workload() workloadKind {
	k, _ := workloadOf(c.Workload)
	return k
}

// Model is the model c's histories are checked against.
func (c Config) Model() string { return c.workload().model }

// CheckWorkload says why name is no workload, or nil: the refusal run's
// --workload gives.
func CheckWorkload(name string) error {
	_, err := workloadOf(name)
	return err
}

// WorkloadUsage says each workload, for --workload's usage.
func WorkloadUsage() string {
	var out []string
	for _, k := range workloadKinds() {
		out = append(out, k.name+" ("+k.usage+")")
	}
	return strings.Join(out, "; ")
}

// resource is c's workload's resource on db, under c's guard.
func (c Config) resource(db *pgxpool.Pool) client.Resource {
	return c.workload().resource(db, c.CounterID, guard.Guard{Kind: c.guard()})
}
