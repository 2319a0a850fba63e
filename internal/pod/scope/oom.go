package scope

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The range of oom_score_adj.
const (
	minOOMScoreAdj = -1000
	maxOOMScoreAdj = 1000
)

// oomScoreAdjFile returns the oom_score_adj file of process pid, "self"
// for 0, under cfg.ProcRoot (default /proc).
func oomScoreAdjFile(cfg Config, pid int) string {
	root, who := cfg.ProcRoot, "self"
	if root == "" {
		root = "/proc"
	}
	if pid != 0 {
		who = strconv.Itoa(pid)
	}
	return filepath.Join(root, who, "oom_score_adj")
}

// raiseOOMScoreAdj writes least to the oom_score_adj file name when the
// value there is lower, and leaves a higher one: a process may always raise
// its score, but lowering it needs CAP_SYS_RESOURCE. A daemon started in a
// scope thus never keeps the OOM protection of the mount pod it left.
func raiseOOMScoreAdj(name string, least int) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("read oom_score_adj: %w", err)
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("read oom_score_adj %s: %w", name, err)
	}
	if cur >= least {
		return nil
	}
	if err := writeFile(name, strconv.Itoa(least), false); err != nil {
		return fmt.Errorf("raise oom_score_adj from %d to %d: %w", cur, least, err)
	}
	return nil
}
