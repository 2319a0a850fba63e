// Package rbd is what the node knows of Ceph RBD volumes: the in-tree
// plugin's name and the utility it runs, which kubelet-exec-shim gives to
// the kubelet on the node (no volume options are checked here: the kubelet's
// own rbd plugin makes the calls). It runs in the mount pod, which installs
// the shim's links.
package rbd

// Plugin is the kubelet's in-tree RBD volume plugin.
const Plugin = "kubernetes.io/rbd"

// Tools are the utilities the plugin runs, under whose names the shim is
// installed.
var Tools = []string{"rbd"}
