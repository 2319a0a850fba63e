package registrar

import (
	"fmt"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// Check reports why the mount pod described by cfg is not ready: a missing
// required tool, an invalid configuration, or a configured plugin whose
// registration is missing, unreadable or names another pod. It returns no
// problem when every registration names this pod and every tool is present.
// It reads the files afresh and needs no running daemon, so it can be the
// pod's readiness probe.
func Check(cfg Config) []string {
	cfg, err := cfg.normalize()
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	if err := checkTools(cfg); err != nil {
		problems = append(problems, err.Error())
	}
	if err := checkDirLinked(cfg.Dir); err != nil {
		problems = append(problems, err.Error())
	}
	for _, p := range cfg.Plugins {
		path, _ := registration.Path(cfg.Dir, p)
		r, ok, err := registration.Read(cfg.Dir, p)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("plugin %s: %v", p, err))
		case !ok:
			problems = append(problems, fmt.Sprintf("plugin %s: not registered (no %s)", p, path))
		case !r.SamePod(cfg.Pod):
			problems = append(problems, fmt.Sprintf("plugin %s: registration %s names pod %s, not this pod %s", p, path, r, cfg.Pod))
		}
	}
	return problems
}
