package deploy_test

import (
	"encoding/json"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/mountcontainers/mountcontainers/internal/pod/metrics"
)

// defaultMetricsPort is mountpod serve's default --metrics-address port.
const defaultMetricsPort = 9641

// TestMetricsPorts: every overlay's mount pod exposes its metrics on a
// port named "metrics" that is the one mountpod listens on and the one its
// scrape annotation names, and no two overlays share a port: host-network
// pods of one node share the node's ports.
func TestMetricsPorts(t *testing.T) {
	seen := map[int32]string{}
	for _, o := range mountPodOverlays {
		overlay := o.overlay
		ds := daemonSet(t, overlay)
		c := ds.Spec.Template.Spec.Containers[0]
		i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" })
		if i < 0 {
			t.Fatalf("%s: no port named metrics: %+v", overlay, c.Ports)
		}
		port := c.Ports[i].ContainerPort
		listen := int32(defaultMetricsPort)
		for _, e := range c.Env {
			if e.Name == "MOUNTPOD_METRICS_ADDRESS" {
				_, p, err := net.SplitHostPort(e.Value)
				n, perr := strconv.Atoi(p)
				if err != nil || perr != nil {
					t.Fatalf("%s: MOUNTPOD_METRICS_ADDRESS %q is not host:port", overlay, e.Value)
				}
				listen = int32(n)
			}
		}
		a := ds.Spec.Template.Annotations
		if port != listen || a["prometheus.io/port"] != strconv.Itoa(int(port)) || a["prometheus.io/scrape"] != "true" {
			t.Errorf("%s: port %d, mountpod listens on %d, annotations %v: they must agree", overlay, port, listen, a)
		}
		if other, ok := seen[port]; ok {
			t.Errorf("%s and %s both use port %d: their pods could not share a node", overlay, other, port)
		}
		seen[port] = overlay
	}
}

// TestMonitoring: deploy/monitoring's PodMonitor selects every overlay's
// mount pods by their metrics port, and every query of the dashboard names
// only metrics the code exposes.
func TestMonitoring(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), "monitoring")
	if err != nil {
		t.Fatalf("kustomize build monitoring: %v", err)
	}
	var pm podMonitor
	var dashboard string
	for _, res := range rm.Resources() {
		y, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		switch res.GetKind() {
		case "PodMonitor":
			if err := yaml.UnmarshalStrict(y, &pm); err != nil {
				t.Fatalf("PodMonitor: %v", err)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict(y, &cm); err != nil {
				t.Fatal(err)
			}
			if cm.Labels["grafana_dashboard"] != "1" {
				t.Errorf("ConfigMap %s lacks the grafana_dashboard label of Grafana's sidecar", cm.Name)
			}
			dashboard = cm.Data["mountcontainers.json"]
		default:
			t.Errorf("unexpected %s %s", res.GetKind(), res.GetName())
		}
	}
	for _, o := range mountPodOverlays {
		overlay := o.overlay
		ds := daemonSet(t, overlay)
		for k, v := range pm.Spec.Selector.MatchLabels {
			if ds.Spec.Template.Labels[k] != v {
				t.Errorf("the PodMonitor selects %s=%s; %s's pods have %q", k, v, overlay, ds.Spec.Template.Labels[k])
			}
		}
		if !slices.Contains(pm.Spec.NamespaceSelector.MatchNames, ds.Namespace) {
			t.Errorf("the PodMonitor looks in %v, %s is in %s", pm.Spec.NamespaceSelector.MatchNames, overlay, ds.Namespace)
		}
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			if !slices.ContainsFunc(ds.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == ep.Port }) {
				t.Errorf("the PodMonitor scrapes port %q, which %s's pods lack", ep.Port, overlay)
			}
		}
	}
	if len(pm.Spec.PodMetricsEndpoints) == 0 {
		t.Error("the PodMonitor has no endpoint")
	}
	checkDashboard(t, dashboard)
}

type podMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		PodMetricsEndpoints []struct {
			Port          string           `json:"port"`
			Path          string           `json:"path"`
			Interval      string           `json:"interval"`
			ScrapeTimeout string           `json:"scrapeTimeout"`
			Relabelings   []map[string]any `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// dashboard is what the test reads of a Grafana dashboard.
type dashboard struct {
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
	// Templating's queries are PromQL too.
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func checkDashboard(t *testing.T, text string) {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal([]byte(text), &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	names, err := metrics.Names()
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			exprs = append(exprs, v.Definition)
		}
	}
	if len(exprs) < 10 {
		t.Errorf("only %d queries in the dashboard", len(exprs))
	}
	used := map[string]bool{}
	for _, e := range exprs {
		found := metricNames(e)
		if len(found) == 0 {
			t.Errorf("query %q names no metric", e)
		}
		for _, n := range found {
			used[n] = true
			if !slices.Contains(names, n) {
				t.Errorf("query %q names %s, which the code does not expose (it does: %s)", e, n, strings.Join(names, " "))
			}
		}
	}
	for _, want := range []string{"mountcontainers_registration_state", "mountcontainers_exec_commands_total",
		"mountcontainers_volume_host_exec_duration_seconds_bucket", "mountcontainers_live_mounts"} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

var (
	promString    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promRange     = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promKeywords  = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan"}
	grafanaAssign = regexp.MustCompile(`\$\w+`)
	// Numbers and durations (0.99, 1e3, 5m).
	promNumber = regexp.MustCompile(`(^|[^a-zA-Z0-9_:])[0-9][0-9a-zA-Z_.]*`)
)

// metricNames returns the metric names a PromQL expression (or a Grafana
// label_values query) selects: identifiers that are neither functions,
// keywords, label names (in matchers and groupings) nor numbers.
func metricNames(expr string) []string {
	e := promString.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, "")
	e = promRange.ReplaceAllString(e, "")
	e = promGrouping.ReplaceAllString(e, "")
	e = grafanaAssign.ReplaceAllString(e, "")
	e = promNumber.ReplaceAllString(e, "$1")
	// label_values(metric, label): the second argument is a label.
	if rest, ok := strings.CutPrefix(strings.TrimSpace(e), "label_values("); ok {
		e, _, _ = strings.Cut(rest, ",")
	}
	var out []string
	for _, m := range promIdent.FindAllString(e, -1) {
		if strings.HasSuffix(m, "(") || slices.Contains(promKeywords, strings.ToLower(m)) {
			continue
		}
		out = append(out, m)
	}
	return out
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`histogram_quantile(0.99, sum by (le, tool) (rate(a_bucket{x=~"$i", y!="by"}[$__rate_interval])))`: {"a_bucket"},
		`b * on (instance) group_left (version) c == 1`:                                                    {"b", "c"},
		`label_values(d, instance)`:            {"d"},
		`sum without (le) (e) and f offset 5m`: {"e", "f"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %v, want %v", expr, got, want)
		}
	}
}
