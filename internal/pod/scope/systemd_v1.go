package scope

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// On a node with cgroup v1 controllers (legacy or hybrid), systemd moves a
// process it is given into its unit only in the hierarchies of the
// controllers it manages: cpu, memory, pids, devices, blkio and, when the
// unit asks for them, a few more. In the others (freezer, cpuset,
// cpuacct on its own, net_cls, perf_event, hugetlb, ... and every one of
// them where systemd manages none, as in a container whose v1 hierarchies
// it cannot write) the process stays where it was: in the mount pod's
// container. The container's runtime then still counts it as the
// container's (runc freezes the freezer cgroup, and signals its
// processes, when the container ends), and the FUSE daemon dies with the
// mount pod: seen on the systemd bed, where the daemon got the
// container's SIGTERM on every pod deletion.
//
// leaveCaller finishes the move: in every v1 controller hierarchy where
// the process is still in the cgroup it was in before systemd placed it
// (and that cgroup is not the root), it moves the process to the root of
// that hierarchy, where systemd keeps its own processes for the
// controllers it does not manage. A hierarchy is found by its controllers
// among the directories of Config.CgroupRoot (not through symbolic
// links); its cgroup.procs must be a regular file of a cgroup file system.

// placedIn reports whether systemd has put the process whose membership m
// is into the unit whose cgroup is unitCgroup: in the hierarchy systemd
// tracks its units in (cgroup2, or the named v1 "name=systemd"), the
// process's cgroup is the unit's (a suffix of it: read from another cgroup
// namespace, the path has more in front). Only then is the rest of the
// move (leaveCaller) systemd's to finish.
func placedIn(m Membership, unitCgroup string) bool {
	for _, e := range m {
		tracked := e.ID == 0 || slices.Equal(e.Controllers, []string{"name=systemd"})
		// unitCgroup starts with "/": a suffix match ends at a boundary.
		if tracked && strings.HasSuffix(e.Path, unitCgroup) {
			return true
		}
	}
	return false
}

// cgroupSuperMagic is the f_type of a cgroup v1 file system.
const cgroupSuperMagic = 0x27e0eb

// leaveCaller moves pid (0: this process) to the root of every cgroup v1
// controller hierarchy where after, its membership once systemd placed it,
// still shows the cgroup of before, its membership until then. It returns
// the hierarchies it moved it in.
func (s *systemd) leaveCaller(pid int, before, after Membership) ([]string, error) {
	var moved []string
	var errs []error
	for _, b := range before {
		if b.ID == 0 || len(b.Controllers) == 0 || strings.HasPrefix(b.Controllers[0], "name=") || b.Path == "/" {
			continue
		}
		i := slices.IndexFunc(after, func(a Member) bool { return a.ID == b.ID })
		if i < 0 || after[i].Path != b.Path {
			continue // systemd moved it there
		}
		dir, err := v1Hierarchy(s.cfg.CgroupRoot, b.Controllers)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := writeProcs(filepath.Join(dir, "cgroup.procs"), pid); err != nil {
			errs = append(errs, fmt.Errorf("move %s out of %s: %w", who(pid), b.Path, err))
			continue
		}
		moved = append(moved, strings.Join(b.Controllers, ","))
	}
	return moved, errors.Join(errs...)
}

// v1Hierarchy returns the directory of root where the cgroup v1 hierarchy
// of exactly these controllers is mounted.
func v1Hierarchy(root string, controllers []string) (string, error) {
	want := slices.Clone(controllers)
	slices.Sort(want)
	entries, err := os.ReadDir(root)
	if err != nil {
		return "", fmt.Errorf("read cgroup root: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		got := strings.Split(e.Name(), ",")
		slices.Sort(got)
		if slices.Equal(got, want) {
			return filepath.Join(root, e.Name()), nil
		}
	}
	return "", fmt.Errorf("no cgroup v1 hierarchy %s under %s", strings.Join(controllers, ","), root)
}

// writeProcs writes pid to a cgroup.procs file, refusing anything but a
// regular file of a cgroup v1 file system reached without a symbolic link.
func writeProcs(path string, pid int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|oNoFollow, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := checkCgroupFile(f); err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(pid))
	return err
}

func who(pid int) string {
	if pid == 0 {
		return "this process"
	}
	return "process " + strconv.Itoa(pid)
}

// oNoFollow refuses a symbolic link as the file's last component.
const oNoFollow = unix.O_NOFOLLOW

// checkCgroupFile refuses f unless it is a regular file of a cgroup v1
// file system.
func checkCgroupFile(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s)", f.Name(), fi.Mode().Type())
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("statfs %s: %w", f.Name(), err)
	}
	if st.Type != cgroupSuperMagic {
		return fmt.Errorf("%s is not on a cgroup v1 file system (type %#x)", f.Name(), st.Type)
	}
	return nil
}
