package framework

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultBedDir is the bed's work directory when BED_DIR is not set.
const DefaultBedDir = "/var/tmp/mountcontainers-bed"

// Env is what test/bed/up.sh wrote to the bed's env file.
type Env struct {
	BedDir          string // the bed's work directory
	Kubeconfig      string // admin kubeconfig
	Kubectl         string // the kubectl binary built for the bed
	KubeVersion     string // the Kubernetes version, e.g. v1.36.3
	APIServer       string // https://127.0.0.1:<port>
	CRISocket       string // containerd's socket path
	CRIEndpoint     string // unix://<CRISocket>
	KubeletRoot     string // the kubelet's root directory (stands in for /var/lib/kubelet)
	VolumePluginDir string // the kubelet's and controller-manager's Flexvolume directory
	RegistrationDir string // <KubeletRoot>/plugin-containers
	LoopDir         string // where loop-device backing files go (teardown detaches them)
	LogDir          string // the components' logs
	NodeName        string
	NodeIP          string
	MountpodImage   string // the mount-pod image built from images/Dockerfile
	BaseImage       string // debian:bookworm-slim made with debootstrap
	PauseImage      string
	// HostName is the machine's host name: it resolves (to loopback), and
	// a bed of one node is named after it.
	HostName string
	// Nodes are the bed's nodes, the first being the one the fields above
	// name (up.sh: BED_NODES).
	Nodes []Node
	// Vars holds every variable of the file, including those above.
	Vars map[string]string
}

// Node is one node of the bed: its kubelet, containerd and directories.
type Node struct {
	Name            string
	IP              string
	Dir             string // the node's tree (the bed's directory for a bed of one node)
	KubeletRoot     string
	RegistrationDir string
	VolumePluginDir string
	CRISocket       string
	ShimDir         string // where the glusterfs mount pod installs kubelet-exec-shim
}

// BedDir returns $BED_DIR or DefaultBedDir.
func BedDir() string {
	if d := os.Getenv("BED_DIR"); d != "" {
		return d
	}
	return DefaultBedDir
}

// EnvPath returns $BED_ENV or <BedDir()>/env.
func EnvPath() string {
	if p := os.Getenv("BED_ENV"); p != "" {
		return p
	}
	return filepath.Join(BedDir(), "env")
}

// LoadEnv reads an env file of `export KEY=value` lines as up.sh writes it.
func LoadEnv(path string) (*Env, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read bed env: %w", err)
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			return nil, fmt.Errorf("read bed env %s: bad line %q", path, line)
		}
		vars[k] = strings.Trim(v, `"'`)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read bed env %s: %w", path, err)
	}
	e := &Env{
		BedDir:          vars["BED_DIR"],
		Kubeconfig:      vars["KUBECONFIG"],
		Kubectl:         vars["KUBECTL"],
		KubeVersion:     vars["KUBE_VERSION"],
		APIServer:       vars["API_SERVER"],
		CRISocket:       vars["CRI_SOCKET"],
		CRIEndpoint:     vars["CRI_ENDPOINT"],
		KubeletRoot:     vars["KUBELET_ROOT"],
		VolumePluginDir: vars["VOLUME_PLUGIN_DIR"],
		RegistrationDir: vars["REGISTRATION_DIR"],
		LoopDir:         vars["LOOP_DIR"],
		LogDir:          vars["LOG_DIR"],
		NodeName:        vars["NODE_NAME"],
		NodeIP:          vars["NODE_IP"],
		MountpodImage:   vars["MOUNTPOD_IMAGE"],
		BaseImage:       vars["BASE_IMAGE"],
		PauseImage:      vars["PAUSE_IMAGE"],
		HostName:        vars["BED_HOST_NAME"],
		Vars:            vars,
	}
	if e.HostName == "" { // an env file older than the nodes
		e.HostName = e.NodeName
	}
	nodes := 1
	if v := vars["BED_NODES"]; v != "" {
		if _, err := fmt.Sscan(v, &nodes); err != nil || nodes < 1 {
			return nil, fmt.Errorf("read bed env %s: BED_NODES=%q is not a number of nodes", path, v)
		}
	}
	for i := 1; i <= nodes; i++ {
		v := func(what string) string { return vars[fmt.Sprintf("NODE_%d_%s", i, what)] }
		n := Node{Name: v("NAME"), IP: v("IP"), Dir: v("DIR"), KubeletRoot: v("KUBELET_ROOT"),
			RegistrationDir: v("REGISTRATION_DIR"), VolumePluginDir: v("VOLUME_PLUGIN_DIR"),
			CRISocket: v("CRI_SOCKET"), ShimDir: v("SHIM_DIR")}
		if i == 1 && n.Name == "" { // an env file older than the nodes
			n = Node{Name: e.NodeName, IP: e.NodeIP, Dir: e.BedDir, KubeletRoot: e.KubeletRoot,
				RegistrationDir: e.RegistrationDir, VolumePluginDir: e.VolumePluginDir,
				CRISocket: e.CRISocket, ShimDir: filepath.Join(e.BedDir, "shim-bin")}
		}
		if n.Name == "" || n.KubeletRoot == "" || n.CRISocket == "" {
			return nil, fmt.Errorf("read bed env %s: BED_NODES=%d but node %d lacks NODE_%d_NAME, _KUBELET_ROOT or _CRI_SOCKET", path, nodes, i, i)
		}
		e.Nodes = append(e.Nodes, n)
	}
	var missing []string
	for k, v := range map[string]string{"KUBECONFIG": e.Kubeconfig, "KUBECTL": e.Kubectl, "CRI_SOCKET": e.CRISocket,
		"KUBELET_ROOT": e.KubeletRoot, "NODE_NAME": e.NodeName} {
		if v == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("read bed env %s: missing %s", path, strings.Join(missing, ", "))
	}
	return e, nil
}

// RepoRoot returns the repository's root directory: the nearest parent of the
// working directory holding test/bed/up.sh.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "test", "bed", "up.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repository root: no test/bed/up.sh above the working directory")
		}
		dir = parent
	}
}
