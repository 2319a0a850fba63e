package scope

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Membership is a process's cgroups, one entry per hierarchy, as
// /proc/PID/cgroup lists them. The paths are relative to the cgroup
// namespace of the process that read the file: read from a private one,
// cgroups outside it start with "/..".
type Membership []Member

// Member is one line of /proc/PID/cgroup.
type Member struct {
	// ID is the hierarchy ID; 0 for cgroup2.
	ID int
	// Controllers are the v1 controllers of the hierarchy, such as
	// ["cpu", "cpuacct"] or ["name=systemd"]; empty for cgroup2.
	Controllers []string
	// Path is the cgroup, such as "/mountcontainers/x/mount-0123456789abcdef".
	Path string
}

// ProcMembership reads /proc/PID/cgroup.
func ProcMembership(pid int) (Membership, error) {
	return readMembership("/proc", pid)
}

func readMembership(procRoot string, pid int) (Membership, error) {
	return readMembershipOf(procRoot, strconv.Itoa(pid))
}

// readMembershipOf reads procRoot/proc/cgroup, proc a PID or "self".
func readMembershipOf(procRoot, proc string) (Membership, error) {
	f, err := os.Open(filepath.Join(procRoot, proc, "cgroup"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := ParseMembership(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return m, nil
}

// ParseMembership parses the format of /proc/PID/cgroup:
// "hierarchy-ID:controller-list:cgroup-path" per line.
func ParseMembership(r io.Reader) (Membership, error) {
	var m Membership
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		ctrl, path, ok2 := strings.Cut(rest, ":")
		n, err := strconv.Atoi(id)
		if !ok1 || !ok2 || err != nil || !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("malformed cgroup line %q", line)
		}
		e := Member{ID: n, Path: path}
		if ctrl != "" {
			e.Controllers = strings.Split(ctrl, ",")
		}
		m = append(m, e)
	}
	return m, sc.Err()
}

// In reports whether the process is in cgroup, or below it, in every
// hierarchy listed: true for a process placed in a scope whose Cgroup is
// cgroup. It is false for an empty Membership.
func (m Membership) In(cgroup string) bool {
	for _, e := range m {
		if !within(e.Path, cgroup) {
			return false
		}
	}
	return len(m) > 0
}

// InAny reports whether the process is in cgroup, or below it, in at least
// one hierarchy; !InAny(c) means the process is outside c everywhere.
func (m Membership) InAny(cgroup string) bool {
	for _, e := range m {
		if within(e.Path, cgroup) {
			return true
		}
	}
	return false
}

// Outside reports whether the process has left the cgroups of other (such
// as a container's, read from its PID 1): in no hierarchy where other's
// cgroup is not the root is the process in other's cgroup or below it. A
// hierarchy where other is at the root tells nothing (everything is below
// the root) and is skipped.
func (m Membership) Outside(other Membership) bool {
	for _, o := range other {
		if o.Path == "/" {
			continue
		}
		for _, e := range m {
			if e.ID == o.ID && within(e.Path, o.Path) {
				return false
			}
		}
	}
	return true
}

// within reports whether cgroup path p is c or below it.
func within(p, c string) bool {
	if c == "/" {
		return true
	}
	c = strings.TrimSuffix(c, "/")
	return p == c || strings.HasPrefix(p, c+"/")
}
