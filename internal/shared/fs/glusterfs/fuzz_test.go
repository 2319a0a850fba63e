package glusterfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/fstest"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs/clientargs"
)

// optionSeeds are options a pod author (and the kubelet) may write.
var optionSeeds = []string{
	`{"server":"gluster-1.example.com","volume":"gv0"}`,
	`{"server":"10.0.0.7","volume":"gv0","mountOptions":"ro,log-level=ERROR,entry-timeout=0"}`,
	`{"servers":"a.example, b.example,c","volume":"v","mountOptions":" acl , ,noatime"}`,
	`{"server":"a","volume":"v_1-x","mountOptions":"backup-volfile-servers=b:10.1.2.3,transport=tcp"}`,
	`{"server":"h","volume":"v","mountOptions":"rw,acl","kubernetes.io/readwrite":"ro"}`,
	`{"server":"a","volume":"v","kubernetes.io/fsType":"glusterfs","kubernetes.io/readwrite":"rw",` +
		`"kubernetes.io/pod.name":"p","kubernetes.io/pod.namespace":"ns","kubernetes.io/pod.uid":"9d1c7a52-2f0e-4c59-8a51-7f3e0c1b2a11",` +
		`"kubernetes.io/pvOrVolumeName":"data","kubernetes.io/serviceAccount.name":"default","kubernetes.io/mounterArgs.FsGroup":"2000",` +
		`"kubernetes.io/secret/key":"c2VjcmV0","kubernetes.io/secret/user":"YWRtaW4="}`,
	`{"server":"a","volume":"v","kubernetes.io/fsType":""}`,
	`{"server":"a","volume":"v","kubernetes.io/fsType":"ext4"}`,
	`{"server":"a","volume":"v","kubernetes.io/readwrite":"maybe"}`,
	`{"server":"a","volume":"v","kubernetes.io/":"x","kubernetes.io":"y"}`,
	`{"server":"::ffff:127.0.0.1","volume":"v"}`,
	`{"server":"[::ffff:10.0.0.1]","volume":"v"}`,
	`{"server":"[2001:db8::1]","volume":"v"}`,
	`{"server":"::1","volume":"v"}`,
	`{"server":"fe80::1%eth0","volume":"v"}`,
	`{"server":"public.example:24007","volume":"v"}`,
	`{"server":"127.1","volume":"v"}`, `{"server":"2130706433","volume":"v"}`,
	`{"server":"0x7f.1","volume":"v"}`, `{"server":"0127.0.0.1","volume":"v"}`,
	`{"server":"127.0.0.1","volume":"v"}`, `{"server":"169.254.169.254","volume":"v"}`,
	`{"server":"0.0.0.0","volume":"v"}`, `{"server":"255.255.255.255","volume":"v"}`,
	`{"server":"a.example.","volume":"v"}`, `{"server":"A-1.Example.COM","volume":"v"}`,
	`{"server":"a;reboot","volume":"v"}`, `{"server":"-oremount","volume":"v"}`,
	`{"server":"a","volume":"../../etc"}`, `{"server":"a","volume":".."}`,
	`{"server":"a","servers":"b","volume":"v"}`, `{"servers":"a,,b","volume":"v"}`,
	`{"servers":"a,b","volume":"v","mountOptions":"backup-volfile-servers=c"}`,
	`{"server":"a","volume":"v","mountOptions":"log-file=/etc/shadow"}`,
	`{"server":"a","volume":"v","mountOptions":"xlator-option=x.y=z"}`,
	`{"server":"a","volume":"v","mountOptions":"backup-volfile-servers=b:$(id)"}`,
	`{"server":"a","volume":"v","mountOptions":"entry-timeout=4294967296"}`,
	`{"server":"a","volume":"v","mountOptions":"lru-limit=65536,background-qlen=64,reader-thread-count=4"}`,
	`{"server":"a","volume":"v","mountOptions":"lru-limit=0"}`,
	`{"server":"a","volume":"v","mountOptions":"lru-limit=4294967295"}`,
	`{"server":"a","volume":"v","mountOptions":"background-qlen=1025"}`,
	`{"server":"a","volume":"v","mountOptions":"reader-thread-count=17"}`,
	`{"server":"a","volume":"v","mountOptions":"invalidate-limit=65537,fetch-attempts=65"}`,
	`{"server":"a","volume":"v","mountOptions":"ro=1"}`,
	`{"server":"a","volume":7}`, `{"server":null,"volume":"v"}`,
	`{"server":"a","volume":"v","volumee":"w"}`,
	`{"server":"a","volume":"v","server":"127.0.0.1"}`,
	`{"server":"a\u0000b","volume":"v"}`, "{\"server\":\"a\xffb\",\"volume\":\"v\"}",
	`{"server":"a","volume":"v"} {}`, `["a"]`, `null`, ``,
	`{}}`, `{"server":"a","volume":"v"}}`, `{"server":"a","volume":"v"}]`, // once read as one object

	`{"server":"` + strings.Repeat("a.", 130) + `b","volume":"v"}`,
	`{"server":"a","volume":"` + strings.Repeat("v", 129) + `"}`,
}

// FuzzParseOptions: the option parser is deterministic; a refusal of an
// object names one of its keys (or a required key it lacks); accepted
// options hold only checked servers, volume and mount options (those that
// size the client's caches, queues and threads within their bounds), make a
// mount(8) command line whose only dashes are its own and that the mount
// pod's mount.glusterfs translates (package clientargs), and written back as
// JSON parse to the same options. Applied with the default allow-list, a
// server accepted is never a loopback, unspecified, link-local, multicast
// or broadcast address, whatever the names resolve to.
func FuzzParseOptions(f *testing.F) {
	for _, s := range optionSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		o, err := ParseOptions(raw)
		o2, err2 := ParseOptions(raw)
		if !reflect.DeepEqual(o, o2) || errString(err) != errString(err2) {
			t.Fatalf("ParseOptions(%q) = %+v, %v, then %+v, %v", raw, o, err, o2, err2)
		}
		if err != nil {
			checkRefusal(t, raw, err)
			return
		}
		checkOptions(t, raw, o)
		checkHelperTakes(t, o)
		enc := encodeOptions(o)
		back, err := ParseOptions(enc)
		if err != nil || !reflect.DeepEqual(back, o) {
			t.Fatalf("ParseOptions(%q) = %+v; written back as %s it parses to %+v, %v", raw, o, enc, back, err)
		}
		checked, err := o.CheckServers(context.Background(), fs.ServerPolicy{}, fstest.HashResolver{})
		if err != nil {
			var oe *fs.OptionError
			if !errors.As(err, &oe) || (oe.Field != o.serversKey() && oe.Field != KeyMountOptions) {
				t.Fatalf("CheckServers(%+v): %v, want an error naming the servers' option", o, err)
			}
			return
		}
		for _, s := range checkedServers(checked) {
			a, err := netip.ParseAddr(s)
			if err != nil || !a.Is4() || fstest.IsSpecial(a) {
				t.Fatalf("CheckServers(%+v) with an empty allow-list lets %q through (%+v)", o, s, checked)
			}
		}
	})
}

// checkHelperTakes: what mount(8) passes the mount pod's mount.glusterfs
// for accepted options is translated, every server a --volfile-server.
func checkHelperTakes(t *testing.T, o Options) {
	t.Helper()
	argv := []string{clientargs.Helper, o.Source(), "/mnt/x"}
	if opts := o.RecordedOptions(); len(opts) > 0 {
		argv = append(argv, "-o", strings.Join(opts, ","))
	}
	args, target, isMount, err := clientargs.Args(argv)
	if err != nil || !isMount || target != "/mnt/x" {
		t.Fatalf("ParseOptions accepts %+v, but the mount helper refuses %q: %v", o, argv, err)
	}
	n := 0
	for _, a := range args {
		if strings.HasPrefix(a, "--volfile-server=") {
			n++
		}
	}
	if want := len(o.Servers) + backupsIn(o.MountOptions); n != want {
		t.Fatalf("%q gives the client %d servers (%q), want %d", argv, n, args, want)
	}
}

// backupsIn counts the servers of a backup-volfile-servers mount option.
func backupsIn(opts []string) int {
	for _, o := range opts {
		if v, ok := strings.CutPrefix(o, backupServersOption+"="); ok {
			return len(strings.Split(v, ":"))
		}
	}
	return 0
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkRefusal: a refusal of a JSON object names a key it has, or a
// required one it lacks.
func checkRefusal(t *testing.T, raw []byte, err error) {
	t.Helper()
	var oe *fs.OptionError
	if !errors.As(err, &oe) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil && obj != nil {
			t.Fatalf("ParseOptions(%q) refuses an object without naming a key: %v", raw, err)
		}
		return
	}
	var obj map[string]json.RawMessage
	if jerr := json.Unmarshal(raw, &obj); jerr != nil {
		t.Fatalf("ParseOptions(%q) names key %q of something that is not an object (%v)", raw, oe.Field, jerr)
	}
	if _, ok := obj[oe.Field]; !ok && oe.Field != KeyServer && oe.Field != KeyVolume {
		t.Fatalf("ParseOptions(%q): %v names a key the options do not have", raw, err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%q", oe.Field)) {
		t.Fatalf("ParseOptions(%q): %q does not quote the key %q", raw, err, oe.Field)
	}
}

// checkOptions checks every part of accepted options.
func checkOptions(t *testing.T, raw []byte, o Options) {
	t.Helper()
	if len(o.Servers) == 0 {
		t.Fatalf("ParseOptions(%q): no server", raw)
	}
	for _, s := range o.Servers {
		if err := fs.CheckHost(s); err != nil || strings.ContainsAny(s, ":,/ \t\n\x00") {
			t.Fatalf("ParseOptions(%q): server %q (%v)", raw, s, err)
		}
	}
	if !volumeRE().MatchString(o.Volume) {
		t.Fatalf("ParseOptions(%q): volume %q", raw, o.Volume)
	}
	for _, opt := range o.RecordedOptions() {
		if err := checkMountOption(opt); err != nil || strings.ContainsAny(opt, ", \t\n\x00") {
			t.Fatalf("ParseOptions(%q): mount option %q (%v)", raw, opt, err)
		}
		checkBounds(t, raw, opt)
	}
	args := o.MountArgs("/dir")
	if args[0] != "-t" || args[1] != FSType || args[len(args)-1] != "/dir" || args[len(args)-2] != o.Source() {
		t.Fatalf("ParseOptions(%q): mount args %q", raw, args)
	}
	if src := o.Source(); strings.HasPrefix(src, "-") || strings.Count(src, ":") != 1 {
		t.Fatalf("ParseOptions(%q): source %q", raw, src)
	}
	if len(args) != 4 && (len(args) != 6 || args[2] != "-o" || strings.HasPrefix(args[3], "-")) {
		t.Fatalf("ParseOptions(%q): mount args %q", raw, args)
	}
}

// encodeOptions writes o back as the JSON options that ask for it.
func encodeOptions(o Options) []byte {
	m := map[string]string{KeyVolume: o.Volume}
	if o.fromServers {
		m[KeyServers] = strings.Join(o.Servers, ",")
	} else {
		m[KeyServer] = o.Servers[0]
	}
	if len(o.MountOptions) > 0 {
		m[KeyMountOptions] = strings.Join(o.MountOptions, ",")
	}
	if o.ReadOnly {
		m[fs.KeyReadWrite] = "ro"
	}
	if o.Pod != nil {
		m[fs.KeyPodNamespace], m[fs.KeyPodName], m[fs.KeyPodUID] = o.Pod.Namespace, o.Pod.Name, o.Pod.UID
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// checkedServers are the servers of options CheckServers returned: the
// volume file server, its backups and those of backup-volfile-servers.
func checkedServers(o Options) []string {
	out := slices.Clone(o.Servers)
	for _, opt := range o.MountOptions {
		if v, ok := strings.CutPrefix(opt, backupServersOption+"="); ok {
			out = append(out, strings.Split(v, ":")...)
		}
	}
	return out
}
