//go:build linux

package checker

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePages asks the kernel to back the array of s, hugeMin bytes or more,
// with huge pages where it can: the records of a check are a hundred
// megabytes and more, written once, and at 4 KiB a page their page faults
// were a fifth of the CPU of a check of 250,000 sections on a virtual
// machine (docs/performance.md). Go's heap asks for none since Go 1.21.1,
// and a kernel whose transparent huge pages are "madvise", as Debian's
// are, gives them only where asked.
//
// What it costs, and why a check may pay it: the range keeps the flag
// after the collector frees the slice, so khugepaged may gather into huge
// pages again memory the scavenger gave back (the growth of RSS for which
// Go stopped asking); and with defrag "madvise" a fault there may wait
// for the kernel to compact memory. hiatus check, the one caller of Open
// in hiatus, is a process that ends with its verdict, its heap bounded by
// its budget, and was measured with both; a long-lived program that calls
// Open may see its RSS stay higher after a check.
func hugePages[T any](s []T) {
	var zero T
	size := uintptr(cap(s)) * unsafe.Sizeof(zero)
	if size < hugeMin {
		return
	}
	const page = 2 << 20
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	lo, hi := (start+page-1)&^(page-1), (start+size)&^(page-1)
	if hi <= lo {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(s)), lo-start)), hi-lo)
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // a hint: without it, 4 KiB pages
}
