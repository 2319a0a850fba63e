// Package livestatus is the report of the live FUSE mounts a mount pod
// serves: what `mountpod status` prints (package livemount makes it, in the
// mount pod) and the rollout reads (off the node) to tell whether a mount
// pod may be replaced in place. Standard library only.
package livestatus

import "strings"

// Mount is a live FUSE mount under the kubelet's directory.
type Mount struct {
	Target string `json:"target"`
	Source string `json:"source"`
	FSType string `json:"fstype"`
	// Daemons are the processes that serve Target: see the package
	// documentation of livemount.
	Daemons []int `json:"daemons"`
	// Plugin and Scope name the scope (under the plugin's parent) named
	// after Target, when there is one; for a bind of another mount of the
	// same FUSE connection under the kubelet's directory (a pod's bind of
	// a node's shared mount, a CSI publish), that mount's scope.
	Plugin string `json:"plugin,omitempty"`
	Scope  string `json:"scope,omitempty"`
	// Scoped: there is at least one daemon and every daemon is in Scope:
	// the mount does not depend on the life of any mount pod.
	Scoped bool `json:"scoped"`
	// Healthy: stat of Target answers; Error says what it answered
	// otherwise.
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
}

// Scope is a scope with no live mount: what its processes are, and whether
// it can be removed.
type Scope struct {
	Plugin    string `json:"plugin"`
	Name      string `json:"name"`
	Cgroup    string `json:"cgroup"`
	Processes []int  `json:"processes"`
}

// Report is what livemount.Survey found.
type Report struct {
	Mounts []Mount `json:"mounts"`
	// Orphans are scopes without a mount (their processes are leftovers,
	// or none: then they can be removed).
	Orphans []Scope `json:"orphanScopes"`
	// ScopesError says why the scopes could not be listed (scopes are on
	// but unavailable); then no mount is Scoped.
	ScopesError string `json:"scopesError,omitempty"`
}

// Unscoped returns the mounts that would die with the pod whose daemons
// run in it: those not [Mount.Scoped].
func (r Report) Unscoped() []Mount {
	var out []Mount
	for _, m := range r.Mounts {
		if !m.Scoped {
			out = append(out, m)
		}
	}
	return out
}

// IsFUSE reports whether fstype is a FUSE file system type (fuse,
// fuse.glusterfs, fuseblk, ...).
func IsFUSE(fstype string) bool {
	return fstype == "fuse" || fstype == "fuseblk" || strings.HasPrefix(fstype, "fuse.")
}
