package client

import (
	"context"

	"github.com/hiatus-dev/hiatus/history"
)

// A Workload is what a critical section does with the resource the lock
// protects: a read, then a write that follows from it, each through the
// workload's guard. Values are the ops' :value as recorded (the counter's
// int64, the list's micro-ops). The Counter and the ListAppend are the
// workloads.
type Workload interface {
	// WriteGuard is the guard the resource checks: which ops carry :fence,
	// and whether the read records one (GuardFenceRMW).
	WriteGuard() Guard
	// WriteOp is the :f of the section's write: :write, :append.
	WriteOp() history.Keyword
	// SectionRead is the section's read under a grant carrying fence;
	// ErrStale when the guard refused it.
	SectionRead(ctx context.Context, fence int64) (any, error)
	// Next is the value the section writes after reading read: the :write
	// op's :value, recorded before the write is sent.
	Next(read any, id WriteID) any
	// SectionWrite writes value (Next's), named id for the settlement,
	// when the guard lets it; ErrStale or ErrChanged when it refused.
	SectionWrite(ctx context.Context, value, read any, fence int64, id WriteID) error
}

// A Settler tells, after the run, which of ids (the :info writes) took
// effect. Call it only when no write can still be in flight.
type Settler interface {
	Audited(ctx context.Context, ids []WriteID) (map[WriteID]bool, error)
}

// A FinalReader reads the resource once every worker has stopped: the
// :value of the :read op marked :final?.
type FinalReader interface {
	FinalRead(ctx context.Context) (any, error)
}

// A Resource is a workload the harness sets up, settles and reads last.
type Resource interface {
	Workload
	Settler
	FinalReader
	Setup(ctx context.Context) error
}

var _ Resource = (*Counter)(nil)

// WriteGuard is c.Guard.
func (c *Counter) WriteGuard() Guard { return c.Guard }

// WriteOp is :write.
func (c *Counter) WriteOp() history.Keyword { return history.FWrite }

// SectionRead is ReadAs.
func (c *Counter) SectionRead(ctx context.Context, fence int64) (any, error) {
	v, err := c.ReadAs(ctx, fence)
	return v, err
}

// Next is read plus one.
func (c *Counter) Next(read any, id WriteID) any { return read.(int64) + 1 }

// SectionWrite is Write.
func (c *Counter) SectionWrite(ctx context.Context, value, read any, fence int64, id WriteID) error {
	return c.Write(ctx, value.(int64), read.(int64), fence, id)
}

// FinalRead is Read's value.
func (c *Counter) FinalRead(ctx context.Context) (any, error) {
	v, _, err := c.Read(ctx)
	return v, err
}
