package rollout

import "k8s.io/client-go/rest"

// The client-side rate limits of a rollout's API client. A dry run asks a
// few requests per node (the pods its drain would evict are listed node by
// node), so client-go's defaults (5 per second, bursts of 10) would make
// the plan of 500 nodes take more than 100 s on the client alone; kubectl
// allows 50 per second too. docs/upgrade.md has the measured figures.
const (
	ClientQPS   = 50
	ClientBurst = 100
)

// SetClientDefaults sets the rate limits of cfg that are unset (zero) to
// ClientQPS and ClientBurst.
func SetClientDefaults(cfg *rest.Config) {
	if cfg.QPS == 0 {
		cfg.QPS = ClientQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = ClientBurst
	}
}
