package csi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	csiapi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
)

// fakeCeph is the ceph tool of a fake mount pod: the subvolumes of its
// file systems are entries of a map. Each call checks what the driver
// hands the tool: the key only in the file --keyfile names, that file
// root's alone, nothing configuring the tool but its arguments.
type fakeCeph struct {
	key        string
	groups     map[string]bool   // FS/GROUP
	subvolumes map[string]int64  // FS/GROUP/NAME: its quota
	paths      map[string]string // FS/GROUP/NAME: its path
	calls      [][]string
	problems   []string
	fail       string // when set, every command fails, printing it
}

func newFakeCeph(key string) *fakeCeph {
	return &fakeCeph{key: key, groups: map[string]bool{}, subvolumes: map[string]int64{}, paths: map[string]string{}}
}

func (f *fakeCeph) run(argv []string) *runtimeapi.ExecSyncResponse {
	f.calls = append(f.calls, argv)
	exit := func(code int32, stderr string) *runtimeapi.ExecSyncResponse {
		return &runtimeapi.ExecSyncResponse{ExitCode: code, Stderr: []byte(stderr)}
	}
	if argv[0] != "ceph" {
		f.problems = append(f.problems, fmt.Sprintf("ran %q", argv))
		return exit(127, "not found")
	}
	var cmd []string
	flags := map[string]string{}
	for i, a := range argv[1:] {
		if strings.Contains(a, f.key) {
			f.problems = append(f.problems, fmt.Sprintf("the key is in argument %d of %q", i+1, argv[0]))
		}
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") && cmd == nil {
			flags[k] = v
			continue
		}
		cmd = append(cmd, a)
	}
	if flags["--conf"] != "/dev/null" || flags["--id"] == "" || flags["--mon_host"] == "" {
		f.problems = append(f.problems, fmt.Sprintf("ceph's configuration is not its arguments alone: %q", argv))
	}
	if fi, err := os.Lstat(flags["--keyfile"]); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		f.problems = append(f.problems, fmt.Sprintf("--keyfile %q: %v %v, want a regular file of mode 0600", flags["--keyfile"], fi, err))
	} else if b, err := os.ReadFile(flags["--keyfile"]); err != nil || string(b) != f.key {
		f.problems = append(f.problems, fmt.Sprintf("--keyfile %q does not hold the key: %v", flags["--keyfile"], err))
	}
	if f.fail != "" {
		return exit(1, f.fail)
	}
	// fs subvolumegroup create FS GROUP
	if len(cmd) == 5 && cmd[0] == "fs" && cmd[1] == "subvolumegroup" && cmd[2] == "create" {
		f.groups[cmd[3]+"/"+cmd[4]] = true
		return &runtimeapi.ExecSyncResponse{}
	}
	// fs subvolume VERB FS NAME --group_name GROUP [--size N] [--mode M]
	if len(cmd) < 7 || len(cmd)%2 == 0 || cmd[0] != "fs" || cmd[1] != "subvolume" {
		return exit(22, fmt.Sprintf("Error EINVAL: %q", cmd))
	}
	opts := map[string]string{}
	for i := 5; i+1 < len(cmd); i += 2 {
		opts[cmd[i]] = cmd[i+1]
	}
	group := cmd[3] + "/" + opts["--group_name"]
	sv := group + "/" + cmd[4]
	_, exists := f.subvolumes[sv]
	switch cmd[2] {
	case "create":
		if !f.groups[group] {
			return exit(2, fmt.Sprintf("Error ENOENT: subvolume group '%s' does not exist", opts["--group_name"]))
		}
		if opts["--mode"] != "777" {
			f.problems = append(f.problems, fmt.Sprintf("a subvolume made with mode %q, not 777: %q", opts["--mode"], cmd))
		}
		var size int64
		fmt.Sscan(opts["--size"], &size)
		if !exists {
			f.subvolumes[sv] = size
			f.paths[sv] = fmt.Sprintf("/volumes/%s/%s/%08x-aaaa-bbbb-cccc-dddddddddddd", opts["--group_name"], cmd[4], len(f.paths))
		}
		return &runtimeapi.ExecSyncResponse{}
	case "getpath", "info", "rm":
		if !exists {
			return exit(2, fmt.Sprintf("Error ENOENT: subvolume '%s' does not exist", cmd[4]))
		}
		switch cmd[2] {
		case "getpath":
			return &runtimeapi.ExecSyncResponse{Stdout: []byte(f.paths[sv] + "\n")}
		case "info":
			quota := `"infinite"`
			if f.subvolumes[sv] > 0 {
				quota = fmt.Sprint(f.subvolumes[sv])
			}
			return &runtimeapi.ExecSyncResponse{Stdout: []byte(`{"bytes_quota": ` + quota + `, "type": "subvolume"}`)}
		}
		delete(f.subvolumes, sv)
		return &runtimeapi.ExecSyncResponse{}
	}
	return exit(22, fmt.Sprintf("Error EINVAL: %q", cmd))
}

// TestCephFSController provisions, validates and deletes CephFS volumes as
// subvolumes through the ceph tool of the (fake) mount pod, each call
// idempotent; the key reaches the tool only through a root-only file on
// the secrets directory, gone once the call ends; bad parameters and
// secrets change nothing, and a failing tool's error is the caller's.
func TestCephFSController(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	const key = "AQBvZXV0ZXN0a2V5MDEyMzQ1Njc4OTAxMjM0NTY3OA=="
	f := newFakeCeph(key)
	var secrets string
	e := newEnv(t, func(e *env) {
		e.d.Name, e.d.FS = "cephfs.mountcontainers.io", cephfs.FS{}
		e.other = f.run
		secrets = e.d.Volumes.SecretsDir
		if err := os.MkdirAll(secrets, 0o700); err != nil {
			t.Fatal(err)
		}
	})
	ctl := csiapi.NewControllerClient(e.conn(t))
	ctx := context.Background()
	mountCap := &csiapi.VolumeCapability{
		AccessType: &csiapi.VolumeCapability_Mount{Mount: &csiapi.VolumeCapability_MountVolume{}},
		AccessMode: &csiapi.VolumeCapability_AccessMode{Mode: csiapi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
	params := map[string]string{"monitors": server + ":6789", "fs": "cephfs", "subvolumeGroup": "grp", "user": "node", "mountOptions": "noatime"}
	provisioner := map[string]string{"key": key}
	create := func(params, secrets map[string]string) (*csiapi.CreateVolumeResponse, error) {
		return ctl.CreateVolume(ctx, &csiapi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csiapi.VolumeCapability{mountCap},
			Parameters: params, Secrets: secrets, CapacityRange: &csiapi.CapacityRange{RequiredBytes: 1 << 30}})
	}
	noKeyFile := func(when string) {
		t.Helper()
		if left, _ := os.ReadDir(secrets); len(left) != 0 {
			t.Errorf("%s: the secrets directory holds %v", when, left)
		}
	}

	vol, err := create(params, provisioner)
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	const id = server + ":6789/cephfs/grp/pvc-1"
	if v := vol.GetVolume(); v.GetVolumeId() != id || v.GetCapacityBytes() != 1<<30 {
		t.Errorf("CreateVolume: volume %q of %d bytes; want %q of %d", v.GetVolumeId(), v.GetCapacityBytes(), id, 1<<30)
	}
	wantCtx := map[string]string{"monitors": server + ":6789", "fs": "cephfs", "user": "node", "mountOptions": "noatime", "path": f.paths["cephfs/grp/pvc-1"]}
	if got := vol.GetVolume().GetVolumeContext(); fmt.Sprint(got) != fmt.Sprint(wantCtx) || !strings.HasPrefix(got["path"], "/volumes/grp/pvc-1/") {
		t.Errorf("CreateVolume: volume context %v; want %v", got, wantCtx)
	}
	if size, ok := f.subvolumes["cephfs/grp/pvc-1"]; !ok || size != 1<<30 {
		t.Errorf("subvolumes after CreateVolume: %v; want cephfs/grp/pvc-1 with a quota of %d", f.subvolumes, 1<<30)
	}
	noKeyFile("after CreateVolume")
	again, err := create(params, provisioner)
	if err != nil || again.GetVolume().GetVolumeId() != id || again.GetVolume().GetVolumeContext()["path"] != wantCtx["path"] || len(f.subvolumes) != 1 {
		t.Errorf("CreateVolume again: %v, %v; want the same volume (subvolumes %v)", again, err, f.subvolumes)
	}
	_, err = ctl.CreateVolume(ctx, &csiapi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csiapi.VolumeCapability{mountCap},
		Parameters: params, Secrets: provisioner, CapacityRange: &csiapi.CapacityRange{RequiredBytes: 2 << 30}})
	if status.Code(err) != codes.AlreadyExists || f.subvolumes["cephfs/grp/pvc-1"] != 1<<30 {
		t.Errorf("CreateVolume again with another capacity: %v (subvolumes %v); want AlreadyExists, the subvolume as it was", err, f.subvolumes)
	}

	validate := func() error {
		_, err := ctl.ValidateVolumeCapabilities(ctx, &csiapi.ValidateVolumeCapabilitiesRequest{VolumeId: id, VolumeCapabilities: []*csiapi.VolumeCapability{mountCap}, Secrets: provisioner})
		return err
	}
	if err := validate(); err != nil {
		t.Errorf("ValidateVolumeCapabilities: %v", err)
	}
	for i := range 2 {
		if _, err := ctl.DeleteVolume(ctx, &csiapi.DeleteVolumeRequest{VolumeId: id, Secrets: provisioner}); err != nil {
			t.Errorf("DeleteVolume (%d): %v", i+1, err)
		}
	}
	if len(f.subvolumes) != 0 {
		t.Errorf("subvolumes after DeleteVolume: %v", f.subvolumes)
	}
	if err := validate(); status.Code(err) != codes.NotFound {
		t.Errorf("ValidateVolumeCapabilities of a deleted volume: %v; want NotFound", err)
	}
	noKeyFile("after DeleteVolume")

	// Refused before anything runs.
	calls := len(f.calls)
	with := func(k, v string) map[string]string {
		p := map[string]string{}
		for k, v := range params {
			p[k] = v
		}
		if v == "" {
			delete(p, k)
		} else {
			p[k] = v
		}
		return p
	}
	for _, tc := range []struct {
		what            string
		params, secrets map[string]string
		says            string
	}{
		{"no file system", with("fs", ""), provisioner, `"fs"`},
		{"a monitor off the allow-list", with("monitors", "127.0.0.1"), provisioner, `"monitors"`},
		{"a path", with("path", "/volumes"), provisioner, `"path"`},
		{"a mount option off the list", with("mountOptions", "exec-this"), provisioner, "mountOptions"},
		{"a bad subvolume group", with("subvolumeGroup", "_deleting"), provisioner, "subvolumeGroup"},
		{"no key", params, nil, "secret key"},
		{"not a key", params, map[string]string{"key": "--mon_host=evil"}, "secret key"},
		{"another entry", params, map[string]string{"key": key, "keyring": key}, "keyring"},
	} {
		_, err := create(tc.params, tc.secrets)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v; want InvalidArgument saying %s, without the key", tc.what, err, tc.says)
		}
	}
	if _, err := ctl.DeleteVolume(ctx, &csiapi.DeleteVolumeRequest{VolumeId: "127.0.0.1:6789/cephfs/grp/pvc-1", Secrets: provisioner}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("DeleteVolume of a volume whose monitor is off the allow-list: %v; want InvalidArgument", err)
	}
	if len(f.calls) != calls {
		t.Errorf("the ceph tool ran for refused requests: %q", f.calls[calls:])
	}

	// The tool fails: the caller learns why and where; nothing is left.
	f.fail = "Error EPERM: access denied"
	_, err = create(params, provisioner)
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "EPERM") || !strings.Contains(err.Error(), "mount pod") || strings.Contains(err.Error(), key) {
		t.Errorf("CreateVolume with a failing tool: %v; want Internal naming EPERM and the mount pod, without the key", err)
	}
	noKeyFile("after a failed CreateVolume")
	if len(f.problems) != 0 {
		t.Errorf("what the driver handed the ceph tool:\n%s", strings.Join(f.problems, "\n"))
	}
	log := e.log.String()
	if strings.Contains(log, key) {
		t.Errorf("the driver's log holds the key:\n%s", log)
	}
	// Each run of the tool is a record naming the command and where it
	// ran, without its arguments (the key file's path among them).
	ran := map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		var r struct{ Msg, Command, Message, Subvolume string }
		if json.Unmarshal([]byte(line), &r) != nil || r.Msg != "ran" {
			continue
		}
		ran[r.Command]++
		if r.Subvolume != "pvc-1" || !strings.Contains(r.Message, "mount pod") || strings.Contains(line, "keyfile") || strings.Contains(line, secrets) {
			t.Errorf("record of a run: %s; want the subvolume pvc-1, where it ran and no argument", line)
		}
	}
	for _, c := range []string{"ceph fs subvolume info", "ceph fs subvolumegroup create", "ceph fs subvolume create", "ceph fs subvolume getpath", "ceph fs subvolume rm"} {
		if ran[c] == 0 {
			t.Errorf("no record of %q among the runs %v", c, ran)
		}
	}
}
