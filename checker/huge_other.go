//go:build !linux

package checker

// hugePages does nothing where there is no madvise(MADV_HUGEPAGE).
func hugePages[T any](s []T) {}
