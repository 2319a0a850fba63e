package registration

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/shared/atomicfile"
)

// LockName is the directory's advisory lock file, shared by writers and
// removers.
const LockName = ".mountcontainers.lock"

const (
	lockName = LockName
	// tempInfix separates the target name from the random part of a
	// temporary file: ".kubernetes.io~glusterfs.json.tmp-1234".
	tempInfix = ".tmp-"
	// lockTimeout bounds the wait for another writer.
	lockTimeout = 10 * time.Second
	// fileMode is the mode of registration files: they hold no secret.
	fileMode = 0o644
	// dirMode is the mode of a directory created by Write.
	dirMode = 0o755
)

// ErrUntrusted is wrapped by every error that refuses a file or directory
// because of its type, owner, mode or size rather than its content.
var ErrUntrusted = errors.New("untrusted")

// Read returns the registration of plugin in dir. ok is false, with a nil
// error, when there is no registration file (or no directory): the plugin is
// not registered. A file that exists but cannot be trusted or decoded is an
// error naming the file and the reason.
func Read(dir, plugin string) (r Registration, ok bool, err error) {
	path, err := Path(dir, plugin)
	if err != nil {
		return Registration{}, false, err
	}
	dfd, err := openRegDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Registration{}, false, nil
		}
		return Registration{}, false, err
	}
	defer unix.Close(dfd)
	return readFile(dfd, path)
}

// Exists reports whether dir holds a file (of any kind) at plugin's
// registration path, without opening or trusting it: it returns false and a
// nil error exactly where [Read] reports no registration, and an error
// where Read fails before looking at the file. It serves callers that only
// need to know whether to look further, at the cost of a stat.
func Exists(dir, plugin string) (bool, error) {
	path, err := Path(dir, plugin)
	if err != nil {
		return false, err
	}
	dfd, err := openRegDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	switch err := unix.Fstatat(dfd, filepath.Base(path), &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT):
		return false, nil
	default:
		return false, fmt.Errorf("registration %s: %w", path, err)
	}
}

// readFile reads and decodes the registration at path, opening its base
// name in dfd, the checked directory of path; see [readTrustedAt].
func readFile(dfd int, path string) (Registration, bool, error) {
	data, ok, err := readTrustedAt(dfd, filepath.Base(path), MaxFileSize)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("registration %s: %w", path, err)
		}
		return Registration{}, false, err
	}
	r, err := Decode(data)
	if err != nil {
		return Registration{}, false, fmt.Errorf("registration %s: %w", path, err)
	}
	return r, true, nil
}

// ReadTrusted returns the content of path, a file that decides what a root
// process runs, once it passes the trust rules of a registration file: a
// regular file (a symlink is refused, never followed), owned by root or
// the effective user, not writable by group or others, at most maxSize
// bytes, in a directory that passes the same owner and mode rules and
// whose ancestors up to / pass those of [openTrustedDir]. ok is false,
// with a nil error, when path or its directory does not exist. Errors name
// the file or directory; a refusal wraps [ErrUntrusted].
func ReadTrusted(path string, maxSize int64) (data []byte, ok bool, err error) {
	dir := filepath.Dir(path)
	dfd, err := openTrustedDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("directory %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	data, ok, err = readTrustedAt(dfd, filepath.Base(path), maxSize)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return data, ok, nil
}

// TrustedFile is one file of [ReadTrustedDir]: its name in the directory,
// and its content or why it was refused (an error that names the file).
type TrustedFile struct {
	Name string
	Data []byte
	Err  error
	// Version is the version of the file that Data holds, or that the
	// caller of [ReadTrustedDirChanged] said it has read already (then
	// Unchanged is set and Data is nil).
	Version   FileVersion
	Unchanged bool
}

// FileVersion tells one content of a file from another without reading
// it: the file (device and inode), its size, and the times of its last
// change of content (mtime) and of its inode (ctime). A write, a
// truncation, a chmod, a chown or a rename sets the ctime to the current
// time, and no system call sets it to any other; a file replaced by
// another (an atomic write renames a new one over it) has another inode.
// The times come from a coarse clock, so two versions written within one
// tick of it can look alike: see [FileVersion.Settled].
type FileVersion struct {
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime unix.Timespec
}

// Settled reports whether v's ctime is more than window before readAt,
// the time its content was read: only then is a later stat that shows the
// same version the same content. A file changed again within the tick of
// the clock it was read in shows the same times (the "racy" files of
// git's index); one whose ctime is well before its read was not being
// written meanwhile.
func (v FileVersion) Settled(readAt time.Time, window time.Duration) bool {
	return time.Unix(v.Ctime.Unix()).Before(readAt.Add(-window))
}

func versionOf(st *unix.Stat_t) FileVersion {
	return FileVersion{Dev: st.Dev, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim, Ctime: st.Ctim}
}

// ReadTrustedDir reads every file of dir whose name keep accepts, each
// under the rules of [ReadTrusted], but with dir and its ancestors walked
// and checked once, not once per file: a caller that reads a directory of
// many files every second (the recovery's mount records) pays one walk
// from / a pass. The names are listed from the directory that was checked,
// not by its path again, and come sorted. A file removed since the listing
// is left out; a missing dir gives no file and no error. An error is the
// directory's (it names it, and wraps [ErrUntrusted] for a refusal).
func ReadTrustedDir(dir string, maxSize int64, keep func(name string) bool) ([]TrustedFile, error) {
	return ReadTrustedDirChanged(dir, maxSize, keep, nil)
}

// ReadTrustedDirChanged is [ReadTrustedDir], but a file whose version
// unchanged reports as one the caller has read already is not opened for
// reading: it comes with Unchanged set and no Data. The trust rules are
// applied to every file all the same, to what a stat of it says now, and
// unchanged is asked only about a file that passes them; a nil unchanged
// reads every file.
func ReadTrustedDirChanged(dir string, maxSize int64, keep func(name string) bool, unchanged func(name string, v FileVersion) bool) ([]TrustedFile, error) {
	dfd, err := openTrustedDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("directory %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	names, err := listDirFD(dfd)
	if err != nil {
		return nil, fmt.Errorf("directory %s: %w", dir, err)
	}
	var out []TrustedFile
	for _, name := range names {
		if !keep(name) {
			continue
		}
		var same func(FileVersion) bool
		if unchanged != nil {
			same = func(v FileVersion) bool { return unchanged(name, v) }
		}
		r, err := readTrustedVersionAt(dfd, name, maxSize, same)
		if err != nil {
			out = append(out, TrustedFile{Name: name, Err: fmt.Errorf("%s: %w", filepath.Join(dir, name), err)})
			continue
		}
		if r.ok {
			out = append(out, TrustedFile{Name: name, Data: r.data, Version: r.version, Unchanged: r.unchanged})
		}
	}
	return out, nil
}

// listDirFD returns the sorted names in the directory of the O_PATH
// descriptor dfd, read through a descriptor of that same directory.
func listDirFD(dfd int) ([]string, error) {
	fd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	var pst, st unix.Stat_t
	if err := unix.Fstat(dfd, &pst); err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if pst.Dev != st.Dev || pst.Ino != st.Ino {
		return nil, fmt.Errorf("%w: changed while it was opened", ErrUntrusted)
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	slices.Sort(names)
	return names, nil
}

// readTrustedAt checks the file name in the directory dfd before it opens
// it for reading, and returns its content; ok is false, with a nil error,
// when there is no such file. Errors do not name the file. The file is
// first opened with O_PATH|O_NOFOLLOW, which neither follows a symlink nor
// has the side effects of a real open (a device node's driver is not
// called, a FIFO is not opened); only once that handle passes the trust
// rules is the same file, not whatever is at the path by then, opened for
// reading through /proc/self/fd.
func readTrustedAt(dfd int, name string, maxSize int64) (data []byte, ok bool, err error) {
	r, err := readTrustedVersionAt(dfd, name, maxSize, nil)
	return r.data, r.ok, err
}

// trustedRead is what readTrustedVersionAt found.
type trustedRead struct {
	data      []byte
	version   FileVersion
	ok        bool // there is such a file
	unchanged bool // same said so: data is nil
}

// readTrustedVersionAt is readTrustedAt, with the version of the file it
// read. When same, if not nil, reports the version a stat of name finds
// (checked against the trust rules first) as one the caller has read
// already, the file is not opened at all. Otherwise the version is the
// O_PATH handle's; the file read is checked to be that file, and its size
// is bounded again as it is read.
func readTrustedVersionAt(dfd int, name string, maxSize int64, same func(FileVersion) bool) (trustedRead, error) {
	if same != nil {
		// One stat of the name, not followed, for a file that has not
		// changed: the rules apply to it as below.
		var st unix.Stat_t
		err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT):
			return trustedRead{}, nil
		case err != nil:
			return trustedRead{}, fmt.Errorf("stat: %w", err)
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return trustedRead{}, fmt.Errorf("%w: is a symbolic link", ErrUntrusted)
		}
		if err := checkFile(&st, maxSize); err != nil {
			return trustedRead{}, err
		}
		if v := versionOf(&st); same(v) {
			return trustedRead{version: v, ok: true, unchanged: true}, nil
		}
	}
	pfd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return trustedRead{}, nil
		}
		return trustedRead{}, fmt.Errorf("open: %w", err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return trustedRead{}, fmt.Errorf("stat: %w", err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return trustedRead{}, fmt.Errorf("%w: is a symbolic link", ErrUntrusted)
	}
	if err := checkFile(&st, maxSize); err != nil {
		return trustedRead{}, err
	}
	r := trustedRead{version: versionOf(&st), ok: true}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return trustedRead{}, fmt.Errorf("open: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var rst unix.Stat_t
	if err := unix.Fstat(fd, &rst); err != nil {
		return trustedRead{}, fmt.Errorf("stat: %w", err)
	}
	if rst.Dev != st.Dev || rst.Ino != st.Ino {
		return trustedRead{}, fmt.Errorf("%w: changed while it was opened", ErrUntrusted)
	}
	r.data, err = io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return trustedRead{}, fmt.Errorf("read: %w", err)
	}
	if int64(len(r.data)) > maxSize {
		return trustedRead{}, fmt.Errorf("%w: more than the limit of %d bytes", ErrUntrusted, maxSize)
	}
	return r, nil
}

// checkFile applies the trust rules to an open file.
func checkFile(st *unix.Stat_t, maxSize int64) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: not a regular file (%s)", ErrUntrusted, FileType(st.Mode))
	}
	if euid := uint32(os.Geteuid()); st.Uid != 0 && st.Uid != euid {
		return fmt.Errorf("%w: owned by uid %d, want 0 or %d", ErrUntrusted, st.Uid, euid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%w: mode %04o is writable by group or others", ErrUntrusted, st.Mode&0o7777)
	}
	if st.Size > maxSize {
		return fmt.Errorf("%w: %d bytes, more than the limit of %d", ErrUntrusted, st.Size, maxSize)
	}
	return nil
}

// checkDir applies the trust rules to the registration directory and its
// ancestors; see [openRegDir].
func checkDir(dir string) error {
	dfd, err := openRegDir(dir)
	if err != nil {
		return err
	}
	unix.Close(dfd)
	return nil
}

// openRegDir is [openTrustedDir] for the registration directory, with
// errors that name it. A missing directory is returned as an error
// wrapping fs.ErrNotExist.
func openRegDir(dir string) (int, error) {
	dfd, err := openTrustedDir(dir)
	if err != nil {
		return -1, fmt.Errorf("registration directory %s: %w", dir, err)
	}
	return dfd, nil
}

// openTrustedDir returns an O_PATH descriptor of dir once dir and every
// directory above it pass the trust rules. The walk starts at / and opens
// each component relative to the one above it with O_PATH|O_NOFOLLOW, so
// the directory checked is the directory opened, and a symbolic link
// anywhere on the way is refused, never followed. Each component must be a
// directory owned by root or the effective user. dir itself must not be
// writable by group or others; an ancestor may be only when it is root's
// and sticky (as /tmp and /var/tmp are): there, no one but root and an
// entry's owner may rename or remove the entry, so the root's or own
// directory below it cannot be swapped. A missing component is
// fs.ErrNotExist. Errors about an ancestor name it; errors about dir
// itself do not.
func openTrustedDir(dir string) (int, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return -1, fmt.Errorf("resolve: %w", err)
	}
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /: %w", err)
	}
	cur := "/"
	for _, name := range strings.Split(abs, "/")[1:] {
		if name == "" {
			continue // abs is "/"
		}
		if fd, err = openChild(fd, cur, name); err != nil {
			return -1, err
		}
		cur = filepath.Join(cur, name)
	}
	if err := checkDirFD(fd, false); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openChild checks the ancestor fd, at path, and returns an O_PATH
// descriptor of its entry name, not following a symbolic link. It closes
// fd.
func openChild(fd int, path, name string) (int, error) {
	defer unix.Close(fd)
	if err := checkDirFD(fd, true); err != nil {
		return -1, fmt.Errorf("ancestor %s: %w", path, err)
	}
	child, err := unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return -1, fs.ErrNotExist
	case err != nil:
		return -1, fmt.Errorf("open %s: %w", filepath.Join(path, name), err)
	}
	return child, nil
}

// checkDirFD applies the trust rules of [openTrustedDir] to the open
// directory fd: those of an ancestor when ancestor is set.
func checkDirFD(fd int, ancestor bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		return fmt.Errorf("%w: is a symbolic link", ErrUntrusted)
	default:
		return fmt.Errorf("%w: not a directory (%s)", ErrUntrusted, FileType(st.Mode))
	}
	if euid := uint32(os.Geteuid()); st.Uid != 0 && st.Uid != euid {
		return fmt.Errorf("%w: owned by uid %d, want 0 or %d", ErrUntrusted, st.Uid, euid)
	}
	switch {
	case st.Mode&0o022 == 0:
		return nil
	case !ancestor:
		return fmt.Errorf("%w: mode %04o is writable by group or others", ErrUntrusted, st.Mode&0o7777)
	case st.Mode&unix.S_ISVTX == 0 || st.Uid != 0:
		return fmt.Errorf("%w: mode %04o is writable by group or others, and it is not root's with the sticky bit", ErrUntrusted, st.Mode&0o7777)
	}
	return nil
}

// FileType names the file type in a stat mode ("regular file", "FIFO",
// ...), for errors about files that are not what they should be.
func FileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "unknown type"
}

// Write registers r for plugin in dir, replacing any earlier registration
// (such as a leftover of an older pod). The directory is created if missing.
// The write is atomic and durable; see the package documentation.
func Write(dir, plugin string, r Registration) error {
	path, err := Path(dir, plugin)
	if err != nil {
		return err
	}
	data, err := Encode(r)
	if err != nil {
		return fmt.Errorf("registration %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("create registration directory: %w", err)
	}
	if err := checkDir(dir); err != nil {
		return err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	removeStaleTemps(dir, filepath.Base(path))
	if err := atomicfile.WriteFile(path, data, fileMode); err != nil {
		return fmt.Errorf("write registration %s: %w", path, err)
	}
	return nil
}

// removeStaleTemps deletes the temporary files of base left by writers that
// died. It is called with the lock held, so no live writer owns one. Only
// regular files are removed; anything else is left for a human.
func removeStaleTemps(dir, base string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "."+globEscape(base)+tempInfix+"*"))
	for _, m := range matches {
		if fi, err := os.Lstat(m); err == nil && fi.Mode().IsRegular() {
			os.Remove(m)
		}
	}
}

func globEscape(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `\`, `\\`)
	return r.Replace(s)
}

// lockDir takes the directory's advisory lock, waiting at most lockTimeout.
func lockDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, lockName)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("lock %s: %w: not a regular file", path, ErrUntrusted)
	}
	if err := LockFD(fd, lockTimeout); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { unix.Close(fd) }, nil
}

// LockFD takes the directory's advisory lock on fd, an open descriptor of
// its lock file ([LockName]), as this package's writers and removers do,
// waiting at most timeout. Closing fd releases it.
func LockFD(fd int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still held by another writer after %s", timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// RemoveIfOwned removes the registration of plugin only if it still names the
// pod with podUID, and reports whether it did. The check and the removal
// happen under the directory lock, so a registration that a newer pod writes
// concurrently through [Write] is never removed. A missing file is not an
// error. A file that cannot be trusted or decoded is left in place and
// reported.
func RemoveIfOwned(dir, plugin, podUID string) (bool, error) {
	path, err := Path(dir, plugin)
	if err != nil {
		return false, err
	}
	if podUID == "" {
		return false, fmt.Errorf("remove registration %s: empty pod UID", path)
	}
	dfd, err := openRegDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	defer unix.Close(dfd)
	unlock, err := lockDir(dir)
	if err != nil {
		return false, err
	}
	defer unlock()
	r, ok, err := readFile(dfd, path)
	if err != nil || !ok || r.PodUID != podUID {
		return false, err
	}
	if err := unix.Unlinkat(dfd, filepath.Base(path), 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, fmt.Errorf("remove registration %s: %w", path, err)
	}
	return true, atomicfile.SyncDir(dir)
}

// Entry is one registration found by [List].
type Entry struct {
	// Plugin is the plugin name decoded from the file name.
	Plugin string
	// Path is the registration file.
	Path string
	// Registration is the decoded content; valid only when Err is nil.
	Registration Registration
	// Err says why the file was refused, if it was.
	Err error
}

// List returns every registration in dir, sorted by file name. Dotfiles and
// files without the ".json" suffix are skipped. A file that cannot be trusted
// or decoded, or whose name is not a valid plugin name, is returned with Err
// set rather than failing the listing. A missing directory lists as empty.
func List(dir string) ([]Entry, error) {
	dfd, err := openRegDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	defer unix.Close(dfd)
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list registrations in %s: %w", dir, err)
	}
	var out []Entry
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, FileSuffix) {
			continue
		}
		e := Entry{Path: filepath.Join(dir, name)}
		e.Plugin, e.Err = PluginFromFileName(name)
		if e.Err == nil {
			var ok bool
			e.Registration, ok, e.Err = readFile(dfd, e.Path)
			if e.Err == nil && !ok {
				continue // removed since ReadDir
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// isNotExist is errors.Is(err, fs.ErrNotExist) for both os and raw errno errors.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT)
}
