// Package seam is the test seam of package startgate: the programs whose
// traced execve startgate fails with EPERM, as a security module's rule
// for a program run traced would, which cannot be had on demand. Only
// package startgatetest sets it, and only in a test binary; elsewhere it
// is empty.
package seam

import "sync"

var (
	mu      sync.Mutex
	refused = map[string]bool{}
)

// Refuse makes the traced execve of the program at path refused until
// undo is called.
func Refuse(path string) (undo func()) {
	mu.Lock()
	defer mu.Unlock()
	refused[path] = true
	return func() {
		mu.Lock()
		defer mu.Unlock()
		delete(refused, path)
	}
}

// Refused reports whether the traced execve of the program at path is to
// be refused.
func Refused(path string) bool {
	mu.Lock()
	defer mu.Unlock()
	return refused[path]
}
