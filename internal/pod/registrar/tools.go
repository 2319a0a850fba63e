package registrar

import (
	"os"
	"path/filepath"
	"strings"
)

// MissingToolsError is returned by [Daemon.Run] when required tools are
// not found; the pod must not register.
type MissingToolsError struct {
	// Missing lists the tools not found, in the configured order.
	Missing []string
	// SearchPath is where they were looked for.
	SearchPath string
}

// Error names the missing tools and the search path.
func (e *MissingToolsError) Error() string {
	return "missing required tools: " + strings.Join(e.Missing, ", ") + " (searched PATH=" + e.SearchPath + ")"
}

// checkTools returns a *MissingToolsError if a tool of cfg is missing.
func checkTools(cfg Config) error {
	missing := MissingTools(cfg.SearchPath, cfg.RequiredTools)
	if len(missing) == 0 {
		return nil
	}
	sp := cfg.SearchPath
	if sp == "" {
		sp = os.Getenv("PATH")
	}
	return &MissingToolsError{Missing: missing, SearchPath: sp}
}

// MissingTools returns the tools that are not executable files: bare names
// are looked up in the directories of searchPath (colon-separated, like
// $PATH; empty means $PATH), names containing a "/" are checked as they are.
func MissingTools(searchPath string, tools []string) []string {
	if searchPath == "" {
		searchPath = os.Getenv("PATH")
	}
	dirs := filepath.SplitList(searchPath)
	var missing []string
	for _, tool := range tools {
		if !findTool(dirs, tool) {
			missing = append(missing, tool)
		}
	}
	return missing
}

func findTool(dirs []string, tool string) bool {
	if strings.Contains(tool, "/") {
		return isExecutable(tool)
	}
	for _, dir := range dirs {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // a relative entry would depend on the working directory
		}
		if isExecutable(filepath.Join(dir, tool)) {
			return true
		}
	}
	return false
}

// isExecutable reports whether path (following symbolic links) is a regular
// file with an execute bit set.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
