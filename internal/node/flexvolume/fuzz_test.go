package flexvolume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
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
// mount(8) command line whose only dashes are its own, and written back as
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
		enc := encodeOptions(o)
		back, err := ParseOptions(enc)
		if err != nil || !reflect.DeepEqual(back, o) {
			t.Fatalf("ParseOptions(%q) = %+v; written back as %s it parses to %+v, %v", raw, o, enc, back, err)
		}
		checked, err := o.CheckServers(context.Background(), ServerPolicy{}, hashResolver{})
		if err != nil {
			var oe *OptionError
			if !errors.As(err, &oe) || (oe.Field != o.serversKey() && oe.Field != KeyMountOptions) {
				t.Fatalf("CheckServers(%+v): %v, want an error naming the servers' option", o, err)
			}
			return
		}
		for _, s := range checkedServers(checked) {
			a, err := netip.ParseAddr(s)
			if err != nil || !a.Is4() || isSpecial(a) {
				t.Fatalf("CheckServers(%+v) with an empty allow-list lets %q through (%+v)", o, s, checked)
			}
		}
	})
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
	var oe *OptionError
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
		if err := checkHost(s); err != nil || strings.ContainsAny(s, ":,/ \t\n\x00") {
			t.Fatalf("ParseOptions(%q): server %q (%v)", raw, s, err)
		}
	}
	if !volumeRE.MatchString(o.Volume) {
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
		m[KeyReadWrite] = "ro"
	}
	if o.Pod != nil {
		m[KeyPodNamespace], m[KeyPodName], m[KeyPodUID] = o.Pod.Namespace, o.Pod.Name, o.Pod.UID
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

// hashResolver resolves every name, to addresses picked by its hash among
// ordinary and special ones (mapped and IPv6 forms too).
type hashResolver struct{}

var resolvable = []string{
	"192.0.2.10", "198.51.100.7", "10.1.2.3", "127.0.0.1", "127.3.4.5", "::ffff:127.0.0.1", "169.254.169.254",
	"::ffff:169.254.169.254", "0.0.0.0", "0.1.2.3", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1",
	"ff02::1", "2001:db8::1", "::ffff:192.0.2.99",
}

func (hashResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	h := fnv.New64a()
	h.Write([]byte(strings.ToLower(host)))
	sum := h.Sum64()
	if sum%17 == 0 {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for n := 1 + sum%3; n > 0; n-- {
		out = append(out, netip.MustParseAddr(resolvable[sum%uint64(len(resolvable))]))
		sum /= uint64(len(resolvable))
	}
	return out, nil
}

// isSpecial reports, by netip's own predicates rather than the driver's
// table, whether a is an address no volume may name unless an
// administrator lists it: loopback, unspecified ("this network" too),
// link-local, multicast or broadcast.
func isSpecial(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsMulticast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		(a.Is4() && (a.As4()[0] == 0 || a == netip.AddrFrom4([4]byte{255, 255, 255, 255})))
}

// FuzzServerPolicy: an allow-list the parser accepts prints as entries
// that parse to the same list, also joined with commas as the environment
// gives them; a refusal names the entry. A special address is allowed only
// by an entry naming nothing but special addresses, an IPv4-mapped address
// exactly as the IPv4 address it maps, and with a non-empty list an
// ordinary address only by an entry that holds it.
func FuzzServerPolicy(f *testing.F) {
	for _, tc := range [][2]string{
		{"", "192.0.2.7"}, {"", "127.0.0.1"}, {"", "::ffff:127.0.0.1"}, {"", "169.254.169.254"},
		{"0.0.0.0/0", "127.0.0.1"}, {"0.0.0.0/0", "192.0.2.99"}, {"::/0", "::ffff:127.0.0.1"}, {"::/0", "::1"},
		{"127.0.0.0/8", "127.0.1.1"}, {"127.0.1.1", "127.0.0.1"}, {"169.254.0.0/16", "169.254.169.254"},
		{"128.0.0.0/1,0.0.0.0/1", "127.0.0.1"}, {"0.0.0.0/5", "0.1.2.3"}, {"fe80::/9", "fe80::1"},
		{"node-1, gluster.example.com.,10.0.0.0/8", "10.9.8.7"}, {"Node-1,192.0.2.1", "192.0.2.1"},
		{"10.0.0.1/8", "10.2.3.4"}, {"2001:db8::/32,fe80::1", "fe80::1"}, {"::ffff:0:0/96", "::ffff:1.2.3.4"},
		{"::ffff:127.0.0.1", "127.0.0.1"}, {"fe80::1%eth0", "fe80::1"}, {"host:24007", "1.2.3.4"},
		{"127.1", "127.0.0.1"}, {"-x", "1.2.3.4"}, {"a;b", "1.2.3.4"}, {"10.0.0.0/33", "10.0.0.1"},
		{"255.255.255.255", "255.255.255.255"}, {"224.0.0.0/3", "224.0.0.1"}, {"\xff", "1.2.3.4"},
		{"::/0", "::2%0"}, {"2001:db8::/32", "2001:db8::1%eth0"},
	} {
		f.Add(tc[0], tc[1])
	}
	f.Fuzz(func(t *testing.T, entries, addr string) {
		list := strings.Split(entries, ",")
		p, err := ParseAllowedServers(list)
		if err != nil {
			named := false
			for _, e := range list {
				named = named || strings.Contains(err.Error(), fmt.Sprintf("allowed server %q", strings.TrimSpace(e)))
			}
			if !named {
				t.Fatalf("ParseAllowedServers(%q): %v names no entry", list, err)
			}
			return
		}
		for _, again := range [][]string{strings.Split(p.String(), ", "), strings.Split(strings.ReplaceAll(p.String(), ", ", ","), ",")} {
			p2, err := ParseAllowedServers(again)
			if err != nil || !reflect.DeepEqual(p, p2) {
				t.Fatalf("ParseAllowedServers(%q) = %s; its entries %q parse to %s, %v", list, p, again, p2, err)
			}
		}
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return
		}
		aerr := p.CheckAddr(a)
		if unmapped := a.Unmap().WithZone(""); (aerr == nil) != (p.CheckAddr(unmapped) == nil) {
			t.Fatalf("policy %s: CheckAddr(%s) = %v, but CheckAddr(%s) = %v", p, a, aerr, unmapped, p.CheckAddr(unmapped))
		}
		if aerr != nil {
			return
		}
		u := a.Unmap().WithZone("") // a zone names a link, not another address
		var holder netip.Prefix
		for _, pfx := range p.prefixes {
			if pfx.Contains(u) && (!isSpecial(u) || isSpecial(pfx.Addr()) && isSpecial(lastAddr(pfx))) {
				holder = pfx
			}
		}
		if !holder.IsValid() && (isSpecial(u) || !p.Empty()) {
			t.Fatalf("policy %s allows %s: no entry holds it (special: %v)", p, a, isSpecial(u))
		}
	})
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// FuzzDecodeSettings: settings a file holds that decode and validate have
// only the keys Install writes, are written back (as Install writes them) to the same settings, keep
// validating with their defaults filled in, and give a positive timeout, a
// known exec mode and an allow-list that parses, also from the
// environment's comma-separated form.
func FuzzDecodeSettings(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"plugin":"example.com/gluster","registrationDir":"/r","runtimeEndpoint":"/run/x.sock","timeout":"5s"}`,
		`{"execMode":"socket","logFile":"/var/log/a.log"}`,
		`{"runtimeEndpoint":"unix:///run/containerd/containerd.sock","execMode":"cri"}`,
		`{"allowedServers":["node-1","127.0.1.1"," gluster.example.com ","","10.0.0.0/8","2001:db8::/32","fe80::1"]}`,
		`{"allowedServers":["::ffff:127.0.0.1"]}`, `{"allowedServers":["a,b"]}`, `{"allowedServers":[]}`,
		`{"timeout":"soon"}`, `{"timeout":"-1s"}`, `{"timeout":"0"}`, `{"timeout":"1ns"}`, `{"timeout":"9223372036854775807ns"}`,
		`{"runtimeEndpoint":"tcp://x"}`, `{"execMode":"fast"}`, `{"logFile":"driver.log"}`, `{"logFile":"/a/../b"}`,
		`{"plugin":"Kubernetes.io/x"}`, `{"plugin":"a/b/c"}`, `{"registrationDir":"rel"}`,
		`{"plugin":"a\u0000b"}`, "{\"plugin\":\"\xff\"}", `{"timeout":5}`, `{"allowedServer":["x"]}`,
		`{} {}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSettings(data)
		if err != nil || s.Validate() != nil {
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil {
			t.Fatalf("settings %q accepted, but they are not one JSON object: %v", data, err)
		}
		for k := range obj {
			if !slices.ContainsFunc(settingsKeys, func(f string) bool { return strings.EqualFold(f, k) }) {
				t.Fatalf("settings %q accepted with the unknown key %q (known: %q)", data, k, settingsKeys)
			}
		}
		enc, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeSettings(enc)
		if err != nil || back.Validate() != nil || !reflect.DeepEqual(normalSettings(back), normalSettings(s)) {
			t.Fatalf("settings %q = %+v; written back as %s they decode to %+v, %v", data, s, enc, back, err)
		}
		w := s.WithDefaults()
		if err := w.Validate(); err != nil || !reflect.DeepEqual(w.WithDefaults(), w) {
			t.Fatalf("settings %+v with defaults %+v: %v", s, w, err)
		}
		if d := s.TimeoutDuration(); d <= 0 || w.TimeoutDuration() != d {
			t.Fatalf("settings %+v: timeout %v, with defaults %v", s, d, w.TimeoutDuration())
		}
		if m := s.Mode(); m != mcexec.ModeAuto && m != mcexec.ModeCRI && m != mcexec.ModeSocket {
			t.Fatalf("settings %+v: exec mode %q", s, m)
		}
		p, err := ParseAllowedServers(s.AllowedServers)
		if err != nil || !reflect.DeepEqual(s.ServerPolicy(), p) {
			t.Fatalf("settings %+v: allow-list %s, %v", s, p, err)
		}
		if env, err := ParseAllowedServers(strings.Split(strings.Join(s.AllowedServers, ","), ",")); err != nil || !reflect.DeepEqual(env, p) {
			t.Fatalf("settings %+v: the allow-list joined as the environment gives it parses to %s, %v", s, env, err)
		}
	})
}

// settingsKeys are the keys of the settings file.
var settingsKeys = func() []string {
	var keys []string
	st := reflect.TypeFor[Settings]()
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
		keys = append(keys, name)
	}
	return keys
}()

// normalSettings is s with an empty allow-list as nil: the file leaves
// out an empty list.
func normalSettings(s Settings) Settings {
	if len(s.AllowedServers) == 0 {
		s.AllowedServers = nil
	}
	return s
}

// elsewhere reports whether s is part of a key of vals, or of a value
// other than the secret's: an error or option quoting that holds s without
// holding the secret.
func elsewhere(vals map[string]string, s string) bool {
	for k, v := range vals {
		if strings.Contains(k, s) || (k != KeySecretKey && strings.Contains(v, s)) {
			return true
		}
	}
	return false
}

var cephSeeds = []string{
	"{\"00000000000\xc5\":\"\",\"kubernetes.io/secret/key\":\"00000000\"}",
	`{"monitors":"10.0.0.7","user":"AAAAAAAAAAAAAAAA","kubernetes.io/secret/key":"QUFBQUFBQUFBQUFBQUFBQQ=="}`,
	`{"monitors":"10.0.0.7:6789,mon.example","user":"web","fs":"cephfs","path":"/volumes/web","mountOptions":"noatime,ro","kubernetes.io/secret/key":"QVFCaDl4bG1BQUFBQUJBQXg4WWQxdThUWjZsSWJJNmJRMWxDbUE9PQo="}`,
	`{"monitors":"10.0.0.7","kubernetes.io/secret/key":"QVFCaDl4bG1BQUFBQUJBQXg4WWQxdThUWjZsSWJJNmJRMWxDbUE9PQ==","kubernetes.io/readwrite":"ro"}`,
	`{"monitors":"127.0.0.1:6789","kubernetes.io/secret/key":"QVFCaDl4bG1BQUFBQUJBQXg4WWQxdThUWjZsSWJJNmJRMWxDbUE9PQ=="}`,
	`{"monitors":"10.0.0.7","path":"/a/../b","user":"a,b","kubernetes.io/secret/key":"eA=="}`,
	`{"monitors":"[::1]:6789","mountOptions":"ceph.keyring=/x"}`,
	`{"monitors":"10.0.0.7:65536;x"}`,
	`{"monitors":"10.0.0.7","mountOptions":"noatime,noatime,rw","kubernetes.io/readwrite":"ro","kubernetes.io/secret/key":"QVFCaDl4bG1BQUFBQUJBQXg4WWQxdThUWjZsSWJJNmJRMWxDbUE9PQ=="}`,
}

// FuzzCephFSOptions: the CephFS option parser is deterministic; a refusal
// names one of the object's keys (or a required key it lacks) and never
// quotes the secret; an accepted volume gives mount(8) options that hold
// no comma, no NUL and no part of the key, name no file other than the
// key file the driver adds, connect only to allowed monitors, and carry
// the key as the base64 text of a cephx key.
func FuzzCephFSOptions(f *testing.F) {
	for _, s := range cephSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		vals, err := decodeOptions(raw)
		if err != nil {
			return // decodeOptions is FuzzParseOptions' subject
		}
		ctx := context.Background()
		m, err := CephFS{}.Mount(ctx, vals, Env{Resolver: hashResolver{}})
		m2, err2 := CephFS{}.Mount(ctx, vals, Env{Resolver: hashResolver{}})
		if !reflect.DeepEqual(m, m2) || errString(err) != errString(err2) {
			t.Fatalf("Mount(%q) = %+v, %v, then %+v, %v", raw, m, err, m2, err2)
		}
		if err != nil {
			var oe *OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("Mount(%q): %v, not an OptionError", raw, err)
			}
			if _, ok := vals[oe.Field]; !ok && oe.Field != KeyMonitors && oe.Field != KeySecretKey {
				t.Fatalf("Mount(%q): error names %q, which it does not have", raw, oe.Field)
			}
			if k := vals[KeySecretKey]; len(k) >= 8 && strings.Contains(err.Error(), k) && !elsewhere(vals, k) {
				t.Fatalf("Mount(%q): the error quotes the secret: %v", raw, err)
			}
			return
		}
		if m.FSType != "fuse.ceph" || m.Source != "none" || m.Secret == nil || m.Secret.Option != "ceph.keyfile" {
			t.Fatalf("Mount(%q) = %+v", raw, m)
		}
		if !cephKeyRE.Match(m.Secret.Data) {
			t.Fatalf("Mount(%q): key %q is not a cephx key", raw, m.Secret.Data)
		}
		seen := map[string]bool{}
		for _, o := range m.Options {
			name, value, _ := strings.Cut(o, "=")
			if o == "" || strings.ContainsAny(o, ",\x00 \t\n") || seen[name] {
				t.Fatalf("Mount(%q): option %q (all: %q)", raw, o, m.Options)
			}
			seen[name] = true
			if strings.Contains(o, string(m.Secret.Data)) && !elsewhere(vals, string(m.Secret.Data)) {
				t.Fatalf("Mount(%q): option %q holds the key", raw, o)
			}
			switch name {
			case "ceph.id", "ceph.client_fs", "ceph.client_mountpoint":
			case "ceph.conf":
				if value != "/dev/null" {
					t.Fatalf("Mount(%q): ceph.conf=%q", raw, value)
				}
			case "ceph.mon_host":
				for _, mon := range strings.Split(value, ";") {
					host, _, _ := strings.Cut(mon, ":")
					a, err := netip.ParseAddr(host)
					if err != nil || !a.Is4() || isSpecial(a) {
						t.Fatalf("Mount(%q): monitor %q with an empty allow-list", raw, mon)
					}
				}
			default:
				if !slices.Contains(cephMountOptions, o) {
					t.Fatalf("Mount(%q): option %q is not allowed", raw, o)
				}
			}
		}
	})
}
