package flexvolume

// SetInMemory replaces the check that the secrets directory is on a tmpfs,
// for tests whose temporary directories are on a disk.
func SetInMemory(f func(string) error) (restore func()) {
	old := inMemory
	inMemory = f
	return func() { inMemory = old }
}

// InMemory is the real check.
var InMemory = inMemory
