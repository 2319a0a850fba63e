package livemount

import (
	"context"
	"log/slog"
	"time"
)

// DefaultKeepPeriod is how often a [Keeper] surveys the mounts.
const DefaultKeepPeriod = 10 * time.Second

// FullSurveyPeriod is how often at most a [Keeper]'s survey looks for
// daemons among all processes; its other surveys look in the plugins'
// scopes first ([Options.DaemonsInScopes]). The daemons it alone finds
// (of another plugin's mount, of one made without a scope, a process
// outside a mount's scope that holds its connection too) are only logged
// and counted; `mountpod status` reads every process itself. Once a
// minute, a wave of a hundred pods' processes, each new to the keeper and
// read whole, made those surveys most of the mount pod's CPU.
const FullSurveyPeriod = 5 * time.Minute

// DeepSurveyPeriod is how often at most a [Keeper]'s full survey reads
// every process whole; its other full surveys skip the processes known to
// hold no /dev/fuse descriptor ([Options.SkipQuiet]).
const DeepSurveyPeriod = 10 * time.Minute

// DefaultWakeDelay is how long a [Keeper] woken by its Events waits before
// it surveys: the scopes of a wave of unmounts empty over seconds, and one
// survey a second removes them all without a survey per scope.
const DefaultWakeDelay = time.Second

// Events wakes a [Keeper] before its next survey is due.
type Events interface {
	// C receives a value when a scope may be ready to go.
	C() <-chan struct{}
	// Refresh is called after every survey: scopes come and go.
	Refresh()
}

// Keeper runs in the mount pod's daemon: at start it logs the live mounts
// of its plugins (those made by earlier pods included: it adopts them, and
// never unmounts or kills anything), then surveys them every Period (and
// soon after its Events wake it), logs what changed and removes the scopes
// whose mount and processes are gone. One survey in [FullSurveyPeriod]
// reads every process for daemons; the others read the scopes' processes
// ([Options.DaemonsInScopes]), and of a daemon found before only the
// descriptors it held its connection through ([Known]), so a mount of
// another plugin may be logged without its daemons. Of the full surveys,
// one in [DeepSurveyPeriod] reads every process whole; the others skip
// the processes that two full surveys in a row found without a /dev/fuse
// descriptor ([Options.SkipQuiet]).
type Keeper struct {
	Options Options
	Period  time.Duration
	Logger  *slog.Logger
	// Observe, when set, gets each survey's report (the mount pod's
	// metrics) after the scopes of gone mounts were removed, and the
	// scopes removed; it must not block.
	Observe func(r Report, removed []Scope)
	// Events, when set, wakes the keeper when a scope's last process
	// has exited (cgroup v2: recovery.NewScopeEvents); it surveys
	// WakeDelay (default [DefaultWakeDelay]) later instead of at the end
	// of its Period. Without it a gone mount's scope stays until the next
	// survey.
	Events    Events
	WakeDelay time.Duration
}

// Run keeps the mounts until ctx ends.
func (k *Keeper) Run(ctx context.Context) {
	period := k.Period
	if period <= 0 {
		period = DefaultKeepPeriod
	}
	wakeDelay := k.WakeDelay
	if wakeDelay <= 0 {
		wakeDelay = DefaultWakeDelay
	}
	log := k.Logger
	if log == nil {
		log = slog.Default()
	}
	prev := map[string]Mount{}
	first := true
	var lastFull, lastDeep time.Time
	known := k.Options.Known
	if known == nil {
		known = &Known{}
	}
	for {
		o := k.Options
		o.Known = known
		o.DaemonsInScopes, o.SkipQuiet = surveyKind(first, time.Since(lastFull), time.Since(lastDeep))
		if !o.DaemonsInScopes {
			lastFull = time.Now()
		}
		if !o.SkipQuiet {
			lastDeep = time.Now()
		}
		r, err := Survey(ctx, o)
		if err != nil {
			log.Warn("survey of live mounts failed", "err", err)
		} else {
			prev = k.logChanges(log, prev, r, first)
			first = false
			var removed []Scope
			if k.Options.Scopes != nil {
				removed, err = RemoveEmptyOrphans(k.Options.Scopes, r)
				for _, s := range removed {
					log.Info("removed the scope of a mount that is gone", "plugin", s.Plugin, "scope", s.Name, "cgroup", s.Cgroup)
				}
				if err != nil {
					log.Warn("removing empty scopes failed", "err", err)
				}
			}
			if k.Observe != nil {
				k.Observe(r, removed)
			}
		}
		var wake <-chan struct{}
		if k.Events != nil {
			k.Events.Refresh()
			wake = k.Events.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		case <-wake:
			select {
			case <-ctx.Done():
				return
			case <-time.After(wakeDelay):
			}
		}
	}
}

// surveyKind says how the keeper's next survey looks for daemons, its
// last full survey sinceFull ago and its last deep one sinceDeep ago: in
// the scopes ([Options.DaemonsInScopes]), but for one every
// [FullSurveyPeriod] and the first; skipping the quiet processes
// ([Options.SkipQuiet]), but for one every [DeepSurveyPeriod] and the
// first. A survey in the scopes that reads every process after all (a
// daemon outside its scope) skips them.
func surveyKind(first bool, sinceFull, sinceDeep time.Duration) (inScopes, skipQuiet bool) {
	if first {
		return false, false
	}
	inScopes = sinceFull < FullSurveyPeriod
	return inScopes, inScopes || sinceDeep < DeepSurveyPeriod
}

func (k *Keeper) logChanges(log *slog.Logger, prev map[string]Mount, r Report, first bool) map[string]Mount {
	now := make(map[string]Mount, len(r.Mounts))
	for _, m := range r.Mounts {
		now[m.Target] = m
		old, had := prev[m.Target]
		attrs := []any{"path", m.Target, "fstype", m.FSType, "source", m.Source, "daemons", m.Daemons,
			"scope", m.Scope, "scoped", m.Scoped, "healthy", m.Healthy}
		if m.Error != "" {
			attrs = append(attrs, "err", m.Error)
		}
		switch {
		case first:
			log.Info("adopted live mount", attrs...)
		case !had:
			log.Info("new live mount", attrs...)
		case old.Healthy != m.Healthy || old.Scoped != m.Scoped:
			log.Warn("live mount changed", attrs...)
		}
	}
	for t, m := range prev {
		if _, ok := now[t]; !ok {
			log.Info("mount gone", "path", t, "fstype", m.FSType, "scope", m.Scope)
		}
	}
	if first {
		log.Info("live mounts surveyed", "mounts", len(r.Mounts), "unscoped", len(r.Unscoped()), "orphanScopes", len(r.Orphans))
	}
	return now
}
