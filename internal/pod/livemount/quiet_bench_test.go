package livemount

import (
	"testing"
)

// BenchmarkReadEveryProcess reads this machine's every process for
// daemons, as the keeper's full surveys do: whole (its first survey and
// one every DeepSurveyPeriod), and skipping the quiet processes (the
// others), once two reads have counted them. Compare the two within one
// run: their ratio is what the skip saves.
func BenchmarkReadEveryProcess(b *testing.B) {
	targets := map[string]bool{"/var/lib/kubelet/pods/none/volumes/x~glusterfs/data": true}
	for _, c := range []struct {
		name      string
		skipQuiet bool
	}{{"whole", false}, {"skipQuiet", true}} {
		b.Run(c.name, func(b *testing.B) {
			known := &Known{}
			for range quietReads {
				findDaemons("/proc", nil, targets, nil, known, false, false, nil)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				findDaemons("/proc", nil, targets, nil, known, false, c.skipQuiet, nil)
			}
		})
	}
}
