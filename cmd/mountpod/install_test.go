package main

import (
	"os"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestInstallSharedMountsDefault: the driver's settings record shared
// mounts unless MOUNTPOD_FLEXVOLUME_SHARED_MOUNTS (or the flag) says
// false.
func TestInstallSharedMountsDefault(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want bool
	}{
		{"", nil, true},
		{"false", nil, false},
		{"true", nil, true},
		{"", []string{"--flexvolume-shared-mounts=false"}, false},
	} {
		t.Setenv("MOUNTPOD_FLEXVOLUME_SHARED_MOUNTS", tc.env)
		if tc.env == "" {
			os.Unsetenv("MOUNTPOD_FLEXVOLUME_SHARED_MOUNTS")
		}
		var got bool
		app := &cli.App{Flags: installFlags(), Action: func(c *cli.Context) error {
			got = installConfigFrom(c).FlexvolumeSharedMounts
			return nil
		}}
		if err := app.Run(append([]string{"mountpod"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("env %q, args %q: FlexvolumeSharedMounts %t, want %t", tc.env, tc.args, got, tc.want)
		}
	}
}
